//! The recording state of the process: one word, read by every hooked call to know what to
//! do, and every transition between its values in this file.
//!
//! ```text
//!   UNINIT --init--> OFF          (SHIM_TRACE=0, setuid, no log: forward only, for good)
//!   UNINIT --init--> RECORDING    (every call recorded: one window from start to exit)
//!   UNINIT --init--> WATCHING     (capture windows: no per-call records between them)
//!   UNINIT --init--> SAMPLING     (SHIM_RECORD=sample: only sampled allocations, their
//!                                  frees and slow calls are recorded)
//!   WATCHING --window opens--> RECORDING        (the recorder: timer, control, signal)
//!   RECORDING --window closes--> WATCHING       (timer, control, limit, write error)
//!   RECORDING/SAMPLING/WATCHING --stop--> STOPPING  (final flush or a failure: threads hand their
//!                                  last buffer over; calls are served and counted, unrecorded)
//!   STOPPING --closed--> CLOSED   (the log is closed; calls counted, unrecorded)
//!   STOPPING/RECORDING --fork child restarts--> RECORDING (SAMPLING: SAMPLING)
//!   any --fork child, exec failure--> OFF
//! ```
//!
//! This module depends on nothing else in the crate: the hot path, the threads, the
//! recorder and the lifecycle all read it, and only call the transitions below.
use core::sync::atomic::{AtomicU8, Ordering::*};

/// Not initialised yet: the first call initialises.
pub const UNINIT: u8 = 0;
/// Forward only, never record (and never will in this process).
pub const OFF: u8 = 1;
/// Between capture windows: calls are not recorded, only marked (for the stall watchdog).
pub const WATCHING: u8 = 2;
/// Only sampled allocations (with their frees) and slow calls are recorded.
pub const SAMPLING: u8 = 3;
/// Every call is recorded.
pub const RECORDING: u8 = 4;
/// Recording is ending (final flush, write failure): calls are served, counted, unrecorded.
pub const STOPPING: u8 = 5;
/// Recording is over and the log closed: calls are served, counted, unrecorded.
pub const CLOSED: u8 = 6;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);

/// The state now (one relaxed load: the hot path's only question).
#[inline(always)]
pub fn get() -> u8 {
    STATE.load(Relaxed)
}

/// Recording (or stopping) is under way in this process: the recorder, the fork and exit
/// handlers have work to do.
#[inline]
pub fn tracing() -> bool {
    matches!(get(), WATCHING | SAMPLING | RECORDING | STOPPING)
}

/// Threads write records now (every call, or the sampled ones): they register with a
/// buffer, and the recorder takes idle threads' buffers.
#[inline]
pub fn writing() -> bool {
    matches!(get(), SAMPLING | RECORDING)
}

/// Recording has begun to stop (or stopped) for good.
#[inline]
pub fn stopping() -> bool {
    get() >= STOPPING
}

/// Initialisation found nothing to record.
pub fn init_off() {
    STATE.store(OFF, Release);
}

/// Initialisation (or a restart after fork or a failed exec) set up a log: record (every
/// call, or only the sampled ones).
pub fn start_recording(sample_only: bool) {
    STATE.store(if sample_only { SAMPLING } else { RECORDING }, SeqCst);
}

/// Initialisation set up a watch log: watch until a window opens.
pub fn start_watching() {
    STATE.store(WATCHING, SeqCst);
}

/// A window opens (the recorder, having armed every thread). False if the process is
/// stopping.
pub fn open_window() -> bool {
    STATE.compare_exchange(WATCHING, RECORDING, SeqCst, Relaxed).is_ok()
}

/// The window closes: back to watching. False if the process is stopping (the final flush
/// closes the window).
pub fn close_window() -> bool {
    STATE.compare_exchange(RECORDING, WATCHING, SeqCst, Relaxed).is_ok()
}

/// The final flush or a failure: threads stop recording. False if already stopping.
pub fn begin_stop() -> bool {
    STATE.compare_exchange(RECORDING, STOPPING, SeqCst, Relaxed).is_ok()
        || STATE.compare_exchange(SAMPLING, STOPPING, SeqCst, Relaxed).is_ok()
        || STATE.compare_exchange(WATCHING, STOPPING, SeqCst, Relaxed).is_ok()
}

/// The recorder has written everything it will write.
pub fn closed() {
    let _ = STATE.compare_exchange(STOPPING, CLOSED, SeqCst, Relaxed);
}

/// Recording stays off in this process from now on (a fork child during the final flush,
/// a failed exec in a threaded process, a log that cannot be created).
pub fn off_for_good() {
    STATE.store(OFF, SeqCst);
}
