//! The reader against bad input: arbitrary bytes, frames with valid headers and garbage
//! bodies, logs cut at any byte and logs with bytes flipped. It must never panic, always
//! finish, hand out no more records than the bytes can hold, and allocate no more than a
//! bounded amount per frame (never in proportion to what a header merely claims).
mod common;

use common::header;
use proptest::prelude::*;
use recorder::buffer::{Args, Buf};
use recorder::format::{self, FrameHeader};
use recorder::writer::{create_log, write_header, LogWriter};
use recorder::{LogReader, Op, ReadIssue};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts this thread's live and peak heap bytes (the reader is single-threaded).
struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn add(n: usize) {
    let _ = LIVE.try_with(|l| {
        let v = l.get() + n;
        l.set(v);
        let _ = PEAK.try_with(|p| p.set(p.get().max(v)));
    });
}

fn sub(n: usize) {
    let _ = LIVE.try_with(|l| l.set(l.get().saturating_sub(n)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        add(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        add(l.size());
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        sub(l.size());
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        add(new);
        sub(l.size());
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// A fresh path in the temp directory.
fn path(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!("recorder-robust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = N.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{tag}-{n}.shimlog")).to_string_lossy().into_owned()
}

/// A valid preamble and header, as the shim writes them.
fn preamble_and_header() -> Vec<u8> {
    let p = path("hdr");
    let (fd, p) = create_log(&p).unwrap();
    write_header(&fd, &header()).unwrap();
    fd.close();
    let b = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    b
}

struct Outcome {
    events: u64,
    frames: usize,
    issues: Vec<ReadIssue>,
}

/// Opens and reads everything, checking the bounds; None when open refuses the file.
fn read(bytes: &[u8]) -> Option<Outcome> {
    let p = path("in");
    std::fs::write(&p, bytes).unwrap();
    let base = LIVE.with(|l| l.get());
    PEAK.with(|pk| pk.set(base));
    let out = LogReader::open(&p).ok().map(|r| {
        let raw: u64 = r.frames.iter().map(|f| f.h.raw_len as u64).sum();
        let mut ev = r.events();
        let mut n = 0u64;
        for _ in &mut ev {
            n += 1;
            // Every record takes at least two bytes (tag and time delta).
            assert!(n <= raw / 2 + 1, "more records than the frames' bytes can hold");
        }
        let mut issues = r.issues.clone();
        issues.extend(ev.issues.iter().cloned());
        Outcome { events: n, frames: r.frames.len(), issues }
    });
    let peak = PEAK.with(|pk| pk.get()) - base;
    let frames = out.as_ref().map_or(0, |o| o.frames);
    // The index, the reader's buffers and at most one decompressed frame per stream, each
    // bounded by the format's maximum frame size; file-sized reads for the header.
    let bound = 4 * bytes.len() + (4 << 20) + frames * (2 * format::MAX_RAW_LEN as usize + (1 << 17));
    assert!(peak <= bound, "reading {} bytes allocated {peak} bytes at once (bound {bound})", bytes.len());
    std::fs::remove_file(&p).unwrap();
    out
}

/// A real log: `threads` streams of random calls, written with the recorder's writer.
fn real_log(calls: &[(u8, u8, u32, u64)], level: i32) -> (Vec<u8>, u64) {
    let p = path("log");
    let (fd, p) = create_log(&p).unwrap();
    let reserved = write_header(&fd, &header()).unwrap();
    let mut w = LogWriter::new(fd, level).unwrap();
    w.note_header(reserved);
    let mut bufs: Vec<Box<Buf>> = (0..4).map(|s| Buf::new_boxed(s + 1)).collect();
    let mut n = 0u64;
    for (i, b) in bufs.iter_mut().enumerate() {
        b.push(Op::ThreadStart, 0, &Args { value: 100 + i as u64, ..Default::default() }, None);
        n += 1;
    }
    let mut t = 1u64;
    for &(th, op, size, ptr) in calls {
        let op = Op::ALLOC_OPS[op as usize % Op::ALLOC_OPS.len()];
        let b = &mut bufs[th as usize % 4];
        if !b.has_room() {
            w.write_buf(b).unwrap();
            let s = b.stream;
            b.reset(s);
        }
        t += 1 + (size as u64 % 7);
        let a = Args { size: size as u64, count: 2, align: 16, old: ptr ^ 0x40, ptr, value: 0 };
        b.push(op, t, &a, (size % 3 == 0).then_some(size as u64));
        n += 1;
    }
    for b in &bufs {
        w.write_buf(b).unwrap();
    }
    drop(w);
    let bytes = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    (bytes, n)
}

fn calls() -> impl Strategy<Value = Vec<(u8, u8, u32, u64)>> {
    prop::collection::vec((any::<u8>(), any::<u8>(), 0u32..100_000, any::<u64>()), 0..40_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Any bytes at all, with or without a valid preamble and header in front.
    #[test]
    fn arbitrary_bytes(tail in prop::collection::vec(any::<u8>(), 0..8192), valid_header: bool) {
        let mut b = if valid_header { preamble_and_header() } else { Vec::new() };
        b.extend_from_slice(&tail);
        let o = read(&b);
        if !valid_header && tail.len() < format::PREAMBLE_LEN {
            prop_assert!(o.is_none());
        }
    }

    /// Frames whose headers are valid (magic, checksum, lengths in range) around bodies
    /// that are garbage, or zstd frames of garbage records.
    #[test]
    fn valid_frame_headers_around_garbage(frames in prop::collection::vec(
        (0u32..6, any::<u32>(), prop::collection::vec(any::<u8>(), 0..2048), any::<bool>(),
         0u32..(format::MAX_RAW_LEN + 1), any::<u64>(), any::<u64>()), 0..8)) {
        let mut b = preamble_and_header();
        for (stream, n_records, body, compress, claimed_raw, first, last) in frames {
            let (body, raw_len) = if compress {
                (zstd::bulk::compress(&body, 1).unwrap(), body.len() as u32)
            } else {
                (body, claimed_raw)
            };
            let h = FrameHeader { stream, n_records, raw_len, comp_len: body.len() as u32, first_ticks: first, last_ticks: last, columnar: false };
            b.extend_from_slice(&h.encode());
            b.extend_from_slice(&body);
        }
        let o = read(&b).expect("a valid preamble and header open");
        prop_assert!(o.frames <= 8);
    }

    /// A real log cut at any byte reads every whole frame before the cut, and says where
    /// it was cut when the cut falls inside a frame.
    #[test]
    fn cut_anywhere(calls in calls(), at in any::<prop::sample::Index>()) {
        let (full, n) = real_log(&calls, 1);
        let whole = LogReader::open(&write_tmp(&full)).unwrap();
        prop_assert_eq!(whole.record_count(), n);
        let cut = at.index(full.len() + 1);
        match read(&full[..cut]) {
            None => prop_assert!(cut < whole.frames.first().map_or(full.len(), |f| f.offset as usize)),
            Some(o) => {
                let kept: Vec<_> = whole.frames.iter().filter(|f| f.offset + 40 + f.h.comp_len as u64 <= cut as u64).collect();
                prop_assert_eq!(o.frames, kept.len());
                prop_assert_eq!(o.events, kept.iter().map(|f| f.h.n_records as u64).sum::<u64>());
                let on_boundary = cut == full.len() || whole.frames.iter().any(|f| f.offset as usize == cut);
                let truncated = o.issues.iter().any(|i| matches!(i, ReadIssue::Truncated { .. }));
                prop_assert_eq!(truncated, !on_boundary, "issues: {:?}", o.issues);
            }
        }
    }

    /// A real log with bytes flipped anywhere (header, frame headers, bodies).
    #[test]
    fn flipped_bytes(calls in calls(), flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..8)) {
        let (mut b, n) = real_log(&calls, 3);
        for (i, x) in flips {
            let i = i.index(b.len());
            b[i] ^= x;
        }
        if let Some(o) = read(&b) {
            // A flip can only lose records (zstd's checksum catches a changed body; a
            // frame header's CRC a changed header).
            prop_assert!(o.events <= n, "{} events from a log of {}", o.events, n);
        }
    }
}

fn write_tmp(b: &[u8]) -> String {
    let p = path("whole");
    std::fs::write(&p, b).unwrap();
    p
}

/// `for_each_frame` hands over every frame's records undecoded, as many bytes as the frame
/// header says, and a frame whose body is damaged as an error without stopping at it.
#[test]
fn each_frame_raw_and_a_damaged_one() {
    let calls: Vec<_> = (0..30_000u32)
        .map(|i| ((i % 4) as u8, (i % 9) as u8, i * 37 % 5000, 0x7f00_0000_0000 + (i as u64) * 48))
        .collect();
    let (mut b, n) = real_log(&calls, 1);
    let whole = LogReader::open(&write_tmp(&b)).unwrap();
    assert!(whole.frames.len() >= 4, "{} frames", whole.frames.len());
    let (mut records, mut seen) = (0u64, 0usize);
    whole.for_each_frame(|fi, body| {
        let body = body.expect("an intact frame reads");
        assert_eq!(body.len(), fi.h.raw_len as usize);
        records += fi.h.n_records as u64;
        seen += 1;
    });
    assert_eq!((records, seen), (n, whole.frames.len()));
    // One byte in the middle of the second frame's body.
    let f = whole.frames[1];
    b[f.offset as usize + format::FRAME_HEADER_LEN + f.h.comp_len as usize / 2] ^= 0x5a;
    let damaged = LogReader::open(&write_tmp(&b)).unwrap();
    let mut results = Vec::new();
    damaged.for_each_frame(|fi, body| results.push((fi.offset, body.is_ok())));
    let bad: Vec<_> = results.iter().filter(|r| !r.1).map(|r| r.0).collect();
    assert_eq!(bad, vec![f.offset]);
    assert_eq!(results.len(), whole.frames.len());
}
