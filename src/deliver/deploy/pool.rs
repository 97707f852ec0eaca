//! A fixed set of worker threads for blocking jobs: deploy's cost follows `--parallel`, not the size
//! of the fleet. The caller hands out at most [`Pool::size`] jobs at once (it keeps the count), so
//! nothing queues behind a busy worker and an interrupted deploy has no backlog to drain. Each job
//! sends its own result back; a job that panics is caught, and the caller hears of it through the
//! `on_panic` it gave with the job (a job's own sender dies with it, but the caller keeps others
//! alive, so without this it would wait for that result forever).

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

    /// Hands `job` to a free worker; the caller calls [`Pool::done`] when its result arrives. Should
    /// the job panic, `on_panic` runs on the worker with the panic's message instead: it must send
    /// the caller a result of its own.
    pub fn run(
        &mut self,
        job: impl FnOnce() + Send + 'static,
        on_panic: impl FnOnce(String) + Send + 'static,
    ) {
        let guarded = move || {
            if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)) {
                on_panic(panic_message(payload.as_ref()));
            }
        };
        if let Some(tx) = &self.jobs
            && tx.send(Box::new(guarded)).is_ok()
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
            // The job's panic was handed to its `on_panic`; this catches one of `on_panic` itself,
            // so the thread goes on serving.
            Ok(job) => {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
            Err(_) => return,
        }
    }
}

/// A panic's message (`panic!` with a literal or a format), else a word saying it had none.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
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
                pool.run(
                    move || {
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(5));
                        now.fetch_sub(1, Ordering::SeqCst);
                        let _ = tx.send(std::thread::current().name().map(str::to_string));
                    },
                    |_| {},
                );
                sent += 1;
            }
            let name = rx.recv().unwrap().unwrap();
            assert!(name.starts_with("t-"), "{name}");
            pool.done();
            got += 1;
        }
        assert!(peak.load(Ordering::SeqCst) <= 3);
        // A job that panics: its caller hears of it (with the message), though it keeps a sender.
        let tx1 = tx.clone();
        pool.run(
            || panic!("a job's panic: {}", 42),
            move |m| tx1.send(Some(format!("panicked: {m}"))).unwrap(),
        );
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(10))
                .unwrap()
                .as_deref(),
            Some("panicked: a job's panic: 42")
        );
        pool.done();
        let tx2 = tx.clone();
        pool.run(move || tx2.send(Some("after".into())).unwrap(), |_| {});
        assert_eq!(
            rx.recv().unwrap().as_deref(),
            Some("after"),
            "still serving"
        );
        pool.close();
    }
}
