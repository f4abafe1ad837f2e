//! A replay thread: replays one recorded thread's ops straight into `shim_backend::{malloc,
//! ...}`, starts and joins the threads the plan gives it (see ../plan/planner.rs), and touches the
//! memory it gets as the chosen `--touch` says.
//!
//! What it spends on itself between calls is kept small and out of the timed stretch: one
//! call in [`Shared::time_mask`]+1 is timed (two clock reads around the call alone), slop
//! comes from the plan, and the counters the sampler reads are updated every 1024 ops.
use super::measure::Progress;
use super::sync;
use crate::replay::plan::{self, Action, PlanOp, ThreadPlan};
use recorder::clock;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

/// How much of each allocated block the replay writes (`--touch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    /// Nothing: only what the allocator writes itself becomes resident.
    None,
    /// One byte in every page the block spans (the program's first write to each page:
    /// page faults, zeroing, huge pages).
    First,
    /// Every byte.
    All,
}

impl Touch {
    pub fn parse(s: &str) -> Result<Touch, String> {
        match s {
            "none" => Ok(Touch::None),
            "first" => Ok(Touch::First),
            "all" => Ok(Touch::All),
            _ => Err(format!("--touch: unknown value '{s}' (accepted: none, first, all)")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Touch::None => "none",
            Touch::First => "first",
            Touch::All => "all",
        }
    }
}

/// One block of the replay: the pointer the backend returned for it, and the counter of its
/// NOTIFY ops that orders threads (see ../plan/planner.rs and sync.rs).
#[derive(Default)]
pub struct Slot {
    pub ptr: AtomicUsize,
    pub requested: AtomicU64,
    pub done: AtomicU32,
}

/// What one replay thread counted and measured.
pub struct Tally {
    /// Sampled latencies: the action in the top 3 bits, clock ticks below.
    pub samples: Vec<u64>,
    pub counts: [u64; 12],
    pub waits: u64,
    pub failures: u64,
    pub misaligned: u64,
    pub live: i64,
    pub ops: u64,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Everything the replay threads share. Built by the child's main thread before the first
/// op; each `workers[t]` is touched only by thread t while it runs, and by the main thread
/// once every thread is joined.
pub struct Shared<'a> {
    pub slots: &'a [Slot],
    pub file: &'a File,
    pub threads: &'a [ThreadPlan],
    pub progress: &'a [Progress],
    pub workers: Vec<UnsafeCell<Worker>>,
    /// pthread_t of each started thread, and whether it was joined.
    pub tids: Vec<AtomicU64>,
    pub joined: Vec<AtomicBool>,
    /// Thread starts and exits done.
    pub life: AtomicU32,
    pub start_ns: AtomicU64,
    /// Some((how, first recorded time)): keep the recorded gaps (--pace).
    pub pace: Option<(Pace, u64)>,
    pub touch: Touch,
    pub page: usize,
    /// Time a call when its thread's call count & time_mask is 0.
    pub time_mask: u64,
    /// Replay threads running now, and the most that ever ran at once (measured).
    pub running: AtomicU32,
    pub max_running: AtomicU32,
    /// Threads whose exit the log does not show (the main thread, threads alive at the end)
    /// wait here after their last op until the child has taken the end figures: their exit
    /// never happened in the program, and an allocator may act on it (jemalloc purges an
    /// arena whose last thread exits).
    pub hold: AtomicBool,
    /// How many of those threads are done with their ops and waiting.
    pub held: AtomicU32,
}

unsafe impl Sync for Shared<'_> {}

/// A replay thread's own state.
pub struct Worker {
    pub t: Tally,
    pub buf: Vec<u8>,
}

static SHARED: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

pub fn fatal(msg: String) -> ! {
    eprintln!("shimlog: replay: {msg}");
    std::process::exit(2)
}

/// How `--pace` spends the recorded gaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    Sleep,
    Busy,
}

impl Pace {
    pub fn name(self) -> &'static str {
        match self {
            Pace::Sleep => "sleep",
            Pace::Busy => "busy",
        }
    }
}

/// Sleeps (or with `busy`, spins) until CLOCK_MONOTONIC reaches `target_ns`.
fn wait_until(target_ns: u64, busy: bool) {
    loop {
        let now = clock::mono_ns();
        if now >= target_ns {
            return;
        }
        let left = target_ns - now;
        if left > 200_000 && !busy {
            let t = target_ns - 100_000;
            let ts = libc::timespec {
                tv_sec: (t / 1_000_000_000) as libc::time_t,
                tv_nsec: (t % 1_000_000_000) as libc::c_long,
            };
            unsafe {
                libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, core::ptr::null_mut())
            };
        } else {
            core::hint::spin_loop();
        }
    }
}

