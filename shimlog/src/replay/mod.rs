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
mod rounds;
mod run;
mod table;
mod units;

use results::{BackendResult, Options, PlanSummary, Program, Replay, Report};
use run::worker::{Pace, Touch};
use shim_backend::settings::{self, Variant};
use shim_backend::Backend;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(clap::Args)]
pub struct Args {
    /// The log to replay.
    pub log: String,
    /// Backends to replay against, comma-separated, each a name or NAME:KEY=VALUE,... with
    /// allocator settings (a KEY=VALUE after a comma continues the settings of the backend
    /// before it); repeatable. Each is a column of its own [default: all this build has]
    #[arg(long, value_name = "NAME[:KEY=VALUE,...],...")]
    pub backend: Vec<String>,
    /// Replay every column this many times, in rotated order, and report medians with their
    /// range; columns whose ranges overlap are called ties.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
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
    let mut variants: Vec<Variant> = Vec::new();
    let asked = if a.backend.is_empty() {
        Backend::available_all().into_iter().map(|b| Variant { backend: b, settings: Vec::new() }).collect()
    } else {
        match settings::parse_variants(&a.backend) {
            Ok(v) => v,
            Err(e) => {
                // One line, exit status 2, as for any other refused argument.
                eprintln!("shimlog: replay --backend: {e}");
                return Ok(2);
            }
        }
    };
    for v in asked {
        if !variants.contains(&v) {
            variants.push(v);
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
                indicatif::ProgressStyle::with_template("planning {bar:40} {bytes}/{total_bytes} {eta}")
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

    // Round r runs the columns starting from column r (rotated order, as make bench does),
    // so that no column always runs first or after the same neighbour.
    let n = a.rounds.max(1) as usize;
    let mut runs: Vec<Vec<Result<Replay, String>>> = variants.iter().map(|_| Vec::new()).collect();
    let total = n * variants.len();
    let mut k = 0;
    for r in 0..n {
        for j in 0..variants.len() {
            let i = (j + r) % variants.len();
            k += 1;
            if tty {
                eprintln!("shimlog: replaying with {} ({k}/{total})", variants[i].label());
            }
            runs[i].push(spawn_child(&a, &variants[i], dir.path()));
        }
    }
    let mut results = Vec::new();
    for (v, rs) in variants.iter().zip(runs) {
        let label = v.label();
        let ok: Vec<Replay> = rs.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
        results.push(match rs.into_iter().find_map(|r| r.err()) {
            Some(e) => BackendResult { backend: label, rounds: None, error: Some(e), replay: None },
            None => {
                let ro = rounds::of(&ok);
                let median = ok.get(ro.median_round).cloned();
                BackendResult { backend: label, rounds: (n > 1).then_some(ro), error: None, replay: median }
            }
        });
    }
    let cols: Vec<(String, rounds::Rounds)> = results
        .iter()
        .filter_map(|b| {
            let r = b.replay.as_ref()?;
            Some((b.backend.clone(), b.rounds.clone().unwrap_or_else(|| rounds::of(std::slice::from_ref(r)))))
        })
        .collect();
    let verdict = (!cols.is_empty()).then(|| rounds::verdict(&cols));
    let failed = results.iter().any(|r| r.error.is_some());
    let h = &reader.header;
    let report = Report {
        log: a.log.clone(),
        program: Program {
            exe: h.exe.clone(),
            cmdline: h.cmdline.clone(),
            pid: h.pid,
            recorded_backend: match &h.backend_settings {
                Some(set) => format!("{}:{set} {}", h.backend, h.backend_version),
                None => format!("{} {}", h.backend, h.backend_version).trim().to_string(),
            },
            window: h.window,
            forked: h.forked,
        },
        options: Options {
            pace: a.pace.is_some(),
            pace_mode: a.pace.map(|p| p.name().to_string()),
            touch: a.touch.name().into(),
            rounds: n,
        },
        notes: notes(&a, &meta, &results, &variants),
        plan: PlanSummary::of(&meta),
        backends: results,
        verdict,
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

fn spawn_child(a: &Args, v: &Variant, dir: &Path) -> Result<Replay, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find shimlog itself: {e}"))?;
    let mut c = Command::new(exe);
    c.arg("replay").arg(&a.log).arg("--child").arg(v.label()).arg("--plan").arg(dir);
    if let Some(p) = a.pace {
        c.arg(format!("--pace={}", p.name()));
    }
    c.arg(format!("--touch={}", a.touch.name()));
    c.arg(format!("--timing={}", a.timing));
    // The user's own SHIM_BACKEND is not this column's.
    c.env_remove("SHIM_BACKEND");
    // The prefixed jemalloc reads _RJEM_MALLOC_CONF (users set MALLOC_CONF), in its
    // constructor: the column's settings go there, after the user's configuration.
    let user_conf = std::env::var("_RJEM_MALLOC_CONF").ok().or_else(|| std::env::var("MALLOC_CONF").ok());
    if v.backend == Backend::Jemalloc && !v.settings.is_empty() {
        c.env("_RJEM_MALLOC_CONF", settings::jemalloc_conf(&v.settings_str(), user_conf.as_deref()));
    } else if let (Ok(conf), Err(_)) = (std::env::var("MALLOC_CONF"), std::env::var("_RJEM_MALLOC_CONF")) {
        c.env("_RJEM_MALLOC_CONF", conf);
    }
    // glibc's tcache tunables are read when a process starts.
    if v.backend == Backend::Glibc {
        let user = std::env::var("GLIBC_TUNABLES").ok();
        if let Some(t) = settings::glibc_tunables(&v.settings_str(), user.as_deref()) {
            c.env("GLIBC_TUNABLES", t);
        }
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

fn run_child(label: &str, a: &Args) -> Result<i32, String> {
    let v = settings::parse_variants(&[label]).map_err(|e| e.to_string())?;
    let [v] = v.as_slice() else { return Err(format!("--child takes one backend, not '{label}'")) };
    let b = v.backend;
    let dir = a.plan.as_deref().ok_or("--child needs --plan DIR")?;
    // Before the backend's first allocation (jemalloc had its configuration from the
    // environment in its constructor; applying it again here changes nothing).
    let s: &'static str = Box::leak(v.settings_str().into_boxed_str());
    settings::apply(b, s.as_bytes(), None, settings::Context::Child).map_err(|e| e.to_string())?;
    let o = run::child::ChildOpts {
        pace: a.pace,
        touch: a.touch,
        progress: std::io::stderr().is_terminal(),
        time_every: a.timing,
    };
    let mut r = run::child::run(b, dir, &o)?;
    for (k, _) in &v.settings {
        if let Some(now) = settings::read_back(b, k) {
            r.settings.insert(k.clone(), now);
        }
    }
    let s = serde_json::to_string(&r).map_err(|e| e.to_string())?;
    println!("{s}");
    Ok(0)
}

fn notes(a: &Args, m: &plan::PlanMeta, res: &[BackendResult], vs: &[Variant]) -> Vec<String> {
    let mut n = Vec::new();
    n.extend(timed_notes(a, m, res, vs));
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
        .filter_map(|b| {
            b.replay
                .as_ref()
                .map(|r| format!("{} {}", b.backend, table::bytes(r.excluded.baseline_rss_bytes as f64)))
        })
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
        n.push(format!(
            "{} calls that returned NULL in the program were replayed as such: no block",
            s.null_result
        ));
    }
    if m.dropped_events > 0 {
        n.push(format!(
            "the log is incomplete: the shim dropped {} events (SHIM_ON_FULL=drop); blocks whose free was lost stay allocated",
            m.dropped_events
        ));
    }
    if m.untraced_calls > 0 {
        n.push(format!(
            "{} calls were served untraced (after a thread's exit or the final flush) and are not replayed",
            m.untraced_calls
        ));
    }
    for i in &m.issues {
        n.push(format!("log: {i}"));
    }
    n
}

fn count_str(v: u64) -> String {
    table::count(v as f64)
}

/// What each time-driven setting (decay, purge delay) models: unpaced, the replay runs the
/// program's calls in less time than the program took, so a delay of D ms spans D times that
/// ratio of the program's time; paced, D ms is D ms of the program's.
fn timed_notes(a: &Args, m: &plan::PlanMeta, res: &[BackendResult], vs: &[Variant]) -> Vec<String> {
    let recorded = m.last_ts_ns.saturating_sub(m.first_ts_ns) as f64;
    let mut out = Vec::new();
    for (v, b) in vs.iter().zip(res) {
        let timed = v.timed();
        let Some(r) = &b.replay else { continue };
        if timed.is_empty() {
            continue;
        }
        let wall = r.wall_ns as f64;
        let each: Vec<String> = timed
            .iter()
            .map(|(k, val)| match val.parse::<f64>() {
                Ok(d) if d < 0.0 => format!("{k}={val} (never) is never in the program's time too"),
                Ok(0.0) => format!("{k}={val} (at once) is at once in the program's time too"),
                Ok(_) if a.pace.is_some() => format!("{k}={val}: the replay kept the program's pace, so {val} ms is {val} ms of the program"),
                Ok(d) if wall > 0.0 && recorded > 0.0 => format!(
                    "{k}={val}: unpaced, the replay ran the program's {} in {}, so {val} ms here spans {} of the program's time (--pace keeps the recorded gaps: then {val} ms is {val} ms of the program)",
                    table::duration(recorded),
                    table::duration(wall),
                    table::duration(d * 1e6 * recorded / wall)
                ),
                _ => format!("{k}={val}"),
            })
            .collect();
        let driver = if v.backend == Backend::Jemalloc {
            " jemalloc (no background threads) purges only from within its calls, so a program that idles after its last call keeps what was not yet purged, in the replay as in the program."
        } else {
            ""
        };
        out.push(format!("{}: time-driven settings: {}.{driver}", v.label(), each.join("; ")));
    }
    out
}
