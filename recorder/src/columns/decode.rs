//! Columns back into records: one at a time for the reader's merge ([`Decoder::next`]), or
//! into a buffer's row encoding, the same bytes the thread wrote ([`Decoder::decode`]).
use super::model::Model;
use super::*;
use crate::buffer::{Args, Buf, RawArgs, RawRecord};
use crate::event::Field;
use crate::varint::unzigzag;

/// Where a frame's columns are being read, and the predictions so far.
pub struct Decoder {
    model: Model,
    pos: [usize; N_COLS],
    /// Records decoded, of `n`.
    i: usize,
    n: usize,
    pub tuning: Tuning,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

/// The columns being read, and where.
struct View<'a> {
    data: [&'a [u8]; N_COLS],
    pos: [usize; N_COLS],
}

impl View<'_> {
    #[inline(always)]
    fn get(&mut self, c: usize) -> Result<u64, String> {
        crate::varint::get(self.data[c], &mut self.pos[c]).ok_or_else(|| short(c))
    }
}

/// After the last record: every column must be used up.
#[cold]
fn end(v: &View) -> Result<Option<RawRecord>, String> {
    for c in 1..N_COLS {
        if v.pos[c] != v.data[c].len() {
            return Err(format!("column {} has {} bytes left over", COLUMN_NAMES[c], v.data[c].len() - v.pos[c]));
        }
    }
    Ok(None)
}

