//! Call sites from damaged input: a stack whose frames are cut short, a site naming a stack
//! the log never defines, a record out of place, an object whose binary is gone, a binary
//! with another build id. Each gets one clear line in `sites.issues` (and in the text
//! report), and the rest of the report is intact. A log without stacks gets a one-line
//! error from pprof and flamegraph.
mod sitelog;
mod synth;

use recorder::buffer::Args;
use recorder::event::site_flags::*;
use recorder::Op;
use synth::{dir, header, shimlog, stats_json, Log};

fn damaged(path: &str, build_id_of_exe: &[u8]) -> String {
    let mut h = header(7, 0);
    h.stacks = Some("all".into());
    h.unwind = Some("tables".into());
    let mut l = Log::create(path, &h);
    l.thread(1, 1_000);
    let (exe, pc) = sitelog::shimlog_main();
    sitelog::mapping(&mut l, 1, 1_100, 0x1000, 1 << 40, 0, &exe, build_id_of_exe);
    sitelog::mapping(
        &mut l,
        1,
        1_100,
        1 << 41,
        (1 << 41) + 0x10000,
        1 << 41,
        "/nonexistent/libgone.so",
        &[0xcd; 20],
    );
    // Stack 1 whole; stack 2 says 3 frames and has 1.
    sitelog::stack(&mut l, 1, 1_100, 1, 2, &[pc, (1 << 41) + 0x100]);
    sitelog::stack(&mut l, 1, 1_100, 2, 3, &[(1 << 41) + 0x200]);
    let m = |l: &mut Log, ts, size, ptr| {
        l.call(1, ts, Op::Malloc, Args { size, ptr, ..Default::default() }, None)
    };
    m(&mut l, 2_000, 1000, 0x10_000);
    sitelog::site(&mut l, 1, 2_000, 1, ALL);
    m(&mut l, 2_100, 3000, 0x20_000);
    sitelog::site(&mut l, 1, 2_100, 2, ALL);
    m(&mut l, 2_200, 500, 0x30_000);
    sitelog::site(&mut l, 1, 2_200, 9, ALL);
    // A frame of a stack never declared.
    sitelog::rec(&mut l, 1, 2_300, Op::StackPc, 11, 0x1234);
    l.free(1, 2_400, 0x20_000);
    l.finish(true)
}

#[test]
fn damaged_stacks_and_missing_binaries_are_said_and_the_report_stands() {
    let d = dir("sites-damaged");
    let log = damaged(&format!("{d}/damaged.shimlog"), &[]);
    let s = stats_json(&[&log]);
    // The rest of the report.
    assert_eq!(s["ops"]["malloc"], 3, "{}", s["ops"]);
    assert_eq!(s["ops"]["free"], 1);
    assert_eq!(s["live_at_end"]["bytes"], 1500);
    let sites = &s["sites"];
    let issues: Vec<&str> = sites["issues"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let has = |needle: &str| issues.iter().any(|i| i.contains(needle));
    assert!(has("stack 2 is corrupt: 1 of its 3 frames"), "{issues:?}");
    assert!(has("a frame of stack 11, which is not defined"), "{issues:?}");
    assert!(has("no binary for /nonexistent/libgone.so (build id cdcdcd"), "{issues:?}");
    assert!(has("--binaries DIR"), "{issues:?}");
    // Every allocation still counted, under the site it resolves to or says it lacks.
    let rows = sites["by_bytes"].as_array().unwrap();
    let bytes = |f: &dyn Fn(&str) -> bool| {
        rows.iter()
            .filter(|r| f(r["function"].as_str().unwrap()))
            .map(|r| r["alloc_bytes"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(bytes(&|f| f.starts_with("shimlog::")), 1000, "{rows:?}");
    assert_eq!(bytes(&|f| f.starts_with("libgone.so+0x")), 3000, "{rows:?}");
    assert_eq!(bytes(&|f| f == "[stack 9: not in the log]"), 500, "{rows:?}");
    assert_eq!(sites["total_leaked_bytes"], 1500);
    // The text report says it too, and exits 0.
    let o = shimlog(&["stats", &log]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("Totals") && text.contains("note: stack 2 is corrupt"), "{text}");
    // pprof and flamegraph still write their files.
    for (cmd, out) in [("pprof", "h.pb.gz"), ("flamegraph", "f.svg")] {
        let out = format!("{d}/{out}");
        let o = shimlog(&[cmd, &log, "-o", &out]);
        assert!(o.status.success(), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(std::fs::metadata(&out).unwrap().len() > 100);
        assert!(String::from_utf8_lossy(&o.stderr).contains("note: no binary for /nonexistent/libgone.so"));
    }
}

#[test]
fn a_binary_with_another_build_id_is_not_used() {
    let d = dir("sites-buildid");
    let log = damaged(&format!("{d}/other-id.shimlog"), &[0x11; 20]);
    let s = stats_json(&[&log]);
    let issues = s["sites"]["issues"].to_string();
    assert!(issues.contains("has build id") && issues.contains("1111111111"), "{issues}");
    let rows = s["sites"]["by_bytes"].to_string();
    assert!(rows.contains("shimlog+0x"), "the mismatched binary was used: {rows}");
}

#[test]
fn logs_without_stacks_get_one_line() {
    let d = dir("sites-none");
    let mut l = Log::create(&format!("{d}/plain.shimlog"), &header(8, 0));
    l.malloc(1, 1_000, 64, 0x1000);
    let log = l.finish(true);
    let s = stats_json(&[&log]);
    assert!(s.get("sites").is_none());
    for cmd in ["pprof", "flamegraph"] {
        let o = shimlog(&[cmd, &log, "-o", &format!("{d}/x")]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("SHIM_STACKS"), "{err}");
    }
}
