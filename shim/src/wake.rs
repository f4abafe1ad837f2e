//! The recorder's doze and what ends it: a futex word ([`DOZING`] set while the recorder
//! sleeps and may be woken) and the bit in a thread's `halt` ([`WAKE`]) that tells the
//! thread's next call to wake it. Async-signal-safe, a syscall only when the recorder dozes.
//! When and how long the recorder dozes is background/pace.rs's; this file is what the
//! program's threads, the signal handler and the exit path call, so it depends on nothing
//! in the crate.
use core::sync::atomic::{fence, AtomicU32, Ordering::*};

/// The bit in a thread's `halt` that says: the recorder dozes, wake it.
pub const WAKE: u8 = 0x80;

/// 1 while the recorder dozes and may be woken, else 0.
static DOZING: AtomicU32 = AtomicU32::new(0);

/// Wakes the recorder if it dozes (one load otherwise).
#[inline]
pub fn nudge() {
    fence(SeqCst);
    if DOZING.load(Relaxed) != 0 && DOZING.swap(0, SeqCst) != 0 {
        unsafe {
            libc::syscall(libc::SYS_futex, DOZING.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
        }
    }
}

/// The recorder is about to doze: from now on a [`nudge`] wakes it.
pub fn wakeable() {
    DOZING.store(1, SeqCst);
}

/// Sleeps up to `ns` unless woken (after [`wakeable`]) or work is `waiting` already.
pub fn wait(ns: u64, waiting: &impl Fn() -> bool) {
    if DOZING.load(SeqCst) != 0 && !waiting() {
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                DOZING.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                1u32,
                &ts as *const libc::timespec,
            );
        }
    }
    DOZING.store(0, SeqCst);
}

/// A fork child: its recorder is a new one, awake.
pub fn reset() {
    DOZING.store(0, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nudge_ends_a_doze() {
        let t = std::thread::spawn(|| {
            while DOZING.load(SeqCst) == 0 {
                std::thread::yield_now();
            }
            nudge();
        });
        let start = std::time::Instant::now();
        wakeable();
        wait(10_000_000_000, &|| false);
        t.join().unwrap();
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "the doze ran its 10 s: {:?}",
            start.elapsed()
        );
        assert_eq!(DOZING.load(SeqCst), 0);
    }
}
