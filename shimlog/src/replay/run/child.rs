//! The replay child: one process per backend. It selects the backend, sets up all of its own
//! bookkeeping (slot table, op buffers, latency sample buffers) before the first replayed
//! op, takes the resident set at that point as its baseline, then starts the recorded
//! threads as they started in the log (worker.rs: each replays its thread's ops straight
//! into `shim_backend::{malloc, ...}` and starts or joins others where the plan says), and
//! makes the thread starts and exits no replay thread hosts itself.
//!
//! shimlog's own allocations go to its global allocator (glibc's malloc, through Rust's
//! System allocator); the replay threads make none while they replay, beyond what
//! pthread_create itself needs for a thread the program also started.
use super::measure::{self, Latency, Progress, Sampler, Statm};
use super::worker::{Pace, Shared, Slot, Tally, Touch, Worker};
use crate::replay::plan::{self, Action, PlanMeta};
use crate::replay::results::{Excluded, Memory, Replay, ThreadResult, Throughput};
use recorder::{clock, Op};
use shim_backend::Backend;
use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};

pub struct ChildOpts {
    pub pace: Option<Pace>,
    pub touch: Touch,
    pub progress: bool,
    /// Time one call in this many (a power of two).
    pub time_every: u64,
}

/// Writes one byte per page so that the pages are resident before the baseline is taken.
fn touch_pages(p: *mut u8, len: usize) {
    let mut i = 0;
    while i < len {
        unsafe { core::ptr::write_volatile(p.add(i), 0) };
        i += 4096;
    }
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
    let max_chunk = meta.threads.iter().flat_map(|t| &t.chunks).map(|c| c.len as usize).max();
    let buf_len = max_chunk.unwrap_or(0).max(plan::CHUNK);
    let time_every = o.time_every.max(1).next_power_of_two();
    let mut sample_bytes = 0u64;
    let workers: Vec<UnsafeCell<Worker>> = meta
        .threads
        .iter()
        .map(|tp| {
            let mut buf = vec![0u8; buf_len];
            touch_pages(buf.as_mut_ptr(), buf.len());
            let cap = (tp.ops / time_every + 2) as usize;
            // Written once (so resident before the baseline), then emptied.
            let mut samples: Vec<u64> = vec![0; cap];
            touch_pages(samples.as_mut_ptr() as *mut u8, cap * 8);
            samples.clear();
            sample_bytes += cap as u64 * 8;
            UnsafeCell::new(Worker {
                t: Tally {
                    samples,
                    counts: [0; 12],
                    waits: 0,
                    failures: 0,
                    misaligned: 0,
                    live: 0,
                    ops: 0,
                    start_ns: 0,
                    end_ns: 0,
                },
                buf,
            })
        })
        .collect();
    let page = if meta.page_size.is_power_of_two() { meta.page_size as usize } else { 4096 };
    let sh = Shared {
        slots: &slots,
        file: &file,
        threads: &meta.threads,
        progress: &progress,
        workers,
        tids: (0..n).map(|_| AtomicU64::new(0)).collect(),
        joined: (0..n).map(|_| AtomicBool::new(false)).collect(),
        life: AtomicU32::new(0),
        start_ns: AtomicU64::new(0),
        pace: o.pace.map(|p| (p, meta.first_ts_ns)),
        touch: o.touch,
        page,
        time_mask: time_every - 1,
        running: AtomicU32::new(0),
        max_running: AtomicU32::new(0),
        hold: AtomicBool::new(true),
        held: AtomicU32::new(0),
    };
    sh.install();
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

    let stop = AtomicBool::new(false);
    let go = std::sync::Barrier::new(2);
    // Nothing of the replay's runs yet: what is resident now is not the replay's.
    let baseline = statm.rss_bytes();
    let base_huge = measure::anon_huge_pages_bytes().unwrap_or(0);
    let hwm_reset = measure::reset_hwm();
    let clk = measure::Clock::start();
    let (before, end_ns, end_rss, stats) = std::thread::scope(|sc| {
        let (sampler, statm, progress, stop, bar, go) = (&mut sampler, &statm, &progress, &stop, &bar, &go);
        let start = &sh.start_ns;
        let samp = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn_scoped(sc, move || {
                go.wait();
                let s0 = start.load(Relaxed);
                sampler.run(statm, baseline, s0, progress, stop, |ops| {
                    if let Some(b) = bar {
                        b.set_position(ops);
                    }
                });
            })
            .unwrap_or_else(|e| super::worker::fatal(format!("cannot start the RSS sampler: {e}")));
        let before = measure::usage();
        sh.start_ns.store(clock::mono_ns(), Relaxed);
        go.wait();
        for l in &meta.control {
            if l.start {
                sh.spawn(l.thread, l.index);
            } else {
                sh.join(l.thread, l.index);
            }
        }
        // Once every start and exit is done, the threads whose exit the log does not show
        // (the main thread, threads alive at the end) end with the replay.
        super::sync::wait_life(&sh.life, meta.lifecycle_events);
        // The end figures are taken once those threads are done with their ops, before
        // they exit (the program ended without their exit).
        let waiting = (0..meta.threads.len())
            .filter(|&t| {
                !meta.threads[t].exited && sh.tids[t].load(Acquire) != 0 && !sh.joined[t].load(Acquire)
            })
            .count() as u32;
        while sh.held.load(Acquire) < waiting {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let end_ns = clock::mono_ns();
        let end_rss = statm.rss_bytes().saturating_sub(baseline);
        let stats = shim_backend::stats::allocator_stats(backend);
        sh.hold.store(false, Release);
        for (t, tp) in meta.threads.iter().enumerate() {
            if !tp.exited {
                sh.join_now(t as u32);
            }
        }
        stop.store(true, Relaxed);
        let _ = samp.join();
        (before, end_ns, end_rss, stats)
    });
    let after = measure::usage().since(&before);
    let start = sh.start_ns.load(Relaxed);
    let wall_ns = end_ns.saturating_sub(start);
    let hwm = if hwm_reset { measure::vm_hwm_bytes() } else { None };
    let huge = measure::anon_huge_pages_bytes();
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    // Calibrate the clock over at least 20 ms.
    let elapsed = clock::mono_ns().saturating_sub(start);
    if elapsed < 20_000_000 {
        std::thread::sleep(std::time::Duration::from_nanos(20_000_000 - elapsed));
    }
    let tpn = clk.ticks_per_ns().max(1e-9);

    let max_running = sh.max_running.load(Acquire);
    let tallies: Vec<Tally> = sh.workers.into_iter().map(|w| w.into_inner().t).collect();
    let mut r = Replay { version: backend.version(), wall_ns, ..Replay::default() };
    let mut counts = [0u64; 12];
    let mut total_lat = Latency::new();
    let mut timed = 0u64;
    let mut threads = Vec::with_capacity(n);
    for (d, tp) in tallies.iter().zip(&meta.threads) {
        for &x in &d.samples {
            total_lat.record((x >> 61) as usize, x & ((1 << 61) - 1));
        }
        timed += d.samples.len() as u64;
        for (c, x) in counts.iter_mut().zip(d.counts) {
            *c += x;
        }
        r.waits += d.waits;
        r.replay_failures += d.failures;
        r.misaligned_results += d.misaligned;
        r.end_live_bytes += d.live;
        r.ops_total += d.ops;
        let run_ns = d.end_ns.saturating_sub(d.start_ns);
        threads.push(ThreadResult {
            tid: tp.tid,
            ops: d.ops,
            run_ns,
            events_per_s: if run_ns > 0 { d.ops as f64 * 1e9 / run_ns as f64 } else { 0.0 },
            waits: d.waits,
        });
    }
    r.cross_thread_frees = meta.cross_thread_frees;
    r.cross_thread_reallocs = meta.cross_thread_reallocs;
    // Each timed call stands for time_every calls.
    let mut all = Latency::new();
    let mut all_total = 0u64;
    for a in Action::ALL {
        let i = a as usize;
        if !total_lat.h[i].is_empty() {
            let mut p = measure::percentiles(&total_lat.h[i], total_lat.total[i], tpn);
            p.total_ns = p.total_ns.saturating_mul(time_every);
            r.latency.insert(a.name().into(), p);
            let _ = all.h[0].add(&total_lat.h[i]);
            all_total = all_total.wrapping_add(total_lat.total[i]);
        }
    }
    let mut p_all = measure::percentiles(&all.h[0], all_total, tpn);
    p_all.total_ns = p_all.total_ns.saturating_mul(time_every);
    r.latency.insert("all".into(), p_all);
    r.alloc_ns_total = ((all_total as f64 / tpn) as u64).saturating_mul(time_every);
    r.ops = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .filter_map(|(i, c)| Some((Op::from_u8(i as u8)?.name().to_string(), *c)))
        .collect::<BTreeMap<_, _>>();
    let mut rates: Vec<f64> = threads.iter().filter(|t| t.ops > 0).map(|t| t.events_per_s).collect();
    rates.sort_by(|a, b| a.total_cmp(b));
    if !rates.is_empty() {
        r.events_per_s_per_thread =
            Throughput { min: rates[0], median: rates[rates.len() / 2], max: rates[rates.len() - 1] };
    }
    r.events_per_s_total = if wall_ns > 0 { r.ops_total as f64 * 1e9 / wall_ns as f64 } else { 0.0 };
    r.threads = threads;
    r.peak_threads = meta.peak_threads;
    r.max_threads_running = max_running;
    r.cpu_user_ns = after.user_ns;
    r.cpu_sys_ns = after.sys_ns;
    r.minor_faults = after.minor_faults;
    r.major_faults = after.major_faults;
    r.voluntary_context_switches = after.vol_ctx;
    r.involuntary_context_switches = after.invol_ctx;
    r.slop = meta.slop.get(backend.name()).cloned().unwrap_or_default();
    r.slop_bytes_total = r.slop.iter().map(|c| c.slop_bytes).sum();
    r.requested_bytes_total = r.slop.iter().map(|c| c.requested_bytes).sum();
    let (peak, source) = match hwm {
        Some(h) => (
            h.saturating_sub(baseline).max(sampler.peak_rss),
            "VmHWM (reset at the start) minus the baseline",
        ),
        None => (sampler.peak_rss, "sampled /proc/self/statm (VmHWM could not be reset)"),
    };
    r.memory = Memory {
        peak_rss_bytes: peak,
        peak_rss_sampled_bytes: sampler.peak_rss,
        end_rss_bytes: end_rss,
        end_huge_page_bytes: huge.map(|h| h.saturating_sub(base_huge)),
        ideal_bytes: meta.ideal_bytes,
        fragmentation: if meta.ideal_bytes > 0 { peak as f64 / meta.ideal_bytes as f64 } else { 0.0 },
        peak_source: source.into(),
        samples: std::mem::take(&mut sampler.samples),
        sample_interval_ns: sampler.interval_ns,
    };
    r.allocator_stats = stats.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    r.excluded = Excluded {
        baseline_rss_bytes: baseline,
        slot_table_bytes: (slots.len() * std::mem::size_of::<Slot>()) as u64,
        op_buffer_bytes: (n * buf_len) as u64,
        histogram_bytes: sample_bytes,
        timer_cost_ns: timer_cost / tpn,
        clock: clock::source().into(),
        time_every,
        timed_calls: timed,
    };
    Ok(r)
}
