//! docs/stats.md lists every field of `shimlog stats --json`: the real binary's reports on
//! logs that fill every section (and a total over two logs, one of them cut) hold no field
//! the page does not list, and the page lists none they do not hold.
mod sitelog;
mod synth;

use recorder::buffer::Args;
use recorder::Op;
use serde_json::Value;
use std::collections::BTreeSet;
use synth::{dir, header, stats_json, Log};

/// A log with something in every section: two threads, calls of several kinds with backend
/// times, a failed call, cross-thread frees, a burst of frees, a drop, RSS samples and
/// blocks never freed.
fn full_log(path: &str, pid: u32) -> String {
    let mut h = header(pid, 0);
    // An allocator of the program's own, and windows: this log is the watch log.
    h.own_allocators = vec![recorder::format::OwnAllocator {
        family: "jemalloc".into(),
        prefix: "".into(),
        version: "5.3.0".into(),
        file: "/usr/bin/synthetic".into(),
        entry_points: 11,
        mode: "recorded".into(),
        note: "mallocx not recorded".into(),
    }];
    h.window = Some(0);
    // Sampled stacks (format 4): one in the shimlog binary, one in an object that is gone.
    h.stacks = Some("sample".into());
    h.sample_bytes = Some(4096);
    h.unwind = Some("tables".into());
    h.stack_depth = Some(64);
    let mut l = Log::create(path, &h);
    {
        use recorder::window_event::*;
        l.watch(1_500, Op::Window, 1, START_SCHEDULE, None);
        l.watch(1_550, Op::Window, 4321, INFLIGHT_LOG_GONE, None);
        l.watch(1_600, Op::ThreadSeen, 0, 1, None);
        l.watch(1_700, Op::AllocStat, recorder::alloc_stat_code("allocated"), 4096, None);
        l.watch(1_800, Op::Stall, Op::Realloc as u64, 1, Some(2_000_000));
        l.watch(2_500, Op::Window, 1, END_LENGTH, None);
        l.watch(2_600, Op::Window, 1, DELETED, None);
    }
    l.thread(1, 1_000);
    l.thread(2, 1_000);
    let timed = |l: &mut Log, tid, ts, op, a: Args, ns| l.call(tid, ts, op, a, Some(ns));
    for i in 0..100u64 {
        let a = Args { size: 16 + i, ptr: 0x10_000 + i * 0x100, ..Default::default() };
        timed(&mut l, 1, 2_000 + i * 10, Op::Malloc, a, 40 + i);
    }
    let a = Args { count: 4, size: 8, ptr: 0x90_000, ..Default::default() };
    timed(&mut l, 1, 3_100, Op::Calloc, a, 90);
    let a = Args { old: 0x90_000, size: 64, ptr: 0x91_000, ..Default::default() };
    timed(&mut l, 1, 3_200, Op::Realloc, a, 700);
    l.malloc(1, 3_300, 1 << 45, 0);
    l.process(3_400, Op::Rss, 1 << 20);
    // Thread 2 frees thread 1's first 80 blocks in one run: a burst, cross-thread.
    for i in 0..80u64 {
        let a = Args { ptr: 0x10_000 + i * 0x100, ..Default::default() };
        timed(&mut l, 2, 4_000 + i * 10, Op::Free, a, 30 + i);
    }
    l.thread_record(2, 5_000, Op::Dropped, 7);
    l.malloc(2, 6_000, 24, 0xa0_000);
    {
        use recorder::event::site_flags::*;
        let (exe, main) = sitelog::shimlog_main();
        sitelog::mapping(&mut l, 2, 7_000, 0x1000, 1 << 40, 0, &exe, &[]);
        sitelog::mapping(
            &mut l,
            2,
            7_000,
            1 << 41,
            (1 << 41) + 0x10000,
            1 << 41,
            "/nonexistent/libgone.so",
            &[0xab; 20],
        );
        sitelog::stack(&mut l, 2, 7_000, 1, 2, &[main, (1 << 41) + 0x100]);
        // A sampled allocation, timed, never freed; and a slow one.
        l.call(2, 7_100, Op::Malloc, Args { size: 100, ptr: 0xb0_000, ..Default::default() }, Some(300));
        sitelog::site(&mut l, 2, 7_100, 1, SAMPLED);
        l.call(
            2,
            7_200,
            Op::Malloc,
            Args { size: 8192, ptr: 0xb1_000, ..Default::default() },
            Some(3_000_000),
        );
        sitelog::site(&mut l, 2, 7_200, 1, SAMPLED | SLOW);
    }
    l.process(200_000_000, Op::Rss, 2 << 20);
    l.watch(200_000_001, Op::Exit, recorder::exit_how::EXIT, 3, None);
    l.finish(true)
}

