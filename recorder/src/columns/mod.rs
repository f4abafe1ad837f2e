//! The columnar frame body (format version 5): the recorder thread splits a buffer's records
//! into one stream per kind of value (operations, time steps, sizes, new pointers, freed
//! pointers, ...), each compressed on its own, so that zstd sees like next to like; and
//! pointers are written as predictions (a freed pointer as the allocation of this frame it
//! was, counted back; a new one against the last block of its size class). Readers turn a
//! body back into the records the thread wrote, byte for byte (docs/format.md, "Columnar
//! frames").
use crate::event::Op;
use crate::varint;

mod decode;
mod encode;
mod model;
mod varints;
pub use decode::{Decoder, BATCH};
pub use encode::Encoder;

/// The columns, in the order their bodies follow each other.
pub const OPS: usize = 0;
pub const TIME: usize = 1;
pub const SIZE: usize = 2;
pub const ALLOC: usize = 3;
pub const FREE: usize = 4;
pub const MISS: usize = 5;
pub const OTHER: usize = 6;
pub const BACKEND: usize = 7;
pub const N_COLS: usize = 8;
pub const COLUMN_NAMES: [&str; N_COLS] =
    ["ops", "time", "sizes", "new pointers", "freed", "freed misses", "other", "backend"];

/// Operation byte: bits 0-5 the op, this bit a backend time follows (in BACKEND).
pub const COL_TIMED: u8 = 0x40;
/// Operation byte: the record's pointers are in OTHER as they are (a prediction was not a
/// multiple of 8 bytes).
pub const COL_VERBATIM: u8 = 0x80;
pub const COL_OP_MASK: u8 = 0x3f;

/// The predictions in force (all on in the format; off only to measure what each gains).
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Time steps as the difference from the previous step.
    pub dod: bool,
    /// A freed pointer as an index into the frame's allocations.
    pub free_index: bool,
    /// A new pointer against the last block of its size class (else the last allocation).
    pub class_alloc: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning { dod: false, free_index: true, class_alloc: true }
    }
}

/// One byte vector per column.
#[derive(Default, Clone, Debug)]
pub struct Columns(pub [Vec<u8>; N_COLS]);

/// The bytes a block of this call takes, for its size class.
#[inline(always)]
fn block_size(op: Op, size: u64, count: u64) -> u64 {
    if matches!(op, Op::Calloc | Op::Reallocarray) {
        size.saturating_mul(count)
    } else {
        size
    }
}

/// Columns shorter than this are stored as they are (a zstd frame costs more than it saves).
const STORE_BELOW: usize = 32;

/// Appends the body of a columnar frame to `out`: the column count, a CRC-32 of the columns'
/// bytes, each column's length and how it is stored, then the columns.
pub fn pack(
    cols: &Columns,
    comp: &mut zstd::bulk::Compressor<'static>,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    let mut crc = crc32fast::Hasher::new();
    out.push(N_COLS as u8);
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    scratch.clear();
    let mut heads = Vec::with_capacity(N_COLS * 2);
    for c in &cols.0 {
        crc.update(c);
        let start = scratch.len();
        let mut zipped = false;
        if c.len() >= STORE_BELOW {
            scratch.reserve(zstd::zstd_safe::compress_bound(c.len()));
            let mut cur = std::io::Cursor::new(&mut *scratch);
            cur.set_position(start as u64);
            let n = comp.compress_to_buffer(&c[..], &mut cur)?;
            zipped = n < c.len();
            scratch.truncate(start + if zipped { n } else { 0 });
        }
        if !zipped {
            scratch.extend_from_slice(c);
        }
        heads.push((c.len() as u64, ((scratch.len() - start) as u64) << 1 | zipped as u64));
    }
    let mut b = [0u8; varint::MAX_LEN];
    for (raw, stored) in heads {
        let n = varint::put(&mut b, raw);
        out.extend_from_slice(&b[..n]);
        let n = varint::put(&mut b, stored);
        out.extend_from_slice(&b[..n]);
    }
    out.extend_from_slice(scratch);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.finalize().to_le_bytes());
    Ok(())
}

/// Reads a columnar body into `cols`. Errors say what is wrong.
pub fn unpack(
    body: &[u8],
    d: &mut zstd::bulk::Decompressor<'static>,
    cols: &mut Columns,
) -> Result<(), String> {
    if body.len() < 5 || body[0] as usize != N_COLS {
        return Err(format!(
            "columnar body of {} columns, expected {N_COLS}",
            body.first().copied().unwrap_or(0)
        ));
    }
    let want_crc = u32::from_le_bytes(body[1..5].try_into().expect("4 bytes"));
    let mut pos = 5;
    let mut heads = [(0usize, 0usize, false); N_COLS];
    for h in heads.iter_mut() {
        let raw = varint::get(body, &mut pos).ok_or("columnar body's lengths cut off")?;
        let stored = varint::get(body, &mut pos).ok_or("columnar body's lengths cut off")?;
        if raw > crate::format::MAX_RAW_LEN as u64 || stored >> 1 > body.len() as u64 {
            return Err("impossible column length".into());
        }
        *h = (raw as usize, (stored >> 1) as usize, stored & 1 != 0);
    }
    let mut crc = crc32fast::Hasher::new();
    for (i, (raw, stored, zipped)) in heads.into_iter().enumerate() {
        let Some(src) = body.get(pos..pos + stored) else {
            return Err(format!("column {} cut off", COLUMN_NAMES[i]));
        };
        pos += stored;
        let c = &mut cols.0[i];
        c.clear();
        if zipped {
            c.reserve(raw);
            let n = d
                .decompress_to_buffer(src, c)
                .map_err(|e| format!("zstd, column {}: {e}", COLUMN_NAMES[i]))?;
            if n != raw {
                return Err(format!("column {} decompressed to {n} bytes, not {raw}", COLUMN_NAMES[i]));
            }
        } else {
            if stored != raw {
                return Err(format!("column {} stored in {stored} bytes, not {raw}", COLUMN_NAMES[i]));
            }
            c.extend_from_slice(src);
        }
        crc.update(c);
    }
    if pos != body.len() {
        return Err(format!("{} bytes after the columns", body.len() - pos));
    }
    if crc.finalize() != want_crc {
        return Err("columns fail their CRC".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests;

/// What a reader keeps to turn columnar frames back into records.
pub struct Reader {
    cols: Columns,
    dec: Decoder,
    buf: Box<crate::buffer::Buf>,
}

impl Default for Reader {
    fn default() -> Self {
        Reader { cols: Columns::default(), dec: Decoder::new(), buf: crate::buffer::Buf::new_boxed(0) }
    }
}

impl Reader {
    /// The records of the columnar frame `h` with body `body`, into `out`.
    pub fn rows(
        &mut self,
        body: &[u8],
        d: &mut zstd::bulk::Decompressor<'static>,
        h: &crate::format::FrameHeader,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        unpack(body, d, &mut self.cols)?;
        self.dec.decode(&self.cols, h.n_records, h.first_ticks, h.stream, &mut self.buf)?;
        let recs = self.buf.records();
        if recs.len() != h.raw_len as usize || self.buf.last_ticks != h.last_ticks {
            return Err(format!(
                "columns rebuild {} bytes of records, header says {}",
                recs.len(),
                h.raw_len
            ));
        }
        out.clear();
        out.extend_from_slice(recs);
        Ok(())
    }
}
