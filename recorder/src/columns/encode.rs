//! A buffer's records into columns (the recorder thread's side; never the hot path).
//!
//! One pass over the rows: each record is decoded, its pointers predicted and its values
//! stored straight into the columns through cursors that have room reserved for a chunk of
//! records, so that no value checks a vector's capacity and the model's fields stay in
//! registers. Malloc and free, most of every log, have arms of their own; every other
//! record takes the general one, which the arms must match byte for byte (tested).
use super::model::{class, Model};
use super::*;
use crate::buffer::{DecodeState, RawRecord};
use crate::event::Field;
use crate::varint::{self, zigzag};

/// Entries of the encoder's table of recent allocations (pointer to its place in the
/// frame's allocations); lossy: a collision only makes a free a miss.
const TABLE_BITS: u32 = 13;

/// Records between two reservations of room in the columns.
const CHUNK: usize = 256;
/// Room each column gets for a chunk: a record writes at most three varints into one column
/// (a verbatim reallocarray's old block, count and pointer into OTHER), and a varint store
/// writes at most MAX_LEN bytes.
const ROOM: usize = CHUNK * 3 * varint::MAX_LEN;

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
    /// The CPU runs the x86-64-v3 copy of the loop (and its PEXT is fast).
    v3: bool,
    pext: bool,
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

/// Stores `v` as a varint at `*at` and moves `*at` past it. Up to 8 bytes (values below
/// 2^56) without a branch on the length: the 7-bit groups spread into bytes, the
/// continuation bits or-ed in, 8 bytes stored and the cursor advanced by what counts.
/// SAFETY: `*at` must have MAX_LEN writable bytes.
#[inline(always)]
unsafe fn put_at(at: &mut *mut u8, v: u64) {
    let n = (64 - (v | 1).leading_zeros()).div_ceil(7) as usize;
    unsafe {
        if n <= 8 {
            let x = (v & 0x0fff_ffff) | ((v & 0x00ff_ffff_f000_0000) << 4);
            let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x0fff_c000_0fff_c000) << 2);
            let x = (x & 0x007f_007f_007f_007f) | ((x & 0x3f80_3f80_3f80_3f80) << 1);
            let cont = 0x8080_8080_8080_8080u64 & ((1u64 << (8 * (n - 1))) - 1);
            at.cast::<u64>().write_unaligned((x | cont).to_le());
            *at = at.add(n);
        } else {
            *at = varint::put_raw(*at, v);
        }
    }
}

/// Appends `v` to `col` as a varint.
#[inline(always)]
#[cfg_attr(not(test), allow(dead_code))]
pub(super) fn put(col: &mut Vec<u8>, v: u64) {
    col.reserve(varint::MAX_LEN);
    // SAFETY: MAX_LEN bytes reserved after len; the bytes len then covers were written.
    unsafe {
        let mut at = col.as_mut_ptr().add(col.len());
        put_at(&mut at, v);
        col.set_len(at.offset_from(col.as_ptr()) as usize);
    }
}

/// Write cursors into the columns, with ROOM bytes reserved after each.
struct Out {
    at: [*mut u8; N_COLS],
}

impl Out {
    fn open(cols: &mut [Vec<u8>; N_COLS]) -> Out {
        Out {
            at: std::array::from_fn(|c| {
                cols[c].reserve(ROOM);
                // SAFETY: len is within the allocation.
                unsafe { cols[c].as_mut_ptr().add(cols[c].len()) }
            }),
        }
    }

    /// The columns' lengths up to the cursors.
    fn close(&self, cols: &mut [Vec<u8>; N_COLS]) {
        for (c, col) in cols.iter_mut().enumerate() {
            // SAFETY: the cursor moved forward from len over written bytes, within ROOM.
            unsafe { col.set_len(self.at[c].offset_from(col.as_ptr()) as usize) }
        }
    }

    #[inline(always)]
    fn put(&mut self, c: usize, v: u64) {
        // SAFETY: at most CHUNK records go between open and close, each storing at most 3
        // varints into a column: ROOM covers them.
        unsafe { put_at(&mut self.at[c], v) }
    }

    #[inline(always)]
    fn push(&mut self, c: usize, b: u8) {
        // SAFETY: as for put.
        unsafe {
            *self.at[c] = b;
            self.at[c] = self.at[c].add(1);
        }
    }

    #[inline(always)]
    fn freed(&mut self, code: Freed) {
        match code {
            Freed::Null => self.put(FREE, 1),
            Freed::Hit(k, _) => self.put(FREE, k + 1),
            Freed::Miss(d) => {
                self.put(FREE, 0);
                self.put(MISS, zigzag(d >> 3));
            }
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
            v3: crate::cpu::has_v3(),
            pext: crate::cpu::has_fast_pext(),
        }
    }

    /// Splits a frame's records (row encoding, as a [`crate::buffer::Buf`] holds them, from
    /// `first_ticks`) into `self.cols`. Returns the number of records, or the offset of a
    /// malformed one.
    pub fn encode(&mut self, records: &[u8], first_ticks: u64) -> Result<u32, usize> {
        #[cfg(target_arch = "x86_64")]
        if self.v3 {
            // SAFETY: v3 only when the CPU has every feature encode_v3 is compiled for
            // (cpu::has_v3), pext only when its PEXT is fast as well.
            return unsafe {
                if self.pext {
                    self.encode_v3::<true>(records, first_ticks)
                } else {
                    self.encode_v3::<false>(records, first_ticks)
                }
            };
        }
        self.encode_with::<false, true>(records, first_ticks)
    }

