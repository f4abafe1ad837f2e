//! The event clock: the TSC on x86-64 when it is invariant, CLOCK_MONOTONIC otherwise.
//!
//! Events carry raw ticks; the header carries the rate and a reference pair so readers
//! convert to nanoseconds. An allocation is stamped with [`after`] (waits for the backend's
//! loads to complete), a free with [`before`] (taken before the backend touches the
//! pointer), so that across threads a block's free always sorts before its reuse.
use core::sync::atomic::{AtomicBool, Ordering::Relaxed};

static USE_TSC: AtomicBool = AtomicBool::new(false);

/// Decides the clock source; call once at start-up. `monotonic` forces CLOCK_MONOTONIC.
pub fn init(monotonic: bool) {
    USE_TSC.store(!monotonic && tsc_invariant(), Relaxed);
}

pub fn source() -> &'static str {
    if USE_TSC.load(Relaxed) {
        "tsc"
    } else {
        "monotonic"
    }
}

#[cfg(target_arch = "x86_64")]
fn tsc_invariant() -> bool {
    use core::arch::x86_64::__cpuid;
    let max_ext = __cpuid(0x8000_0000).eax;
    max_ext >= 0x8000_0007 && (__cpuid(0x8000_0007).edx & (1 << 8)) != 0
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_invariant() -> bool {
    false
}

/// CLOCK_MONOTONIC in nanoseconds.
#[inline]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Wall-clock time in nanoseconds since the Unix epoch.
pub fn unix_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Ticks now, unordered (for durations).
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if USE_TSC.load(Relaxed) {
        return unsafe { core::arch::x86_64::_rdtsc() };
    }
    mono_ns()
}

/// Ticks read after every earlier instruction has completed (stamp for an allocation).
#[inline(always)]
pub fn after() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if USE_TSC.load(Relaxed) {
        let mut aux = 0u32;
        return unsafe { core::arch::x86_64::__rdtscp(&mut aux) };
    }
    mono_ns()
}

/// Ticks for a free, read before the backend gets the pointer. No fence is needed: RDTSC
/// reads the counter when it executes, which is before it retires; the backend's stores
/// that publish the freed block retire after it and only then become visible to other
/// threads. (The allocation side does need RDTSCP: a plain RDTSC could execute before the
/// load that found the block.)
#[inline(always)]
pub fn before() -> u64 {
    now()
}

/// A (ticks, monotonic ns) pair taken together.
#[derive(Clone, Copy, Debug)]
pub struct Pair {
    pub ticks: u64,
    pub mono_ns: u64,
}

pub fn pair() -> Pair {
    // Bracket the clock_gettime call and keep the tightest of a few tries.
    let mut best = Pair { ticks: now(), mono_ns: mono_ns() };
    let mut width = u64::MAX;
    for _ in 0..5 {
        let a = now();
        let m = mono_ns();
        let b = now();
        if b.wrapping_sub(a) < width {
            width = b.wrapping_sub(a);
            best = Pair { ticks: a + (b - a) / 2, mono_ns: m };
        }
    }
    best
}

/// Ticks per second measured between two pairs.
pub fn rate(a: Pair, b: Pair) -> f64 {
    if source() == "monotonic" {
        return 1e9;
    }
    let dt = b.mono_ns.saturating_sub(a.mono_ns);
    if dt == 0 {
        return 1e9;
    }
    b.ticks.wrapping_sub(a.ticks) as f64 * 1e9 / dt as f64
}

/// Raw clock ticks in the log's units (see [`crate::format::TICK_SHIFT`]).
#[inline(always)]
pub fn to_log(ticks: u64) -> u64 {
    ticks >> crate::format::TICK_SHIFT
}
