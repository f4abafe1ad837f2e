//! The replay child: one process per backend. It selects the backend, sets up all of its own
//! bookkeeping (slot table, op buffers, histograms, thread stacks) before the first replayed
//! op, takes the resident set at that point as its baseline, then lets one OS thread per
//! recorded thread replay that thread's ops straight into `shim_backend::{malloc, ...}`.
//!
//! shimlog's own allocations go to its global allocator (glibc's malloc, through Rust's
//! System allocator); none is made by the replay threads while they replay.
use super::measure::{self, Latency, Progress, Sampler, Slop, Statm};
use super::plan::{self, Action, PlanMeta, ThreadPlan};
use super::report::{Excluded, Memory, Replay, ThreadResult, Throughput};
use recorder::{clock, Op};
use shim_backend::Backend;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Barrier;

/// One block of the replay: the pointer the backend returned for it, and the counter of
/// ops done on it that orders threads (see plan.rs).
#[derive(Default)]
struct Slot {
    ptr: AtomicUsize,
    requested: AtomicU64,
    owner: AtomicU32,
    done: AtomicU32,
}

pub struct ChildOpts {
    pub pace: bool,
    pub touch: bool,
    pub progress: bool,
}

/// A replay thread's state, built by the main thread before the replay starts.
struct Worker<'a> {
    me: u32,
    slots: &'a [Slot],
    progress: &'a Progress,
    t: Tally,
    touch: bool,
    buf: Vec<u8>,
}

fn fatal(msg: String) -> ! {
    eprintln!("shimlog: replay: {msg}");
    std::process::exit(2)
}

/// Waits until `done` reaches `want`; true when it had to wait at all.
#[inline]
fn wait_for(done: &AtomicU32, want: u32) -> bool {
    if done.load(Acquire) == want {
        return false;
    }
    let mut spins = 0u32;
    while done.load(Acquire) != want {
        spins += 1;
        if spins < 256 {
            core::hint::spin_loop();
        } else if spins < 4096 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
    }
    true
}

/// Sleeps or spins until CLOCK_MONOTONIC reaches `target_ns`.
fn wait_until(target_ns: u64) {
    loop {
        let now = clock::mono_ns();
        if now >= target_ns {
            return;
        }
        let left = target_ns - now;
        if left > 200_000 {
            let t = target_ns - 100_000;
            let ts = libc::timespec {
                tv_sec: (t / 1_000_000_000) as libc::time_t,
                tv_nsec: (t % 1_000_000_000) as libc::c_long,
            };
            unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    core::ptr::null_mut(),
                )
            };
        } else {
            core::hint::spin_loop();
        }
    }
}

