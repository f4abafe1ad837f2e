//! How replay threads wait for one another: a short spin, then a futex sleep. An op that
//! nobody waits for does nothing here; only an op the plan flags NOTIFY (the next op on its
//! slot is another thread's) pays for an atomic swap, and a futex wake when someone sleeps.
use std::sync::atomic::{AtomicU32, Ordering::*};

/// Set in a slot's counter by a thread sleeping on it.
pub const WAITER: u32 = 1 << 31;
/// The counter's value bits (sequence numbers are compared modulo 2^31).
pub const SEQ_MASK: u32 = !WAITER;
const SPINS: u32 = 200;

fn futex_wait(a: &AtomicU32, expected: u32) {
    let no_timeout: *const libc::timespec = core::ptr::null();
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            a.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            no_timeout,
        )
    };
}

fn futex_wake(a: &AtomicU32) {
    unsafe {
        libc::syscall(libc::SYS_futex, a.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX)
    };
}

/// Waits until the slot counter `a` is `want` (mod 2^31); true when it had to wait.
///
/// Only NOTIFY ops change the counter, always with a swap that sees the waiter bit, so a
/// sleeper is never missed: at worst an earlier NOTIFY op wakes it early and it sleeps again.
#[inline]
pub fn wait_slot(a: &AtomicU32, want: u32) -> bool {
    let want = want & SEQ_MASK;
    let mut v = a.load(Acquire);
    if v & SEQ_MASK == want {
        return false;
    }
    for _ in 0..SPINS {
        core::hint::spin_loop();
        v = a.load(Acquire);
        if v & SEQ_MASK == want {
            return true;
        }
    }
    loop {
        if v & SEQ_MASK == want {
            return true;
        }
        if v & WAITER == 0 {
            if let Err(x) = a.compare_exchange_weak(v, v | WAITER, Acquire, Acquire) {
                v = x;
                continue;
            }
            v |= WAITER;
        }
        futex_wait(a, v);
        v = a.load(Acquire);
    }
}

/// A NOTIFY op is done: one more on the slot counter `a`, and its sleepers woken.
#[inline]
pub fn notify_slot(a: &AtomicU32) {
    let v = a.load(Relaxed);
    if a.swap(((v & SEQ_MASK) + 1) & SEQ_MASK, Release) & WAITER != 0 {
        futex_wake(a);
    }
}

/// Waits until the lifecycle counter `a` (thread starts and exits done) reaches `want`.
pub fn wait_life(a: &AtomicU32, want: u32) {
    loop {
        let v = a.load(Acquire);
        if v == want {
            return;
        }
        futex_wait(a, v);
    }
}

/// One more thread start or exit is done: wakes whoever waits for it.
pub fn advance_life(a: &AtomicU32) {
    a.fetch_add(1, Release);
    futex_wake(a);
}
