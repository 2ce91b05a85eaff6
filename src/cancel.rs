//! A cancellation signal shared between the dispatcher (which cancels) and a
//! turn worker and its helpers (which watch).
//!
//! Watching is possible three ways: poll `is_cancelled` between steps, wait
//! on `signal()` inside a `select!` (it becomes ready, disconnected, the
//! moment the token is cancelled), or register a hook that runs at cancel
//! time — used to shut down an HTTP agent so a socket blocked in `read`
//! wakes up at once and the server sees the client go away.

use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Hook = Box<dyn FnOnce() + Send>;

#[derive(Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

struct Inner {
    cancelled: AtomicBool,
    signal: Receiver<()>,
    trigger: Mutex<Option<Sender<()>>>,
    hooks: Mutex<Vec<Hook>>,
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

impl CancelToken {
    pub fn new() -> CancelToken {
        let (trigger, signal) = crossbeam_channel::bounded(0);
        CancelToken {
            inner: Arc::new(Inner {
                cancelled: AtomicBool::new(false),
                signal,
                trigger: Mutex::new(Some(trigger)),
                hooks: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Cancels: sets the flag, wakes every waiter and runs the hooks once.
    pub fn cancel(&self) {
        if self.inner.cancelled.swap(true, Ordering::SeqCst) {
            return;
        }
        drop(lock(&self.inner.trigger).take());
        let hooks = std::mem::take(&mut *lock(&self.inner.hooks));
        for hook in hooks {
            hook();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// A receiver that never yields a value and becomes disconnected (so
    /// ready in a `select!`) when the token is cancelled.
    pub fn signal(&self) -> &Receiver<()> {
        &self.inner.signal
    }

    /// Sleeps for `duration` unless cancelled first. Returns true when the
    /// sleep was cut short by a cancel.
    pub fn sleep(&self, duration: Duration) -> bool {
        if self.is_cancelled() {
            return true;
        }
        matches!(
            self.inner.signal.recv_timeout(duration),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected)
        )
    }

    /// Runs `hook` when the token is cancelled, or at once if it already is.
    pub fn on_cancel(&self, hook: impl FnOnce() + Send + 'static) {
        {
            let mut hooks = lock(&self.inner.hooks);
            if !self.is_cancelled() {
                hooks.push(Box::new(hook));
                return;
            }
        }
        hook();
    }
}

/// Locks a mutex, recovering it if a panicking thread poisoned it: the data
/// guarded here (a sender, a hook list) stays consistent either way.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Instant;

    #[test]
    fn cancel_wakes_sleepers_and_runs_hooks_once() {
        let token = CancelToken::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = ran.clone();
        token.on_cancel(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        let sleeper = {
            let token = token.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                (token.sleep(Duration::from_secs(30)), start.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        token.cancel();
        token.cancel();
        let (cut, elapsed) = sleeper.join().unwrap();
        assert!(cut);
        assert!(elapsed < Duration::from_secs(10));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        let late = Arc::new(AtomicUsize::new(0));
        let counter = late.clone();
        token.on_cancel(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(late.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn sleep_runs_to_the_end_without_cancel() {
        assert!(!CancelToken::new().sleep(Duration::from_millis(5)));
    }
}
