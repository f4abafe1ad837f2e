//! libshim.so: interposes the malloc family (exports.rs, the only C-ABI surface), forwards
//! each call to the backend chosen at start-up, and records it (hot.rs) into a per-thread
//! buffer (thread.rs) that the recorder thread (recorder_thread.rs) compresses into the log.
//! Start-up, fork and exit are in lifecycle.rs; environment variables in config.rs; the
//! allocators programs link in themselves are found and patched by patch/; SHIM_RECORD=sample's
//! path (only sampled allocations and their frees recorded) is in sampled/.

mod config;
mod control;
mod exports;
mod header;
mod hot;
mod init;
mod lifecycle;
mod logfile;
mod pace;
mod packing;
mod patch;
mod reclaim;
mod recorder_thread;
mod sampled;
mod shared;
mod stacks;
mod state;
mod thread;
mod tls;
mod watch;
mod window;

/// The shim's own allocations (recorder, zstd's Rust side, std) go straight to the backend,
/// never through the hooks.
#[global_allocator]
static ALLOC: shim_backend::BackendAlloc = shim_backend::BackendAlloc;
