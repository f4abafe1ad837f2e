//! `shimlog stats` on synthetic logs whose every number is known: the real binary runs on
//! real files and its --json must equal what the workload did.
mod synth;

use recorder::buffer::Args;
use recorder::Op;
use serde_json::Value;
use synth::{dir, header, shimlog, stats_json, Log};

const T11: u32 = 11;
const T12: u32 = 12;

/// The workload (times in ns; thread 11 makes, thread 12 mostly frees):
///
/// ```text
/// 1010 t11 malloc(100)=A   1020 t11 malloc(200)=B   1030 t11 calloc(10,30)=C
/// 1040 t11 realloc(A,1000)=D (frees A)              live 1500
/// 1050 t12 free(B) cross-thread   1060 t12 free(NULL)   1070 t12 free(0x9999) unknown
/// 1080 t11 posix_memalign(64,500)=E (5 ms in the backend)   live 1800
/// 1090 t11 malloc(2^40) = NULL
/// 1.5 ms RSS 10 MB;  2 ms t11 free(C);  2.5 ms t12 malloc(8)=F;  2.6 ms t12 dropped 5
/// 3 ms +10i t11 malloc(16) x70;  3.5 ms +10i t12 frees them: a burst of 70, cross-thread
/// 5 ms +10i t11 malloc(32) x63 (peak 3524 bytes at 5.00062 ms); 5.2 ms +10i t11 frees them
/// 7 ms t11 malloc(48)=G;  8 ms t11 free(D);  8.5 ms RSS 9 MB;  end: E, F, G live (556 bytes)
/// ```
fn known_log(path: &str) -> String {
    let mut l = Log::create(path, &header(100, 0));
    l.thread(T11, 1000);
    l.thread(T12, 1000);
    l.call(
        T11,
        1010,
        Op::Malloc,
        Args {
            size: 100,
            ptr: 0x1000,
            ..Default::default()
        },
        Some(50),
    );
    l.malloc(T11, 1020, 200, 0x2000);
    l.call(
        T11,
        1030,
        Op::Calloc,
        Args {
            count: 10,
            size: 30,
            ptr: 0x3000,
            ..Default::default()
        },
        None,
    );
    l.call(
        T11,
        1040,
        Op::Realloc,
        Args {
            old: 0x1000,
            size: 1000,
            ptr: 0x4000,
            ..Default::default()
        },
        Some(200),
    );
    l.call(
        T12,
        1050,
        Op::Free,
        Args {
            ptr: 0x2000,
            ..Default::default()
        },
        Some(70),
    );
    l.free(T12, 1060, 0);
    l.free(T12, 1070, 0x9999);
    l.call(
        T11,
        1080,
        Op::PosixMemalign,
        Args {
            align: 64,
            size: 500,
            ptr: 0x5000,
            ..Default::default()
        },
        Some(5_000_000),
    );
    l.malloc(T11, 1090, 1 << 40, 0);
    l.process(1_500_000, Op::Rss, 10_000_000);
    l.free(T11, 2_000_000, 0x3000);
    l.malloc(T12, 2_500_000, 8, 0x6000);
    l.thread_record(T12, 2_600_000, Op::Dropped, 5);
    for i in 0..70u64 {
        l.malloc(T11, 3_000_000 + i * 10, 16, 0x10000 + i * 16);
    }
    for i in 0..70u64 {
        l.free(T12, 3_500_000 + i * 10, 0x10000 + i * 16);
    }
    for i in 0..63u64 {
        l.malloc(T11, 5_000_000 + i * 10, 32, 0x20000 + i * 32);
    }
    for i in 0..63u64 {
        l.free(T11, 5_200_000 + i * 10, 0x20000 + i * 32);
    }
    l.malloc(T11, 7_000_000, 48, 0x7000);
    l.free(T11, 8_000_000, 0x4000);
    l.process(8_500_000, Op::Rss, 9_000_000);
    l.finish(true)
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned number: {v}"))
}

