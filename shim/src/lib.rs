//! libshim.so: interposes the malloc family, forwards each call to the backend chosen at
//! start-up, and records it into a per-thread buffer that the recorder thread compresses
//! into the log. The files, from the top (each imports only files below it):
//!
//! - the C ABI: `exports.rs` (the malloc family, heap introspection), `patch/` (a
//!   program's own allocator: found, patched, its entry points' wrappers), `process.rs`
//!   (constructor, fork, exec*, _exit, abort, the final flush), `fds.rs` (close, close_range,
//!   closefrom, dup2, dup3: the shim's own descriptors spared); `c_rules.rs`, the malloc
//!   family's C rules they share;
//! - `hot/`: the one dispatch on the recording state, then the recording, watching and
//!   sampling paths; `stacks/`, the call stacks they take;
//! - `thread.rs`: the per-thread buffer and state, the registry, the TLS block (tls.c);
//! - `background/`: the recorder thread's side (writing, pace, windows, watch log, control
//!   socket, reclaiming in-flight files), started by process.rs;
//! - start-up: `init.rs` (on the first call: settings, backend, log), `header.rs`;
//! - below everything: `config.rs` (every SHIM_* setting, parsed once), `state.rs` (the
//!   recording state and its transitions), `shared.rs` (what the threads, the recorder
//!   and the exit path share), `wake.rs` (waking the dozing recorder).
//!
//! docs/design.md has the picture and the rules of each layer.

mod background;
mod c_rules;
mod config;
mod exports;
mod fds;
mod header;
mod hot;
mod init;
mod patch;
mod process;
mod shared;
mod stacks;
mod state;
mod thread;
mod wake;

/// The shim's own allocations (recorder, zstd's Rust side, std) go straight to the backend,
/// never through the hooks.
#[global_allocator]
static ALLOC: shim_backend::BackendAlloc = shim_backend::BackendAlloc;
