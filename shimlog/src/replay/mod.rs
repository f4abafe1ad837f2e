//! `shimlog replay LOG [--backend glibc,jemalloc,mimalloc,tcmalloc,snmalloc,rpmalloc] [--json] [--pace[=sleep|busy]]
//! [--touch=none|first|all] [--timing=N|all]`.
//!
//! The parent turns the log into a plan once (plan/: planner.rs makes one op stream per
//! recorded thread, in a temporary directory), then replays it in one fresh child process
//! per backend (run/: child.rs and worker.rs, `shimlog replay LOG --child BACKEND --plan DIR`,
//! which prints its figures as JSON), and shows the children's figures side by side
//! (table.rs) or as JSON (results.rs).
mod plan;
mod results;
mod run;
mod table;

use results::{BackendResult, Options, PlanSummary, Program, Replay, Report};
use run::worker::{Pace, Touch};
use shim_backend::Backend;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(clap::Args)]
pub struct Args {
    /// The log to replay.
    pub log: String,
    /// Backends to replay against, comma-separated [default: all this build has]
    #[arg(long, value_delimiter = ',', value_parser = parse_backend)]
    pub backend: Vec<Backend>,
    /// Print the results as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Keep the recorded gaps between calls: each call waits until its recorded time after
    /// the start. sleep (a bare --pace) sleeps through a gap, as a program waiting for I/O or
    /// a lock; busy spins through it, as a program computing (the CPU stays busy, the other
    /// threads get less of it). Either exercises time-dependent decay and purging. Without
    /// --pace calls follow each other at once: the program's work between calls takes no time.
    #[arg(long, value_name = "sleep|busy", num_args = 0..=1, default_missing_value = "sleep",
          require_equals = true, value_parser = parse_pace)]
    pub pace: Option<Pace>,
    /// How much of each allocated block to write: none; first (one byte in every page the
    /// block spans, as a program's first writes fault its new pages in); all (every byte).
    /// A bare --touch is all.
    #[arg(long, value_name = "none|first|all", default_value = "first", num_args = 0..=1,
          default_missing_value = "all", require_equals = true, value_parser = parse_touch)]
    pub touch: Touch,
    /// Which calls are timed: one in N (rounded up to a power of two), or all. The timed
    /// calls give the latency figures; the others run with no clock read around them.
    #[arg(long, value_name = "N|all", default_value = "64", value_parser = parse_timing)]
    pub timing: u64,
    /// Internal: replay the plan in --plan against this backend and print JSON.
    #[arg(long, hide = true)]
    pub child: Option<String>,
    #[arg(long, hide = true)]
    pub plan: Option<PathBuf>,
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    s.parse()
}

fn parse_touch(s: &str) -> Result<Touch, String> {
    Touch::parse(s)
}

fn parse_pace(s: &str) -> Result<Pace, String> {
    match s {
        "sleep" => Ok(Pace::Sleep),
        "busy" => Ok(Pace::Busy),
        _ => Err(format!("unknown value '{s}' (accepted: sleep, busy)")),
    }
}

fn parse_timing(s: &str) -> Result<u64, String> {
    if s == "all" {
        return Ok(1);
    }
    match s.parse::<u64>() {
        Ok(n) if (1..=1 << 20).contains(&n) => Ok(n.next_power_of_two()),
        _ => Err(format!("unknown value '{s}' (accepted: all, or N from 1 to 1048576: time one call in N)")),
    }
}

