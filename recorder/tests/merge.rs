//! The reader's merge: whatever the number of streams, how their frames interleave in the
//! file, when each starts and how often ticks tie, every record comes out exactly once, in
//! tick order, a free before anything else on a tie, and each stream in its own order.
mod common;

use proptest::prelude::*;
use recorder::buffer::{Args, Buf};
use recorder::writer::{create_log, write_header, LogWriter};
use recorder::{LogReader, Op};
use std::sync::atomic::{AtomicU64, Ordering};

fn path() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("recorder-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = N.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("m-{n}.shimlog")).to_string_lossy().into_owned()
}

/// (stream, op, ticks, ptr) of every record written, in each stream's order.
type Rec = (u32, Op, u64, u64);

/// Writes `streams` streams; stream s starts at `starts[s]` and gets records whose ticks
/// step by 0..=`step` (so that ties are common). A stream's buffer becomes a frame every
/// `frame_every` records, so streams have many frames, interleaved in the file. Every third
/// frame is a row frame (as the recorder writes when it is behind), the others columnar.
fn write_log(calls: &[(u8, bool, u8)], starts: &[u64], step: u8, frame_every: usize) -> (String, Vec<Rec>) {
    let (fd, p) = create_log(&path()).unwrap();
    let reserved = write_header(&fd, &common::header()).unwrap();
    let mut w = LogWriter::new(fd, 1).unwrap();
    w.note_header(reserved);
    let n = starts.len();
    let mut bufs: Vec<Box<Buf>> = (0..n).map(|s| Buf::new_boxed(s as u32 + 1)).collect();
    let mut ticks: Vec<u64> = starts.to_vec();
    let mut written = Vec::new();
    for (i, &(th, free, d)) in calls.iter().enumerate() {
        let s = th as usize % n;
        let b = &mut bufs[s];
        if b.n as usize >= frame_every || !b.has_room() {
            w.hurry(w.frames % 3 == 2);
            w.write_buf(b).unwrap();
            let id = b.stream;
            b.reset(id);
        }
        ticks[s] += (d % (step + 1)) as u64;
        let op = if free { Op::Free } else { Op::Malloc };
        let ptr = 0x1000 + 16 * i as u64;
        b.push(op, ticks[s], &Args { size: 24, ptr, ..Default::default() }, None);
        written.push((s as u32 + 1, op, ticks[s], ptr));
    }
    for b in &bufs {
        if !b.is_empty() {
            w.hurry(w.frames % 3 == 2);
            w.write_buf(b).unwrap();
        }
    }
    drop(w);
    (p, written)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn merged_in_order(
        calls in prop::collection::vec((any::<u8>(), any::<bool>(), any::<u8>()), 0..6000),
        starts in prop::collection::vec(0u64..5000, 1..40),
        step in 0u8..6,
        frame_every in 1usize..400,
    ) {
        let (p, written) = write_log(&calls, &starts, step, frame_every);
        let r = LogReader::open(&p).unwrap();
        if r.frames.len() >= 3 {
            prop_assert!(r.frames.iter().any(|f| f.h.columnar) && r.frames.iter().any(|f| !f.h.columnar));
        }
        let mut ev = r.events();
        let got: Vec<Rec> = (&mut ev).map(|e| (e.stream, e.op, e.ts_ns, e.ptr)).collect();
        std::fs::remove_file(&p).unwrap();
        prop_assert!(ev.issues.is_empty(), "{:?}", ev.issues);
        prop_assert_eq!(got.len(), written.len());
        // The last ticks seen of each stream.
        let mut last: Vec<Option<u64>> = vec![None; starts.len() + 1];
        for (i, &b) in got.iter().enumerate() {
            if i > 0 {
                let a = got[i - 1];
                prop_assert!(a.2 <= b.2, "ticks go back: {:?} then {:?}", a, b);
                // A free waits behind a tie only for a record before it in its own stream.
                let held = last[b.0 as usize] == Some(b.2);
                if a.2 == b.2 && b.1 == Op::Free && !held {
                    prop_assert!(a.1 == Op::Free, "free after a malloc on a tie: {:?} {:?}", a, b);
                }
            }
            last[b.0 as usize] = Some(b.2);
        }
        // Each stream's records in its own order, none lost or made up.
        for s in 1..=starts.len() as u32 {
            let want: Vec<&Rec> = written.iter().filter(|r| r.0 == s).collect();
            let have: Vec<&Rec> = got.iter().filter(|r| r.0 == s).collect();
            prop_assert_eq!(have, want);
        }
    }
}
