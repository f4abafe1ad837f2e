//! The recorder thread's side: everything the shim does off the program's threads.
//!
//! - `recorder_thread`: the thread's loop: takes full buffers, packs, compresses and writes
//!   them, takes idle threads' buffers, runs the watchdog and the windows;
//! - `pace`: how long it sleeps between ticks, when it dozes (the wake-up itself is wake.rs);
//! - `packing/`: rows or columns (SHIM_PACK), by the idle cores and the cgroup's quota;
//! - `logfile`: one log file as the recorder writes it;
//! - `window`: the capture schedule, opening and closing a window;
//! - `watch`: the watchdog's stalls and the watch log's samples;
//! - `control`: the control socket (`shimlog ctl`);
//! - `reclaim`: the thread that recovers dead processes' in-flight files.
//!
//! These run on the shim's own threads, marked internal (their allocations are never
//! recorded); they read the threads' state (thread.rs) and never make a program's thread
//! wait, except SHIM_ON_FULL=block. Only process.rs imports this folder (to start the
//! recorder).
pub mod control;
pub mod logfile;
pub mod pace;
pub mod packing;
pub mod reclaim;
pub mod recorder_thread;
pub mod watch;
pub mod window;
