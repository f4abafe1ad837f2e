//! The instruction budgets (itest/budgets.json): what the shim's hot paths, `shimlog stats` and
//! the replay cost per event, counted by valgrind's callgrind, so that no slow drift goes
//! unnoticed on a machine too noisy to time it.
//!
//! Each figure is measured through the public surface only (the built libshim.so and shimlog,
//! the SHIM_* variables): a run of the same fixed workload at two sizes, under callgrind, with
//! address-space randomisation off; (instructions of the larger run - those of the smaller) /
//! (events of the larger - events of the smaller), so start-up and exit cancel out. The
//! workloads are deterministic (fixed seeds, one thread calling the allocator, logs written by
//! `recorder::synth`), so the same binaries give the same counts run to run: forwarding,
//! watching, the switch and stats exactly, recording and the replay within 0.4% (timestamps
//! differ, and with them a few varints and which calls are timed). The recorder thread is not
//! budgeted: what it does per event depends on when it wakes (two runs: 85 and 111).
//!
//! A figure more than `tolerance_percent` over its budget fails the test, with one line naming
//! it, its value and its budget. Raising a budget is a commit of its own that says why (the
//! file holds, for each figure, the value it was set from, the commit and the reason). The
//! figures of every run are written to target/budget/measured.json.
use itest::{command, cprog, run, shim_lib, shimlog_bin, workspace_root, Output};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The loop's iterations at the two sizes (2 calls each, plus 512 around the loop).
const LOOP_ITERS: (u64, u64) = (10_000, 110_000);
/// The synthetic logs' records at the two sizes.
const LOG_RECORDS: (u64, u64) = (20_000, 220_000);

fn valgrind() -> PathBuf {
    let found = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("valgrind")).find(|p| p.is_file()));
    found.unwrap_or_else(|| {
        panic!(
            "valgrind not found on PATH: the instruction budgets need it (Debian's `valgrind` package; `make test` installs it as root through tools/test-deps.sh)"
        )
    })
}

/// `program args` under callgrind, one output file per thread (stem-NN, or stem.PID-NN with
/// children traced), address-space randomisation off.
fn callgrind(stem: &Path, children: bool, program: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = command(valgrind());
    c.arg("--tool=callgrind").arg("--separate-threads=yes").arg(format!(
        "--callgrind-out-file={}{}",
        stem.display(),
        if children { ".%p" } else { "" }
    ));
    if children {
        c.arg("--trace-children=yes");
    }
    c.arg(program).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    unsafe {
        c.pre_exec(|| {
            // ADDR_NO_RANDOMIZE: the same addresses run to run (hash tables keyed by them
            // take the same paths).
            libc::personality(0x0040000);
            Ok(())
        });
    }
    let out = run(c);
    out.assert_success(&format!("callgrind run {}", stem.display()));
    out
}

/// Instructions of a callgrind run, per process: {pid or 0: total over its threads}.
fn totals(stem: &Path) -> BTreeMap<u32, u64> {
    let dir = stem.parent().expect("stem in a directory");
    let base = stem.file_name().expect("stem name").to_string_lossy().into_owned();
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).expect("read the callgrind directory").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&base) else {
            continue;
        };
        // "-01" (one process) or ".PID-01" (children traced).
        let (pid, thread) = match rest.strip_prefix('.') {
            Some(r) => match r.split_once('-') {
                Some((p, t)) => (p.parse::<u32>().ok(), t),
                None => (r.parse::<u32>().ok(), ""),
            },
            None => (Some(0), rest.trim_start_matches('-')),
        };
        let (Some(pid), true) = (pid, thread.is_empty() || thread.parse::<u32>().is_ok()) else {
            continue;
        };
        let text = std::fs::read_to_string(e.path()).expect("read a callgrind file");
        if text.is_empty() {
            // With --separate-threads=yes the stem itself is left empty.
            continue;
        }
        let n = text
            .lines()
            .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{}: no totals line", e.path().display()));
        *out.entry(pid).or_insert(0) += n;
    }
    assert!(!out.is_empty(), "callgrind left no output files for {}", stem.display());
    out
}

