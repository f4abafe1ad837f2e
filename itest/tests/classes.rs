//! `shimlog stats --classes` on a known request mix: itest/programs/c/classmix.c under the real shim
//! (100 x 100 B, 50 x 600 B, 20 x 2100 B, 10 x 5000 B, 5 x 10000 B, all live at once, and
//! nothing else), its slop under jemalloc's classes, a spacing rule laid over them and a list
//! alone, each computed here by hand from the classes' definitions.
use itest::*;
use serde_json::Value;

const REQUESTED: u64 = 100 * 100 + 50 * 600 + 20 * 2100 + 10 * 5000 + 5 * 10000;

fn stats(log: &std::path::Path, extra: &[&str]) -> Output {
    let mut c = command(shimlog_bin());
    c.arg("stats").arg(log).args(extra);
    run(c)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn slop_of_a_known_mix_is_the_hand_computed_one() {
    let t = run_traced("glibc", || command(cprog("classmix")));
    t.out.assert_success("classmix under the shim");
    let log = t.only_log();
    let out = stats(
        &log,
        &[
            "--json",
            "--classes",
            "jemalloc",
            "--classes",
            "every 256 B from 512 B to 4 KiB",
            "--classes",
            "64,128,256,512,1024,2048,4096,8192 on none",
            "--classes",
            "8,16,32,48; 4 per doubling from 64 B to 1 MiB on none",
        ],
    );
    out.assert_success("stats --classes");
    let doc = out.json();
    assert_eq!(
        u(&doc["ops"]["malloc"]),
        185,
        "the program's 185 allocations and nothing else: {}",
        doc["ops"]
    );
    let c = doc["classes"].as_array().expect("classes");
    assert_eq!(c.len(), 4);
    for x in c {
        assert_eq!(u(&x["requested_bytes"]), REQUESTED, "{}", x["label"]);
        assert_eq!(u(&x["allocations"]), 185);
        assert_eq!(u(&x["at_peak"]["live_bytes"]), REQUESTED, "every block live at once");
    }
    // jemalloc's classes (4 per doubling from 64 B): 100 -> 112, 600 -> 640, 2100 -> 2560,
    // 5000 -> 5120, 10000 -> 10240.
    let je = 100 * 12 + 50 * 40 + 20 * 460 + 10 * 120 + 5 * 240;
    assert_eq!(u(&c[0]["slop_bytes"]), je, "{:#}", c[0]);
    assert_eq!(u(&c[0]["at_peak"]["slop_bytes"]), je, "all live at the peak");
    assert_eq!(
        u(&c[0]["slop_bytes"]),
        u(&doc["slop"]["jemalloc"]["slop_bytes"]),
        "the slop section's jemalloc"
    );
    assert!(c[0]["label"].as_str().unwrap().starts_with("jemalloc "), "{}", c[0]["label"]);
    // Every 256 B from 512 B to 4 KiB, jemalloc's classes elsewhere: 600 -> 768, 2100 -> 2304.
    let rule = 100 * 12 + 50 * 168 + 20 * 204 + 10 * 120 + 5 * 240;
    assert_eq!(u(&c[1]["slop_bytes"]), rule, "{:#}", c[1]);
    assert_eq!(c[1]["slop_change_bytes"].as_i64(), Some(rule as i64 - je as i64));
    // The classes that moved: 768 B (600 B requests, +50 x 128) and 2304 B (-20 x 256).
    let moved: Vec<(u64, i64)> = c[1]["most_changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (u(&r["class_bytes"]), r["change_bytes"].as_i64().unwrap()))
        .collect();
    assert_eq!(moved, vec![(768, 50 * 128), (2304, -20 * 256)]);
    // Powers of two alone: 100 -> 128, 600 -> 1024, 2100 -> 4096, 5000 -> 8192, 10000 above.
    assert_eq!(u(&c[2]["slop_bytes"]), 100 * 28 + 50 * 424 + 20 * 1996 + 10 * 3192, "{:#}", c[2]);
    assert_eq!((u(&c[2]["above_classes"]), u(&c[2]["above_classes_bytes"])), (5, 5 * 10000));
    // jemalloc's rule written out gives jemalloc's own answer.
    assert_eq!(u(&c[3]["slop_bytes"]), je, "{:#}", c[3]);
    assert_eq!(c[3]["slop_change_bytes"].as_i64(), Some(0));

    // The text report: one line per configuration, then the classes that moved.
    let out = stats(&log, &["--classes", "jemalloc", "--classes", "every 256 B from 512 B to 4 KiB"]);
    out.assert_success("stats --classes, text");
    let text = out.stdout_str();
    assert!(text.contains("size-class what-if (185 allocations"), "{text}");
    assert!(text.contains("every 256 B from 512 B to 4 KiB (on jemalloc's other classes)"), "{text}");
    assert!(text.contains("the classes whose slop changed most against 1"), "{text}");
}

#[test]
fn a_bad_spec_is_one_line_and_exit_2() {
    let t = run_traced("glibc", || command(cprog("classmix")));
    t.out.assert_success("classmix under the shim");
    let log = t.only_log();
    for bad in ["jemaloc", "every 256 B from 4 KiB to 512 B", "16,32 on nothing", "every 0 B from 1 B to 2 B"]
    {
        let out = stats(&log, &["--classes", "jemalloc", "--classes", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", out.stderr);
        assert_eq!(out.stderr.trim().lines().count(), 1, "{bad}: one line: {}", out.stderr);
        assert!(
            out.stderr.contains(bad) && out.stderr.contains("accepted: a backend (glibc, jemalloc"),
            "{bad}: {}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "no report: {}", out.stdout_str());
    }
}
