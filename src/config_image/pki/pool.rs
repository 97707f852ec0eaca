//! A tiny scoped worker pool for the handful of CPU-bound jobs one site needs (RSA key generation, bcrypt).
//!
//! Each job is a closure; up to `max_workers` workers (the calling thread is one of them, so no
//! thread sits idle waiting) pull jobs from a shared queue in order, so the caller decides the schedule by
//! how it orders the list. Results come back in job order. Rayon would be a whole scheduler for seven jobs.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::thread;

use anyhow::Result;

/// One unit of work; it may borrow from the caller's stack because the pool is scoped.
pub(super) type Job<'a, T> = Box<dyn FnOnce() -> Result<T> + Send + 'a>;

/// Runs every job and returns their results in job order, or the first error in job order.
///
/// After a job fails, workers stop taking new jobs: the run is lost anyway and keygens are not free.
/// At most `max_workers` threads work (fewer when there are fewer jobs).
pub(super) fn run<T: Send>(jobs: Vec<Job<'_, T>>, max_workers: NonZeroUsize) -> Result<Vec<T>> {
    let total = jobs.len();
    let workers = max_workers.get().min(total).max(1);
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let failed = AtomicBool::new(false);
    let drain = || {
        let mut done = Vec::new();
        while !failed.load(Ordering::Relaxed) {
            // The guard is a temporary of this statement, so the lock is released before the job runs.
            let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
            let Some((index, job)) = next else { break };
            let result = job();
            if result.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            done.push((index, result));
        }
        done
    };
    let mut finished = thread::scope(|scope| {
        let helpers: Vec<_> = (1..workers).map(|_| scope.spawn(drain)).collect();
        let mut all = drain();
        for helper in helpers {
            match helper.join() {
                Ok(done) => all.extend(done),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        all
    });
    finished.sort_unstable_by_key(|(index, _)| *index);
    finished.into_iter().map(|(_, result)| result).collect()
}

/// One worker per core: what a single site uses when it has the machine to itself.
pub fn all_cores() -> NonZeroUsize {
    thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    fn run<T: Send>(jobs: Vec<Job<'_, T>>) -> Result<Vec<T>> {
        super::run(jobs, all_cores())
    }

    #[test]
    fn results_come_back_in_job_order() {
        let jobs: Vec<Job<'_, usize>> = (0..20)
            .map(|i| -> Job<'_, usize> {
                Box::new(move || {
                    thread::sleep(Duration::from_millis((20 - i) as u64));
                    Ok(i * 10)
                })
            })
            .collect();
        let out = run(jobs).unwrap();
        assert_eq!(out, (0..20).map(|i| i * 10).collect::<Vec<_>>());
    }

    #[test]
    fn first_error_in_job_order_is_returned() {
        let jobs: Vec<Job<'_, u8>> = vec![
            Box::new(|| Ok(1)),
            Box::new(|| anyhow::bail!("job two broke")),
            Box::new(|| Ok(3)),
        ];
        let err = run(jobs).unwrap_err();
        assert_eq!(err.to_string(), "job two broke");
    }

    #[test]
    fn empty_job_list_is_fine() {
        let out: Vec<u8> = run(Vec::new()).unwrap();
        assert!(out.is_empty());
    }

    /// Two jobs that each wait for the other can only both finish if they run at the same time.
    #[test]
    fn jobs_run_concurrently_when_cores_allow() {
        if all_cores().get() < 2 {
            eprintln!("SKIP jobs_run_concurrently_when_cores_allow: fewer than 2 cores");
            return;
        }
        let (to_b, from_a) = mpsc::channel();
        let (to_a, from_b) = mpsc::channel();
        let wait = Duration::from_secs(10);
        let jobs: Vec<Job<'_, bool>> = vec![
            Box::new(move || {
                to_b.send(())?;
                Ok(from_b.recv_timeout(wait).is_ok())
            }),
            Box::new(move || {
                to_a.send(())?;
                Ok(from_a.recv_timeout(wait).is_ok())
            }),
        ];
        assert_eq!(run(jobs).unwrap(), vec![true, true]);
    }

    #[test]
    fn one_worker_runs_jobs_on_the_calling_thread() {
        let caller = thread::current().id();
        let jobs: Vec<Job<'_, bool>> = (0..4)
            .map(|_| -> Job<'_, bool> { Box::new(move || Ok(thread::current().id() == caller)) })
            .collect();
        assert_eq!(super::run(jobs, NonZeroUsize::MIN).unwrap(), vec![true; 4]);
    }
}