/// Instructions of the main thread (valgrind's thread 1) of a one-process run.
fn main_thread(stem: &Path) -> u64 {
    let p = PathBuf::from(format!("{}-01", stem.display()));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    text.lines()
        .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{}: no totals line", p.display()))
}

fn calls_of(out: &Output) -> u64 {
    let s = out.stdout_str();
    s.split_whitespace()
        .find_map(|w| w.strip_prefix("calls="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("budget_loop printed no calls=N: {s:?}"))
}

/// The log files a run left in dir whose name starts with prefix.
fn logs_in(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read the log directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(prefix) && n.ends_with(".shimlog")
        })
        .collect();
    v.sort();
    v
}

fn stats_events(logs: &[PathBuf]) -> u64 {
    let mut c = command(shimlog_bin());
    c.arg("stats").arg("--json").args(logs);
    let out = run(c);
    out.assert_success("shimlog stats");
    out.json()["events"].as_u64().expect("stats --json has events")
}

/// A figure: instructions per event, and how it was measured.
struct Figure {
    value: f64,
    how: String,
}

/// The loop under the shim in one configuration (None: bare), at both sizes: the main
/// thread's instructions per call. With `check`, what the run must have left (its logs).
fn loop_figure(dir: &Path, name: &str, env: &[(&str, &str)], check: fn(&Path, u64)) -> (f64, f64) {
    let prog = cprog("budget_loop");
    let shim = shim_lib().display().to_string();
    let mut got = Vec::new();
    for iters in [LOOP_ITERS.0, LOOP_ITERS.1] {
        let logdir = dir.join(format!("{name}-{iters}-logs"));
        std::fs::create_dir_all(&logdir).unwrap();
        let pattern = logdir.join("%e.%p.shimlog").display().to_string();
        let mut e: Vec<(&str, &str)> = env.to_vec();
        if name != "bare" {
            e.push(("LD_PRELOAD", &shim));
            e.push(("SHIM_LOG", &pattern));
        }
        let stem = dir.join(format!("{name}-{iters}"));
        let out = callgrind(&stem, false, &prog, &[&iters.to_string()], &e);
        let calls = calls_of(&out);
        assert_eq!(calls, 2 * iters + 512, "budget_loop {iters}: calls");
        check(&logdir, calls);
        got.push((calls, main_thread(&stem)));
    }
    let (c0, i0) = got[0];
    let (c1, i1) = got[1];
    ((i1 - i0) as f64 / (c1 - c0) as f64, i1 as f64)
}

fn no_check(_: &Path, _: u64) {}

fn no_log(dir: &Path, _: u64) {
    let l = logs_in(dir, "budget_loop.");
    assert!(l.is_empty(), "SHIM_TRACE=0 left logs: {l:?}");
}

fn recorded(dir: &Path, calls: u64) {
    let l = logs_in(dir, "budget_loop.");
    assert_eq!(l.len(), 1, "recording left one log: {l:?}");
    let ev = stats_events(&l);
    // Its events: every call, the thread's start and exit, the RSS samples, the end.
    assert!(ev >= calls && ev <= calls + 64, "{}: {ev} events for {calls} calls", l[0].display());
}

fn watched(dir: &Path, calls: u64) {
    let l = logs_in(dir, "budget_loop.");
    // Window 0, the watch log, and no window.
    assert_eq!(l.len(), 1, "watching left the watch log alone: {l:?}");
    assert!(l[0].to_string_lossy().ends_with(".0.shimlog"), "{l:?} is not the watch log");
    let ev = stats_events(&l);
    assert!(ev < calls / 10, "the watch log holds {ev} events for {calls} calls: calls were recorded");
}

fn synth(dir: &Path, name: &str, records: u64, threads: u32) -> PathBuf {
    let p = dir.join(format!("{name}-{records}.shimlog"));
    let w = recorder::synth::write(&p.display().to_string(), records, threads, 2000, 1)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
    assert_eq!(w.records, records + threads as u64 + 1, "synthetic log {}", p.display());
    PathBuf::from(w.path)
}

