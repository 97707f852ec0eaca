//! A fixed set of worker threads for blocking jobs: deploy's cost follows `--parallel`, not the size
//! of the fleet. The caller hands out at most [`Pool::size`] jobs at once (it keeps the count), so
//! nothing queues behind a busy worker and an interrupted deploy has no backlog to drain. Each job
//! sends its own result back; a job that panics is caught and reported by the caller's message.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

type Job = Box<dyn FnOnce() + Send>;

pub struct Pool {
    jobs: Option<Sender<Job>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    size: usize,
    busy: usize,
}

impl Pool {
    /// `size` threads named `name-N`.
    pub fn new(size: usize, name: &str) -> Result<Pool> {
        let size = size.max(1);
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let threads = (0..size)
            .map(|i| {
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || work(&rx))
                    .with_context(|| format!("starting the {name} threads"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Pool {
            jobs: Some(tx),
            threads,
            size,
            busy: 0,
        })
    }

    /// Whether a job handed out now would start at once.
    pub fn has_room(&self) -> bool {
        self.busy < self.size
    }

    pub fn busy(&self) -> usize {
        self.busy
    }

    /// Hands `job` to a free worker; the caller calls [`Pool::done`] when its result arrives.
    pub fn run(&mut self, job: impl FnOnce() + Send + 'static) {
        if let Some(tx) = &self.jobs
            && tx.send(Box::new(job)).is_ok()
        {
            self.busy += 1;
        }
    }

    pub fn done(&mut self) {
        self.busy = self.busy.saturating_sub(1);
    }

    /// Stops taking jobs; the workers end once their job does. Waits for none of them: an
    /// interrupted deploy does not wait for a BMC that does not answer.
    pub fn close(mut self) {
        self.jobs = None;
        self.threads.clear();
    }
}

fn work(rx: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let guard = rx.lock().unwrap_or_else(|p| p.into_inner());
            guard.recv()
        };
        match job {
            // A panic is the job's own: the caller hears of it through its result channel (the
            // sender is dropped unsent) and the thread goes on serving.
            Ok(job) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn jobs_run_on_the_pools_threads_only() {
        let mut pool = Pool::new(3, "t").unwrap();
        let (tx, rx) = channel();
        let peak = Arc::new(AtomicUsize::new(0));
        let now = Arc::new(AtomicUsize::new(0));
        let mut sent = 0;
        let mut got = 0;
        while got < 12 {
            while pool.has_room() && sent < 12 {
                let (tx, peak, now) = (tx.clone(), peak.clone(), now.clone());
                pool.run(move || {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    now.fetch_sub(1, Ordering::SeqCst);
                    let _ = tx.send(std::thread::current().name().map(str::to_string));
                });
                sent += 1;
            }
            let name = rx.recv().unwrap().unwrap();
            assert!(name.starts_with("t-"), "{name}");
            pool.done();
            got += 1;
        }
        assert!(peak.load(Ordering::SeqCst) <= 3);
        pool.run(|| panic!("a job's panic"));
        pool.done();
        let tx2 = tx.clone();
        pool.run(move || tx2.send(Some("after".into())).unwrap());
        assert_eq!(
            rx.recv().unwrap().as_deref(),
            Some("after"),
            "still serving"
        );
        pool.close();
    }
}
