//! Columns back into a frame's records (row encoding, the same bytes the thread wrote).
use super::model::Model;
use super::*;
use crate::buffer::{Args, Buf};
use crate::event::Field;
use crate::varint::{self, unzigzag};

pub struct Decoder {
    model: Model,
    pub tuning: Tuning,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

/// One column as it is read.
struct Col<'a> {
    data: &'a [u8],
    pos: usize,
    name: usize,
}

impl Col<'_> {
    #[inline(always)]
    fn get(&mut self) -> Result<u64, String> {
        varint::get(self.data, &mut self.pos).ok_or_else(|| format!("column {} ends early", COLUMN_NAMES[self.name]))
    }
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder { model: Model::new(), tuning: Tuning::default() }
    }

    /// Rebuilds `n` records from `cols` into `out` (reset for `stream` first).
    pub fn decode(&mut self, cols: &Columns, n: u32, first_ticks: u64, stream: u32, out: &mut Buf) -> Result<(), String> {
        out.reset(stream);
        self.model.reset(first_ticks);
        let ops = &cols.0[OPS];
        if ops.len() != n as usize {
            return Err(format!("{} operations for {n} records", ops.len()));
        }
        let mut c: [Col; N_COLS] = std::array::from_fn(|i| Col { data: &cols.0[i], pos: 0, name: i });
        let [_, time, size, alloc, free, miss, other, backend] = &mut c;
        for &tag in ops.iter() {
            let op = Op::from_u8(tag & COL_OP_MASK).ok_or_else(|| format!("unknown operation {}", tag & COL_OP_MASK))?;
            let m = &mut self.model;
            let tv = unzigzag(time.get()?);
            let dt = if self.tuning.dod { tv.wrapping_add(m.last_dt) } else { tv };
            m.last_dt = dt;
            let ticks = m.last_ticks.wrapping_add(dt as u64);
            m.last_ticks = ticks;
            let mut a = Args::default();
            let verbatim = tag & COL_VERBATIM != 0;
            let frees = op.is_free();
            for f in op.layout() {
                match f {
                    Field::Size => a.size = size.get()?,
                    Field::Count if op.is_alloc_family() => a.count = other.get()?,
                    Field::Align if op.is_alloc_family() => a.align = other.get()?,
                    Field::Old | Field::Ptr if !op.is_alloc_family() => return Err(format!("{op:?} with a pointer")),
                    Field::Old | Field::Ptr if *f == Field::Old || frees => {
                        // The released block, and the model moves on at once (as the
                        // encoder's did, before predicting the new block).
                        // (free_sized's size is read: it comes before the pointer.)
                        let sized = if op == Op::FreeSized { Some(a.size) } else { None };
                        let (p, known) = if verbatim {
                            (other.get()?, sized)
                        } else {
                            let (p, hit) = self.freed(free, miss)?;
                            (p, hit.or(sized))
                        };
                        if *f == Field::Old {
                            a.old = p
                        } else {
                            a.ptr = p
                        }
                        self.model.freed(p, known);
                    }
                    Field::Ptr => {
                        a.ptr = if verbatim {
                            other.get()?
                        } else {
                            let d = unzigzag(alloc.get()?) << 3;
                            let bsize = block_size(op, a.size, a.count);
                            let base = if self.tuning.class_alloc { self.model.alloc_base(bsize) } else { self.model.last_alloc };
                            base.wrapping_add(d as u64)
                        };
                        self.model.allocated(a.ptr, block_size(op, a.size, a.count));
                    }
                    _ => a.value = other.get()?,
                }
            }
            let bt = if tag & COL_TIMED != 0 { Some(backend.get()?) } else { None };
            if !out.has_room() {
                return Err("records overflow a buffer".into());
            }
            out.push(op, ticks, &a, bt);
        }
        // (The operations were read as bytes, and counted above.)
        for col in &c[1..] {
            if col.pos != col.data.len() {
                return Err(format!("column {} has {} bytes left over", COLUMN_NAMES[col.name], col.data.len() - col.pos));
            }
        }
        Ok(())
    }

    /// A released pointer (free, realloc's old block), and its size when it was allocated
    /// in this frame.
    #[inline(always)]
    fn freed(&self, free: &mut Col, miss: &mut Col) -> Result<(u64, Option<u64>), String> {
        match free.get()? {
            0 => {
                let d = unzigzag(miss.get()?) << 3;
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
}