fn stats_figure(dir: &Path) -> Figure {
    let mut got = Vec::new();
    for records in [LOG_RECORDS.0, LOG_RECORDS.1] {
        let log = synth(dir, "stats", records, 4);
        let stem = dir.join(format!("stats-{records}"));
        let out = callgrind(
            &stem,
            false,
            &shimlog_bin(),
            &["stats", "--one-thread", "--json", &log.display().to_string()],
            &[],
        );
        let ev = out.json()["events"].as_u64().expect("stats --json has events");
        got.push((ev, totals(&stem).values().sum::<u64>()));
    }
    let (e0, i0) = got[0];
    let (e1, i1) = got[1];
    Figure {
        value: (i1 - i0) as f64 / (e1 - e0) as f64,
        how: format!(
            "shimlog stats --one-thread --json on recorder::synth logs (4 threads, 2000 live, zstd 1) of {} and {} records, all threads",
            LOG_RECORDS.0, LOG_RECORDS.1
        ),
    }
}

/// The replay of a one-thread synthetic log against glibc: the child's instructions per op
/// (its per-op loop) and the parent's (planning) per record.
fn replay_figures(dir: &Path) -> (Figure, Figure) {
    let mut got = Vec::new();
    for records in [LOG_RECORDS.0, LOG_RECORDS.1] {
        let log = synth(dir, "replay", records, 1);
        let stem = dir.join(format!("replay-{records}"));
        let out = callgrind(
            &stem,
            true,
            &shimlog_bin(),
            &["replay", "--backend", "glibc", "--json", &log.display().to_string()],
            &[],
        );
        let doc = out.json();
        let calls = doc["plan"]["calls"]
            .as_u64()
            .unwrap_or_else(|| panic!("replay --json has no plan.calls: {}", doc["plan"]));
        assert!(doc["backends"][0]["error"].is_null(), "the replay failed: {}", doc["backends"][0]);
        let t = totals(&stem);
        let parent = *t
            .get(&out.pid)
            .unwrap_or_else(|| panic!("no callgrind file of the replay's own process {} in {t:?}", out.pid));
        let children: Vec<u64> = t.iter().filter(|(p, _)| **p != out.pid).map(|(_, v)| *v).collect();
        assert_eq!(children.len(), 1, "one replay child (glibc): {t:?}");
        got.push((records, calls, parent, children[0]));
    }
    let (r0, c0, p0, k0) = got[0];
    let (r1, c1, p1, k1) = got[1];
    (
        Figure {
            value: (k1 - k0) as f64 / (c1 - c0) as f64,
            how: format!(
                "shimlog replay --backend glibc of recorder::synth logs (1 thread, 2000 live) of {} and {} records: the replay child (all its threads) per call replayed",
                LOG_RECORDS.0, LOG_RECORDS.1
            ),
        },
        Figure {
            value: (p1 - p0) as f64 / (r1 - r0) as f64,
            how: "the same runs: shimlog replay's own process (reading the log, building the plan, the report) per record".into(),
        },
    )
}