impl<'a> Shared<'a> {
    /// Makes `self` the state every replay thread reads; it must outlive them all (the
    /// child joins every thread before dropping it).
    pub fn install(&self) {
        SHARED.store(self as *const Shared as *mut c_void, Release);
    }

    /// Starts recorded thread `t` as lifecycle event `index`.
    pub fn spawn(&self, t: u32, index: u32) {
        sync::wait_life(&self.life, index);
        let mut tid: libc::pthread_t = 0;
        let rc = unsafe {
            let mut attr: libc::pthread_attr_t = core::mem::zeroed();
            libc::pthread_attr_init(&mut attr);
            libc::pthread_attr_setstacksize(&mut attr, 256 * 1024);
            let rc = libc::pthread_create(&mut tid, &attr, entry, t as usize as *mut c_void);
            libc::pthread_attr_destroy(&mut attr);
            rc
        };
        if rc != 0 {
            fatal(format!(
                "cannot start replay thread {} (recorded tid {}): error {rc}",
                t, self.threads[t as usize].tid
            ));
        }
        self.tids[t as usize].store(tid as u64, Release);
        sync::advance_life(&self.life);
    }

    /// Waits for recorded thread `t` to end, as lifecycle event `index`.
    pub fn join(&self, t: u32, index: u32) {
        sync::wait_life(&self.life, index);
        self.join_now(t);
        sync::advance_life(&self.life);
    }

    /// Joins thread `t` if it was started and not joined yet.
    pub fn join_now(&self, t: u32) {
        let tid = self.tids[t as usize].load(Acquire);
        if tid != 0 && !self.joined[t as usize].swap(true, AcqRel) {
            unsafe { libc::pthread_join(tid as libc::pthread_t, core::ptr::null_mut()) };
        }
    }
}

