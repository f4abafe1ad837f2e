//! `shimlog stats` on the logs of a process tree: a forked child's log read with its
//! parent's, and three generations whose blocks outlive the process that made them.
mod synth;

use recorder::Op;
use synth::{dir, header, shimlog, stats_json, u, Log};

#[test]
fn several_logs_give_a_section_each_and_a_total() {
    let d = dir("multi");
    // Parent: 1000 bytes live from 1 us to 5 us (its clock starts at mono 1 s).
    let mut a = Log::create(&format!("{d}/parent.shimlog"), &header(200, 1_000_000_000));
    a.malloc(1, 1_000, 1000, 0xa000);
    a.free(1, 5_000, 0xa000);
    a.process(4_000, Op::Rss, 4_000_000);
    let pa = a.finish(true);
    // Child: starts 1 us later; 2000 bytes live from its 1 us to 2 us (total clock 2..3 us).
    let mut h = header(201, 1_000_001_000);
    h.ppid = 200;
    h.forked = true;
    h.backend = "mimalloc".into();
    let mut b = Log::create(&format!("{d}/child.shimlog"), &h);
    b.malloc(1, 1_000, 2000, 0xa000);
    b.process(1_500, Op::Rss, 3_000_000);
    b.free(1, 2_000, 0xa000);
    b.malloc(1, 3_000, 10, 0xb000);
    let pb = b.finish(true);

    let j = stats_json(&[&pa, &pb]);
    assert_eq!(u(&j["processes"]), 2);
    let logs = j["logs"].as_array().unwrap();
    assert_eq!(logs.len(), 2);
    assert_eq!(u(&logs[0]["peak_live_bytes"]), 1000);
    assert_eq!(u(&logs[1]["peak_live_bytes"]), 2000);
    assert_eq!(u(&logs[1]["process"]["ppid"]), 200);
    assert_eq!(logs[1]["process"]["forked"], true);
    // Both live at once: 3000 bytes at parent time 2 us.
    assert_eq!(u(&j["peak_live_bytes"]), 3000);
    assert_eq!(u(&j["peak_live_at_ns"]), 2_000);
    assert_eq!(u(&j["live_at_end"]["bytes"]), 10);
    assert_eq!(u(&j["events"]), u(&logs[0]["events"]) + u(&logs[1]["events"]));
    assert_eq!(u(&j["ops"]["malloc"]), 3);
    assert_eq!(u(&j["ops"]["free"]), 2);
    assert_eq!(j["backend"], "jemalloc, mimalloc");
    // RSS of the total: both processes' last samples added (3 MB + 4 MB at the parent's 4 us).
    let s = j["memory"]["samples"].as_array().unwrap();
    assert_eq!(s.iter().map(|s| u(&s["rss_bytes"])).collect::<Vec<_>>(), vec![3_000_000, 7_000_000]);
    // Slop at the total's peak: both blocks.
    let je = shim_backend::size_class(shim_backend::Backend::Jemalloc, 1000) as u64 - 1000
        + shim_backend::size_class(shim_backend::Backend::Jemalloc, 2000) as u64
        - 2000;
    assert_eq!(u(&j["slop"]["jemalloc"]["at_peak"]["slop_bytes"]), je);

    let o = shimlog(&["stats", &pa, &pb]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains(&format!("== {pa}")) && out.contains(&format!("== {pb}")));
    assert!(out.contains("== total of 2 processes"), "{out}");
}

/// Three generations (a shell, its subshell, the subshell's child): the grandchild frees a
/// block its grandparent made before the first fork, which its parent never freed, and one
/// its parent made; read together, both frees are matched, none is unknown.
#[test]
fn a_grandchild_frees_its_grandparents_block() {
    let d = dir("grandchild");
    let mut g = Log::create(&format!("{d}/g.shimlog"), &header(300, 1_000_000_000));
    g.thread(1, 500);
    g.malloc(1, 1_000, 100, 0xa000);
    g.malloc(1, 1_500, 50, 0xa100);
    let pg = g.finish(true);
    // The child, forked at 2 us of g's clock; it frees 0xa100, makes 0xc000.
    let mut h = header(301, 1_000_002_000);
    h.ppid = 300;
    h.forked = true;
    h.parent_log = Some(pg.clone());
    h.fork_ticks = Some(2_000);
    let mut c = Log::create(&format!("{d}/c.shimlog"), &h);
    c.thread(1, 100);
    c.free(1, 200, 0xa100);
    c.malloc(1, 300, 30, 0xc000);
    let pc = c.finish(true);
    // The grandchild, forked at 1 us of c's clock (after its malloc): frees both.
    let mut h = header(302, 1_000_003_500);
    h.ppid = 301;
    h.forked = true;
    h.parent_log = Some(pc.clone());
    h.fork_ticks = Some(1_000);
    let mut k = Log::create(&format!("{d}/k.shimlog"), &h);
    k.thread(1, 100);
    k.free(1, 200, 0xa000);
    k.free(1, 300, 0xc000);
    let pk = k.finish(true);

    let j = stats_json(&[&pg, &pc, &pk]);
    assert_eq!(u(&j["unknown_frees"]), 0, "{}", serde_json::to_string_pretty(&j["logs"]).unwrap());
    let logs = j["logs"].as_array().unwrap();
    assert_eq!(u(&logs[1]["inherited"]["frees"]), 1);
    assert_eq!(u(&logs[2]["inherited"]["frees"]), 2);
    assert_eq!(u(&logs[2]["inherited"]["bytes_freed"]), 130);
}
