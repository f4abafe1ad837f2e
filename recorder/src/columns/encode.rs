//! A buffer's records into columns (the recorder thread's side; never the hot path).
use super::model::{class, Model};
use super::*;
use crate::buffer::DecodeState;
use crate::event::Field;
use crate::varint::{self, zigzag};

/// Entries of the encoder's table of recent allocations (pointer to its place in the
/// frame's allocations); lossy: a collision only makes a free a miss.
const TABLE_BITS: u32 = 13;

/// How a pointer that is released (free, realloc's old block) is written.
#[derive(Clone, Copy)]
enum Freed {
    Null,
    /// Allocated `k` allocations ago in this frame (1: the last one), with this size.
    Hit(u64, u64),
    /// Not found: its delta from the last freed pointer.
    Miss(i64),
}

pub struct Encoder {
    model: Model,
    /// (pointer, sequence number of its allocation + 1) by a hash of the pointer.
    table: Vec<(u64, u64)>,
    /// Sequence number of the frame's first allocation (numbers grow across frames, so that
    /// the table never needs clearing).
    seq_base: u64,
    pub cols: Columns,
    pub tuning: Tuning,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder::new()
    }
}

#[inline(always)]
fn slot(p: u64) -> usize {
    ((p >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - TABLE_BITS)) as usize
}

/// Appends `v` as a varint. Up to 8 bytes (values below 2^56) without a branch on the
/// length: the 7-bit groups spread into bytes, the continuation bits or-ed in, 8 bytes
/// stored and the length advanced by what counts.
#[inline(always)]
pub(super) fn put(col: &mut Vec<u8>, v: u64) {
    if col.capacity() - col.len() < varint::MAX_LEN {
        col.reserve(4096);
    }
    let n = (64 - (v | 1).leading_zeros()).div_ceil(7) as usize;
    // SAFETY: the capacity after len holds MAX_LEN bytes, what either store writes at most;
    // the bytes that len then covers were written.
    unsafe {
        let at = col.as_mut_ptr().add(col.len());
        if n <= 8 {
            let x = (v & 0x0fff_ffff) | ((v & 0x00ff_ffff_f000_0000) << 4);
            let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x0fff_c000_0fff_c000) << 2);
            let x = (x & 0x007f_007f_007f_007f) | ((x & 0x3f80_3f80_3f80_3f80) << 1);
            let cont = 0x8080_8080_8080_8080u64 & ((1u64 << (8 * (n - 1))) - 1);
            at.cast::<u64>().write_unaligned((x | cont).to_le());
            col.set_len(col.len() + n);
        } else {
            let end = varint::put_raw(at, v);
            col.set_len(col.len() + end.offset_from(at) as usize);
        }
    }
}

impl Encoder {
    pub fn new() -> Encoder {
        Encoder {
            model: Model::new(),
            table: vec![(0, 0); 1 << TABLE_BITS],
            seq_base: 0,
            cols: Columns::default(),
            tuning: Tuning::default(),
        }
    }

    /// Splits a frame's records (row encoding, as a [`crate::buffer::Buf`] holds them, from
    /// `first_ticks`) into `self.cols`. Returns the number of records, or the offset of a
    /// malformed one.
    pub fn encode(&mut self, records: &[u8], first_ticks: u64) -> Result<u32, usize> {
        for c in self.cols.0.iter_mut() {
            c.clear();
        }
        self.seq_base += self.model.allocs.len() as u64 + 1;
        self.model.reset(first_ticks);
        let mut st = DecodeState::new(first_ticks);
        let mut n = 0u32;
        loop {
            let rec = match st.next_common::<false>(records) {
                Some(r) => r,
                None => match st.next_record(records) {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(at) => return Err(at),
                },
            };
            self.record(&rec);
            n += 1;
        }
        Ok(n)
    }

    fn freed_code(&self, p: u64) -> Freed {
        if p == 0 {
            return Freed::Null;
        }
        if self.tuning.free_index {
            let (tp, seq1) = self.table[slot(p)];
            if tp == p && seq1 > self.seq_base {
                let i = (seq1 - 1 - self.seq_base) as usize;
                if let Some(&(ap, size)) = self.model.allocs.get(i) {
                    if ap == p {
                        return Freed::Hit((self.model.allocs.len() - i) as u64, size);
                    }
                }
            }
        }
        Freed::Miss(p.wrapping_sub(self.model.last_free) as i64)
    }

