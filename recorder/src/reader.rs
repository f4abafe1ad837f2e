//! Reading a log back: the header, an index of frame headers (one pass that skips the
//! compressed bodies), then every thread's records merged in time order.
//!
//! Memory is bounded by the number of threads whose streams overlap in time (one
//! decompressed frame each) plus the frame index, never by the number of events. The file
//! must be seekable (frames of one thread are read where they lie).
use crate::buffer::{DecodeState, RawRecord};
use crate::event::{Event, Op};
use crate::format::{self, FrameHeader, Header};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Something wrong with a log that the reader worked around.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadIssue {
    /// The file ends inside a frame starting at `offset`: everything before it was read.
    Truncated { offset: u64 },
    /// Bytes at `offset` are not a valid frame header; reading resumed at `resumed_at`
    /// (None: no later frame was found).
    CorruptHeader {
        offset: u64,
        resumed_at: Option<u64>,
    },
    /// The frame at `offset` has a valid header but its body does not decode.
    CorruptFrame { offset: u64, reason: String },
}

impl std::fmt::Display for ReadIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadIssue::Truncated { offset } => {
                write!(
                    f,
                    "log is cut off inside the frame at byte {offset}; read up to there"
                )
            }
            ReadIssue::CorruptHeader {
                offset,
                resumed_at: Some(r),
            } => {
                write!(
                    f,
                    "corrupt frame header at byte {offset}; resumed at byte {r}"
                )
            }
            ReadIssue::CorruptHeader {
                offset,
                resumed_at: None,
            } => {
                write!(
                    f,
                    "corrupt frame header at byte {offset}; no later frame found"
                )
            }
            ReadIssue::CorruptFrame { offset, reason } => {
                write!(f, "corrupt frame at byte {offset} ({reason}); skipped it")
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct FrameInfo {
    /// Offset of the frame header.
    pub offset: u64,
    pub h: FrameHeader,
}

pub struct LogReader {
    file: File,
    pub path: String,
    pub header: Header,
    pub frames: Vec<FrameInfo>,
    /// Problems found while indexing (truncation, corrupt headers).
    pub issues: Vec<ReadIssue>,
    pub file_len: u64,
    /// The final flush's cut (ticks), from the End record: calls stamped later were made
    /// while threads were stopping one by one and are left out of [`LogReader::events`],
    /// so that what is read is one consistent cut of the process.
    pub cut_ticks: Option<u64>,
}

fn err(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

impl LogReader {
    /// Opens a log, reads its header and indexes its frames. Errors name what is wrong.
    pub fn open(path: &str) -> io::Result<LogReader> {
        let file = File::open(path).map_err(|e| err(e.kind(), format!("{path}: {e}")))?;
        let file_len = file.metadata()?.len();
        let mut pre = [0u8; format::PREAMBLE_LEN];
        if file_len < format::PREAMBLE_LEN as u64
            || file.read_exact_at(&mut pre, 0).is_err()
            || &pre[0..8] != format::MAGIC
        {
            return Err(err(
                io::ErrorKind::InvalidData,
                format!("{path}: not a shim log (it does not start with the SHIMLOG magic)"),
            ));
        }
        let version = u16::from_le_bytes([pre[8], pre[9]]);
        if version != format::VERSION {
            return Err(err(
                io::ErrorKind::InvalidData,
                format!(
                    "{path}: log format version {version}; this build of shimlog reads version {}",
                    format::VERSION
                ),
            ));
        }
        let hlen = u32::from_le_bytes([pre[12], pre[13], pre[14], pre[15]]);
        if hlen > format::MAX_HEADER_LEN || (format::PREAMBLE_LEN as u64 + hlen as u64) > file_len {
            return Err(err(
                io::ErrorKind::InvalidData,
                format!("{path}: log header is cut off or corrupt (claims {hlen} bytes)"),
            ));
        }
        let mut hb = vec![0u8; hlen as usize];
        file.read_exact_at(&mut hb, format::PREAMBLE_LEN as u64)?;
        let header: Header = serde_json::from_slice(&hb).map_err(|e| {
            err(
                io::ErrorKind::InvalidData,
                format!("{path}: log header is not valid: {e}"),
            )
        })?;
        let mut r = LogReader {
            file,
            path: path.to_string(),
            header,
            frames: Vec::new(),
            issues: Vec::new(),
            file_len,
            cut_ticks: None,
        };
        r.index(format::PREAMBLE_LEN as u64 + hlen as u64)?;
        r.cut_ticks = r.find_cut();
        Ok(r)
    }

    fn index(&mut self, mut off: u64) -> io::Result<()> {
        let mut hb = [0u8; format::FRAME_HEADER_LEN];
        while off < self.file_len {
            if off + format::FRAME_HEADER_LEN as u64 > self.file_len {
                self.issues.push(ReadIssue::Truncated { offset: off });
                return Ok(());
            }
            self.file.read_exact_at(&mut hb, off)?;
            match FrameHeader::decode(&hb) {
                Some(h) => {
                    let end = off + format::FRAME_HEADER_LEN as u64 + h.comp_len as u64;
                    if end > self.file_len {
                        self.issues.push(ReadIssue::Truncated { offset: off });
                        return Ok(());
                    }
                    self.frames.push(FrameInfo { offset: off, h });
                    off = end;
                }
                None => {
                    let resumed = self.resync(off + 1)?;
                    self.issues.push(ReadIssue::CorruptHeader {
                        offset: off,
                        resumed_at: resumed,
                    });
                    match resumed {
                        Some(r) => off = r,
                        None => return Ok(()),
                    }
                }
            }
        }
        Ok(())
    }

    /// The offset of the next valid frame header at or after `from`.
    fn resync(&self, mut from: u64) -> io::Result<Option<u64>> {
        let magic = format::FRAME_MAGIC.to_le_bytes();
        let mut chunk = vec![0u8; 1 << 20];
        while from + format::FRAME_HEADER_LEN as u64 <= self.file_len {
            let n = ((self.file_len - from) as usize).min(chunk.len());
            self.file.read_exact_at(&mut chunk[..n], from)?;
            for i in 0..n.saturating_sub(3) {
                if chunk[i..i + 4] == magic {
                    let at = from + i as u64;
                    let mut hb = [0u8; format::FRAME_HEADER_LEN];
                    if at + format::FRAME_HEADER_LEN as u64 <= self.file_len {
                        self.file.read_exact_at(&mut hb, at)?;
                        if FrameHeader::decode(&hb).is_some() {
                            return Ok(Some(at));
                        }
                    }
                }
            }
            if n < chunk.len() {
                break;
            }
            from += (n - 3) as u64;
        }
        Ok(None)
    }

    /// The End record's cut, read from the process stream's last frame.
    fn find_cut(&self) -> Option<u64> {
        let fi = self.frames.iter().rev().find(|f| f.h.stream == 0)?;
        let (mut comp, mut dctx, mut data) = (Vec::new(), None, Vec::new());
        self.read_frame(fi, &mut comp, &mut dctx, &mut data).ok()?;
        let mut st = DecodeState::new(fi.h.first_ticks);
        let mut cut = None;
        while let Ok(Some(rec)) = st.next_record(&data) {
            if rec.op == Op::End && rec.args.value != 0 {
                cut = Some(rec.args.value);
            }
        }
        cut
    }

    /// Total records the index promises (before decoding).
    pub fn record_count(&self) -> u64 {
        self.frames.iter().map(|f| f.h.n_records as u64).sum()
    }

    /// Compressed bytes of all indexed frames.
    pub fn compressed_bytes(&self) -> u64 {
        self.frames
            .iter()
            .map(|f| f.h.comp_len as u64 + format::FRAME_HEADER_LEN as u64)
            .sum()
    }

    /// Every record of every stream, merged in time order.
    pub fn events(&self) -> Events<'_> {
        Events::new(self)
    }

    /// Reads and decompresses one frame's records into `out`; `comp` and `dctx` are reused
    /// across frames so that reading allocates nothing per frame once warm.
    fn read_frame(
        &self,
        fi: &FrameInfo,
        comp: &mut Vec<u8>,
        dctx: &mut Option<zstd::bulk::Decompressor<'static>>,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        comp.clear();
        comp.resize(fi.h.comp_len as usize, 0);
        self.file
            .read_exact_at(comp, fi.offset + format::FRAME_HEADER_LEN as u64)
            .map_err(|e| e.to_string())?;
        if dctx.is_none() {
            *dctx = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?);
        }
        let d = dctx.as_mut().expect("decompressor");
        // Decompresses into the Vec's capacity (no zero-filling), at most raw_len bytes: a
        // frame claiming more is rejected by zstd, one producing less by the check below.
        out.clear();
        out.reserve(fi.h.raw_len as usize);
        let n = d
            .decompress_to_buffer(comp, out)
            .map_err(|e| format!("zstd: {e}"))?;
        if n != fi.h.raw_len as usize {
            return Err(format!(
                "decompressed to {n} bytes, header says {}",
                fi.h.raw_len
            ));
        }
        Ok(())
    }
}

