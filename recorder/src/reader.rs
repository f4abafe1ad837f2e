//! Reading a log back: the header, an index of frame headers (one pass that skips the
//! compressed bodies), then every thread's records merged in time order.
//!
//! Memory is bounded by the number of threads whose streams overlap in time (one
//! decompressed frame and a batch of decoded records each) plus the frame index, never by
//! the number of events. The file must be seekable (frames of one thread are read where
//! they lie). Frames are decompressed straight from a read-only mapping of the file, which
//! is released behind the first frame still to be read and populated a couple of MiB ahead
//! of it (with pread where mapping fails).
//!
//! Speed: each stream is decoded a batch at a time in a tight loop (allocation records, nearly
//! every record, through a fast path), and the streams are merged by a loser tree whose keys
//! are single integers, so that picking the next event costs log2(streams) min/max
//! operations and no unpredictable branch. [`Events::drive`] hands each event to a consumer
//! inside the merge loop; [`Events::fill`] (a chunk at a time) and the `Iterator` are built
//! on it.
use crate::buffer::DecodeState;
use crate::ending::Ending;
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

/// The log file mapped read-only, so that frame bodies are decompressed from the page cache
/// without a copy into a buffer first. (A log is only ever appended to and rewritten in
/// place, never truncated, while a reader may have it mapped.)
struct Mapped {
    ptr: *const u8,
    len: usize,
}

// SAFETY: a read-only mapping, shared like a &[u8].
unsafe impl Send for Mapped {}
unsafe impl Sync for Mapped {}