impl Worker<'_> {
    #[inline(always)]
    fn got(&mut self, s: &Slot, p: *mut c_void, requested: u64, bytes: u64) {
        if p.is_null() {
            self.t.failures += 1;
            s.ptr.store(0, Relaxed);
            s.requested.store(0, Relaxed);
            return;
        }
        let usable = unsafe { shim_backend::usable_size(p) } as u64;
        self.t.slop.add(requested, usable);
        if self.touch {
            unsafe { core::ptr::write_bytes(p as *mut u8, 0x5a, bytes as usize) };
        }
        s.ptr.store(p as usize, Relaxed);
        s.requested.store(requested, Relaxed);
        s.owner.store(self.me, Relaxed);
        self.t.live += requested as i64;
    }

    #[inline(always)]
    fn op(&mut self, o: &plan::PlanOp) {
        let Some(s) = self.slots.get(o.slot as usize) else {
            fatal(format!(
                "the plan names slot {} of {}",
                o.slot,
                self.slots.len()
            ))
        };
        let seq = match o.wait {
            Some(q) => {
                if wait_for(&s.done, q) {
                    self.t.waits += 1;
                }
                q
            }
            None => s.done.load(Relaxed),
        };
        let action = Action::from_u8(o.action).unwrap_or(Action::Free);
        match action {
            Action::Malloc | Action::Calloc | Action::Memalign => {
                let t0 = clock::now();
                let p = unsafe {
                    match action {
                        Action::Malloc => shim_backend::malloc(o.size as usize),
                        Action::Calloc => shim_backend::calloc(o.count as usize, o.size as usize),
                        _ => shim_backend::memalign(o.align as usize, o.size as usize),
                    }
                };
                let t1 = clock::now();
                self.t.lat.record(action as usize, t1.wrapping_sub(t0));
                if action == Action::Memalign
                    && (p as usize) & (o.align as usize).wrapping_sub(1) != 0
                {
                    self.t.misaligned += 1;
                }
                let bytes = if action == Action::Calloc {
                    o.requested
                } else {
                    o.size
                };
                self.got(s, p, o.requested, bytes);
            }
            Action::Realloc => {
                let p = s.ptr.load(Relaxed) as *mut c_void;
                if s.owner.load(Relaxed) != self.me {
                    self.t.cross_reallocs += 1;
                }
                let t0 = clock::now();
                let q = unsafe {
                    if p.is_null() {
                        // Its allocation failed in this replay: this is the block's first.
                        shim_backend::malloc(o.size as usize)
                    } else {
                        shim_backend::realloc(p, o.size as usize)
                    }
                };
                let t1 = clock::now();
                self.t
                    .lat
                    .record(Action::Realloc as usize, t1.wrapping_sub(t0));
                if q.is_null() && !p.is_null() {
                    // A failed realloc leaves the block as it was.
                    self.t.failures += 1;
                } else {
                    self.t.live -= s.requested.load(Relaxed) as i64;
                    self.got(s, q, o.requested, o.size);
                }
            }
            Action::Free => {
                let p = s.ptr.load(Relaxed) as *mut c_void;
                if s.owner.load(Relaxed) != self.me {
                    self.t.cross_frees += 1;
                }
                if !p.is_null() {
                    let t0 = clock::now();
                    unsafe { shim_backend::free(p) };
                    let t1 = clock::now();
                    self.t
                        .lat
                        .record(Action::Free as usize, t1.wrapping_sub(t0));
                }
                self.t.live -= s.requested.load(Relaxed) as i64;
                s.ptr.store(0, Relaxed);
                s.requested.store(0, Relaxed);
            }
        }
        s.done.store(seq.wrapping_add(1), Release);
        if let Some(c) = self.t.counts.get_mut(o.op as usize) {
            *c += 1;
        }
        self.t.ops += 1;
        self.progress.ops.store(self.t.ops, Relaxed);
        self.progress.live.store(self.t.live, Relaxed);
    }

    /// Replays every op of `tp`, reading its chunks from `file`.
    fn run(&mut self, tp: &ThreadPlan, file: &File, pace: Option<(u64, u64)>) {
        let mut prev_ts = 0u64;
        let mut buf = std::mem::take(&mut self.buf);
        for c in &tp.chunks {
            let len = c.len as usize;
            if len > buf.len() {
                fatal(format!("a plan chunk of {len} bytes exceeds {}", buf.len()));
            }
            if let Err(e) = file.read_exact_at(&mut buf[..len], c.offset) {
                fatal(format!("reading the replay plan: {e}"));
            }
            let mut pos = 0;
            while pos < len {
                let Some(o) = plan::decode(&buf[..len], &mut pos, prev_ts) else {
                    fatal(format!(
                        "the replay plan is corrupt at byte {}",
                        c.offset + pos as u64
                    ))
                };
                prev_ts = o.ts_ns;
                if let Some((base, first)) = pace {
                    wait_until(base + o.ts_ns.saturating_sub(first));
                }
                self.op(&o);
            }
        }
        self.buf = buf;
    }
}

/// Writes one byte per page so that the pages are resident before the baseline is taken.
fn touch_pages(p: *mut u8, len: usize) {
    let mut i = 0;
    while i < len {
        unsafe { core::ptr::write_volatile(p.add(i), 0) };
        i += 4096;
    }
}

/// What one replay thread counted and measured.
struct Tally {
    lat: Latency,
    slop: Slop,
    counts: [u64; 11],
    cross_frees: u64,
    cross_reallocs: u64,
    waits: u64,
    failures: u64,
    misaligned: u64,
    live: i64,
    ops: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            lat: Latency::new(),
            slop: Slop::new(),
            counts: [0; 11],
            cross_frees: 0,
            cross_reallocs: 0,
            waits: 0,
            failures: 0,
            misaligned: 0,
            live: 0,
            ops: 0,
        }
    }
}

/// A replay thread's result.
struct Done {
    t: Tally,
    tid: u32,
    run_ns: u64,
}

