//! What the recording and sampling paths share: the calling thread's recording state
//! (registering the thread on its first call, and on the process's very first having the
//! C entry layer start it up), the timing countdown, the watchdog's slow mark, and the way
//! out when recording stopped under a call.
use crate::thread::tls::{self, Tls};
use crate::thread::{self, leave, ThreadState};
use crate::{shared, state};
use core::ffi::c_void;
use core::sync::atomic::Ordering::Relaxed;
use recorder::clock;

/// Ticks now if this call is one of the timed ones, else 0.
#[inline(always)]
pub fn start_timer(st: &mut ThreadState) -> u64 {
    if st.countdown != 0 {
        st.countdown -= 1;
        if st.countdown == 0 {
            st.countdown = shared::G.get().timing_period;
            return clock::now();
        }
    }
    0
}

/// The backend time of this call: measured if timed (`t0` != 0), else a lower bound if
/// the watchdog marked it (`slow`), else unknown. A difference that comes out negative
/// (clock reads reordered) is dropped rather than wrapped.
#[inline(always)]
pub fn backend_ticks(st: &ThreadState, t0: u64, slow: bool, end: u64) -> Option<u64> {
    let start = if t0 != 0 {
        t0
    } else if slow {
        st.slow_since.load(Relaxed)
    } else {
        return None;
    };
    end.checked_sub(start)
}

/// Whether the watchdog marked the call in progress as slow.
#[inline(always)]
pub fn marked_slow(st: &ThreadState) -> bool {
    st.slow_call.load(Relaxed) == st.calls.load(Relaxed)
}

/// The thread's state when it records, or None to take the slow path.
#[inline(always)]
pub fn recording(t: &mut Tls) -> Option<&'static mut ThreadState> {
    if t.busy == 0 && (t.state as usize) > 1 {
        Some(unsafe { &mut *t.state })
    } else {
        None
    }
}

/// Not recording on this thread right now: nested inside the shim, not yet initialised or
/// registered, tracing off, or after the thread's exit or the final flush. Returns true when
/// the thread is now registered and the call should be recorded.
#[cold]
#[inline(never)]
fn prepare(t: &mut Tls) -> bool {
    if t.busy != 0 {
        return false;
    }
    t.busy = 1;
    shim_start_up();
    let ok = if !state::writing() || t.state == tls::EXITED {
        if !t.state.is_null() {
            shared::count_untraced();
        }
        false
    } else {
        t.state = thread::register();
        if t.state.is_null() {
            t.state = tls::EXITED;
            shared::count_untraced();
        }
        (t.state as usize) > 1
    };
    t.busy = 0;
    ok
}

unsafe extern "C" {
    /// The process's start-up (settings, backend, log: init.rs), begun on its first call by
    /// the C entry layer that owns it (exports.rs), as heaptrack's `if (!hooks) init()` sits
    /// in its top layer; returns at once once done, waits while another thread runs it. It
    /// is reached from here, on a thread's first call only, by its C name rather than an
    /// import: a check in each exported function would cost every call two instructions.
    safe fn shim_start_up();
}

/// The calling thread's recording state, registering it first if needed.
#[inline(always)]
pub fn state(t: &mut Tls) -> Option<&'static mut ThreadState> {
    match recording(t) {
        Some(st) => Some(st),
        None if prepare(t) => Some(unsafe { &mut *t.state }),
        None => None,
    }
}

/// The final flush has begun, or the window closed: hand this thread's buffer over and
/// forward (for good after the final flush; until the next window otherwise).
#[cold]
#[inline(never)]
pub fn stopped(t: &mut Tls, st: &mut ThreadState, call: impl FnOnce() -> *mut c_void) -> *mut c_void {
    leave(st);
    st.close();
    match state::get() {
        s if s >= state::STOPPING => {
            t.state = tls::EXITED;
            shared::count_untraced();
        }
        // A window is open, but this thread could not join it (no buffer to be had).
        state::RECORDING | state::SAMPLING => shared::count_untraced(),
        // The window closed: the call belongs to the watch.
        _ => {}
    }
    t.busy = 0;
    call()
}
