//! The watching path (capture windows, between two windows): no record, only a mark of
//! the call in the thread's `in_call` for the recorder's stall watchdog.
use crate::thread;
use crate::thread::tls::{self, Tls};
use crate::{state, wake};
use core::sync::atomic::Ordering::Relaxed;
use recorder::Op;

/// The call is only marked in `in_call`, for the stall watchdog (the op in the low bits,
/// WATCHED set: the recorder never waits on such a call).
#[inline(always)]
pub fn watch<R>(op: Op, call: impl FnOnce() -> R) -> R {
    let t = tls::get();
    if (t.state as usize) <= 1 {
        return watch_first(t, call);
    }
    let st = unsafe { &mut *t.state };
    let n = st.next_call();
    st.in_call.store(thread::WATCHED | n << 6 | op as u64, Relaxed);
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    if st.halt.load(Relaxed) & wake::WAKE != 0 {
        // The first call since the recorder began to doze (background/pace.rs).
        thread::woken(st);
    }
    let r = call();
    st.in_call.store(0, Relaxed);
    r
}

/// A thread's first call while watching: it registers (without a buffer), so that the
/// watchdog sees its calls.
#[cold]
#[inline(never)]
fn watch_first<R>(t: &mut Tls, call: impl FnOnce() -> R) -> R {
    if t.busy == 0 && t.state.is_null() {
        t.busy = 1;
        if state::get() == state::WATCHING {
            t.state = thread::register();
            if t.state.is_null() {
                t.state = tls::EXITED;
            }
        }
        t.busy = 0;
    }
    call()
}
