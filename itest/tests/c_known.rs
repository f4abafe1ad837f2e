//! itest/programs/c/known.c under the shim with each backend: the numbers the program prints about
//! itself (peak live bytes, cross-thread frees, free bursts, lifetimes, blocks never freed)
//! are what its log shows, computed here from the events directly. These are the numbers
//! `shimlog stats` must report for the same log.
use itest::*;
use recorder::{Event, LogReader, Op};
use std::collections::HashMap;

struct Block {
    size: u64,
    tid: u32,
    ts: u64,
    /// Allocation events in the whole log before this block's.
    allocs_before: u64,
}

fn check(backend: &str) {
    let t = run_traced(backend, || command(cprog("known")));
    t.out.assert_success("known under the shim");
    let p = t.out.json();
    assert_eq!(p["errors"], 0);
    let u = |v: &serde_json::Value| v.as_u64().unwrap();
    let (main_tid, tid_a, tid_b) =
        (u(&p["main_tid"]) as u32, u(&p["thread_a_tid"]) as u32, u(&p["thread_b_tid"]) as u32);

    let log = t.only_log();
    let sound = analyze(&log, |_| false);
    let mut ck = Checks::new();
    ck.failed.extend(sound.consistency_failures(true));
    ck.check(sound.clean_end, || "no end record".into());

    let r = LogReader::open(log.to_str().unwrap()).unwrap();
    let mut live: HashMap<u64, Block> = HashMap::new();
    let (mut live_bytes, mut peak, mut allocs) = (0u64, 0u64, 0u64);
    let mut baseline = None; // live bytes when the program's first block (1000 bytes) is made
    let mut runs: HashMap<u32, u64> = HashMap::new();
    let mut bursts: Vec<(u32, u64)> = Vec::new();
    let mut cross_2048 = 0u64;
    let mut short_held = Vec::new(); // sizes 4100 and 2048 held less than 2 ms
    let mut ten_between = (0u64, 0u64); // (72-byte blocks with exactly 10 allocations between, others)
    let mut immediate = (0u64, 0u64); // (48-byte blocks freed by the next call on their thread, others)
    let mut last_on_thread: HashMap<u32, Event> = HashMap::new();
    let end_run = |runs: &mut HashMap<u32, u64>, bursts: &mut Vec<(u32, u64)>, tid: u32| {
        let n = runs.remove(&tid).unwrap_or(0);
        if n >= 64 {
            bursts.push((tid, n));
        }
    };
    for e in r.events() {
        if !e.op.is_alloc_family() {
            continue;
        }
        let freed = match e.op {
            Op::Free if e.ptr != 0 => Some(e.ptr),
            Op::Realloc | Op::Reallocarray if e.old != 0 && (e.ptr != 0 || e.requested() == 0) => Some(e.old),
            _ => None,
        };
        if e.op == Op::Free {
            *runs.entry(e.tid).or_default() += 1;
        } else {
            end_run(&mut runs, &mut bursts, e.tid);
        }
        if let Some(ptr) = freed {
            if let Some(b) = live.remove(&ptr) {
                live_bytes -= b.size;
                let held = e.ts_ns.saturating_sub(b.ts);
                if ((b.size == 4100 && b.tid == main_tid) || (b.size == 2048 && b.tid == tid_a))
                    && held < 2_000_000
                {
                    short_held.push((b.size, held));
                }
                if b.size == 2048 && b.tid == tid_a && e.tid == tid_b {
                    cross_2048 += 1;
                }
                if b.size == 72 && b.tid == main_tid {
                    if allocs - b.allocs_before - 1 == 10 {
                        ten_between.0 += 1
                    } else {
                        ten_between.1 += 1
                    }
                }
                if b.size == 48 && b.tid == main_tid && e.op == Op::Free {
                    let prev = last_on_thread.get(&e.tid);
                    if prev.is_some_and(|p| p.op == Op::Malloc && p.ptr == ptr) {
                        immediate.0 += 1
                    } else {
                        immediate.1 += 1
                    }
                }
            }
        }
        if e.op.allocates() && e.ptr != 0 {
            if baseline.is_none() && e.tid == main_tid && e.op == Op::Malloc && e.size == 1000 {
                baseline = Some(live_bytes);
            }
            live.insert(e.ptr, Block { size: e.requested(), tid: e.tid, ts: e.ts_ns, allocs_before: allocs });
            live_bytes += e.requested();
            peak = peak.max(live_bytes);
        }
        if e.op.allocates() {
            allocs += 1;
        }
        last_on_thread.insert(e.tid, e);
    }
    for tid in runs.keys().copied().collect::<Vec<_>>() {
        end_run(&mut runs, &mut bursts, tid);
    }

    let baseline = baseline.expect("the program's first malloc(1000) is not in the log");
    ck.check(baseline < 64 << 10, || format!("{baseline} bytes live before main's first block"));
    ck.eq(
        "peak live bytes less what was live before the program's first block",
        peak - baseline,
        u(&p["peak_live_bytes"]),
    );
    ck.eq("2048-byte blocks made by thread A and freed by thread B", cross_2048, 50);
    let main_bursts: Vec<u64> = bursts.iter().filter(|(t, _)| *t == main_tid).map(|(_, n)| *n).collect();
    ck.eq("main thread's free bursts (runs of >= 64 frees)", main_bursts, vec![100, 64]);
    ck.eq("free bursts on other threads", bursts.iter().filter(|(t, _)| *t != main_tid).count(), 0);
    let end333 = live.values().filter(|b| b.size == 333 && b.tid == main_tid).count() as u64;
    ck.eq("333-byte blocks never freed", end333, u(&p["program_live_at_end"]["blocks"]));
    ck.check(short_held.is_empty(), || format!("blocks meant to live >= 2 ms lived {short_held:?} ns"));
    ck.eq("72-byte blocks with 10 allocations between malloc and free (yes, no)", ten_between, (100, 0));
    ck.eq("48-byte blocks freed by the next call on their thread (yes, no)", immediate, (1000, 0));
    let ops = &p["program_ops"];
    for op in ["malloc", "calloc", "realloc", "free"] {
        ck.within(&format!("count of {op}"), sound.count(op), u(&ops[op]), RUNTIME_SLACK);
    }
    ck.eq("threads", sound.threads.len() as u64, u(&p["threads"]));
    ck.finish(&format!("known under {backend}"));
}

#[test]
fn known_glibc() {
    check("glibc");
}

#[test]
fn known_jemalloc() {
    check("jemalloc");
}

#[test]
fn known_mimalloc() {
    check("mimalloc");
}

#[test]
fn known_tcmalloc() {
    check("tcmalloc");
}

#[test]
fn known_snmalloc() {
    check("snmalloc");
}

#[test]
fn known_rpmalloc() {
    check("rpmalloc");
}