/// One thread's stream while the merge reads it.
struct Cursor {
    stream: u32,
    tid: u32,
    /// Indices into `LogReader::frames` still to read, in file order.
    frames: std::vec::IntoIter<usize>,
    data: Vec<u8>,
    state: DecodeState,
    cur_offset: u64,
    /// The stream's next record (valid while the cursor is in the heap).
    next: RawRecord,
}

/// Merge order, packed into one integer so that the heap compares cheaply: ticks (high 64
/// bits), then a free before anything else (its block may be the one the other record
/// returns), then the stream; the low 31 bits are the cursor's slot.
type Key = u128;
const SLOT_BITS: u32 = 31;

#[inline(always)]
fn key(r: &RawRecord, stream: u32, slot: u32) -> Key {
    let class: u64 = if r.op == Op::Free { 0 } else { 1 };
    let low = (class << 63) | ((stream as u64) << SLOT_BITS) | slot as u64;
    ((r.ticks as u128) << 64) | low as u128
}

#[inline(always)]
fn key_ticks(k: Key) -> u64 {
    (k >> 64) as u64
}

#[inline(always)]
fn key_slot(k: Key) -> u32 {
    (k as u32) & ((1 << SLOT_BITS) - 1)
}

/// What decoding needs besides the cursor being advanced.
struct Src<'a> {
    r: &'a LogReader,
    comp: Vec<u8>,
    dctx: Option<zstd::bulk::Decompressor<'static>>,
}

