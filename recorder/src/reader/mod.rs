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

mod mapped;
mod merge;
mod pool;
mod stream;
use mapped::Mapped;
pub use merge::{Events, Sink};
pub use pool::Pool;

/// Something wrong with a log that the reader worked around.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadIssue {
    /// The file ends inside a frame starting at `offset`: everything before it was read.
    Truncated { offset: u64 },
    /// Bytes at `offset` are not a valid frame header; reading resumed at `resumed_at`
    /// (None: no later frame was found).
    CorruptHeader { offset: u64, resumed_at: Option<u64> },
    /// The frame at `offset` has a valid header but its body does not decode.
    CorruptFrame { offset: u64, reason: String },
}

impl std::fmt::Display for ReadIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadIssue::Truncated { offset } => {
                write!(f, "log is cut off inside the frame at byte {offset}; read up to there")
            }
            ReadIssue::CorruptHeader { offset, resumed_at: Some(r) } => {
                write!(f, "corrupt frame header at byte {offset}; resumed at byte {r}")
            }
            ReadIssue::CorruptHeader { offset, resumed_at: None } => {
                write!(f, "corrupt frame header at byte {offset}; no later frame found")
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
    /// The file's first `file_len` bytes, where mmap works (else frames are read with pread).
    map: Option<Mapped>,
    pub path: String,
    /// The format version in the file's preamble.
    pub version: u16,
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
        let header: Header = serde_json::from_slice(&hb)
            .map_err(|e| err(io::ErrorKind::InvalidData, format!("{path}: log header is not valid: {e}")))?;
        let mut r = LogReader {
            map: Mapped::of(&file, file_len),
            file,
            path: path.to_string(),
            version,
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
                    self.issues.push(ReadIssue::CorruptHeader { offset: off, resumed_at: resumed });
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
        let (mut comp, mut dctx, mut data, mut cols) = (Vec::new(), None, Vec::new(), None);
        let mut recs = Vec::new();
        for fi in tail.into_iter().rev() {
            let read = self.read_frame(fi, &mut comp, &mut dctx, &mut cols, &mut data);
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
        self.frames.iter().map(|f| f.h.comp_len as u64 + format::FRAME_HEADER_LEN as u64).sum()
    }

    /// Every record of every stream, merged in time order.
    pub fn events(&self) -> Events<'_> {
        Events::new(self)
    }

    /// [`LogReader::events`] with the frames decompressed and decoded ahead by `pool`'s
    /// threads (made for this reader; see [`Pool`]): the same events in the same order,
    /// the same issues and counts.
    pub fn events_pooled<'a>(&'a self, pool: &'a Pool<'a>) -> Events<'a> {
        let mut e = Events::new(self);
        e.src.pool = Some(pool as &dyn stream::Ahead);
        e
    }

    /// Decompresses every frame in file order and hands each to `f` with its records
    /// (undecoded), or with why it could not be read: the reader's first stage alone, with
    /// no decoding and no merge (the `zstdspeed` example times it).
    pub fn for_each_frame(&self, mut f: impl FnMut(&FrameInfo, Result<&[u8], String>)) {
        let (mut comp, mut dctx, mut out, mut cols) = (Vec::new(), None, Vec::new(), None);
        for fi in &self.frames {
            let read = self.read_frame(fi, &mut comp, &mut dctx, &mut cols, &mut out);
            f(fi, read.map(|()| &out[..]));
        }
    }

    /// Decompresses every frame in file order and hands `f` how many bytes came out, or why
    /// it could not be read: zstd alone, a columnar frame's columns unpacked and not put
    /// back together into records (the `zstdspeed` example times it).
    pub fn for_each_decompressed(&self, mut f: impl FnMut(&FrameInfo, Result<usize, String>)) {
        let (mut comp, mut dctx, mut out, mut cols) =
            (Vec::new(), None, Vec::new(), crate::columns::Columns::default());
        for fi in &self.frames {
            let read = if fi.h.columnar {
                self.read_columns(fi, &mut comp, &mut dctx, &mut cols)
                    .map(|()| cols.0.iter().map(Vec::len).sum())
            } else {
                self.read_frame(fi, &mut comp, &mut dctx, &mut None, &mut out).map(|()| out.len())
            };
            f(fi, read);
        }
    }

    /// A frame's body: in the mapping, or read into `comp`.
    fn body<'a>(&'a self, fi: &FrameInfo, comp: &'a mut Vec<u8>) -> Result<&'a [u8], String> {
        let clen = fi.h.comp_len as usize;
        let at = fi.offset + format::FRAME_HEADER_LEN as u64;
        Ok(match &self.map {
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
        })
    }

    /// Reads a columnar frame's columns into `cols` (the reader's merge decodes them itself,
    /// without the rows).
    pub(super) fn read_columns(
        &self,
        fi: &FrameInfo,
        comp: &mut Vec<u8>,
        dctx: &mut Option<zstd::bulk::Decompressor<'static>>,
        cols: &mut crate::columns::Columns,
    ) -> Result<(), String> {
        if self.version < format::COLUMNAR_VERSION {
            return Err(format!("a columnar frame in a version {} log", self.version));
        }
        let body = self.body(fi, comp)?;
        if dctx.is_none() {
            *dctx = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?);
        }
        crate::columns::unpack(body, dctx.as_mut().expect("decompressor"), cols)
    }

    /// Reads and decompresses one frame's records into `out` (a columnar frame's rebuilt);
    /// `comp`, `dctx` and `cols` are reused across frames so that reading allocates nothing
    /// per frame once warm.
    fn read_frame(
        &self,
        fi: &FrameInfo,
        comp: &mut Vec<u8>,
        dctx: &mut Option<zstd::bulk::Decompressor<'static>>,
        cols: &mut Option<Box<crate::columns::Reader>>,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let body = self.body(fi, comp)?;
        if dctx.is_none() {
            *dctx = Some(zstd::bulk::Decompressor::new().map_err(|e| format!("zstd: {e}"))?);
        }
        let d = dctx.as_mut().expect("decompressor");
        if fi.h.columnar {
            if self.version < format::COLUMNAR_VERSION {
                return Err(format!("a columnar frame in a version {} log", self.version));
            }
            return cols.get_or_insert_with(Default::default).rows(body, d, &fi.h, out);
        }
        // Decompresses into the Vec's capacity (no zero-filling), at most raw_len bytes: a
        // frame claiming more is rejected by zstd, one producing less by the check below.
        out.clear();
        out.reserve(fi.h.raw_len as usize);
        let n = d.decompress_to_buffer(body, out).map_err(|e| format!("zstd: {e}"))?;
        if n != fi.h.raw_len as usize {
            return Err(format!("decompressed to {n} bytes, header says {}", fi.h.raw_len));
        }
        Ok(())
    }
}
