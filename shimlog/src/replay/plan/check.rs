//! Tests of the plan builder: random hand-offs between threads, executed by a simulator.
use super::planner::{build, LOCAL_FREE_MAX};
use super::*;
use recorder::{LogReader, Op};
use std::fs::File;
use std::os::unix::fs::FileExt;

use recorder::buffer::Args;

/// Executes a plan on one thread, op by op, picking any thread whose next op may run (its
/// wait satisfied, or its thread start or exit next in line), as the child's threads and
/// its main thread (the plan's `control` list) would. Checks that every op finds its slot as
/// it expects, that a thread runs only once started and is joined only once all its ops are
/// done, and that no more threads are alive at once than the log had.
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
    let n = streams.len();
    let mut full = vec![false; meta.slots as usize];
    let mut done = vec![0u32; meta.slots as usize];
    let mut last = vec![u32::MAX; meta.slots as usize];
    let mut at = vec![0usize; n];
    let mut started = vec![false; n];
    let (mut life, mut alive, mut control_at) = (0u32, 0u32, 0usize);
    let ended = |at: &[usize], j: usize| at[j] == streams[j].len();
    loop {
        let mut progressed = false;
        while let Some(l) = meta.control.get(control_at) {
            let j = l.thread as usize;
            if life != l.index || !(l.start || (started[j] && ended(&at, j))) {
                break;
            }
            if l.start {
                if started[j] {
                    return Err(format!("thread {j} started twice"));
                }
                started[j] = true;
                alive += 1;
            } else {
                alive -= 1;
            }
            life += 1;
            control_at += 1;
            progressed = true;
        }
        for t in 0..n {
            if !started[t] {
                continue;
            }
            while at[t] < streams[t].len() {
                let o = &streams[t][at[t]];
                let a = Action::from_u8(o.action).unwrap();
                match a {
                    Action::Spawn | Action::Join => {
                        let j = o.slot as usize;
                        if life != o.count as u32 || (a == Action::Join && !(started[j] && ended(&at, j))) {
                            break;
                        }
                        if a == Action::Spawn {
                            if started[j] {
                                return Err(format!("thread {j} started twice"));
                            }
                            started[j] = true;
                            alive += 1;
                        } else {
                            alive -= 1;
                        }
                        life += 1;
                    }
                    _ => {
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
                        let needs_full = matches!(a, Action::Realloc | Action::Free);
                        if full[k] != needs_full {
                            return Err(format!(
                                "thread {t} op {} ({a:?}) finds slot {k} full={}",
                                at[t], full[k]
                            ));
                        }
                        full[k] = a != Action::Free;
                        if o.notify {
                            done[k] += 1;
                        }
                        last[k] = t as u32;
                    }
                }
                if alive > meta.peak_threads {
                    return Err(format!(
                        "{alive} threads alive at once, the log had at most {}",
                        meta.peak_threads
                    ));
                }
                at[t] += 1;
                progressed = true;
            }
        }
        if control_at == meta.control.len() && (0..n).all(|t| started[t] && ended(&at, t)) {
            if life != meta.lifecycle_events {
                return Err(format!(
                    "{life} thread starts and exits made, the plan has {}",
                    meta.lifecycle_events
                ));
            }
            return Ok(());
        }
        if !progressed {
            return Err(format!("deadlock at {at:?} (thread starts and exits done: {life})"));
        }
    }
}

/// Writes a log of `calls` (thread, op, args), 1000 ticks apart (the log may keep ticks
/// in coarser units), in that order; thread starts and exits are among the calls.
fn write_log(path: &std::path::Path, calls: &[(usize, Op, Args)]) {
    use recorder::buffer::Buf;
    use recorder::writer::{create_log, write_header, LogWriter};
    let (fd, _) = create_log(path.to_str().unwrap()).unwrap();
    let h = recorder::Header {
        format_version: recorder::format::VERSION,
        page_size: 4096,
        ticks_per_sec: 1e9,
        ..recorder::Header::default()
    };
    let reserved = write_header(&fd, &h).unwrap();
    let mut w = LogWriter::new(fd, 1).unwrap();
    w.note_header(reserved);
    let threads = calls.iter().map(|c| c.0 + 1).max().unwrap_or(0);
    for t in 0..threads {
        let stream = t as u32 + 1;
        let mut b = Buf::new_boxed(stream);
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
    /// Random hand-offs between threads that start and exit at random (four lanes, each
    /// running one thread after another), with addresses reused: the plan replays every
    /// call, each op finds its block as it expects, no more threads live at once than in the
    /// log, and no order of waits, starts and exits deadlocks.
    #[test]
    fn random_handoffs_plan_consistently(steps in proptest::collection::vec(
        (0usize..4, 0u8..4, proptest::prelude::any::<u16>(), 1u64..5000), 1..400)) {
        let mut live: Vec<u64> = Vec::new();
        let mut freed: Vec<u64> = Vec::new();
        let mut next = 0x10_0000u64;
        let mut calls = Vec::new();
        // Each lane's current thread (its stream index) and whether it has started.
        let mut lane: Vec<(usize, bool)> = (0..4).map(|l| (l, false)).collect();
        let mut threads = 4;
        let mut n_calls = 0u64;
        let mut fresh = |freed: &mut Vec<u64>, pick: u16| {
            if pick.is_multiple_of(3) && !freed.is_empty() {
                freed.swap_remove(pick as usize % freed.len())
            } else {
                next += 0x1000;
                next
            }
        };
        for (l, kind, pick, size) in steps {
            if kind == 3 {
                // The lane's thread exits (if it ran) and a new one takes its place.
                if lane[l].1 {
                    calls.push((lane[l].0, Op::ThreadExit, Args::default()));
                    lane[l] = (threads, false);
                    threads += 1;
                }
                continue;
            }
            let t = lane[l].0;
            if !lane[l].1 {
                calls.push((t, Op::ThreadStart, Args { value: 100 + t as u64, ..Args::default() }));
                lane[l].1 = true;
            }
            n_calls += 1;
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
        write_log(&path, &calls);
        let r = LogReader::open(path.to_str().unwrap()).unwrap();
        let mut f = tempfile::tempfile().unwrap();
        let m = build(&r, &mut f, |_| {}).unwrap();
        proptest::prop_assert_eq!(m.ops.values().sum::<u64>(), n_calls);
        proptest::prop_assert_eq!(&m.skipped, &Skipped::default());
        proptest::prop_assert_eq!(m.end_live_blocks, live.len() as u64);
        proptest::prop_assert!(m.slots as u64 <= m.peak_live_blocks + 4 * (LOCAL_FREE_MAX as u64 + 8));
        if let Err(e) = simulate(&m, &f) {
            return Err(proptest::test_runner::TestCaseError::fail(e));
        }
    }
}