#[test]
fn instruction_budgets() {
    let root = workspace_root();
    let file = root.join("itest/budgets.json");
    let budgets: Value = serde_json::from_str(
        &std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display())),
    )
    .unwrap_or_else(|e| panic!("{}: not JSON: {e}", file.display()));
    let tolerance = budgets["tolerance_percent"].as_f64().expect("budgets.json: tolerance_percent");
    valgrind();
    let tmp = tempfile::Builder::new().prefix("itest-budget-").tempdir().unwrap();
    let dir = tmp.path();

    let mut figs: BTreeMap<&str, Figure> = BTreeMap::new();
    let loop_how = |what: &str| {
        format!(
            "itest/programs/c/budget_loop at {} and {} iterations (malloc/free pairs, one thread), {what}: the program's thread, per call",
            LOOP_ITERS.0, LOOP_ITERS.1
        )
    };
    // Counts do not depend on the load: the loop's runs on this thread, stats and the replay
    // on another, side by side.
    let ((bare, rec, off, watch, switched), (stats, (replay, plan))) = std::thread::scope(|sc| {
        let other = sc.spawn(|| (stats_figure(dir), replay_figures(dir)));
        let (bare, _) = loop_figure(dir, "bare", &[], no_check);
        let (rec, _) = loop_figure(dir, "record", &[("SHIM_BACKEND", "glibc")], recorded);
        let (off, _) = loop_figure(dir, "forward", &[("SHIM_BACKEND", "glibc"), ("SHIM_TRACE", "0")], no_log);
        let (watch, _) = loop_figure(
            dir,
            "watch",
            &[("SHIM_BACKEND", "glibc"), ("SHIM_START", "1d"), ("SHIM_WINDOW", "1s")],
            watched,
        );
        let (switched, _) =
            loop_figure(dir, "switched", &[("SHIM_BACKEND", "mimalloc"), ("SHIM_TRACE", "0")], no_log);
        let others = other.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        ((bare, rec, off, watch, switched), others)
    });
    figs.insert(
        "record",
        Figure {
            value: rec - bare,
            how: loop_how("recording (SHIM_BACKEND=glibc, default settings), less the bare run's"),
        },
    );
    figs.insert(
        "forward",
        Figure { value: off - bare, how: loop_how("SHIM_TRACE=0 SHIM_BACKEND=glibc, less the bare run's") },
    );
    figs.insert(
        "watch",
        Figure {
            value: watch - bare,
            how: loop_how("watching (SHIM_START=1d SHIM_WINDOW=1s SHIM_BACKEND=glibc), less the bare run's"),
        },
    );
    figs.insert(
        "switched_mimalloc",
        Figure {
            value: switched,
            how: loop_how("SHIM_TRACE=0 SHIM_BACKEND=mimalloc, mimalloc's own instructions included"),
        },
    );
    figs.insert("stats", stats);
    figs.insert("replay", replay);
    figs.insert("replay_plan", plan);

    let commit = Command::new("git")
        .args(["-C", &root.display().to_string(), "rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let listed = budgets["figures"].as_object().expect("budgets.json: figures is an object");
    let mut failures = Vec::new();
    let mut measured = serde_json::Map::new();
    eprintln!("instructions per event (bare glibc loop: {bare:.1} per call, not budgeted)");
    eprintln!("{:<18} {:>9} {:>9} {:>9}  verdict", "figure", "measured", "budget", "limit");
    for (name, f) in &figs {
        measured
            .insert(name.to_string(), json!({ "measured": (f.value * 10.0).round() / 10.0, "how": f.how }));
        let Some(b) = listed.get(*name) else {
            failures.push(format!("budget {name}: measured {:.1} instructions per event, but itest/budgets.json has no budget for it", f.value));
            continue;
        };
        let budget =
            b["budget"].as_f64().unwrap_or_else(|| panic!("budgets.json: {name}.budget is not a number"));
        let limit = budget * (1.0 + tolerance / 100.0);
        let over = f.value > limit;
        eprintln!(
            "{name:<18} {:>9.1} {budget:>9.1} {limit:>9.1}  {}",
            f.value,
            if over {
                "OVER BUDGET"
            } else if f.value < budget * 0.9 {
                "ok (10% or more under: lower the budget?)"
            } else {
                "ok"
            }
        );
        if over {
            failures.push(format!(
                "budget {name}: {:.1} instructions per event, over its budget of {budget:.1} by {:.1}% (the limit is +{tolerance}%: {limit:.1}); set at {} ({}): {}",
                f.value,
                (f.value / budget - 1.0) * 100.0,
                b["commit"].as_str().unwrap_or("?"),
                b["measured"],
                f.how
            ));
        }
    }
    for name in listed.keys() {
        if !figs.contains_key(name.as_str()) {
            failures.push(format!(
                "budget {name}: in itest/budgets.json but not measured by itest/tests/budget.rs"
            ));
        }
    }
    let out_dir = root.join("target/budget");
    std::fs::create_dir_all(&out_dir).unwrap();
    let doc =
        json!({ "commit": commit, "bare_loop_per_call": (bare * 10.0).round() / 10.0, "figures": measured });
    std::fs::write(out_dir.join("measured.json"), serde_json::to_string_pretty(&doc).unwrap() + "\n")
        .unwrap();
    assert!(
        failures.is_empty(),
        "\n{}\n(this run's figures: target/budget/measured.json)",
        failures.join("\n")
    );
}