/// The merged iterator returned by [`LogReader::events`].
pub struct Events<'a> {
    src: Src<'a>,
    /// Streams not started yet: (first ticks, stream).
    pending: BinaryHeap<Reverse<(u64, u32)>>,
    waiting: HashMap<u32, Vec<usize>>,
    /// The smallest key of all started streams with a record in hand, held out of the
    /// heap so that a stream producing a run of the smallest keys costs no heap work.
    top: Option<Key>,
    /// One entry per other started stream that has a record in hand; every key here is
    /// larger than `top` (keys are unique: they end in the slot).
    active: BinaryHeap<Reverse<Key>>,
    cursors: Vec<Cursor>,
    /// Slots of finished cursors, reused (with their buffers) by later streams.
    free_slots: Vec<u32>,
    /// Ticks are nanoseconds already (ticks_per_sec == 1e9 and ref_ticks == 0).
    ticks_are_ns: bool,
    /// Problems met while decoding frames.
    pub issues: Vec<ReadIssue>,
    /// Compressed bytes of the frames decoded so far (for progress).
    pub bytes_read: u64,
    /// True once the process stream's End record was read.
    pub clean_end: bool,
    pub decoded: u64,
    /// Calls left out because they were stamped after the final flush's cut.
    pub after_cut: u64,
}

/// Loads the cursor's next record, moving to its next frame when needed. False at the end
/// of the stream.
#[inline(always)]
fn advance(
    src: &mut Src<'_>,
    issues: &mut Vec<ReadIssue>,
    bytes_read: &mut u64,
    c: &mut Cursor,
) -> bool {
    // The common case (another record in the frame in hand) stays inline; the end of a
    // frame, a malformed record and the end of the stream go out of line.
    match c.state.next_record(&c.data) {
        Ok(Some(rec)) => {
            c.next = rec;
            true
        }
        first => advance_slow(first, src, issues, bytes_read, c),
    }
}

/// [`advance`] once the frame in hand gave `first` (its end or a malformed record)
/// instead of a record: reports, moves to the next frame and goes on from there.
#[cold]
#[inline(never)]
fn advance_slow(
    first: Result<Option<RawRecord>, usize>,
    src: &mut Src<'_>,
    issues: &mut Vec<ReadIssue>,
    bytes_read: &mut u64,
    c: &mut Cursor,
) -> bool {
    let mut got = Some(first);
    loop {
        let res = match got.take() {
            Some(r) => r,
            None => c.state.next_record(&c.data),
        };
        match res {
            Ok(Some(rec)) => {
                c.next = rec;
                return true;
            }
            Ok(None) => {}
            Err(at) => issues.push(ReadIssue::CorruptFrame {
                offset: c.cur_offset,
                reason: format!("malformed record at byte {at} of its records"),
            }),
        }
        let Some(fi) = c.frames.next() else {
            return false;
        };
        let info = src.r.frames[fi];
        c.cur_offset = info.offset;
        *bytes_read += info.h.comp_len as u64 + format::FRAME_HEADER_LEN as u64;
        let r = src.r;
        match r.read_frame(&info, &mut src.comp, &mut src.dctx, &mut c.data) {
            Ok(()) => c.state = DecodeState::new(info.h.first_ticks),
            Err(reason) => {
                issues.push(ReadIssue::CorruptFrame {
                    offset: info.offset,
                    reason,
                });
                c.data.clear();
                c.state = DecodeState::new(info.h.first_ticks);
            }
        }
    }
}

