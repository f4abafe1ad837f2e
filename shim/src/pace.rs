//! The recorder's pace: how long it sleeps between ticks, and who wakes it early.
//!
//! While the program calls the allocator, the recorder ticks every half `SHIM_STALL` (at
//! least every 500 µs, at most every 20 ms): its stall watchdog calls a call slow once it
//! has seen it on two ticks. Once no thread has made a call for a few ticks, it dozes
//! instead, until the next RSS sample (up to 100 ms), having set [`WAKE`] in every thread's
//! `halt`: the first call any thread makes then sees a `halt` other than RUN (the check it
//! makes on every call anyway), clears the bit and wakes the recorder, which watches that
//! call at the busy pace. So an idle program costs the recorder about ten wake-ups a second
//! instead of two thousand, and the watchdog misses no call.
//!
//! Wakes it too, whenever it sleeps longer than 500 µs: a full buffer handed over, a new
//! thread, the exit's final flush, a `SHIM_SIGNAL`. A wake is a futex on [`DOZING`]: async-
//! signal-safe, and a syscall only when the recorder sleeps.
use crate::thread::{ThreadState, REGISTRY};
use core::sync::atomic::{fence, AtomicU32, Ordering::*};

/// The bit in a thread's `halt` that says: the recorder dozes, wake it.
pub const WAKE: u8 = 0x80;

/// The busy pace's bounds, in ns.
const MIN_TICK_NS: u64 = 500_000;
const MAX_TICK_NS: u64 = 20_000_000;
/// The longest doze, in ns.
const MAX_DOZE_NS: u64 = 100_000_000;
/// Busy ticks without a call before the recorder dozes.
const QUIET_TICKS: u32 = 4;

/// 1 while the recorder sleeps and may be woken (a sleep over 500 µs), else 0.
static DOZING: AtomicU32 = AtomicU32::new(0);

/// Wakes the recorder if it sleeps (one load otherwise).
#[inline]
pub fn nudge() {
    fence(SeqCst);
    if DOZING.load(Relaxed) != 0 && DOZING.swap(0, SeqCst) != 0 {
        unsafe {
            libc::syscall(libc::SYS_futex, DOZING.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
        }
    }
}

/// What the watchdog saw of the threads on this tick.
#[derive(Clone, Copy, Default)]
pub struct Seen {
    /// The threads' calls, summed (a change: some thread made a call since the last tick).
    pub calls: u64,
    /// Some thread is inside a call now.
    pub in_call: bool,
}

pub struct Pace {
    /// The busy pace, in ns.
    tick_ns: u64,
    last_calls: u64,
    quiet: u32,
}

impl Pace {
    /// The busy pace for a stall threshold of `stall_ns`.
    pub fn new(stall_ns: u64) -> Pace {
        Pace { tick_ns: (stall_ns / 2).clamp(MIN_TICK_NS, MAX_TICK_NS), last_calls: 0, quiet: 0 }
    }

    /// The busy pace, in ns (the watchdog's slack).
    pub fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    /// Counts the ticks without a call: `drained` buffers this tick, `seen` of the threads.
    pub fn observe(&mut self, drained: bool, seen: Seen) {
        if drained || seen.in_call || seen.calls != self.last_calls {
            self.quiet = 0;
        } else {
            self.quiet = self.quiet.saturating_add(1);
        }
        self.last_calls = seen.calls;
    }

    /// Sleeps until the next tick: the busy pace, or, when the threads have been quiet, a doze
    /// of up to `doze_ns` (the next thing the recorder has to do on its own) that the first
    /// call ends. `waiting` says whether work has come in meanwhile (a full buffer, the exit).
    pub fn rest(&mut self, doze_ns: u64, waiting: impl Fn() -> bool) {
        if self.quiet < QUIET_TICKS || doze_ns <= self.tick_ns {
            if self.tick_ns <= MIN_TICK_NS {
                // The default busy pace: a plain sleep, as short as a wake would be.
                std::thread::sleep(std::time::Duration::from_nanos(self.tick_ns));
            } else {
                DOZING.store(1, SeqCst);
                wait(self.tick_ns, &waiting);
            }
            return;
        }
        // Wakeable first (a thread that sees WAKE before the recorder sleeps must find
        // DOZING set, or its wake is lost), then every thread's next call wakes it: WAKE set,
        // then (the handshake of `thread::enter`: a thread counts its call and stores
        // `in_call`, then loads `halt`) a full barrier on every running thread, then a look
        // for a call made since the last tick or under way.
        DOZING.store(1, SeqCst);
        REGISTRY.for_each(|st: &mut ThreadState| {
            st.halt.fetch_or(WAKE, SeqCst);
            true
        });
        crate::shared::membarrier();
        let mut seen = Seen::default();
        REGISTRY.for_each(|st: &mut ThreadState| {
            seen.calls = seen.calls.wrapping_add(st.calls.load(SeqCst));
            seen.in_call |= st.in_call.load(SeqCst) != 0;
            true
        });
        if seen.in_call || seen.calls != self.last_calls {
            self.quiet = 0;
            wait(self.tick_ns, &waiting);
        } else {
            wait(doze_ns.min(MAX_DOZE_NS), &waiting);
        }
        // Awake: no thread need wake it any more (a bit left set would cost a thread a
        // needless wake on its next call, and stop the recorder taking its idle buffer).
        REGISTRY.for_each(|st: &mut ThreadState| {
            st.halt.fetch_and(!WAKE, SeqCst);
            true
        });
    }
}

/// Sleeps up to `ns` unless woken (DOZING set by the caller) or work is `waiting` already.
fn wait(ns: u64, waiting: &impl Fn() -> bool) {
    if DOZING.load(SeqCst) != 0 && !waiting() {
        let ts = libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long };
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
    fn the_busy_pace_is_half_the_stall_within_bounds() {
        assert_eq!(Pace::new(1_000_000).tick_ns(), 500_000);
        assert_eq!(Pace::new(100_000).tick_ns(), 500_000);
        assert_eq!(Pace::new(10_000_000).tick_ns(), 5_000_000);
        assert_eq!(Pace::new(10_000_000_000).tick_ns(), 20_000_000);
    }

    #[test]
    fn quiet_counts_ticks_without_calls() {
        let mut p = Pace::new(1_000_000);
        p.observe(false, Seen { calls: 5, in_call: false });
        assert_eq!(p.quiet, 0, "the calls changed");
        for i in 1..=3 {
            p.observe(false, Seen { calls: 5, in_call: false });
            assert_eq!(p.quiet, i);
        }
        p.observe(false, Seen { calls: 5, in_call: true });
        assert_eq!(p.quiet, 0, "a call under way");
        p.observe(false, Seen { calls: 5, in_call: false });
        p.observe(true, Seen { calls: 5, in_call: false });
        assert_eq!(p.quiet, 0, "a buffer drained");
    }

    #[test]
    fn a_nudge_ends_a_doze() {
        let t = std::thread::spawn(|| {
            while DOZING.load(SeqCst) == 0 {
                std::thread::yield_now();
            }
            nudge();
        });
        let start = std::time::Instant::now();
        DOZING.store(1, SeqCst);
        wait(10_000_000_000, &|| false);
        t.join().unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(5), "the doze ran its 10 s: {:?}", start.elapsed());
        assert_eq!(DOZING.load(SeqCst), 0);
    }
}
