//! The hot path: what a call of the malloc family runs between the C ABI (exports.rs,
//! patch/wrappers.rs) and the calling thread's own buffer (thread.rs).
//!
//! ```text
//! dispatch.rs   one match on the recording state (state.rs), once per call
//!    ├─ OFF        the call, nothing else
//!    ├─ WATCHING   watch.rs: a mark for the recorder's watchdog
//!    ├─ SAMPLING   sampled/: the byte sampler's allocations, their frees, slow calls
//!    └─ RECORDING  record.rs: every call, one record
//! entry.rs      what the recording and sampling paths share: the thread's registration on
//!               its first call (start-up, exports.rs's shim_start_up, on the process's
//!               first), the timing countdown, the watchdog's slow mark, the way out when
//!               recording stopped
//! ```
//!
//! The rules: no lock, no syscall, no allocation on these paths (the first call of a
//! thread and a full buffer's hand-over aside, both off the inlined path); the files
//! import downwards only (dispatch -> record/watch/sampled -> entry -> thread, stacks).
pub mod dispatch;
pub mod entry;
pub mod record;
pub mod sampled;
pub mod watch;
