//! The recorder's pace: how long it sleeps between ticks, and who wakes it early.
//!
//! While the program calls the allocator, the recorder ticks every 500 µs: its stall
//! watchdog calls a call slow once it has seen it on two ticks. Once no thread has made a
//! call for 2 ms, it dozes instead, until the next RSS sample (up to 100 ms), having
//! set [`WAKE`] in every thread's `halt`: the first call any thread makes then sees a `halt`
//! other than RUN (the check it makes on every call anyway), clears the bit and wakes the
//! recorder, which watches that call at the busy pace. So an idle program costs the
//! recorder about ten wake-ups a second instead of two thousand, and the watchdog misses no
//! call.
//!
//! A doze costs a membarrier (an interrupt of every CPU running the program's threads) and
//! the waking call a futex wake: worth it only when the doze lasts. When calls keep ending
//! dozes within a few ms, the recorder waits longer before the next one (from 2 ms up to
//! 16 ms without a call); a doze that lasts brings the wait back down.
//!
//! While it dozes, these wake it too: a full buffer handed over, a new thread, the exit's
//! final flush, a `SHIM_SIGNAL`. A wake is a futex (wake.rs, below the threads that call it):
//! async-signal-safe, and a syscall only when the recorder dozes.
use crate::thread::{ThreadState, REGISTRY};
use crate::wake::{self, WAKE};
use core::sync::atomic::Ordering::SeqCst;

/// The busy pace, in ns.
pub const TICK_NS: u64 = 500_000;
/// The longest doze, in ns.
const MAX_DOZE_NS: u64 = 100_000_000;
/// How long without a call before the recorder dozes, in ns: at first, and at most.
const QUIET_NS: u64 = 2_000_000;
const MAX_QUIET_NS: u64 = 16_000_000;
/// A doze that a call ended sooner than this did not pay for itself.
const SHORT_DOZE_NS: u64 = 4_000_000;

/// What the watchdog saw of the threads on this tick.
#[derive(Clone, Copy, Default)]
pub struct Seen {
    /// The threads' calls, summed (a change: some thread made a call since the last tick).
    pub calls: u64,
    /// Some thread is inside a call now.
    pub in_call: bool,
}

impl Seen {
    /// Counts in one thread: its `calls` so far, and its `in_call` now.
    #[inline]
    pub fn add(&mut self, calls: u64, in_call: u64) {
        self.calls = self.calls.wrapping_add(calls);
        self.in_call |= in_call != 0;
    }
}

pub struct Pace {
    last_calls: u64,
    /// When the threads were last seen calling (CLOCK_MONOTONIC ns), and how long without a
    /// call the next doze waits for.
    active_at: u64,
    quiet_needed: u64,
    /// When the last doze began (CLOCK_MONOTONIC ns), until the tick after it.
    dozed_at: Option<u64>,
}

impl Pace {
    pub fn new() -> Pace {
        Pace { last_calls: 0, active_at: 0, quiet_needed: QUIET_NS, dozed_at: None }
    }

    /// Notes whether the threads called since the last tick: `drained` buffers this tick,
    /// `seen` of the threads, at `mono` (CLOCK_MONOTONIC ns).
    pub fn observe(&mut self, drained: bool, seen: Seen, mono: u64) {
        let active = drained || seen.in_call || seen.calls != self.last_calls;
        self.last_calls = seen.calls;
        if let Some(at) = self.dozed_at.take() {
            // A doze a call cut short: wait longer for the next; one that lasted: less long.
            self.quiet_needed = if active && mono.saturating_sub(at) < SHORT_DOZE_NS {
                (self.quiet_needed * 2).min(MAX_QUIET_NS)
            } else {
                (self.quiet_needed / 2).max(QUIET_NS)
            };
        }
        if active {
            self.active_at = mono;
        }
    }

    /// Sleeps until the next tick: the busy pace, or, when the threads have been quiet, a doze
    /// of up to `doze_ns` (the next thing the recorder has to do on its own) that the first
    /// call ends. `waiting` says whether work has come in meanwhile (a full buffer, the exit).
    pub fn rest(&mut self, doze_ns: u64, waiting: impl Fn() -> bool) {
        let quiet = recorder::clock::mono_ns().saturating_sub(self.active_at);
        if quiet < self.quiet_needed || doze_ns <= TICK_NS {
            std::thread::sleep(std::time::Duration::from_nanos(TICK_NS));
            return;
        }
        // Wakeable first (a thread that sees WAKE before the recorder sleeps must find
        // DOZING set, or its wake is lost), then every thread's next call wakes it: WAKE set,
        // then (the handshake of `thread::enter`: a thread counts its call and stores
        // `in_call`, then loads `halt`) a full barrier on every running thread, then a look
        // for a call made since the last tick or under way.
        wake::wakeable();
        REGISTRY.for_each(|st: &mut ThreadState| {
            st.halt.fetch_or(WAKE, SeqCst);
            true
        });
        let fenced = crate::shared::membarrier();
        let mut seen = Seen::default();
        REGISTRY.for_each(|st: &mut ThreadState| {
            seen.add(st.calls.load(SeqCst), st.in_call.load(SeqCst));
            true
        });
        if !fenced || seen.in_call || seen.calls != self.last_calls {
            // A call under way, or no barrier to trust the look with: the busy pace.
            self.active_at = recorder::clock::mono_ns();
            wake::wait(TICK_NS, &waiting);
        } else {
            self.dozed_at = Some(recorder::clock::mono_ns());
            wake::wait(doze_ns.min(MAX_DOZE_NS), &waiting);
        }
        // Awake: no thread need wake it any more (a bit left set would cost a thread a
        // needless wake on its next call, and stop the recorder taking its idle buffer).
        REGISTRY.for_each(|st: &mut ThreadState| {
            st.halt.fetch_and(!WAKE, SeqCst);
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_CALL: Seen = Seen { calls: 5, in_call: false };
    const MS: u64 = 1_000_000;

    #[test]
    fn quiet_dates_from_the_last_call_seen() {
        let mut p = Pace::new();
        p.observe(false, NO_CALL, 10 * MS);
        assert_eq!(p.active_at, 10 * MS, "the calls changed");
        p.observe(false, NO_CALL, 11 * MS);
        assert_eq!(p.active_at, 10 * MS, "no call");
        p.observe(false, Seen { calls: 5, in_call: true }, 12 * MS);
        assert_eq!(p.active_at, 12 * MS, "a call under way");
        p.observe(true, NO_CALL, 13 * MS);
        assert_eq!(p.active_at, 13 * MS, "a buffer drained");
    }

    #[test]
    fn short_dozes_make_the_recorder_wait_longer_for_the_next() {
        let mut p = Pace::new();
        p.observe(false, NO_CALL, 0);
        for want in [4, 8, 16, 16] {
            p.dozed_at = Some(100 * MS);
            p.observe(false, Seen { calls: p.last_calls + 1, in_call: false }, 102 * MS);
            assert_eq!(p.quiet_needed, want * MS, "a call 2 ms into the doze");
        }
        p.dozed_at = Some(100 * MS);
        p.observe(false, Seen { calls: p.last_calls + 1, in_call: false }, 120 * MS);
        assert_eq!(p.quiet_needed, 8 * MS, "a call 20 ms into the doze");
        for want in [4, 2, 2] {
            p.dozed_at = Some(100 * MS);
            p.observe(false, NO_CALL, 200 * MS);
            assert_eq!(p.quiet_needed, want * MS, "a doze that timed out");
        }
    }
}