extern "C" fn entry(arg: *mut c_void) -> *mut c_void {
    let sh = unsafe { &*(SHARED.load(Acquire) as *const Shared) };
    let t = arg as usize;
    let w = unsafe { &mut *sh.workers[t].get() };
    let now = sh.running.fetch_add(1, AcqRel) + 1;
    sh.max_running.fetch_max(now, AcqRel);
    w.run(sh, t);
    sh.running.fetch_sub(1, AcqRel);
    if !sh.threads[t].exited {
        sh.held.fetch_add(1, AcqRel);
        while sh.hold.load(Acquire) {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    core::ptr::null_mut()
}

/// Writes `[from, to)` of the block at `p` as `touch` says.
#[inline(always)]
fn touch(p: *mut u8, from: usize, to: usize, how: Touch, page: usize) {
    if from >= to {
        return;
    }
    match how {
        Touch::None => {}
        Touch::First => unsafe {
            let end = p as usize + to;
            let mut a = p as usize + from;
            loop {
                core::ptr::write_volatile(a as *mut u8, 0x5a);
                a = (a | (page - 1)) + 1;
                if a >= end {
                    break;
                }
            }
        },
        Touch::All => unsafe { core::ptr::write_bytes(p.add(from), 0x5a, to - from) },
    }
}

impl Worker {
    #[inline(always)]
    fn got(&mut self, sh: &Shared, s: &Slot, p: *mut c_void, requested: u64, from: u64, bytes: u64) {
        if p.is_null() {
            self.t.failures += 1;
            s.ptr.store(0, Relaxed);
            s.requested.store(0, Relaxed);
            return;
        }
        touch(p as *mut u8, from as usize, bytes as usize, sh.touch, sh.page);
        s.ptr.store(p as usize, Relaxed);
        s.requested.store(requested, Relaxed);
        self.t.live += requested as i64;
    }

    #[inline(always)]
    fn timed<R>(&mut self, sh: &Shared, action: Action, f: impl FnOnce() -> R) -> R {
        let n = self.t.ops;
        if n & sh.time_mask != 0 {
            return f();
        }
        let t0 = clock::now();
        let r = f();
        let t1 = clock::now();
        if self.t.samples.len() < self.t.samples.capacity() {
            self.t.samples.push(((action as u64) << 61) | t1.wrapping_sub(t0).min((1 << 61) - 1));
        }
        r
    }

    #[inline(always)]
    fn op(&mut self, sh: &Shared, o: &PlanOp) {
        let action = Action::from_u8(o.action).unwrap_or(Action::Free);
        match action {
            Action::Spawn => return sh.spawn(o.slot, o.count as u32),
            Action::Join => return sh.join(o.slot, o.count as u32),
            _ => {}
        }
        let Some(s) = sh.slots.get(o.slot as usize) else {
            fatal(format!("the plan names slot {} of {}", o.slot, sh.slots.len()))
        };
        if let Some(q) = o.wait {
            if sync::wait_slot(&s.done, q) {
                self.t.waits += 1;
            }
        }
        match action {
            Action::Malloc | Action::Calloc | Action::Memalign => {
                let p = self.timed(sh, action, || unsafe {
                    match action {
                        Action::Malloc => shim_backend::malloc(o.size as usize),
                        Action::Calloc => shim_backend::calloc(o.count as usize, o.size as usize),
                        _ => shim_backend::memalign(o.align as usize, o.size as usize),
                    }
                });
                if action == Action::Memalign && (p as usize) & (o.align as usize).wrapping_sub(1) != 0 {
                    self.t.misaligned += 1;
                }
                let bytes = if action == Action::Calloc { o.requested } else { o.size };
                self.got(sh, s, p, o.requested, 0, bytes);
            }
            Action::Realloc => {
                let p = s.ptr.load(Relaxed) as *mut c_void;
                let q = self.timed(sh, action, || unsafe {
                    if p.is_null() {
                        // Its allocation failed in this replay: this is the block's first.
                        shim_backend::malloc(o.size as usize)
                    } else {
                        shim_backend::realloc(p, o.size as usize)
                    }
                });
                if q.is_null() && !p.is_null() {
                    // A failed realloc leaves the block as it was.
                    self.t.failures += 1;
                } else {
                    let old = s.requested.load(Relaxed);
                    self.t.live -= old as i64;
                    // The program writes what the block gained; realloc copied the rest.
                    let from = if p.is_null() { 0 } else { old.min(o.size) };
                    self.got(sh, s, q, o.requested, from, o.size);
                }
            }
            _ => {
                let p = s.ptr.load(Relaxed) as *mut c_void;
                if !p.is_null() {
                    self.timed(sh, Action::Free, || unsafe { shim_backend::free(p) });
                }
                self.t.live -= s.requested.load(Relaxed) as i64;
                s.ptr.store(0, Relaxed);
                s.requested.store(0, Relaxed);
            }
        }
        if o.notify {
            sync::notify_slot(&s.done);
        }
        if let Some(c) = self.t.counts.get_mut(o.op as usize) {
            *c += 1;
        }
        self.t.ops += 1;
    }

    /// Replays every op of thread `t`, reading its chunks from the plan file.
    pub fn run(&mut self, sh: &Shared, t: usize) {
        let tp = &sh.threads[t];
        let progress = &sh.progress[t];
        self.t.start_ns = clock::mono_ns();
        let base = sh.start_ns.load(Relaxed);
        let mut prev_ts = 0u64;
        let mut buf = std::mem::take(&mut self.buf);
        for c in &tp.chunks {
            let len = c.len as usize;
            if len > buf.len() {
                fatal(format!("a plan chunk of {len} bytes exceeds {}", buf.len()));
            }
            if let Err(e) = sh.file.read_exact_at(&mut buf[..len], c.offset) {
                fatal(format!("reading the replay plan: {e}"));
            }
            let mut pos = 0;
            while pos < len {
                let Some(o) = plan::decode(&buf[..len], &mut pos, prev_ts) else {
                    fatal(format!("the replay plan is corrupt at byte {}", c.offset + pos as u64))
                };
                prev_ts = o.ts_ns;
                if let Some((how, first)) = sh.pace {
                    wait_until(base + o.ts_ns.saturating_sub(first), how == Pace::Busy);
                }
                self.op(sh, &o);
                if self.t.ops & 1023 == 0 {
                    progress.ops.store(self.t.ops, Relaxed);
                    progress.live.store(self.t.live, Relaxed);
                }
            }
        }
        progress.ops.store(self.t.ops, Relaxed);
        progress.live.store(self.t.live, Relaxed);
        self.buf = buf;
        self.t.end_ns = clock::mono_ns();
    }
}