#[test]
fn known_workload_numbers_are_exact() {
    let d = dir("known");
    let log = known_log(&format!("{d}/known.shimlog"));
    let j = stats_json(&[&log]);

    // Totals: 2 ThreadStart + 279 calls + 2 RSS + 1 Dropped + 2 ThreadExit + End.
    assert_eq!(u(&j["events"]), 287);
    assert_eq!(u(&j["processes"]), 1);
    assert_eq!(u(&j["threads"]), 2);
    assert_eq!(j["backend"], "jemalloc");
    assert_eq!(u(&j["process"]["pid"]), 100);
    let ops = &j["ops"];
    assert_eq!(u(&ops["malloc"]), 138);
    assert_eq!(u(&ops["free"]), 138);
    assert_eq!(u(&ops["calloc"]), 1);
    assert_eq!(u(&ops["realloc"]), 1);
    assert_eq!(u(&ops["posix_memalign"]), 1);
    assert_eq!(u(&ops["aligned_alloc"]), 0);
    let bytes = &j["bytes"];
    assert_eq!(
        u(&bytes["malloc"]),
        100 + 200 + (1 << 40) + 8 + 70 * 16 + 63 * 32 + 48
    );
    assert_eq!(u(&bytes["calloc"]), 300);
    assert_eq!(u(&bytes["realloc"]), 1000);
    assert_eq!(u(&bytes["posix_memalign"]), 500);
    assert_eq!(u(&j["failed"]["malloc"]), 1);
    assert_eq!(u(&j["free_null"]), 1);
    assert_eq!(u(&j["unknown_frees"]), 1);
    assert_eq!(u(&j["address_reuse_conflicts"]), 0);
    assert_eq!(u(&j["duration_ns"]), 8_500_002 - 1000);
    assert_eq!(u(&j["dropped"]["events"]), 5);
    assert_eq!(u(&j["dropped"]["per_thread"][0]["tid"]), T12 as u64);
    assert_eq!(u(&j["dropped"]["when"][0]["ts_ns"]), 2_600_000);

    // The heap.
    assert_eq!(u(&j["peak_live_bytes"]), 3524);
    assert_eq!(u(&j["peak_live_at_ns"]), 5_000_620);
    assert_eq!(u(&j["peak_live_blocks"]), 66);
    assert_eq!(u(&j["live_at_end"]["blocks"]), 3);
    assert_eq!(u(&j["live_at_end"]["bytes"]), 556);

    // Sizes: 16 is the most frequent request (70), then 32 (63).
    assert_eq!(u(&j["sizes"]["top"][0]["size"]), 16);
    assert_eq!(u(&j["sizes"]["top"][0]["requests"]), 70);
    assert_eq!(u(&j["sizes"]["top"][1]["size"]), 32);
    assert_eq!(u(&j["sizes"]["distinct"]), 10);
    let b16 = j["sizes"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| u(&b["from"]) == 16)
        .unwrap();
    assert_eq!((u(&b16["to"]), u(&b16["requests"])), (31, 70));

    // Threads.
    let c = &j["cross_thread_frees"];
    assert_eq!(u(&c["count"]), 71);
    assert_eq!(u(&c["of_frees"]), 137);
    assert!((c["share"].as_f64().unwrap() - 71.0 / 137.0).abs() < 1e-9);
    assert_eq!(u(&c["top_pairs"][0]["alloc_tid"]), T11 as u64);
    assert_eq!(u(&c["top_pairs"][0]["free_tid"]), T12 as u64);
    assert_eq!(u(&c["top_pairs"][0]["count"]), 71);
    let b = &j["free_bursts"];
    assert_eq!(u(&b["min_run"]), 64);
    assert_eq!(u(&b["count"]), 1);
    assert_eq!(u(&b["longest"]["frees"]), 70);
    assert_eq!(u(&b["longest"]["tid"]), T12 as u64);
    assert_eq!(u(&b["longest"]["start_ns"]), 3_500_000);
    assert_eq!(u(&b["longest"]["end_ns"]), 3_500_690);
    let t11 = j["per_thread"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| u(&t["tid"]) == 11)
        .unwrap();
    assert_eq!(u(&t11["allocs"]), 1 + 1 + 1 + 1 + 1 + 70 + 63 + 1);
    assert_eq!(u(&t11["frees"]), 65);

    // Lifetimes: A and B die 30 ns after birth; the 70 and the 63 within 1 ms.
    let l = &j["lifetimes"];
    assert_eq!(u(&l["freed_blocks"]), 137);
    assert_eq!(u(&l["never_freed_blocks"]), 3);
    assert_eq!(u(&l["never_freed_bytes"]), 556);
    assert_eq!(u(&l["freed_within_1us"]), 2);
    assert_eq!(u(&l["freed_within_1ms"]), 135);
    let nf: Vec<(u64, u64)> = l["never_freed_by_size"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (u(&n["size"]), u(&n["blocks"])))
        .collect();
    assert_eq!(nf, vec![(500, 1), (48, 1), (8, 1)]);
    // Allocations between: A, B, C: 2; D: 136; the 70: 0..=69; the 63: 0..=62.
    let between = |n: u64| -> u64 {
        l["allocs_between"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| u(&b["from"]) == n && u(&b["to"]) == n)
            .map(|b| u(&b["blocks"]))
            .sum()
    };
    assert_eq!(between(0), 2);
    assert_eq!(between(2), 5);
    assert_eq!(u(&l["allocs_between"]["max"]), 136);
    let over_1ms: u64 = l["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| u(&b["from_ns"]) >= 1_000_000)
        .map(|b| u(&b["blocks"]))
        .sum();
    assert_eq!(over_1ms, 2, "C (~2 ms) and D (~8 ms)");

    // Memory: one sample per RSS record, with the live state at that moment.
    let m = &j["memory"];
    assert_eq!(m["samples_from"], "rss");
    let s = m["samples"].as_array().unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (
            u(&s[0]["ts_ns"]),
            u(&s[0]["rss_bytes"]),
            u(&s[0]["live_bytes"]),
            u(&s[0]["live_blocks"])
        ),
        (1_500_000, 10_000_000, 1800, 3)
    );
    assert_eq!(
        (u(&s[1]["live_bytes"]), u(&s[1]["max_live_bytes"])),
        (556, 3524)
    );
    assert_eq!(u(&m["rss_at_end"]["rss_bytes"]), 9_000_000);
    assert_eq!(u(&m["rss_at_end"]["live_bytes"]), 556);
    assert_eq!(u(&m["peak_rss_bytes"]), 10_000_000);

    // Latency: the 5 ms posix_memalign is the slowest call.
    let lat = &j["latency"];
    assert_eq!(u(&lat["timed_calls"]), 4);
    assert_eq!(u(&lat["slowest"][0]["backend_ns"]), 5_000_000);
    assert_eq!(lat["slowest"][0]["op"], "posix_memalign");
    assert_eq!(u(&lat["slowest"][0]["tid"]), T11 as u64);
    assert_eq!(u(&lat["slowest"][0]["size"]), 500);
    assert_eq!(u(&lat["slowest"][0]["ts_ns"]), 1080);
    assert_eq!(lat["slowest"].as_array().unwrap().len(), 4);
    assert!(lat["slowest"][0]["freed_bytes"].is_null());
    // The realloc freed A (100 bytes) for 1000; the free of B, 200 bytes, asked for none.
    assert_eq!(lat["slowest"][1]["op"], "realloc");
    assert_eq!(u(&lat["slowest"][1]["size"]), 1000);
    assert_eq!(u(&lat["slowest"][1]["freed_bytes"]), 100);
    assert_eq!(lat["slowest"][2]["op"], "free");
    assert_eq!(u(&lat["slowest"][2]["size"]), 0);
    assert_eq!(u(&lat["slowest"][2]["freed_bytes"]), 200);
    assert!(lat["slowest"][3]["freed_bytes"].is_null());
    let pm = &lat["per_op"]["posix_memalign"];
    assert!(
        u(&pm["max_ns"]).abs_diff(5_000_000) <= 5_000,
        "hdrhistogram keeps 3 digits: {pm}"
    );
    assert_eq!(u(&lat["per_op"]["malloc"]["timed_calls"]), 1);

    // Read: complete.
    assert_eq!(j["read"]["clean_end"], true);
    assert_eq!(j["read"]["issues"].as_array().unwrap().len(), 0);
}