impl Mapped {
    fn of(file: &File, len: u64) -> Option<Mapped> {
        use std::os::fd::AsRawFd;
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        // SAFETY: a new private read-only mapping of an open file; checked for failure.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0)
        };
        (p != libc::MAP_FAILED).then_some(Mapped { ptr: p as *const u8, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping holds len readable bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Unmaps the whole pages of bytes `from..to` from this process (they stay in the page
    /// cache, and reading them again maps them again), so that the reader's resident memory
    /// does not grow with the log.
    fn release(&self, from: u64, to: u64) {
        let page = page_size();
        let (start, end) = (from / page * page, to.min(self.len as u64) / page * page);
        // MADV_DONTNEED on a private read-only file mapping only drops the process's page
        // table entries.
        self.advise(start, end, libc::MADV_DONTNEED);
    }

    /// Maps the pages of bytes `from..to` in one call (MADV_POPULATE_READ, Linux 5.14 and
    /// later; where it fails, the pages are faulted in as they are read, as before).
    fn populate(&self, from: u64, to: u64) {
        let start = from / page_size() * page_size();
        self.advise(start, to.min(self.len as u64), libc::MADV_POPULATE_READ);
    }

    /// Gives the kernel `advice` on bytes `start..end` of the mapping (`start` on a page).
    fn advise(&self, start: u64, end: u64, advice: libc::c_int) {
        if start < end {
            // SAFETY: a range inside the mapping (end <= len); the advice given here only
            // drops or makes page table entries of a read-only file mapping.
            unsafe {
                libc::madvise(
                    self.ptr.add(start as usize) as *mut libc::c_void,
                    (end - start) as usize,
                    advice,
                )
            };
        }
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64
}

/// How far ahead of the first frame still to be read the mapping is populated.
const POPULATE_AHEAD: u64 = 2 << 20;

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: mapped in `of` with this length.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

pub struct LogReader {
    file: File,
    /// The file's first `file_len` bytes, where mmap works (else frames are read with pread).
    map: Option<Mapped>,
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
    /// How the process ended, as far as the log says.
    pub ending: Ending,
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
        if !(format::OLDEST_VERSION..=format::VERSION).contains(&version) {
            return Err(err(
                io::ErrorKind::InvalidData,
                format!(
                    "{path}: log format version {version}; this build of shimlog reads versions {} to {}",
                    format::OLDEST_VERSION,
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
            map: Mapped::of(&file, file_len),
            file,
            path: path.to_string(),
            header,
            frames: Vec::new(),
            issues: Vec::new(),
            file_len,
            cut_ticks: None,
            ending: Ending::NoEnd,
        };
        r.index(format::PREAMBLE_LEN as u64 + hlen as u64)?;
        (r.cut_ticks, r.ending) = r.find_end();
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

    /// The End record's cut, and how the process ended, from the process stream's last two
    /// frames (recovery appends one after what the process wrote).
    fn find_end(&self) -> (Option<u64>, Ending) {
        let tail: Vec<&FrameInfo> = self.frames.iter().rev().filter(|f| f.h.stream == 0).take(2).collect();
        let (mut comp, mut dctx, mut data) = (Vec::new(), None, Vec::new());
        let mut recs = Vec::new();
        for fi in tail.into_iter().rev() {
            let read = self.read_frame(fi, &mut comp, &mut dctx, &mut data);
            if let Some(m) = &self.map {
                m.release(fi.offset, fi.offset + format::FRAME_HEADER_LEN as u64 + fi.h.comp_len as u64);
            }
            if read.is_err() {
                continue;
            }
            let mut st = DecodeState::new(fi.h.first_ticks);
            while let Ok(Some(rec)) = st.next_record(&data) {
                if matches!(rec.op, Op::End | Op::Exit | Op::Recovered) {
                    recs.push(rec);
                }
            }
        }
        let cut = recs.iter().rev().find(|r| r.op == Op::End && r.args.value != 0).map(|r| r.args.value);
        (cut, Ending::from_records(&recs))
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

    /// Decompresses every frame in file order and hands each to `f` with its records
    /// (undecoded), or with why it could not be read: the reader's first stage alone, with
    /// no decoding and no merge (the `zstdspeed` example times it).
    pub fn for_each_frame(&self, mut f: impl FnMut(&FrameInfo, Result<&[u8], String>)) {
        let (mut comp, mut dctx, mut out) = (Vec::new(), None, Vec::new());
        for fi in &self.frames {
            let read = self.read_frame(fi, &mut comp, &mut dctx, &mut out);
            f(fi, read.map(|()| &out[..]));
        }
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
        let clen = fi.h.comp_len as usize;
        let at = fi.offset + format::FRAME_HEADER_LEN as u64;
        let body: &[u8] = match &self.map {
            // The index only holds frames that end inside the file.
            Some(m) => &m.bytes()[at as usize..at as usize + clen],
            None => {
                // Grown (and zeroed) only when a frame is larger than any before: the read
                // overwrites what it uses.
                if comp.len() < clen {
                    comp.resize(clen, 0);
                }
                let comp = &mut comp[..clen];
                self.file.read_exact_at(comp, at).map_err(|e| e.to_string())?;
                comp
            }
        };
        if dctx.is_none() {
            *dctx = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?);
        }
        let d = dctx.as_mut().expect("decompressor");
        // Decompresses into the Vec's capacity (no zero-filling), at most raw_len bytes: a
        // frame claiming more is rejected by zstd, one producing less by the check below.
        out.clear();
        out.reserve(fi.h.raw_len as usize);
        let n = d
            .decompress_to_buffer(body, out)
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

/// Records a cursor decodes at a time: small enough that the batches of many streams stay
/// in cache, large enough that decoding runs as a tight loop.
const BATCH: usize = 128;
const _: () = assert!(BATCH.is_power_of_two());

/// One thread's stream while the merge reads it.
struct Cursor {
    stream: u32,
    tid: u32,
    /// Indices into `LogReader::frames` still to read, in file order.
    frames: std::vec::IntoIter<usize>,
    data: Vec<u8>,
    state: DecodeState,
    cur_offset: u64,
    /// The stream's decoded records, `len` of them, not yet handed out from `pos` on,
    /// with their keys.
    batch: Box<[Event; BATCH]>,
    keys: Box<[Key; BATCH]>,
    len: usize,
    pos: usize,
}

/// Merge order, packed into one integer so that comparing two is one instruction: ticks
/// since the log's earliest frame (high bits), then a free before anything else (its block
/// may be the one the other record returns), then the cursor's slot (the low `Order::slot_bits`
/// bits). `EMPTY` (every bit set) marks a slot with no stream.
type Key = u64;
const EMPTY: Key = Key::MAX;
/// In [`Events::ahead`]: the slot's batch has no record after the one in the tournament.
/// (`Order::max_rel` keeps every record's key at most u64::MAX - 4.)
const REFILL: Key = Key::MAX - 1;

/// How keys are packed for one log: enough slot bits for every stream in it, the rest for
/// ticks. Ticks beyond what fits (a log spanning more than ~2^(63 - slot_bits) ticks, over a
/// year for a log of a thousand threads at the shim's clock rate) or before the earliest
/// frame (only a corrupt log) are clamped, and such records merge at the clamp.
#[derive(Clone, Copy)]
struct Order {
    base: u64,
    slot_bits: u32,
    max_rel: u64,
}

impl Order {
    fn new(base: u64, streams: usize) -> Order {
        let slot_bits = (usize::BITS - streams.max(1).leading_zeros()).max(1);
        Order {
            base,
            slot_bits,
            max_rel: (1u64 << (63 - slot_bits)) - 2,
        }
    }

    #[inline(always)]
    fn key(&self, ticks: u64, op: Op, slot: u32) -> Key {
        let rel = ticks.saturating_sub(self.base).min(self.max_rel);
        let class = !op.is_free() as u64;
        (rel << (self.slot_bits + 1)) | (class << self.slot_bits) | slot as u64
    }

    /// The smallest key a record of `ticks` or later can have (EMPTY for u64::MAX: no
    /// stream waiting to start).
    #[inline(always)]
    fn start_key(&self, ticks: u64) -> Key {
        if ticks == u64::MAX {
            return EMPTY;
        }
        ticks.saturating_sub(self.base).min(self.max_rel) << (self.slot_bits + 1)
    }

    #[inline(always)]
    fn slot(&self, k: Key) -> u32 {
        (k & ((1u64 << self.slot_bits) - 1)) as u32
    }
}

/// What decoding needs besides the cursor being filled.
struct Src<'a> {
    r: &'a LogReader,
    comp: Vec<u8>,
    dctx: Option<zstd::bulk::Decompressor<'static>>,
    /// Ticks are nanoseconds already (ticks_per_sec == 1e9 and ref_ticks == 0).
    ticks_are_ns: bool,
    scale: format::NsScale,
    order: Order,
    /// Decode with PEXT (the CPU has a fast one).
    pext: bool,
    /// Run the copies compiled for x86-64-v3 (the CPU has its features).
    v3: bool,
    /// Problems met while decoding frames.
    issues: Vec<ReadIssue>,
    /// Which frames have been read, the first not yet read, and how far the mapping has
    /// been released (see [`Src::sweep`]).
    done: Vec<bool>,
    low: usize,
    released: u64,
    /// How far the mapping has been populated ahead (see [`Src::sweep`]).
    populated: u64,
    bytes_read: u64,
    clean_end: bool,
    after_cut: u64,
}

impl Src<'_> {
    #[inline(always)]
    fn ns(&self, ticks: u64) -> u64 {
        if self.ticks_are_ns {
            ticks
        } else {
            self.scale.ns(ticks)
        }
    }

    /// The event of `rec`, its `ts_ns` still in ticks (see `refill_with`).
    #[inline(always)]
    fn raw_event(&self, rec: &crate::buffer::RawRecord, tid: u32, stream: u32, value: u64) -> Event {
        // No op has both a count and an alignment, and records have neither.
        let arg = rec.args.count | rec.args.align | value;
        let backend = match rec.backend_ticks {
            Some(t) => self.scale.dur(t).min(Event::NOT_TIMED - 1),
            None => Event::NOT_TIMED,
        };
        Event {
            ts_ns: rec.ticks,
            ptr: rec.args.ptr,
            size: rec.args.size,
            old: rec.args.old,
            arg,
            backend,
            tid,
            stream,
            op: rec.op,
        }
    }

    /// Refills `c.batch` with the stream's next records (up to BATCH), moving to its next
    /// frames as needed. False at the end of the stream.
    #[inline]
    fn refill(&mut self, c: &mut Cursor, slot: u32) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.v3 {
            // SAFETY: v3 is set only when the CPU has every feature refill_v3 is compiled
            // for (cpu::has_v3), pext only when its PEXT is fast as well.
            return unsafe {
                if self.pext {
                    self.refill_v3::<true>(c, slot)
                } else {
                    self.refill_v3::<false>(c, slot)
                }
            };
        }
        self.refill_with::<false>(c, slot)
    }

    /// [`Src::refill`] compiled for x86-64-v3 (see [`crate::cpu`]); with `PEXT`, varints pack
    /// with PEXT.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt,fma,movbe")]
    unsafe fn refill_v3<const PEXT: bool>(&mut self, c: &mut Cursor, slot: u32) -> bool {
        self.refill_with::<PEXT>(c, slot)
    }

    #[inline(always)]
    fn refill_with<const PEXT: bool>(&mut self, c: &mut Cursor, slot: u32) -> bool {
        c.pos = 0;
        let cut = self.r.cut_ticks.unwrap_or(u64::MAX);
        loop {
            // The decoder's state is copied out and back, so that the loop keeps it in
            // registers: stored in the cursor, it went through memory between records (the
            // compiler cannot tell that the batch's stores leave it alone).
            let (data, batch, keys) = (&c.data[..], &mut *c.batch, &mut *c.keys);
            let mut state = c.state;
            let st = &mut state;
            let (stream, mut tid, mut len) = (c.stream, c.tid, 0);
            while len < BATCH {
                // Nearly every record takes the fast path: an allocation record, only
                // stamped after the cut or not.
                if let Some(rec) = st.next_common::<PEXT>(data) {
                    if rec.ticks > cut {
                        self.after_cut += 1;
                        continue;
                    }
                    batch[len] = self.raw_event(&rec, tid, stream, 0);
                    len += 1;
                    continue;
                }
                let rec = match st.next_record(data) {
                    Ok(Some(rec)) => rec,
                    Ok(None) => break,
                    Err(at) => {
                        self.issues.push(ReadIssue::CorruptFrame {
                            offset: c.cur_offset,
                            reason: format!("malformed record at byte {at} of its records"),
                        });
                        *st = DecodeState::new(0);
                        c.data.clear();
                        break;
                    }
                };
                if rec.op.is_alloc_family() && rec.ticks > cut {
                    self.after_cut += 1;
                    continue;
                }
                if rec.op == Op::ThreadStart {
                    tid = rec.args.value as u32;
                }
                let mut value = rec.args.value;
                if rec.op == Op::End {
                    self.clean_end = true;
                    if value != 0 {
                        value = self.ns(value);
                    }
                }
                batch[len] = self.raw_event(&rec, tid, stream, value);
                len += 1;
            }
            // Keys and nanoseconds in a pass of their own, with few values live: in the
            // decoding loop they kept the order's and the clock's constants on the stack.
            let order = self.order;
            for (e, k) in batch[..len].iter_mut().zip(keys.iter_mut()) {
                *k = order.key(e.ts_ns, e.op, slot);
            }
            if !self.ticks_are_ns {
                let scale = self.scale;
                for e in &mut batch[..len] {
                    e.ts_ns = scale.ns(e.ts_ns);
                }
            }
            c.state = state;
            c.tid = tid;
            c.len = len;
            if c.len > 0 {
                return true;
            }
            // The frame in hand is used up: on to the stream's next one.
            let Some(fi) = c.frames.next() else {
                return false;
            };
            let info = self.r.frames[fi];
            c.cur_offset = info.offset;
            self.bytes_read += info.h.comp_len as u64 + format::FRAME_HEADER_LEN as u64;
            let r = self.r;
            if let Err(reason) = r.read_frame(&info, &mut self.comp, &mut self.dctx, &mut c.data) {
                self.issues.push(ReadIssue::CorruptFrame {
                    offset: info.offset,
                    reason,
                });
                c.data.clear();
            }
            self.sweep(fi);
            c.state = DecodeState::new(info.h.first_ticks);
        }
    }

    /// Frame `fi` has been read: the mapping is released up to the first frame still to be
    /// read, a MiB or more at a time. (Streams are read in time order, which is close to file
    /// order, so what stays mapped is about a frame per thread.)
    fn sweep(&mut self, fi: usize) {
        let Some(m) = &self.r.map else {
            return;
        };
        self.done[fi] = true;
        while self.done.get(self.low) == Some(&true) {
            self.low += 1;
        }
        let upto = self.r.frames.get(self.low).map_or(self.r.file_len, |f| f.offset);
        if upto >= self.released + (1 << 20) || self.low == self.done.len() {
            m.release(self.released, upto);
            self.released = upto;
        }
        // The page-table entries of the next few MiB in one call, rather than a page fault
        // per 64 KiB (the kernel's fault-around) as the decompressor first reads them.
        let ahead = (upto + POPULATE_AHEAD).min(m.len as u64);
        if ahead >= self.populated + (1 << 20) || (ahead == m.len as u64 && ahead > self.populated) {
            m.populate(self.populated.max(upto), ahead);
            self.populated = ahead;
        }
    }
}

impl Cursor {
    /// The key of the record after the one at `pos`, or REFILL when the batch has none.
    #[inline(always)]
    fn after(&self) -> Key {
        if self.pos + 1 < self.len {
            self.keys[(self.pos + 1) & (BATCH - 1)]
        } else {
            REFILL
        }
    }
}

/// The key of the cursor's next record after the one just handed out, refilling its batch
/// when it is used up; EMPTY (and the slot freed) at the end of its stream.
#[inline(always)]
fn next_key(src: &mut Src<'_>, c: &mut Cursor, free_slots: &mut Vec<u32>, slot: u32) -> Key {
    if c.pos < c.len {
        c.keys[c.pos & (BATCH - 1)]
    } else {
        next_batch(src, c, free_slots, slot)
    }
}

/// [`next_key`] once the batch is used up: out of line, so that the merge loop stays small
/// enough to keep its state in registers.
#[inline(never)]
fn next_batch(src: &mut Src<'_>, c: &mut Cursor, free_slots: &mut Vec<u32>, slot: u32) -> Key {
    if src.refill(c, slot) {
        c.keys[0]
    } else {
        free_slots.push(slot);
        EMPTY
    }
}

/// What [`Events::drive`] hands each event to, in merged order.
pub trait Sink {
    fn take(&mut self, e: &Event);
}

/// [`Events::fill`]'s sink.
struct Fill<'o> {
    out: &'o mut [Event],
    n: usize,
}

impl Sink for Fill<'_> {
    #[inline(always)]
    fn take(&mut self, e: &Event) {
        self.out[self.n] = *e;
        self.n += 1;
    }
}

/// The merged iterator returned by [`LogReader::events`]: a loser tree over the started
/// streams, each decoded a batch at a time.
pub struct Events<'a> {
    src: Src<'a>,
    /// Streams not started yet: (first ticks, stream).
    pending: BinaryHeap<Reverse<(u64, u32)>>,
    waiting: HashMap<u32, Vec<usize>>,
    cursors: Vec<Cursor>,
    /// The tournament: `tree[0]` is the smallest key of all slots, `tree[n]` for n in
    /// 1..cap the loser of the match at node n (its children are 2n and 2n + 1); slot s is
    /// leaf cap + s. Replaying a slot's new key after it won costs about log2(cap)
    /// comparisons and no unpredictable branch.
    tree: Vec<Key>,
    /// The current key of each slot (EMPTY for an unused one).
    leaves: Vec<Key>,
    /// The key of each slot's record after its current one, or REFILL: read when the slot
    /// wins, so that the next key is one load from the slot number (through the cursor, it
    /// was three in a row, on the chain from one winner to the next).
    ahead: Vec<Key>,
    /// Slots of finished cursors, reused (with their buffers) by later streams.
    free_slots: Vec<u32>,
    /// Merged events handed out one at a time by `next`: `chunk[chunk_pos..chunk_len]`.
    chunk: Vec<Event>,
    chunk_pos: usize,
    chunk_len: usize,
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
                ticks_are_ns: h.ticks_per_sec == 1e9 && h.ref_ticks == 0,
                scale: format::NsScale::of(h),
                pext: crate::cpu::has_fast_pext(),
                v3: crate::cpu::has_v3(),
                order: Order::new(
                    r.frames.iter().map(|f| f.h.first_ticks).min().unwrap_or(0),
                    waiting.len(),
                ),
                issues: Vec::new(),
                done: vec![false; r.frames.len()],
                low: 0,
                released: 0,
                populated: 0,
                bytes_read: 0,
                clean_end: false,
                after_cut: 0,
            },
            pending,
            waiting,
            cursors: Vec::new(),
            tree: vec![EMPTY; 1],
            leaves: vec![EMPTY; 1],
            ahead: vec![REFILL; 1],
            free_slots: Vec::new(),
            chunk: Vec::new(),
            chunk_pos: 0,
            chunk_len: 0,
            issues: Vec::new(),
            bytes_read: 0,
            clean_end: false,
            decoded: 0,
            after_cut: 0,
        }
    }

