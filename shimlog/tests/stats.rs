//! `shimlog stats` on synthetic logs whose every number is known: the real binary runs on
//! real files and its --json must equal what the workload did.
mod synth;

use recorder::buffer::Args;
use recorder::Op;
use serde_json::Value;
use synth::{dir, four_threads, header, shimlog, stats_json, u, xorshift, Log};

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
    l.call(T11, 1010, Op::Malloc, Args { size: 100, ptr: 0x1000, ..Default::default() }, Some(50));
    l.malloc(T11, 1020, 200, 0x2000);
    l.call(T11, 1030, Op::Calloc, Args { count: 10, size: 30, ptr: 0x3000, ..Default::default() }, None);
    l.call(
        T11,
        1040,
        Op::Realloc,
        Args { old: 0x1000, size: 1000, ptr: 0x4000, ..Default::default() },
        Some(200),
    );
    l.call(T12, 1050, Op::Free, Args { ptr: 0x2000, ..Default::default() }, Some(70));
    l.free(T12, 1060, 0);
    l.free(T12, 1070, 0x9999);
    l.call(
        T11,
        1080,
        Op::PosixMemalign,
        Args { align: 64, size: 500, ptr: 0x5000, ..Default::default() },
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
    assert_eq!(u(&bytes["malloc"]), 100 + 200 + (1 << 40) + 8 + 70 * 16 + 63 * 32 + 48);
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
    let b16 = j["sizes"]["buckets"].as_array().unwrap().iter().find(|b| u(&b["from"]) == 16).unwrap();
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
    let t11 = j["per_thread"].as_array().unwrap().iter().find(|t| u(&t["tid"]) == 11).unwrap();
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
        (u(&s[0]["ts_ns"]), u(&s[0]["rss_bytes"]), u(&s[0]["live_bytes"]), u(&s[0]["live_blocks"])),
        (1_500_000, 10_000_000, 1800, 3)
    );
    assert_eq!((u(&s[1]["live_bytes"]), u(&s[1]["max_live_bytes"])), (556, 3524));
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
    assert!(u(&pm["max_ns"]).abs_diff(5_000_000) <= 5_000, "hdrhistogram keeps 3 digits: {pm}");
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
    let rows: Vec<&str> =
        out.lines().filter(|l| l.starts_with("   malloc ") || l.starts_with("   free ")).take(2).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].len(), rows[1].len(), "{rows:?}");
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
    l.call(1, 1020, Op::Realloc, Args { old: 0x1000, size: 0, ptr: 0, ..Default::default() }, None);
    // A failed realloc keeps the old block.
    l.call(2, 1030, Op::Realloc, Args { old: 0x2000, size: 1 << 50, ptr: 0, ..Default::default() }, None);
    // malloc returning 0x2000 while it is still live: counted, the old block taken as freed.
    l.malloc(1, 1040, 70, 0x2000);
    // realloc(NULL, n) is malloc(n).
    l.call(1, 1050, Op::Realloc, Args { old: 0, size: 30, ptr: 0x3000, ..Default::default() }, None);
    let log = l.finish(true);
    let j = stats_json(&[&log]);
    assert_eq!(u(&j["address_reuse_conflicts"]), 1);
    assert_eq!(u(&j["unknown_frees"]), 0);
    assert_eq!(u(&j["failed"]["realloc"]), 1);
    assert_eq!(u(&j["live_at_end"]["blocks"]), 2);
    assert_eq!(u(&j["live_at_end"]["bytes"]), 100);
    assert_eq!(u(&j["lifetimes"]["freed_blocks"]), 1, "only realloc(p, 0) freed a block");
    assert_eq!(u(&j["peak_live_bytes"]), 150);
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
    (serde_json::from_slice(&two.stdout).unwrap(), serde_json::from_slice(&one.stdout).unwrap())
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
