//! Call stacks (SHIM_STACKS): which code made a call. After a call returns, while the
//! caller's frames are still on the stack, the calling thread decides whether to take its
//! stack (a slow call, a sampled allocation, or every allocation), unwinds it in place
//! (`unwind.rs`), interns it in the process's stack table (`table.rs`) and writes, into its
//! own stream, the stack's definition the first time it is seen, the loaded objects it runs
//! in (`modules.rs`) and a `site` record naming the stack of the call just recorded.
//!
//! Nothing here allocates: the table and the module list are fixed-size, mapped once; the
//! unwinders read the stack and the unwind tables in place. The settings (SHIM_STACKS and
//! the four that go with it) are config.rs's; [`setup`] takes them at start-up.
mod modules;
mod sampler;
mod table;
mod unwind;

use crate::config::{StackMode, Stacks};
use crate::shared::{self, G};
use crate::thread::{append, ThreadState};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use recorder::buffer::Args;
use recorder::event::site_flags;
use recorder::{Header, Op};

pub const OFF: u8 = StackMode::Off as u8;
pub const SAMPLE: u8 = StackMode::Sample as u8;
pub const ALL: u8 = StackMode::All as u8;

/// The largest SHIM_STACK_DEPTH.
pub const MAX_DEPTH: usize = crate::config::MAX_STACK_DEPTH as usize;

static MODE: AtomicU8 = AtomicU8::new(OFF);
static DEPTH: AtomicU32 = AtomicU32::new(0);
static MEAN: AtomicU64 = AtomicU64::new(0);
static FP: AtomicU8 = AtomicU8::new(0);
/// A call at least this many clock ticks inside the allocator is slow (0: not yet known).
static SLOW_TICKS: AtomicU64 = AtomicU64::new(0);

/// SHIM_STACKS as set up at start-up.
#[inline(always)]
pub fn mode() -> u8 {
    MODE.load(Relaxed)
}

/// At start-up, before the log's header is written (the settings from config.rs, their
/// lines said now): maps the stack table when stacks are on.
pub fn setup(s: &Stacks) {
    for w in s.warnings.iter().flatten() {
        shared::say(w);
    }
    let mut m = s.mode as u8;
    MEAN.store(s.sample_bytes, Relaxed);
    DEPTH.store(s.depth, Relaxed);
    FP.store(s.frame_pointers as u8, Relaxed);
    if let Some(seed) = s.seed {
        sampler::set_seed(seed);
    }
    if m != OFF && !table::init() {
        shared::say("shim: cannot map the stack table; stacks off");
        m = OFF;
    }
    if m != OFF {
        // A fork child's log starts empty: its table and module list start again.
        unsafe { libc::pthread_atfork(None, None, Some(after_fork_child)) };
    }
    MODE.store(m, Relaxed);
}

/// What the log header says of the settings.
pub fn describe(h: &mut Header) {
    let m = MODE.load(Relaxed);
    h.stacks = Some(["off", "slow", "sample", "all"][m as usize & 3].to_string());
    if m == SAMPLE {
        h.sample_bytes = Some(MEAN.load(Relaxed));
    }
    if m != OFF {
        h.unwind = Some(if FP.load(Relaxed) != 0 { "fp" } else { "tables" }.to_string());
        h.stack_depth = Some(DEPTH.load(Relaxed));
    }
}

/// The slow-call threshold in clock ticks: SHIM_STALL at the calibrated rate (at 3 ticks
/// per ns, a bound for this machine's TSC, until the recorder has calibrated).
#[inline(always)]
fn slow_ticks() -> u64 {
    let t = SLOW_TICKS.load(Relaxed);
    if t != 0 {
        t
    } else {
        compute_slow_ticks()
    }
}

#[cold]
fn compute_slow_ticks() -> u64 {
    let ns = G.get().stall_ns.max(1);
    let tps = f64::from_bits(shared::TPS_BITS.load(Relaxed));
    if tps > 0.0 {
        let t = ((ns as f64 * tps / 1e9) as u64).max(1);
        SLOW_TICKS.store(t, Relaxed);
        t
    } else {
        ns.saturating_mul(3)
    }
}

/// After an allocating call was recorded (`ptr` its result, `bytes` asked, `bt` its time
/// inside the allocator in clock ticks when measured): takes its stack if it is wanted.
#[inline(always)]
pub fn after_alloc(st: &mut ThreadState, ts: u64, ptr: u64, bytes: u64, bt: Option<u64>) {
    let m = mode();
    if m == OFF {
        return;
    }
    let mut flags = 0;
    if let Some(b) = bt {
        if b >= slow_ticks() {
            flags |= site_flags::SLOW;
        }
    }
    if m >= SAMPLE && ptr != 0 {
        if m == ALL {
            flags |= site_flags::ALL;
        } else if sampler::take(bytes, MEAN.load(Relaxed)) {
            flags |= site_flags::SAMPLED;
        }
    }
    if flags != 0 {
        capture(st, ts, flags);
    }
}

/// SHIM_RECORD=sample: whether an allocation of `bytes` is sampled (the byte sampler of
/// SHIM_STACKS=sample).
#[inline(always)]
pub fn sampled(bytes: u64) -> bool {
    sampler::take(bytes, MEAN.load(Relaxed))
}

/// SHIM_RECORD=sample: the stack of the call just recorded, with its `site_flags`.
#[inline(always)]
pub fn take(st: &mut ThreadState, ts: u64, flags: u64) {
    if mode() != OFF {
        capture(st, ts, flags);
    }
}

/// Whether a call that spent `bt` ticks inside the allocator is a slow one.
#[inline(always)]
pub fn is_slow(bt: Option<u64>) -> bool {
    bt.is_some_and(|b| b >= slow_ticks())
}

/// After a free was recorded: its stack if it was slow.
#[inline(always)]
pub fn after_free(st: &mut ThreadState, ts: u64, bt: Option<u64>) {
    if let Some(b) = bt {
        if mode() != OFF && b >= slow_ticks() {
            capture(st, ts, site_flags::SLOW);
        }
    }
}

/// Takes the calling thread's stack and writes the records that name it.
#[cold]
#[inline(never)]
fn capture(st: &mut ThreadState, ts: u64, flags: u64) {
    let mut pcs = [0u64; MAX_DEPTH];
    let depth = DEPTH.load(Relaxed) as usize;
    let n = unwind::capture(&mut pcs[..depth], FP.load(Relaxed) != 0);
    let pcs = &pcs[..n];
    let (id, new) = table::intern(pcs);
    if new {
        modules::ensure(pcs, &mut |op, size, value| emit(st, ts, op, size, value));
        emit(st, ts, Op::Stack, id as u64, n as u64);
        for &pc in pcs {
            emit(st, ts, Op::StackPc, id as u64, pc);
        }
    }
    emit(st, ts, Op::Site, id as u64, flags);
}

fn emit(st: &mut ThreadState, ts: u64, op: Op, size: u64, value: u64) {
    append(st, op, ts, &Args { size, value, ..Args::default() }, None);
}

/// In a fork child: its log is new, so every stack and object is new to it.
pub extern "C" fn after_fork_child() {
    table::reset();
    modules::reset();
}
