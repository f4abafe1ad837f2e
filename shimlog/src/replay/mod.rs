//! `shimlog replay LOG [--backend glibc,jemalloc,mimalloc] [--json] [--pace] [--touch]`.
//!
//! The parent turns the log into a plan once (plan.rs: one op stream per recorded thread, in
//! a temporary directory), then replays it in one fresh child process per backend
//! (child.rs: `shimlog replay LOG --child BACKEND --plan DIR`, which prints its figures as
//! JSON), and shows the children's figures side by side (table.rs) or as JSON (report.rs).
mod child;
mod measure;
mod plan;
mod report;
mod table;

use report::{BackendResult, Options, PlanSummary, Program, Replay, Report};
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
    /// Keep the recorded gaps between events (exercises time-dependent decay and purging).
    #[arg(long)]
    pub pace: bool,
    /// Write every allocated byte, so that RSS reflects memory the program really used.
    #[arg(long)]
    pub touch: bool,
    /// Internal: replay the plan in --plan against this backend and print JSON.
    #[arg(long, hide = true)]
    pub child: Option<String>,
    #[arg(long, hide = true)]
    pub plan: Option<PathBuf>,
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    s.parse()
}

pub fn run(a: Args) -> Result<i32, String> {
    if let Some(b) = &a.child {
        return run_child(b, &a);
    }
    let mut backends: Vec<Backend> = Vec::new();
    for b in if a.backend.is_empty() { Backend::ALL.to_vec() } else { a.backend.clone() } {
        if !backends.contains(&b) {
            backends.push(b);
        }
    }
    let reader = crate::open::open(&a.log)?;
    let dir = tempfile::Builder::new()
        .prefix("shimlog-replay-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory for the replay plan: {e}"))?;
    let tty = std::io::stderr().is_terminal();
    let meta = {
        let mut f = std::fs::File::create(dir.path().join("ops.bin"))
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
        let m = plan::build(&reader, &mut f, |n| {
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
        },
        options: Options { pace: a.pace, touch: a.touch },
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
    if a.pace {
        c.arg("--pace");
    }
    if a.touch {
        c.arg("--touch");
    }
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
    let o = child::ChildOpts { pace: a.pace, touch: a.touch, progress: std::io::stderr().is_terminal() };
    let r = child::run(b, dir, &o)?;
    let s = serde_json::to_string(&r).map_err(|e| e.to_string())?;
    println!("{s}");
    Ok(0)
}

fn notes(a: &Args, m: &plan::PlanMeta, res: &[BackendResult]) -> Vec<String> {
    let mut n = Vec::new();
    if a.touch {
        n.push("memory was touched: every allocated byte was written once after it was allocated".into());
    } else {
        n.push("memory was not touched: RSS counts only pages the allocators wrote themselves (their metadata, calloc's zeroing); --touch writes every allocated byte".into());
    }
    if a.pace {
        n.push(format!(
            "paced: the recorded gaps between events were kept ({} recorded)",
            table::duration(m.last_ts_ns.saturating_sub(m.first_ts_ns) as f64)
        ));
    } else {
        n.push("replayed as fast as possible, without the recorded gaps (--pace keeps them)".into());
    }
    let base: Vec<String> = res
        .iter()
        .filter_map(|b| b.replay.as_ref().map(|r| format!("{} {}", b.backend, table::bytes(r.excluded.baseline_rss_bytes as f64))))
        .collect();
    if let Some(r) = res.iter().find_map(|b| b.replay.as_ref()) {
        let e = &r.excluded;
        n.push(format!(
            "excluded from every RSS figure: each child's resident set just before its first replayed op ({}): shimlog itself, its slot table ({} slots, {}), op buffers ({}), latency histograms ({}), the RSS samples and the {} replay threads' stacks, all written once before the first op so that they do not grow during the replay (the stacks only by what the allocator calls use)",
            base.join(", "),
            count_str(m.slots as u64),
            table::bytes(e.slot_table_bytes as f64),
            table::bytes(e.op_buffer_bytes as f64),
            table::bytes(e.histogram_bytes as f64),
            m.threads.len()
        ));
        n.push("shimlog's own allocations use glibc's malloc and were all made before the replay started, so in the glibc column they share its heap; the glibc statistics (mallinfo2) include them".into());
        n.push(format!(
            "latencies include one clock read ({}), about {:.0} ns; they are rounded to 1% (2 significant digits)",
            e.clock, e.timer_cost_ns
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