pub fn run(a: Args) -> Result<i32, String> {
    if let Some(b) = &a.child {
        return run_child(b, &a);
    }
    let mut backends: Vec<Backend> = Vec::new();
    for b in if a.backend.is_empty() { Backend::available_all() } else { a.backend.clone() } {
        if !backends.contains(&b) {
            backends.push(b);
        }
    }
    let reader = crate::open::open(&a.log)?;
    if reader.header.record.as_deref() == Some("sample") {
        return Err(format!(
            "{}: a sampled-only log (SHIM_RECORD=sample) holds a sample of the calls, not all of them: it cannot be replayed; record with SHIM_RECORD=all (the default) to replay",
            a.log
        ));
    }
    let dir = tempfile::Builder::new()
        .prefix("shimlog-replay-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory for the replay plan: {e}"))?;
    let tty = std::io::stderr().is_terminal();
    let meta = {
        // Read back too: the planner flags ops already written (NOTIFY) in place.
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("ops.bin"))
            .map_err(|e| format!("cannot create the replay plan in {}: {e}", dir.path().display()))?;
        let bar = tty.then(|| {
            let b = indicatif::ProgressBar::new(reader.compressed_bytes());
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "planning {bar:40} {bytes}/{total_bytes} {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        let m = plan::planner::build(&reader, &mut f, |n| {
            if let Some(b) = &bar {
                b.set_position(n)
            }
        })?;
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        m
    };
    if meta.calls == 0 {
        return Err(format!("{}: the log holds no malloc-family calls to replay", a.log));
    }
    let json = serde_json::to_vec(&meta).map_err(|e| e.to_string())?;
    std::fs::write(dir.path().join("plan.json"), json)
        .map_err(|e| format!("cannot write the replay plan in {}: {e}", dir.path().display()))?;

    let mut results = Vec::new();
    for (i, b) in backends.iter().enumerate() {
        if tty {
            eprintln!("shimlog: replaying with {} ({}/{})", b.name(), i + 1, backends.len());
        }
        let r = spawn_child(&a, *b, dir.path());
        results.push(match r {
            Ok(rep) => BackendResult { backend: b.name().into(), error: None, replay: Some(rep) },
            Err(e) => BackendResult { backend: b.name().into(), error: Some(e), replay: None },
        });
    }
    let failed = results.iter().any(|r| r.error.is_some());
    let h = &reader.header;
    let report = Report {
        log: a.log.clone(),
        program: Program {
            exe: h.exe.clone(),
            cmdline: h.cmdline.clone(),
            pid: h.pid,
            recorded_backend: format!("{} {}", h.backend, h.backend_version).trim().to_string(),
            window: h.window,
            forked: h.forked,
        },
        options: Options {
            pace: a.pace.is_some(),
            pace_mode: a.pace.map(|p| p.name().to_string()),
            touch: a.touch.name().into(),
        },
        notes: notes(&a, &meta, &results),
        plan: PlanSummary::of(&meta),
        backends: results,
    };
    if a.json {
        let s = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{s}");
    } else {
        print!("{}", table::render(&report));
    }
    for b in &report.backends {
        if let Some(e) = &b.error {
            eprintln!("shimlog: replay with {}: {e}", b.backend);
        }
    }
    Ok(if failed { 1 } else { 0 })
}

fn spawn_child(a: &Args, b: Backend, dir: &Path) -> Result<Replay, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find shimlog itself: {e}"))?;
    let mut c = Command::new(exe);
    c.arg("replay").arg(&a.log).arg("--child").arg(b.name()).arg("--plan").arg(dir);
    if let Some(p) = a.pace {
        c.arg(format!("--pace={}", p.name()));
    }
    c.arg(format!("--touch={}", a.touch.name()));
    c.arg(format!("--timing={}", a.timing));
    // The prefixed jemalloc reads _RJEM_MALLOC_CONF; users set MALLOC_CONF.
    if let (Ok(conf), Err(_)) = (std::env::var("MALLOC_CONF"), std::env::var("_RJEM_MALLOC_CONF")) {
        c.env("_RJEM_MALLOC_CONF", conf);
    }
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let out = c.output().map_err(|e| format!("cannot start the replay child: {e}"))?;
    if !out.status.success() {
        use std::os::unix::process::ExitStatusExt;
        return Err(match out.status.signal() {
            Some(sig) => format!("the replay child was killed by signal {sig}"),
            None => format!("the replay child exited with status {}", out.status.code().unwrap_or(-1)),
        });
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("the replay child's report is not valid: {e}"))
}

fn run_child(name: &str, a: &Args) -> Result<i32, String> {
    let b: Backend = name.parse()?;
    let dir = a.plan.as_deref().ok_or("--child needs --plan DIR")?;
    let o = run::child::ChildOpts {
        pace: a.pace,
        touch: a.touch,
        progress: std::io::stderr().is_terminal(),
        time_every: a.timing,
    };
    let r = run::child::run(b, dir, &o)?;
    let s = serde_json::to_string(&r).map_err(|e| e.to_string())?;
    println!("{s}");
    Ok(0)
}

