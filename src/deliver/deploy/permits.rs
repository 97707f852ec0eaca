//! `--parallel`: at most N sites talk to their BMCs at once. A BMC call that inserts media is also
//! when the BMC downloads the image (or starts to), so the same bound holds concurrent downloads.
//! Waiting for a host or a cluster holds no permit: hundreds of sites may wait at once.

use std::sync::{Condvar, Mutex};

pub struct Permits {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Permits {
    pub fn new(n: usize) -> Permits {
        Permits {
            free: Mutex::new(n.max(1)),
            freed: Condvar::new(),
        }
    }

    /// Runs `f` holding a permit, waiting for one first.
    pub fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            while *free == 0 {
                free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
            }
            *free -= 1;
        }
        // Given back even if `f` panics, so the other sites are not starved.
        let _back = Back(self);
        f()
    }
}

struct Back<'a>(&'a Permits);

impl Drop for Back<'_> {
    fn drop(&mut self) {
        let mut free = self.0.free.lock().unwrap_or_else(|p| p.into_inner());
        *free += 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn never_more_than_n_at_once() {
        let permits = Permits::new(2);
        let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    permits.with(|| {
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        now.fetch_sub(1, Ordering::SeqCst);
                    })
                });
            }
        });
        let peak = peak.load(Ordering::SeqCst);
        assert!((1..=2).contains(&peak), "{peak} at once");
    }
}