impl<'a> Events<'a> {
    fn new(r: &'a LogReader) -> Self {
        let mut waiting: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, f) in r.frames.iter().enumerate() {
            waiting.entry(f.h.stream).or_default().push(i);
        }
        let pending = waiting
            .iter()
            .map(|(s, v)| Reverse((r.frames[v[0]].h.first_ticks, *s)))
            .collect();
        let h = &r.header;
        Events {
            src: Src {
                r,
                comp: Vec::new(),
                dctx: None,
            },
            pending,
            waiting,
            top: None,
            active: BinaryHeap::new(),
            cursors: Vec::new(),
            free_slots: Vec::new(),
            ticks_are_ns: h.ticks_per_sec == 1e9 && h.ref_ticks == 0,
            issues: Vec::new(),
            bytes_read: 0,
            clean_end: false,
            decoded: 0,
            after_cut: 0,
        }
    }

    fn activate(&mut self, stream: u32) {
        let frames = self.waiting.remove(&stream).unwrap_or_default();
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.cursors.push(Cursor {
                    stream,
                    tid: 0,
                    frames: Vec::new().into_iter(),
                    data: Vec::new(),
                    state: DecodeState::default(),
                    cur_offset: 0,
                    next: RawRecord::default(),
                });
                (self.cursors.len() - 1) as u32
            }
        };
        let c = &mut self.cursors[slot as usize];
        c.stream = stream;
        c.tid = 0;
        c.frames = frames.into_iter();
        c.data.clear();
        c.state = DecodeState::default();
        c.cur_offset = 0;
        if advance(&mut self.src, &mut self.issues, &mut self.bytes_read, c) {
            let k = key(&c.next, stream, slot);
            match self.top {
                None => self.top = Some(k),
                Some(t) if k < t => {
                    self.active.push(Reverse(t));
                    self.top = Some(k);
                }
                Some(_) => self.active.push(Reverse(k)),
            }
        } else {
            self.free_slots.push(slot);
        }
    }
}

impl Iterator for Events<'_> {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(ev) = self.next_record()? {
                return Some(ev);
            }
        }
    }
}

impl Events<'_> {
    /// The next record in merged order: Some(None) for one left out after the cut.
    #[inline]
    fn next_record(&mut self) -> Option<Option<Event>> {
        // Bring in every stream that starts no later than the earliest record in hand.
        loop {
            let head = self.top.map(key_ticks);
            match self.pending.peek().copied() {
                Some(Reverse((first, s))) if head.is_none_or(|h| first <= h) => {
                    self.pending.pop();
                    self.activate(s);
                }
                _ if head.is_none() => return None,
                _ => break,
            }
        }
        let (ev, skip) = {
            let top = self.top?;
            let slot = key_slot(top);
            let c = &mut self.cursors[slot as usize];
            let rec = c.next;
            let h = &self.src.r.header;
            let skip =
                rec.op.is_alloc_family() && self.src.r.cut_ticks.is_some_and(|cut| rec.ticks > cut);
            if rec.op == Op::ThreadStart {
                c.tid = rec.args.value as u32;
            }
            if rec.op == Op::End {
                self.clean_end = true;
            }
            let ts_ns = |t: u64| {
                if self.ticks_are_ns {
                    t
                } else {
                    h.ticks_to_ns(t)
                }
            };
            let ev = Event {
                ts_ns: ts_ns(rec.ticks),
                tid: c.tid,
                stream: c.stream,
                op: rec.op,
                ptr: rec.args.ptr,
                size: rec.args.size,
                count: rec.args.count,
                align: rec.args.align,
                old: rec.args.old,
                value: if rec.op == Op::End && rec.args.value != 0 {
                    ts_ns(rec.args.value)
                } else {
                    rec.args.value
                },
                backend_ns: rec.backend_ticks.map(|t| h.dur_ns(t)),
            };
            if advance(&mut self.src, &mut self.issues, &mut self.bytes_read, c) {
                let k = key(&c.next, c.stream, slot);
                // While this stream still holds the smallest key it stays out of the heap;
                // otherwise it trades places with the heap's smallest (one sift-down).
                if let Some(mut m) = self.active.peek_mut() {
                    if m.0 < k {
                        self.top = Some(m.0);
                        m.0 = k;
                    } else {
                        drop(m);
                        self.top = Some(k);
                    }
                } else {
                    self.top = Some(k);
                }
            } else {
                self.top = self.active.pop().map(|Reverse(k)| k);
                self.free_slots.push(slot);
            }
            (ev, skip)
        };
        if skip {
            self.after_cut += 1;
            return Some(None);
        }
        self.decoded += 1;
        Some(Some(ev))
    }
}
