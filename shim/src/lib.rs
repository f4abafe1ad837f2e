//! libshim.so: interposes the malloc family, forwards each call to the backend chosen at
//! start-up, and records it into a per-thread buffer that the recorder thread compresses
//! into the log. The files, from the top (each imports only files of its own layer or
//! below; `python3 tools/layers.py` checks it against docs/design.md's table):
//!
//! - the C entry: `process.rs` (constructor, fork, exec*, _exit, abort, the final flush),
//!   `exports.rs` (the malloc family, heap introspection; the process's start-up is begun
//!   here, `shim_start_up`, reached from hot/entry.rs on the first call), `fds.rs` (close,
//!   close_range, closefrom, dup2, dup3: the shim's own descriptors spared);
//! - `background/`: the recorder thread's side (writing, pace, windows, watch log, control
//!   socket, reclaiming in-flight files), started by process.rs;
//! - start-up: `init.rs` (on the first call: settings, backend, log), `header.rs`;
//! - `patch/`: a program's own allocator (found, patched, its entry points' wrappers, which
//!   call hot/dispatch.rs and c_rules.rs, not exports.rs);
//! - `c_rules.rs`: the malloc family's C rules, shared by the entry points;
//! - `hot/`: the one dispatch on the recording state, then the recording, watching and
//!   sampling paths; `stacks/`, the call stacks they take;
//! - `thread.rs`: the per-thread buffer and state, the registry, the TLS block (tls.c);
//! - `shared.rs`: what the threads, the recorder and the exit path share;
//! - below everything: `state.rs` (the recording state and its transitions), `config.rs`
//!   (every SHIM_* setting, parsed once), `wake.rs` (waking the dozing recorder).
//!
//! docs/design.md has the picture, the rules of each layer and a malloc's walk through them.

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