#[cold]
fn short(col: usize) -> String {
    format!("column {} ends early", COLUMN_NAMES[col])
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder { model: Model::new(), pos: [0; N_COLS], i: 0, n: 0, tuning: Tuning::default() }
    }

    /// Starts on a frame of `n` records whose columns are `cols`.
    pub fn start(&mut self, cols: &Columns, n: u32, first_ticks: u64) -> Result<(), String> {
        self.model.reset(first_ticks);
        self.pos = [0; N_COLS];
        self.i = 0;
        self.n = 0;
        if cols.0[OPS].len() != n as usize {
            return Err(format!("{} operations for {n} records", cols.0[OPS].len()));
        }
        self.n = n as usize;
        Ok(())
    }

    /// Hands the frame's next records to `f` until it returns false or the frame ends
    /// (`Ok(false)` then). The columns' positions are kept in locals meanwhile (in the
    /// decoder they went through memory between fields).
    #[inline(always)]
    pub fn run(&mut self, cols: &Columns, mut f: impl FnMut(RawRecord) -> bool) -> Result<bool, String> {
        let mut v = View { data: std::array::from_fn(|c| &cols.0[c][..]), pos: self.pos };
        let r = loop {
            match self.step(&mut v) {
                Ok(Some(rec)) => {
                    if !f(rec) {
                        break Ok(true);
                    }
                }
                Ok(None) => break Ok(false),
                Err(e) => break Err(e),
            }
        };
        self.pos = v.pos;
        r
    }

    /// The frame's next record, `Ok(None)` after the last (when every column was used up).
    pub fn next(&mut self, cols: &Columns) -> Result<Option<RawRecord>, String> {
        let mut v = View { data: std::array::from_fn(|c| &cols.0[c][..]), pos: self.pos };
        let r = self.step(&mut v);
        self.pos = v.pos;
        r
    }

    #[inline(always)]
    fn step(&mut self, v: &mut View) -> Result<Option<RawRecord>, String> {
        if self.i >= self.n {
            return end(v);
        }
        let tag = v.data[OPS][self.i];
        self.i += 1;
        let op = Op::from_u8(tag & COL_OP_MASK).ok_or_else(|| format!("unknown operation {}", tag & COL_OP_MASK))?;
        let tv = unzigzag(v.get(TIME)?);
        let m = &mut self.model;
        let dt = if self.tuning.dod { tv.wrapping_add(m.last_dt) } else { tv };
        m.last_dt = dt;
        let ticks = m.last_ticks.wrapping_add(dt as u64);
        m.last_ticks = ticks;
        let mut a = RawArgs::default();
        // The two records of nearly every log with their layout a constant.
        match op {
            Op::Malloc if tag & COL_VERBATIM == 0 => {
                a.size = v.get(SIZE)?;
                let d = unzigzag(v.get(ALLOC)?) << 3;
                let base = if self.tuning.class_alloc { self.model.alloc_base(a.size) } else { self.model.last_alloc };
                a.ptr = base.wrapping_add(d as u64);
                self.model.allocated(a.ptr, a.size);
            }
            Op::Free if tag & COL_VERBATIM == 0 => {
                let (p, known) = self.freed(v)?;
                a.ptr = p;
                self.model.freed(p, known);
            }
            _ if op.is_alloc_family() => self.alloc_fields(v, op, tag & COL_VERBATIM != 0, &mut a)?,
            _ => {
                for f in op.layout() {
                    match f {
                        Field::Size => a.size = v.get(SIZE)?,
                        _ => a.value = v.get(OTHER)?,
                    }
                }
            }
        }
        let backend_ticks = if tag & COL_TIMED != 0 { Some(v.get(BACKEND)?) } else { None };
        Ok(Some(RawRecord { op, ticks, args: a, backend_ticks }))
    }


    #[inline(always)]
    fn alloc_fields(&mut self, v: &mut View, op: Op, verbatim: bool, a: &mut RawArgs) -> Result<(), String> {
        let frees = op.is_free();
        for f in op.layout() {
            match f {
                Field::Size => a.size = v.get(SIZE)?,
                Field::Count => a.count = v.get(OTHER)?,
                Field::Align => a.align = v.get(OTHER)?,
                Field::Old | Field::Ptr if *f == Field::Old || frees => {
                    // The released block, and the model moves on at once (as the encoder's
                    // did, before predicting the new block). free_sized's size is read: it
                    // comes before the pointer.
                    let sized = if op == Op::FreeSized { Some(a.size) } else { None };
                    let (p, known) = if verbatim {
                        (v.get(OTHER)?, sized)
                    } else {
                        let (p, hit) = self.freed(v)?;
                        (p, hit.or(sized))
                    };
                    if *f == Field::Old {
                        a.old = p
                    } else {
                        a.ptr = p
                    }
                    self.model.freed(p, known);
                }
                Field::Old | Field::Ptr => {
                    let bsize = block_size(op, a.size, a.count);
                    a.ptr = if verbatim {
                        v.get(OTHER)?
                    } else {
                        let d = unzigzag(v.get(ALLOC)?) << 3;
                        let base = if self.tuning.class_alloc { self.model.alloc_base(bsize) } else { self.model.last_alloc };
                        base.wrapping_add(d as u64)
                    };
                    self.model.allocated(a.ptr, bsize);
                }
                Field::Value | Field::Tid => return Err(format!("{op:?} with a value")),
            }
        }
        Ok(())
    }

    /// A released pointer (free, realloc's old block), and its size when it was allocated
    /// in this frame.
    #[inline(always)]
    fn freed(&mut self, v: &mut View) -> Result<(u64, Option<u64>), String> {
        match v.get(FREE)? {
            0 => {
                let d = unzigzag(v.get(MISS)?) << 3;
                Ok((self.model.last_free.wrapping_add(d as u64), None))
            }
            1 => Ok((0, None)),
            k => {
                let len = self.model.allocs.len() as u64;
                let k = k - 1;
                if k > len {
                    return Err(format!("a free of the allocation {k} back, of {len}"));
                }
                let (p, s) = self.model.allocs[(len - k) as usize];
                Ok((p, Some(s)))
            }
        }
    }

    /// Rebuilds the `n` records of `cols` into `out` (reset for `stream` first), in the row
    /// encoding.
    pub fn decode(&mut self, cols: &Columns, n: u32, first_ticks: u64, stream: u32, out: &mut Buf) -> Result<(), String> {
        out.reset(stream);
        self.start(cols, n, first_ticks)?;
        while let Some(r) = self.next(cols)? {
            if !out.has_room() {
                return Err("records overflow a buffer".into());
            }
            let x = &r.args;
            let a = Args { size: x.size, count: x.count, align: x.align, old: x.old, ptr: x.ptr, value: x.value };
            out.push(r.op, r.ticks, &a, r.backend_ticks);
        }
        Ok(())
    }
}