    #[inline]
    fn record(&mut self, rec: &crate::buffer::RawRecord) {
        let op = rec.op;
        let a = &rec.args;
        let m = &mut self.model;
        let mut tag = op as u8;
        if rec.backend_ticks.is_some() {
            tag |= COL_TIMED;
        }
        let dt = rec.ticks.wrapping_sub(m.last_ticks) as i64;
        let tv = if self.tuning.dod { dt.wrapping_sub(m.last_dt) } else { dt };
        m.last_dt = dt;
        m.last_ticks = rec.ticks;
        if !op.is_alloc_family() {
            self.cols.0[OPS].push(tag);
            put(&mut self.cols.0[TIME], zigzag(tv));
            for f in op.layout() {
                match f {
                    Field::Size => put(&mut self.cols.0[SIZE], a.size),
                    _ => put(&mut self.cols.0[OTHER], a.value),
                }
            }
        } else {
            self.alloc_record(tag, tv, rec);
        }
        if let Some(t) = rec.backend_ticks {
            put(&mut self.cols.0[BACKEND], t);
        }
    }

    /// An allocation-family record: its pointers predicted (or, when a prediction is not a
    /// multiple of 8 bytes, all of them verbatim, tag bit COL_VERBATIM).
    fn alloc_record(&mut self, mut tag: u8, tv: i64, rec: &crate::buffer::RawRecord) {
        let op = rec.op;
        let a = &rec.args;
        let layout = op.layout();
        let has_old = matches!(op, Op::Realloc | Op::Reallocarray);
        let frees = op.is_free();
        // Predictions first, from the model as it stands; then the model moves on as the
        // decoder's will: the released block, then the new one.
        let released = if has_old { Some(a.old) } else if frees { Some(a.ptr) } else { None };
        let code = released.map_or(Freed::Null, |p| self.freed_code(p));
        let mut odd = 0u64;
        if let Freed::Miss(d) = code {
            odd |= d as u64;
        }
        let sized = if op == Op::FreeSized { Some(a.size) } else { None };
        let known = match code {
            Freed::Hit(_, s) => Some(s),
            _ => sized,
        };
        let bsize = block_size(op, a.size, a.count);
        let mut alloc_delta = 0i64;
        if !frees {
            let m = &self.model;
            let base = match (self.tuning.class_alloc, released, known) {
                (false, ..) => m.last_alloc,
                // The block just released, when it is of the same class (what a realloc in
                // place returns).
                (true, Some(p), Some(k)) if p != 0 && class(k) == class(bsize) => p,
                (true, ..) => m.alloc_base(bsize),
            };
            alloc_delta = a.ptr.wrapping_sub(base) as i64;
            odd |= alloc_delta as u64;
        }
        let verbatim = odd & 7 != 0;
        if let Some(p) = released {
            // A verbatim record's released block: its size only from free_sized.
            self.model.freed(p, if verbatim { sized } else { known });
        }
        if !frees {
            if a.ptr != 0 {
                let seq1 = self.seq_base + self.model.allocs.len() as u64 + 1;
                self.table[slot(a.ptr)] = (a.ptr, seq1);
            }
            self.model.allocated(a.ptr, bsize);
        }
        if verbatim {
            tag |= COL_VERBATIM;
        }
        let c = &mut self.cols.0;
        c[OPS].push(tag);
        put(&mut c[TIME], zigzag(tv));
        for f in layout {
            match f {
                Field::Size => put(&mut c[SIZE], a.size),
                Field::Count | Field::Align => put(&mut c[OTHER], a.count | a.align),
                Field::Old | Field::Ptr if verbatim => put(&mut c[OTHER], if *f == Field::Old { a.old } else { a.ptr }),
                Field::Old => put_freed(c, code),
                Field::Ptr if frees => put_freed(c, code),
                Field::Ptr => put(&mut c[ALLOC], zigzag(alloc_delta >> 3)),
                Field::Value | Field::Tid => put(&mut c[OTHER], a.value),
            }
        }
    }
}

fn put_freed(c: &mut [Vec<u8>; N_COLS], code: Freed) {
    match code {
        Freed::Null => put(&mut c[FREE], 1),
        Freed::Hit(k, _) => put(&mut c[FREE], k + 1),
        Freed::Miss(d) => {
            put(&mut c[FREE], 0);
            put(&mut c[MISS], zigzag(d >> 3));
        }
    }
}