    /// [`Encoder::encode`] with the general arm only: what the malloc and free arms must
    /// match.
    #[cfg(test)]
    pub(super) fn encode_general(&mut self, records: &[u8], first_ticks: u64) -> Result<u32, usize> {
        self.encode_with::<false, false>(records, first_ticks)
    }

    /// [`Encoder::encode`] compiled for x86-64-v3 (see [`crate::cpu`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt,fma,movbe")]
    unsafe fn encode_v3<const PEXT: bool>(&mut self, records: &[u8], first_ticks: u64) -> Result<u32, usize> {
        self.encode_with::<PEXT, true>(records, first_ticks)
    }

    #[inline(always)]
    fn encode_with<const PEXT: bool, const ARMS: bool>(
        &mut self,
        records: &[u8],
        first_ticks: u64,
    ) -> Result<u32, usize> {
        // The columns out of self while their cursors write, so that the compiler knows the
        // stores leave the model alone.
        let mut cols = std::mem::take(&mut self.cols.0);
        for c in cols.iter_mut() {
            c.clear();
        }
        self.seq_base += self.model.allocs.len() as u64 + 1;
        self.model.reset(first_ticks);
        let mut st = DecodeState::new(first_ticks);
        let mut n = 0u32;
        let r = 'frame: loop {
            let mut out = Out::open(&mut cols);
            for _ in 0..CHUNK {
                let rec = match st.next_common::<PEXT>(records) {
                    Some(r) => r,
                    None => match st.next_record(records) {
                        Ok(Some(r)) => r,
                        Ok(None) => {
                            out.close(&mut cols);
                            break 'frame Ok(n);
                        }
                        Err(at) => {
                            out.close(&mut cols);
                            break 'frame Err(at);
                        }
                    },
                };
                self.record::<ARMS>(&rec, &mut out);
                n += 1;
            }
            out.close(&mut cols);
        };
        self.cols.0 = cols;
        r
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

    #[inline(always)]
    fn record<const ARMS: bool>(&mut self, rec: &RawRecord, out: &mut Out) {
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
        match op {
            Op::Malloc if ARMS => self.malloc(tag, tv, a.size, a.ptr, out),
            Op::Free if ARMS => self.free(tag, tv, a.ptr, out),
            _ if op.is_alloc_family() => self.alloc_record(tag, tv, rec, out),
            _ => {
                out.push(OPS, tag);
                out.put(TIME, zigzag(tv));
                for f in op.layout() {
                    match f {
                        Field::Size => out.put(SIZE, a.size),
                        _ => out.put(OTHER, a.value),
                    }
                }
            }
        }
        if let Some(t) = rec.backend_ticks {
            out.put(BACKEND, t);
        }
    }

    /// Malloc's arm: [`Encoder::alloc_record`] for a record with a size and a new pointer.
    #[inline(always)]
    fn malloc(&mut self, mut tag: u8, tv: i64, size: u64, ptr: u64, out: &mut Out) {
        let m = &mut self.model;
        let base = if self.tuning.class_alloc { m.alloc_base(size) } else { m.last_alloc };
        let delta = ptr.wrapping_sub(base) as i64;
        let verbatim = delta & 7 != 0;
        if ptr != 0 {
            let seq1 = self.seq_base + m.allocs.len() as u64 + 1;
            self.table[slot(ptr)] = (ptr, seq1);
        }
        m.allocated(ptr, size);
        tag |= if verbatim { COL_VERBATIM } else { 0 };
        out.push(OPS, tag);
        out.put(TIME, zigzag(tv));
        out.put(SIZE, size);
        if verbatim {
            out.put(OTHER, ptr);
        } else {
            out.put(ALLOC, zigzag(delta >> 3));
        }
    }

    /// Free's arm: [`Encoder::alloc_record`] for a record with only the block released.
    #[inline(always)]
    fn free(&mut self, mut tag: u8, tv: i64, ptr: u64, out: &mut Out) {
        let code = self.freed_code(ptr);
        let (verbatim, known) = match code {
            Freed::Miss(d) => (d & 7 != 0, None),
            Freed::Hit(_, s) => (false, Some(s)),
            Freed::Null => (false, None),
        };
        self.model.freed(ptr, known);
        tag |= if verbatim { COL_VERBATIM } else { 0 };
        out.push(OPS, tag);
        out.put(TIME, zigzag(tv));
        if verbatim {
            out.put(OTHER, ptr);
        } else {
            out.freed(code);
        }
    }

    /// An allocation-family record: its pointers predicted (or, when a prediction is not a
    /// multiple of 8 bytes, all of them verbatim, tag bit COL_VERBATIM).
    fn alloc_record(&mut self, mut tag: u8, tv: i64, rec: &RawRecord, out: &mut Out) {
        let op = rec.op;
        let a = &rec.args;
        let layout = op.layout();
        let has_old = matches!(op, Op::Realloc | Op::Reallocarray);
        let frees = op.is_free();
        // Predictions first, from the model as it stands; then the model moves on as the
        // decoder's will: the released block, then the new one.
        let released = if has_old {
            Some(a.old)
        } else if frees {
            Some(a.ptr)
        } else {
            None
        };
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
        out.push(OPS, tag);
        out.put(TIME, zigzag(tv));
        for f in layout {
            match f {
                Field::Size => out.put(SIZE, a.size),
                Field::Count | Field::Align => out.put(OTHER, a.count | a.align),
                Field::Old | Field::Ptr if verbatim => {
                    out.put(OTHER, if *f == Field::Old { a.old } else { a.ptr })
                }
                Field::Old => out.freed(code),
                Field::Ptr if frees => out.freed(code),
                Field::Ptr => out.put(ALLOC, zigzag(alloc_delta >> 3)),
                Field::Value | Field::Tid => out.put(OTHER, a.value),
            }
        }
    }
}