#[test]
fn burst_threshold_is_configurable() {
    let d = dir("burst");
    let log = known_log(&format!("{d}/known.shimlog"));
    let j = stats_json(&["--burst", "63", &log]);
    let b = &j["free_bursts"];
    assert_eq!((u(&b["count"]), u(&b["frees"])), (2, 70 + 63));
    assert_eq!(u(&b["top"][1]["frees"]), 63);
    assert_eq!(u(&b["top"][1]["tid"]), T11 as u64);
    let o = shimlog(&["stats", "--burst", "0", &log]);
    assert!(!o.status.success());
}

#[test]
fn human_report_has_every_section_with_units() {
    let d = dir("human");
    let log = known_log(&format!("{d}/known.shimlog"));
    let o = shimlog(&["stats", &log]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    for want in [
        "Totals",
        "287 events",
        "Request sizes (10 distinct)",
        "Size-class waste",
        "Lifetimes",
        "Threads",
        "cross-thread frees: 71",
        "free bursts (>= 64 frees, no allocation between): 1, 70 frees; longest 70 frees on tid 12",
        "Memory over time",
        "peak live 3.44 KiB in 66 blocks at 5.00 ms",
        "Time inside the allocator (4 timed calls)",
        "5.00 ms",
    ] {
        assert!(out.contains(want), "report lacks {want:?}:\n{out}");
    }
    // Aligned tables: every row of the ops table has its numbers ending in the same column.
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("   malloc ") || l.starts_with("   free "))
        .take(2)
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].len(), rows[1].len(), "{rows:?}");
}