    /// Rebuilds the tournament from `leaves` (when a stream starts).
    fn rebuild(&mut self) {
        let cap = self.leaves.len();
        // winners[n]: the winner of the subtree at node n (leaves at cap..2cap).
        let mut win = vec![EMPTY; 2 * cap];
        win[cap..].copy_from_slice(&self.leaves);
        self.tree.clear();
        self.tree.resize(cap, EMPTY);
        for n in (1..cap).rev() {
            let (a, b) = (win[2 * n], win[2 * n + 1]);
            win[n] = a.min(b);
            self.tree[n] = a.max(b);
        }
        self.tree[0] = win[1];
    }

    /// Starts a stream: a slot (growing the tree when all are taken), its first batch,
    /// and the tournament rebuilt with it.
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
                    batch: Box::new([Event::default(); BATCH]),
                    keys: Box::new([EMPTY; BATCH]),
                    len: 0,
                    pos: 0,
                });
                let s = self.cursors.len() - 1;
                // As many leaves as slots, a power of two or not: node n's children are
                // 2n and 2n + 1 for any width, and 9 streams (8 threads and the
                // process's) take 3 or 4 matches to replay rather than 4 in 16 leaves.
                if s >= self.leaves.len() {
                    self.leaves.resize(s + 1, EMPTY);
                    self.ahead.resize(s + 1, REFILL);
                }
                s as u32
            }
        };
        let c = &mut self.cursors[slot as usize];
        c.stream = stream;
        c.tid = 0;
        c.frames = frames.into_iter();
        c.data.clear();
        c.state = DecodeState::default();
        c.cur_offset = 0;
        if self.src.refill(c, slot) {
            self.leaves[slot as usize] = c.keys[0];
            self.ahead[slot as usize] = c.after();
        } else {
            self.leaves[slot as usize] = EMPTY;
            self.free_slots.push(slot);
        }
        self.rebuild();
    }

    /// Fills `out` with the next events in merged order; returns how many it wrote (fewer
    /// than `out.len()` only at the end of the log). Cheaper than calling `next` for each.
    pub fn fill(&mut self, out: &mut [Event]) -> usize {
        let max = out.len();
        self.drive(max, &mut Fill { out, n: 0 })
    }

    /// Hands the next `max` events in merged order to `f`, one at a time; returns how many
    /// it handed (fewer than `max` only at the end of the log). `f` runs inside the merge
    /// loop, event by event, rather than after it a chunk at a time as with
    /// [`Events::fill`], so that the out-of-order core can overlap a consumer's work per
    /// event (the analysis) with the merge's chain of dependent loads from one winner to
    /// the next. On x86-64 CPUs with the x86-64-v3 features, the loop and `f` with it (an
    /// `#[inline(always)]` [`Sink::take`]) are compiled for them.
    #[inline]
    pub fn drive<F: Sink>(&mut self, max: usize, f: &mut F) -> usize {
        #[cfg(target_arch = "x86_64")]
        if self.src.v3 {
            // SAFETY: the CPU has every feature drive_v3 is compiled for (cpu::has_v3).
            return unsafe { self.drive_v3(max, f) };
        }
        self.drive_with(max, f)
    }

    /// [`Events::drive`] compiled for x86-64-v3 (see [`crate::cpu`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt,fma,movbe")]
    unsafe fn drive_v3<F: Sink>(&mut self, max: usize, f: &mut F) -> usize {
        self.drive_with(max, f)
    }

    #[inline(always)]
    fn drive_with<F: Sink>(&mut self, max: usize, f: &mut F) -> usize {
        let mut n = 0;
        let order = self.src.order;
        loop {
            let next_start = self.pending.peek().map_or(u64::MAX, |Reverse((t, _))| *t);
            // Every key from `start` up is EMPTY or comes after a stream still to start, so
            // one comparison tells the common case (a record to hand out) from the others.
            let start = order.start_key(next_start);
            n = self.merge(max, n, start, f);
            if n == max || next_start == u64::MAX {
                break;
            }
            // Bring in every stream that starts no later than the earliest record in hand.
            let Reverse((_, s)) = self.pending.pop().expect("pending stream");
            self.activate(s);
        }
        self.decoded += n as u64;
        self.sync();
        n
    }

    /// Hands records to `f` while the earliest key in hand is below `start`, until `max`
    /// have been handed (counting the `n` before); returns the count. The tournament's
    /// arrays are held as pointers for the loop: through `self`, every store by `f` made the
    /// compiler load each array's address again.
    #[inline(always)]
    fn merge<F: Sink>(&mut self, max: usize, mut n: usize, start: Key, f: &mut F) -> usize {
        let order = self.src.order;
        let cap = self.leaves.len();
        // activate keeps these in step: one slot per cursor, the tree as wide as the leaves.
        assert!(self.tree.len() == cap && self.ahead.len() == cap && self.cursors.len() <= cap);
        let tree = self.tree.as_mut_ptr();
        let leaves = self.leaves.as_mut_ptr();
        let ahead = self.ahead.as_mut_ptr();
        let cursors = self.cursors.as_mut_ptr();
        // SAFETY (every access below): a slot comes from a key in the tree below `start`,
        // which is not EMPTY, so it is the slot of a live cursor: < cursors.len() <= cap;
        // tree nodes are 0 < node < cap. Nothing in the loop resizes these vectors (only
        // activate does, outside it).
        let replay = |slot: usize, k: Key| -> Key {
            unsafe {
                *leaves.add(slot) = k;
                let mut cur = k;
                let mut node = (cap + slot) >> 1;
                while node >= 1 {
                    let l = *tree.add(node);
                    // Which stream wins is data, not a pattern: min and max, not a branch.
                    *tree.add(node) = l.max(cur);
                    cur = l.min(cur);
                    node >>= 1;
                }
                *tree = cur;
                cur
            }
        };
        let mut top = unsafe { *tree };
        while n < max && top < start {
            let slot = order.slot(top) as usize;
            let c = unsafe { &mut *cursors.add(slot) };
            // pos < len <= BATCH, a power of two: the mask only spares a bounds check.
            f.take(&c.batch[c.pos & (BATCH - 1)]);
            n += 1;
            c.pos += 1;
            let mut k = unsafe { *ahead.add(slot) };
            if k == REFILL {
                k = next_key(&mut self.src, c, &mut self.free_slots, slot as u32);
            }
            unsafe { *ahead.add(slot) = c.after() };
            top = replay(slot, k);
            // Still the winner: its run goes out together, up to the next key of any other
            // stream and of any stream still to start, with one more replay at its end.
            if top == k && k < start && n < max {
                let mut second = EMPTY;
                let mut node = (cap + slot) >> 1;
                while node >= 1 {
                    second = second.min(unsafe { *tree.add(node) });
                    node >>= 1;
                }
                let bound = second.min(start);
                let lim = c.len.min(c.pos + (max - n));
                let mut end = c.pos;
                while end < lim && c.keys[end] < bound {
                    end += 1;
                }
                if end > c.pos {
                    for e in &c.batch[c.pos..end] {
                        f.take(e);
                    }
                    n += end - c.pos;
                    c.pos = end;
                    let k = next_key(&mut self.src, c, &mut self.free_slots, slot as u32);
                    unsafe { *ahead.add(slot) = c.after() };
                    top = replay(slot, k);
                }
            }
        }
        n
    }

    /// Copies the decoder's counters to the public fields.
    fn sync(&mut self) {
        if self.src.issues.len() > self.issues.len() {
            let new = self.src.issues[self.issues.len()..].to_vec();
            self.issues.extend(new);
        }
        self.bytes_read = self.src.bytes_read;
        self.clean_end = self.src.clean_end;
        self.after_cut = self.src.after_cut;
    }
}

/// Events `next` merges at a time.
const CHUNK: usize = 256;

impl Iterator for Events<'_> {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        if self.chunk_pos == self.chunk_len {
            let mut chunk = std::mem::take(&mut self.chunk);
            chunk.resize(CHUNK, Event::default());
            self.chunk_len = self.fill(&mut chunk);
            self.chunk = chunk;
            self.chunk_pos = 0;
            if self.chunk_len == 0 {
                return None;
            }
        }
        let e = self.chunk[self.chunk_pos];
        self.chunk_pos += 1;
        Some(e)
    }
}