/// A fork child of the log at `parent` (forked at 3,500 ns, while all of its parent's first
/// 100 blocks were live) that frees one of them and died: its log was recovered.
fn child_log(path: &str, parent: &str) -> String {
    let mut h = header(300, 3_600);
    h.forked = true;
    h.parent_log = Some(parent.to_string());
    h.fork_ticks = Some(3_500);
    // A sampled-only child (SHIM_RECORD=sample), for `process.sampled_only`.
    h.record = Some("sample".into());
    h.sample_bytes = Some(4096);
    let mut l = Log::create(path, &h);
    l.thread(300, 10);
    l.free(300, 100, 0x10_000 + 5 * 0x100);
    l.malloc(300, 150, 40, 0xb0_000);
    l.watch(200, Op::Recovered, recorder::recovered_end::KILLED, 3, None);
    l.finish(false)
}

/// Every leaf and array of `v`, as a path (`a.b`, `a[].c`), with the keys that name an
/// operation, a record kind or a backend written as docs/stats.md writes them.
fn paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = match at {
                    "ops" | "bytes" | "failed" | "latency.per_op" => "<op>",
                    "records" => "<record>",
                    "slop" => "<backend>",
                    "watch.allocator_stats" => "<stat>",
                    _ => k.as_str(),
                };
                let p = if at.is_empty() { key.to_string() } else { format!("{at}.{key}") };
                paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            out.insert(format!("{at}[]"));
            // The sections of a total read as one-log documents.
            let inner = if at == "logs" { String::new() } else { format!("{at}[]") };
            for x in a {
                paths(x, &inner, out);
            }
        }
        _ => {
            out.insert(at.to_string());
        }
    }
}

/// The paths docs/stats.md lists: every `code` in the first cell of a table row.
fn documented() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/stats.md"))
        .expect("docs/stats.md");
    let mut out = BTreeSet::new();
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let first = line.split('|').nth(1).unwrap_or("");
        for (i, part) in first.split('`').enumerate() {
            if i % 2 == 1 {
                out.insert(part.to_string());
            }
        }
    }
    out
}

#[test]
fn every_json_field_is_documented_and_every_documented_field_exists() {
    let d = dir("doc");
    let one = full_log(&format!("{d}/one.shimlog"), 100);
    let other = full_log(&format!("{d}/other.shimlog"), 200);
    // The second log cut inside its last frame: the total then lists a read issue.
    let r = recorder::LogReader::open(&other).unwrap();
    let last = *r.frames.last().unwrap();
    let bytes = std::fs::read(&other).unwrap();
    let cut = format!("{d}/cut.shimlog");
    std::fs::write(&cut, &bytes[..(last.offset + 45) as usize]).unwrap();

    let mut seen = BTreeSet::new();
    let child = child_log(&format!("{d}/child.shimlog"), &one);
    let classes = ["--classes", "jemalloc", "--classes", "every 64 B from 64 B to 256 B"];
    let mut with_classes = vec![one.as_str()];
    with_classes.extend(classes);
    for args in [vec![one.as_str()], vec![one.as_str(), cut.as_str(), child.as_str()], with_classes] {
        paths(&stats_json(&args), "", &mut seen);
    }
    let doc = documented();
    let missing: Vec<&String> = seen.difference(&doc).collect();
    assert!(missing.is_empty(), "in the report but not in docs/stats.md: {missing:?}");
    // A documented object (`memory.rss_at_peak`) is seen through its fields.
    let stale: Vec<&String> = doc
        .iter()
        .filter(|p| {
            !seen
                .iter()
                .any(|s| s == *p || s.starts_with(&format!("{p}.")) || s.starts_with(&format!("{p}[")))
        })
        .collect();
    assert!(stale.is_empty(), "in docs/stats.md but in no report: {stale:?}");
    // The logs fill what the check relies on.
    for p in [
        "free_bursts.longest.frees",
        "read.issues[].log",
        "dropped.when[].events",
        "failed.<op>",
        "memory.rss_at_peak.rss_per_live",
        "latency.slowest[].freed_bytes",
        "lifetimes.never_freed_by_size[].bytes",
        "cross_thread_frees.top_pairs[].count",
        "process.ended.status",
        "process.ended.records",
        "inherited.frees",
        "process.parent_log",
        "process.sampled_only",
        "sites.by_bytes[].location",
        "sites.issues[]",
        "sites.slow[].slow_ns",
        "sites.by_time[].timed_ns",
    ] {
        assert!(seen.contains(p), "{p} not in the reports");
    }
}