/// Runs the replay of the plan in `dir` against `backend` and returns what it measured.
pub fn run(backend: Backend, dir: &Path, o: &ChildOpts) -> Result<Replay, String> {
    shim_backend::select(backend);
    clock::init(false);
    let meta_bytes = std::fs::read(dir.join("plan.json"))
        .map_err(|e| format!("reading the replay plan {}: {e}", dir.display()))?;
    let meta: PlanMeta = serde_json::from_slice(&meta_bytes)
        .map_err(|e| format!("the replay plan in {} is not valid: {e}", dir.display()))?;
    drop(meta_bytes);
    let file = File::open(dir.join("ops.bin"))
        .map_err(|e| format!("opening the replay plan {}: {e}", dir.display()))?;
    let statm = Statm::open().ok_or("cannot read /proc/self/statm")?;

    let slots: Vec<Slot> = (0..meta.slots).map(|_| Slot::default()).collect();
    for s in &slots {
        s.done.store(0, Relaxed);
        s.ptr.store(0, Relaxed);
    }
    let n = meta.threads.len();
    let progress: Vec<Progress> = (0..n).map(|_| Progress::default()).collect();
    let max_chunk = meta
        .threads
        .iter()
        .flat_map(|t| &t.chunks)
        .map(|c| c.len as usize)
        .max();
    let buf_len = max_chunk.unwrap_or(0).max(plan::CHUNK);
    let mut workers: Vec<Worker> = (0..n)
        .map(|i| {
            let mut buf = vec![0u8; buf_len];
            touch_pages(buf.as_mut_ptr(), buf.len());
            Worker {
                me: i as u32,
                slots: &slots,
                progress: &progress[i],
                t: Tally::new(),
                touch: o.touch,
                buf,
            }
        })
        .collect();
    let histogram_bytes = workers.iter().map(|w| w.t.lat.bytes()).sum::<u64>();
    let mut total_lat = Latency::new();
    let mut total_slop = Slop::new();
    let mut sampler = Sampler::new();
    let timer_cost = measure::timer_cost_ticks();
    let total_ops: u64 = meta.threads.iter().map(|t| t.ops).sum();
    let bar = o.progress.then(|| {
        let b = indicatif::ProgressBar::new(total_ops);
        b.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{:>8} {{bar:40}} {{human_pos}}/{{human_len}} ops, {{eta}} left",
                backend.name()
            ))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });

    let ready = Barrier::new(n + 1);
    let go = Barrier::new(n + 2);
    let start_ns = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let pace_first = meta.first_ts_ns;
    let mut baseline = 0u64;
    let mut base_huge = 0u64;
    let mut hwm_reset = false;
    let mut before = measure::Usage::default();
    let mut clk = None;

    let (dones, end_ns) = std::thread::scope(|sc| {
        let mut handles = Vec::with_capacity(n);
        for (w, tp) in workers.drain(..).zip(meta.threads.iter()) {
            let (ready, go, start_ns, file) = (&ready, &go, &start_ns, &file);
            let pace = o.pace;
            let h = std::thread::Builder::new()
                .name(format!("replay-{}", tp.tid))
                .stack_size(256 * 1024)
                .spawn_scoped(sc, move || {
                    let mut w = w;
                    ready.wait();
                    go.wait();
                    let base = start_ns.load(Relaxed);
                    w.run(tp, file, pace.then_some((base, pace_first)));
                    let end = clock::mono_ns();
                    Done {
                        t: w.t,
                        tid: tp.tid,
                        run_ns: end.saturating_sub(base),
                    }
                })
                .unwrap_or_else(|e| fatal(format!("cannot start replay thread {}: {e}", tp.tid)));
            handles.push(h);
        }
        ready.wait();
        // Every thread is up with its buffers: what is resident now is not the replay's.
        baseline = statm.rss_bytes();
        base_huge = measure::anon_huge_pages_bytes().unwrap_or(0);
        hwm_reset = measure::reset_hwm();
        let (sampler, statm, progress, stop, bar) = (&mut sampler, &statm, &progress, &stop, &bar);
        let (go_s, start_s) = (&go, &start_ns);
        let samp = sc.spawn(move || {
            go_s.wait();
            let s0 = start_s.load(Relaxed);
            sampler.run(statm, baseline, s0, progress, stop, |ops| {
                if let Some(b) = bar {
                    b.set_position(ops);
                }
            });
        });
        clk = Some(measure::Clock::start());
        before = measure::usage();
        start_ns.store(clock::mono_ns(), Relaxed);
        go.wait();
        let dones: Vec<Done> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| fatal("a replay thread panicked".into()))
            })
            .collect();
        let end_ns = clock::mono_ns();
        stop.store(true, Relaxed);
        let _ = samp.join();
        (dones, end_ns)
    });
    let after = measure::usage().since(&before);
    let start = start_ns.load(Relaxed);
    let wall_ns = end_ns.saturating_sub(start);
    let end_rss = statm.rss_bytes().saturating_sub(baseline);
    let hwm = if hwm_reset {
        measure::vm_hwm_bytes()
    } else {
        None
    };
    let huge = measure::anon_huge_pages_bytes();
    let stats = shim_backend::stats::allocator_stats(backend);
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    // Calibrate the clock over at least 20 ms.
    let elapsed = clock::mono_ns().saturating_sub(start);
    if elapsed < 20_000_000 {
        std::thread::sleep(std::time::Duration::from_nanos(20_000_000 - elapsed));
    }
    let tpn = clk.map(|c| c.ticks_per_ns()).unwrap_or(1.0).max(1e-9);

    let mut counts = [0u64; 11];
    let mut threads = Vec::with_capacity(dones.len());
    let mut r = Replay {
        version: backend.version(),
        wall_ns,
        ..Replay::default()
    };
    for d in &dones {
        total_lat.merge(&d.t.lat);
        total_slop.merge(&d.t.slop);
        for (c, x) in counts.iter_mut().zip(d.t.counts) {
            *c += x;
        }
        r.cross_thread_frees += d.t.cross_frees;
        r.cross_thread_reallocs += d.t.cross_reallocs;
        r.waits += d.t.waits;
        r.replay_failures += d.t.failures;
        r.misaligned_results += d.t.misaligned;
        r.end_live_bytes += d.t.live;
        r.ops_total += d.t.ops;
        threads.push(ThreadResult {
            tid: d.tid,
            ops: d.t.ops,
            run_ns: d.run_ns,
            events_per_s: if d.run_ns > 0 {
                d.t.ops as f64 * 1e9 / d.run_ns as f64
            } else {
                0.0
            },
            waits: d.t.waits,
        });
    }
    let mut all = Latency::new();
    let mut all_total = 0u64;
    for a in Action::ALL {
        let i = a as usize;
        if !total_lat.h[i].is_empty() {
            r.latency.insert(
                a.name().into(),
                measure::percentiles(&total_lat.h[i], total_lat.total[i], tpn),
            );
            let _ = all.h[0].add(&total_lat.h[i]);
            all_total = all_total.wrapping_add(total_lat.total[i]);
        }
    }
    r.latency.insert(
        "all".into(),
        measure::percentiles(&all.h[0], all_total, tpn),
    );
    r.alloc_ns_total = (all_total as f64 / tpn) as u64;
    r.ops = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .filter_map(|(i, c)| Some((Op::from_u8(i as u8)?.name().to_string(), *c)))
        .collect::<BTreeMap<_, _>>();
    let mut rates: Vec<f64> = threads
        .iter()
        .filter(|t| t.ops > 0)
        .map(|t| t.events_per_s)
        .collect();
    rates.sort_by(|a, b| a.total_cmp(b));
    if !rates.is_empty() {
        r.events_per_s_per_thread = Throughput {
            min: rates[0],
            median: rates[rates.len() / 2],
            max: rates[rates.len() - 1],
        };
    }
    r.events_per_s_total = if wall_ns > 0 {
        r.ops_total as f64 * 1e9 / wall_ns as f64
    } else {
        0.0
    };
    r.threads = threads;
    r.cpu_user_ns = after.user_ns;
    r.cpu_sys_ns = after.sys_ns;
    r.minor_faults = after.minor_faults;
    r.major_faults = after.major_faults;
    r.voluntary_context_switches = after.vol_ctx;
    r.involuntary_context_switches = after.invol_ctx;
    r.slop = measure::slop_report(&total_slop);
    r.slop_bytes_total = r.slop.iter().map(|c| c.slop_bytes).sum();
    r.requested_bytes_total = r.slop.iter().map(|c| c.requested_bytes).sum();
    let (peak, source) = match hwm {
        Some(h) => (
            h.saturating_sub(baseline).max(sampler.peak_rss),
            "VmHWM (reset at the start) minus the baseline",
        ),
        None => (
            sampler.peak_rss,
            "sampled /proc/self/statm (VmHWM could not be reset)",
        ),
    };
    r.memory = Memory {
        peak_rss_bytes: peak,
        peak_rss_sampled_bytes: sampler.peak_rss,
        end_rss_bytes: end_rss,
        end_huge_page_bytes: huge.map(|h| h.saturating_sub(base_huge)),
        ideal_bytes: meta.ideal_bytes,
        fragmentation: if meta.ideal_bytes > 0 {
            peak as f64 / meta.ideal_bytes as f64
        } else {
            0.0
        },
        peak_source: source.into(),
        samples: std::mem::take(&mut sampler.samples),
        sample_interval_ns: sampler.interval_ns,
    };
    r.allocator_stats = stats.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    r.excluded = Excluded {
        baseline_rss_bytes: baseline,
        slot_table_bytes: (slots.len() * std::mem::size_of::<Slot>()) as u64,
        op_buffer_bytes: (n * buf_len) as u64,
        histogram_bytes,
        timer_cost_ns: timer_cost / tpn,
        clock: clock::source().into(),
    };
    Ok(r)
}