fn notes(a: &Args, m: &plan::PlanMeta, res: &[BackendResult]) -> Vec<String> {
    let mut n = Vec::new();
    n.push(match a.touch {
        Touch::First => "memory touched as a program's first writes touch it (--touch=first, the default): one byte written in every page each block spans (a realloc: in what the block gained), so that the page faults, zeroing and huge pages of new memory are paid as in the program; --touch=all writes every byte, --touch=none nothing".into(),
        Touch::All => "memory was touched: every allocated byte was written once after it was allocated (a realloc: what the block gained)".into(),
        Touch::None => "memory was not touched: RSS counts only pages the allocators wrote themselves (their metadata, calloc's zeroing); --touch=first writes one byte per page, --touch=all every byte".into(),
    });
    n.push(format!(
        "threads lived as they lived: each recorded thread was started and joined where the log shows it started and exited, relative to the other threads' calls ({} starts and exits; at most {} threads alive at once, as in the program)",
        m.lifecycle_events, m.peak_threads
    ));
    match a.pace {
        Some(p) => n.push(format!(
            "paced: every call waited for its recorded time ({} recorded), {} through the gaps: {}",
            table::duration(m.last_ts_ns.saturating_sub(m.first_ts_ns) as f64),
            if p == Pace::Busy { "spinning" } else { "asleep" },
            if p == Pace::Busy {
                "the program's work between calls modelled as CPU kept busy (no memory touched)"
            } else {
                "the program's work between calls modelled as waiting (the CPU free for other threads)"
            }
        )),
        None => n.push("replayed as fast as possible, calls back to back: the program's own work between calls is left out, so the wall times are the allocator's (plus the replay's own few ns per call and the touches); --pace keeps the recorded gaps".into()),
    }
    let base: Vec<String> = res
        .iter()
        .filter_map(|b| b.replay.as_ref().map(|r| format!("{} {}", b.backend, table::bytes(r.excluded.baseline_rss_bytes as f64))))
        .collect();
    if let Some(r) = res.iter().find_map(|b| b.replay.as_ref()) {
        let e = &r.excluded;
        n.push(format!(
            "excluded from every RSS figure: each child's resident set just before its first replayed op ({}): shimlog itself, its slot table ({} slots, {}), op buffers ({}), latency sample buffers ({}) and the RSS samples, all written once before the first op so that they do not grow during the replay; the {} replay threads' stacks are the program's own threads' counterparts and count",
            base.join(", "),
            count_str(m.slots as u64),
            table::bytes(e.slot_table_bytes as f64),
            table::bytes(e.op_buffer_bytes as f64),
            table::bytes(e.histogram_bytes as f64),
            m.threads.len()
        ));
        n.push("shimlog's own allocations use glibc's malloc and were all made before the replay started, so in the glibc column they share its heap; the glibc statistics (mallinfo2) include them".into());
        n.push(format!(
            "one call in {} was timed ({} calls; --timing), as the shim does: latencies are of those calls and include one clock read ({}), about {:.0} ns, rounded to 1% (2 significant digits); total times are theirs scaled by {}. Slop comes from each backend's size classes, computed while planning: nothing but the calls, their touches and the threads' hand-offs runs in the timed replay",
            e.time_every, count_str(e.timed_calls), e.clock, e.timer_cost_ns, e.time_every
        ));
    }
    for b in res {
        if let Some(r) = &b.replay {
            let huge = r.memory.end_huge_page_bytes.unwrap_or(0);
            if huge > 0 && huge * 2 >= r.memory.end_rss_bytes {
                let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "unknown".into());
                n.push(format!(
                    "{}: {} of its {} resident at the end are transparent huge pages (a fault maps 2 MiB at once, touched or not; THP setting here: {thp})",
                    b.backend,
                    table::bytes(huge as f64),
                    table::bytes(r.memory.end_rss_bytes as f64)
                ));
            }
        }
    }
    n.push("ideal = peak of live requested bytes in log order; fragmentation = peak RSS / ideal; slop = usable size minus requested size, summed over every allocation".into());
    let s = &m.skipped;
    if s.unknown_free + s.unknown_realloc > 0 {
        n.push(format!(
            "{} frees and {} reallocs of pointers the log never saw allocated (allocated before capture began) were skipped; the reallocs' results were replayed as fresh blocks of their new size",
            s.unknown_free, s.unknown_realloc
        ));
    }
    if m.late_realloc_frees > 0 {
        n.push(format!(
            "{} reallocs moved a block whose old address another thread had already been given in log order (a realloc is stamped when it returns); each was matched to its own thread's block",
            m.late_realloc_frees
        ));
    }
    if s.missed_free > 0 {
        n.push(format!(
            "{} blocks were never freed in the log though their address was handed out again (a lost free); they stay allocated in the replay",
            s.missed_free
        ));
    }
    if s.null_result > 0 {
        n.push(format!("{} calls that returned NULL in the program were replayed as such: no block", s.null_result));
    }
    if m.dropped_events > 0 {
        n.push(format!(
            "the log is incomplete: the shim dropped {} events (SHIM_ON_FULL=drop); blocks whose free was lost stay allocated",
            m.dropped_events
        ));
    }
    if m.untraced_calls > 0 {
        n.push(format!("{} calls were served untraced (after a thread's exit or the final flush) and are not replayed", m.untraced_calls));
    }
    for i in &m.issues {
        n.push(format!("log: {i}"));
    }
    n
}

fn count_str(v: u64) -> String {
    table::count(v as f64)
}
