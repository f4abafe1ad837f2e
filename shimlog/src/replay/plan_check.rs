//! Tests of the plan builder: random hand-offs between threads, executed by a simulator.
use super::plan::*;
use super::planner::LOCAL_FREE_MAX;
use recorder::{LogReader, Op};
use std::fs::File;
use std::os::unix::fs::FileExt;

use recorder::buffer::Args;

/// Executes a plan on one thread, op by op, picking any thread whose next op may run
/// (its wait satisfied), and checks that every op finds its slot as it expects.
fn simulate(meta: &PlanMeta, file: &File) -> Result<(), String> {
    let mut streams: Vec<Vec<PlanOp>> = Vec::new();
    for t in &meta.threads {
        let mut v = Vec::new();
        let mut prev = 0;
        for c in &t.chunks {
            let mut b = vec![0u8; c.len as usize];
            file.read_exact_at(&mut b, c.offset).unwrap();
            let mut pos = 0;
            while pos < b.len() {
                let o = decode(&b, &mut pos, prev).ok_or("corrupt")?;
                prev = o.ts_ns;
                v.push(o);
            }
        }
        streams.push(v);
    }
    let mut full = vec![false; meta.slots as usize];
    let mut done = vec![0u32; meta.slots as usize];
    let mut last = vec![u32::MAX; meta.slots as usize];
    let mut at = vec![0usize; streams.len()];
    loop {
        let mut progressed = false;
        for (t, s) in streams.iter().enumerate() {
            while at[t] < s.len() {
                let o = &s[at[t]];
                let k = o.slot as usize;
                match o.wait {
                    Some(q) if done[k] != q => break,
                    Some(_) => {}
                    None => {
                        if last[k] != u32::MAX && last[k] != t as u32 {
                            return Err(format!("thread {t} op {} on slot {k} does not wait, but thread {} touched it last", at[t], last[k]));
                        }
                    }
                }
                let a = Action::from_u8(o.action).unwrap();
                let needs_full = matches!(a, Action::Realloc | Action::Free);
                if full[k] != needs_full {
                    return Err(format!("thread {t} op {} ({a:?}) finds slot {k} full={}", at[t], full[k]));
                }
                full[k] = a != Action::Free;
                done[k] += 1;
                last[k] = t as u32;
                at[t] += 1;
                progressed = true;
            }
        }
        if at.iter().zip(&streams).all(|(a, s)| *a == s.len()) {
            return Ok(());
        }
        if !progressed {
            return Err(format!("deadlock at {at:?}"));
        }
    }
}

/// Writes a log of `calls` (thread, op, args), 1000 ticks apart (the log may keep ticks
/// in coarser units), in that order.
fn write_log(path: &std::path::Path, threads: usize, calls: &[(usize, Op, Args)]) {
    use recorder::buffer::Buf;
    use recorder::writer::{create_log, write_header, LogWriter};
    let (fd, _) = create_log(path.to_str().unwrap()).unwrap();
    let h = recorder::Header {
        format_version: recorder::format::VERSION,
        page_size: 4096,
        ticks_per_sec: 1e9,
        ..recorder::Header::default()
    };
    let reserved = write_header(fd, &h).unwrap();
    let mut w = LogWriter::new(fd, 1).unwrap();
    w.note_header(reserved);
    for t in 0..threads {
        let stream = t as u32 + 1;
        let mut b = Buf::new_boxed(stream);
        b.push(Op::ThreadStart, 1, &Args { value: 100 + t as u64, ..Args::default() }, None);
        for (i, (th, op, a)) in calls.iter().enumerate() {
            if *th == t {
                if !b.has_room() {
                    w.write_buf(&b).unwrap();
                    b.reset(stream);
                }
                b.push(*op, 1000 + i as u64 * 1000, a, None);
            }
        }
        w.write_buf(&b).unwrap();
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Random hand-offs between threads, with addresses reused: the plan replays every
    /// call, each op finds its block as it expects, and no order of waits deadlocks.
    #[test]
    fn random_handoffs_plan_consistently(steps in proptest::collection::vec(
        (0usize..4, 0u8..3, proptest::prelude::any::<u16>(), 1u64..5000), 1..400)) {
        let mut live: Vec<u64> = Vec::new();
        let mut freed: Vec<u64> = Vec::new();
        let mut next = 0x10_0000u64;
        let mut calls = Vec::new();
        let mut fresh = |freed: &mut Vec<u64>, pick: u16| {
            if pick.is_multiple_of(3) && !freed.is_empty() {
                freed.swap_remove(pick as usize % freed.len())
            } else {
                next += 0x1000;
                next
            }
        };
        for (t, kind, pick, size) in steps {
            match kind {
                1 if !live.is_empty() => {
                    let p = live.swap_remove(pick as usize % live.len());
                    calls.push((t, Op::Free, Args { ptr: p, ..Args::default() }));
                    freed.push(p);
                }
                2 if !live.is_empty() => {
                    let i = pick as usize % live.len();
                    let old = live[i];
                    let new = if pick.is_multiple_of(2) { old } else { fresh(&mut freed, pick / 2) };
                    if new != old {
                        freed.push(old);
                    }
                    live[i] = new;
                    calls.push((t, Op::Realloc, Args { old, size, ptr: new, ..Args::default() }));
                }
                _ => {
                    let p = fresh(&mut freed, pick);
                    live.push(p);
                    calls.push((t, Op::Malloc, Args { size, ptr: p, ..Args::default() }));
                }
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("random.shimlog");
        write_log(&path, 4, &calls);
        let r = LogReader::open(path.to_str().unwrap()).unwrap();
        let mut f = tempfile::tempfile().unwrap();
        let m = build(&r, &mut f, |_| {}).unwrap();
        proptest::prop_assert_eq!(m.ops.values().sum::<u64>(), calls.len() as u64);
        proptest::prop_assert_eq!(&m.skipped, &Skipped::default());
        proptest::prop_assert_eq!(m.end_live_blocks, live.len() as u64);
        proptest::prop_assert!(m.slots as u64 <= m.peak_live_blocks + 4 * LOCAL_FREE_MAX as u64);
        if let Err(e) = simulate(&m, &f) {
            return Err(proptest::test_runner::TestCaseError::fail(e));
        }
    }
}