/// The slop of a known mix of sizes equals, for each backend, the sum of (usable size -
/// requested) that the backend itself answers for blocks of those sizes.
#[test]
fn slop_matches_each_backends_usable_size() {
    use shim_backend::Backend;
    let sizes: Vec<u64> = vec![
        1, 7, 8, 13, 16, 24, 25, 100, 100, 100, 513, 1000, 4000, 5000, 20000, 70000,
    ];
    let d = dir("slop");
    let mut l = Log::create(&format!("{d}/slop.shimlog"), &header(7, 0));
    for (i, &s) in sizes.iter().enumerate() {
        l.malloc(1, 1000 + i as u64, s, 0x1000 * (i as u64 + 1));
    }
    let log = l.finish(true);
    let j = stats_json(&[&log]);
    let want_total: u64 = sizes.iter().sum();
    for b in Backend::ALL {
        // Ask the backend: allocate each size a few times, all live at once, and take the
        // smallest usable size (glibc may hand out a free chunk a little larger than its
        // rounding, depending on this process's heap; one of the copies comes off the top).
        shim_backend::select(b);
        let mut blocks = Vec::new();
        let expected: u64 = sizes
            .iter()
            .map(|&s| {
                (0..8)
                    .map(|_| unsafe {
                        let p = shim_backend::malloc(s as usize);
                        assert!(!p.is_null());
                        blocks.push(p);
                        shim_backend::usable_size(p) as u64 - s
                    })
                    .min()
                    .unwrap_or(0)
            })
            .sum();
        for p in blocks {
            unsafe { shim_backend::free(p) };
        }
        let s = &j["slop"][b.name()];
        assert_eq!(u(&s["requested_bytes"]), want_total, "{}", b.name());
        assert_eq!(
            u(&s["slop_bytes"]),
            expected,
            "{}: slop over the run",
            b.name()
        );
        // Nothing is freed, so the peak is the end and holds every block.
        assert_eq!(
            u(&s["at_peak"]["slop_bytes"]),
            expected,
            "{}: slop at peak",
            b.name()
        );
        let per_class: u64 = s["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| u(&c["slop_bytes"]))
            .sum();
        assert_eq!(per_class, expected, "{}: classes add up", b.name());
        let allocs: u64 = s["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| u(&c["allocations"]))
            .sum();
        assert_eq!(allocs, sizes.len() as u64);
    }
    shim_backend::select(Backend::Glibc);
}

/// The slop at peak is the state at the peak, not at the end.
#[test]
fn slop_at_peak_is_taken_at_the_peak() {
    let d = dir("slop-peak");
    let mut l = Log::create(&format!("{d}/p.shimlog"), &header(8, 0));
    // Peak: 3 x 100 (300 bytes); then all freed and one 250-byte block made (not a peak).
    for i in 0..3u64 {
        l.malloc(1, 1000 + i, 100, 0x1000 * (i + 1));
    }
    for i in 0..3u64 {
        l.free(1, 2000 + i, 0x1000 * (i + 1));
    }
    l.malloc(1, 3000, 250, 0x9000);
    let log = l.finish(true);
    let j = stats_json(&[&log]);
    assert_eq!(u(&j["peak_live_bytes"]), 300);
    for b in shim_backend::Backend::ALL {
        let s = &j["slop"][b.name()];
        let c100 = shim_backend::size_class(b, 100) as u64 - 100;
        let c250 = shim_backend::size_class(b, 250) as u64 - 250;
        assert_eq!(u(&s["at_peak"]["slop_bytes"]), 3 * c100, "{}", b.name());
        assert_eq!(u(&s["slop_bytes"]), 3 * c100 + c250, "{}", b.name());
        let row = s["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| u(&c["allocations"]) == 3)
            .unwrap();
        assert_eq!(u(&row["blocks_at_peak"]), 3);
    }
}

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
    assert_eq!(
        u(&j["events"]),
        u(&logs[0]["events"]) + u(&logs[1]["events"])
    );
    assert_eq!(u(&j["ops"]["malloc"]), 3);
    assert_eq!(u(&j["ops"]["free"]), 2);
    assert_eq!(j["backend"], "jemalloc, mimalloc");
    // RSS of the total: both processes' last samples added (3 MB + 4 MB at the parent's 4 us).
    let s = j["memory"]["samples"].as_array().unwrap();
    assert_eq!(
        s.iter().map(|s| u(&s["rss_bytes"])).collect::<Vec<_>>(),
        vec![3_000_000, 7_000_000]
    );
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

/// One thread's 100,000 mallocs: several full frames of its stream before the last ones.
fn many_frames(path: &str) -> String {
    let mut l = Log::create(path, &header(9, 0));
    for i in 0..100_000u64 {
        l.malloc(1, 1000 + i * 10, 64, 0x10_0000 + i * 64);
    }
    let p = l.finish(true);
    assert!(
        recorder::LogReader::open(&p).unwrap().frames.len() >= 4,
        "the log needs several frames"
    );
    p
}

#[test]
fn a_cut_log_reports_where_it_was_cut() {
    let d = dir("cut");
    let full = many_frames(&format!("{d}/full.shimlog"));
    let bytes = std::fs::read(&full).unwrap();
    let r = recorder::LogReader::open(&full).unwrap();
    // Cut in the middle of the second frame (both first frames are the thread's).
    let f = r.frames[1];
    assert_eq!((r.frames[0].h.stream, f.h.stream), (1, 1));
    let second = f.offset;
    let cut = format!("{d}/cut.shimlog");
    std::fs::write(
        &cut,
        &bytes[..(second + 40 + f.h.comp_len as u64 / 2) as usize],
    )
    .unwrap();
    let j = stats_json(&[&cut]);
    let issues = j["read"]["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0]["kind"], "truncated");
    assert_eq!(u(&issues[0]["offset"]), second);
    assert_eq!(j["read"]["clean_end"], false);
    assert_eq!(
        u(&j["ops"]["malloc"]),
        r.frames[0].h.n_records as u64 - 1,
        "the first frame, less its ThreadStart"
    );
    let o = shimlog(&["stats", &cut]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.contains(&format!(
            "warning: log is cut off inside the frame at byte {second}"
        )),
        "{out}"
    );
}

#[test]
fn a_corrupt_frame_is_reported_and_skipped() {
    let d = dir("corrupt");
    let full = many_frames(&format!("{d}/full.shimlog"));
    let mut bytes = std::fs::read(&full).unwrap();
    let r = recorder::LogReader::open(&full).unwrap();
    let f = r.frames[1];
    // Garble the middle of the second frame's compressed body (its header stays valid).
    let mid = (f.offset + 40 + f.h.comp_len as u64 / 2) as usize;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5a;
    }
    let bad = format!("{d}/bad.shimlog");
    std::fs::write(&bad, &bytes).unwrap();
    let j = stats_json(&[&bad]);
    let issues = j["read"]["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0]["kind"], "corrupt_frame");
    assert_eq!(u(&issues[0]["offset"]), f.offset);
    let total: u64 = r.frames.iter().map(|f| f.h.n_records as u64).sum();
    assert_eq!(
        u(&j["events"]),
        total - f.h.n_records as u64,
        "every other frame was read"
    );
    let out = String::from_utf8(shimlog(&["stats", &bad]).stdout).unwrap();
    assert!(
        out.contains(&format!("warning: corrupt frame at byte {}", f.offset)),
        "{out}"
    );
}

#[test]
fn a_file_that_is_not_a_log_is_one_line_and_a_failure() {
    let d = dir("notalog");
    let p = format!("{d}/notes.txt");
    std::fs::write(&p, "just some text, long enough to have a preamble\n").unwrap();
    for args in [
        vec!["stats", p.as_str()],
        vec!["stats", "--json", p.as_str()],
    ] {
        let o = shimlog(&args);
        assert!(!o.status.success());
        assert!(o.stdout.is_empty());
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("not a shim log") && err.contains(&p), "{err}");
    }
    let o = shimlog(&["stats", &format!("{d}/missing.shimlog")]);
    assert!(!o.status.success());
    assert!(String::from_utf8(o.stderr)
        .unwrap()
        .contains("No such file"));
}

/// A log whose realloc returns an address still live (cross-thread reordering) and whose
/// realloc(p, 0) frees p, as glibc's does.
#[test]
fn realloc_edge_cases() {
    let d = dir("realloc");
    let mut l = Log::create(&format!("{d}/r.shimlog"), &header(5, 0));
    l.malloc(1, 1000, 100, 0x1000);
    l.malloc(2, 1010, 50, 0x2000);
    // glibc realloc(p, 0): frees p, returns NULL; not a failure.
    l.call(
        1,
        1020,
        Op::Realloc,
        Args {
            old: 0x1000,
            size: 0,
            ptr: 0,
            ..Default::default()
        },
        None,
    );
    // A failed realloc keeps the old block.
    l.call(
        2,
        1030,
        Op::Realloc,
        Args {
            old: 0x2000,
            size: 1 << 50,
            ptr: 0,
            ..Default::default()
        },
        None,
    );
    // malloc returning 0x2000 while it is still live: counted, the old block taken as freed.
    l.malloc(1, 1040, 70, 0x2000);
    // realloc(NULL, n) is malloc(n).
    l.call(
        1,
        1050,
        Op::Realloc,
        Args {
            old: 0,
            size: 30,
            ptr: 0x3000,
            ..Default::default()
        },
        None,
    );
    let log = l.finish(true);
    let j = stats_json(&[&log]);
    assert_eq!(u(&j["address_reuse_conflicts"]), 1);
    assert_eq!(u(&j["unknown_frees"]), 0);
    assert_eq!(u(&j["failed"]["realloc"]), 1);
    assert_eq!(u(&j["live_at_end"]["blocks"]), 2);
    assert_eq!(u(&j["live_at_end"]["bytes"]), 100);
    assert_eq!(
        u(&j["lifetimes"]["freed_blocks"]),
        1,
        "only realloc(p, 0) freed a block"
    );
    assert_eq!(u(&j["peak_live_bytes"]), 150);
}

/// A log of process `pid` in a fresh directory `name`, with `tids` started at 100 ns.
fn four_threads(name: &str, pid: u32, tids: [u32; 4]) -> Log {
    let d = dir(name);
    let mut l = Log::create(&format!("{d}/{name}.shimlog"), &header(pid, 0));
    for t in tids {
        l.thread(t, 100);
    }
    l
}

/// One step of xorshift64: deterministic test data.
fn xorshift(x: &mut u64) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
}

/// A log of four threads, each allocating, the next one freeing what one made a while ago
/// (cross-thread): 60,000 calls from time `t0` ns, every 7 ns. Also what each call did to
/// the live bytes, with its time.
fn interleaved(name: &str, pid: u32, tids: [u32; 4], seed: u64, t0: u64) -> (String, Vec<(u64, i64)>) {
    let mut l = four_threads(name, pid, tids);
    let mut x = seed;
    let mut live: Vec<(u64, u64)> = Vec::new();
    let mut did = Vec::new();
    for i in 0..60_000u64 {
        xorshift(&mut x);
        let t = tids[(x % 4) as usize];
        let ts = t0 + i * 7;
        if live.len() > 500 && x.is_multiple_of(3) {
            let (p, size) = live.swap_remove((x as usize / 3) % live.len());
            l.free(t, ts, p);
            did.push((ts, -(size as i64)));
        } else {
            let (p, size) = (0x7f00_0000_0000 + i * 48, 16 + x % 2000);
            l.malloc(t, ts, size, p);
            live.push((p, size));
            did.push((ts, size as i64));
        }
    }
    (l.finish(true), did)
}

/// `stats --json ARGS` read on a second thread (the default with two CPUs) and on one.
fn both_ways(logs: &[&str]) -> (Value, Value) {
    let two = shimlog(&[&["stats", "--json"], logs].concat());
    let one = shimlog(&[&["stats", "--json", "--one-thread"], logs].concat());
    assert!(two.status.success() && one.status.success());
    (
        serde_json::from_slice(&two.stdout).unwrap(),
        serde_json::from_slice(&one.stdout).unwrap(),
    )
}

/// Reading on a second thread and on one give the same report, on a log of several
/// interleaved threads, many frames and many chunks of events, and on two such logs read
/// together (the merge of the logs then runs on the reading thread too). The total's peak
/// of live bytes, a moment of both processes at once, is the one their calls in time order
/// give: the logs' calls alternate 3 and 4 ns apart, so any slip in the merge shows.
#[test]
fn one_thread_and_two_give_the_same_report() {
    let (log, did) = interleaved("threads", 21, [31, 32, 33, 34], 0x2545_f491_4f6c_dd1d, 1000);
    let (a, b) = both_ways(&[&log]);
    // The calls, a start and an exit per thread, the end record.
    assert_eq!(u(&a["events"]), 60_000 + 2 * 4 + 1);
    assert!(u(&a["cross_thread_frees"]["count"]) > 1000);
    assert!(a == b, "the reports differ");

    let (other, did2) = interleaved("threads2", 22, [41, 42, 43, 44], 0x9e37_79b9_7f4a_7c15, 1003);
    let (a, b) = both_ways(&[&log, &other]);
    assert_eq!(u(&a["processes"]), 2);
    assert_eq!(u(&a["events"]), 2 * (60_000 + 2 * 4 + 1));
    assert!(a == b, "the reports of the two logs together differ");
    let mut all = [did, did2].concat();
    all.sort();
    let (mut live, mut peak, mut at) = (0i64, 0i64, 0u64);
    for (ts, d) in all {
        live += d;
        if live > peak {
            (peak, at) = (live, ts);
        }
    }
    assert_eq!(u(&a["peak_live_bytes"]), peak as u64);
    assert_eq!(u(&a["peak_live_at_ns"]), at);
}

/// Peak resident memory (KiB) of `shimlog ARGS...`, which must succeed.
fn peak_rss_kb(args: &[&str]) -> u64 {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_shimlog"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run shimlog");
    let (mut status, mut ru) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, into locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert!(pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "shimlog {args:?} failed");
    ru.ru_maxrss as u64
}

/// Memory follows the blocks live at once, not the size of the log: reading a log through
/// its mapping releases what has been read, on one thread and on two.
#[test]
fn memory_stays_bounded_on_a_long_log() {
    let tids = [41u32, 42, 43, 44];
    let mut l = four_threads("bounded", 23, tids);
    // About 2,000 blocks live; the pointers wander over 2^40 bytes, so that the log
    // compresses to a few bytes per event.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut live: Vec<u64> = Vec::new();
    for i in 0..3_000_000u64 {
        xorshift(&mut x);
        let t = tids[(x % 4) as usize];
        if live.len() > 2000 {
            let p = live.swap_remove((x >> 8) as usize % live.len());
            l.free(t, 1000 + i * 3, p);
        } else {
            let p = 0x7f00_0000_0000 + ((x >> 20) & ((1 << 37) - 1)) * 8;
            l.malloc(t, 1000 + i * 3, 16 + (x >> 50) % 500, p);
            live.push(p);
        }
    }
    let log = l.finish(true);
    let file_kb = std::fs::metadata(&log).unwrap().len() / 1024;
    assert!(file_kb > 8 * 1024, "the log should be larger than the reader's own memory: {file_kb} KiB");
    for args in [vec!["stats", "--one-thread", &log], vec!["stats", &log]] {
        let rss = peak_rss_kb(&args);
        // The binary, its tables and histograms, the six backends' own arenas (their size
        // classes are asked for the slop table), and a few frames in flight: 14-15 MiB
        // alone, up to 21 under the whole suite's load. A reader that kept what it read
        // mapped would hold the whole file (18 MiB) besides, over 30.
        assert!(rss < 12 * 1024 + file_kb / 2, "{args:?}: peak RSS {rss} KiB for a log of {file_kb} KiB");
    }
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
