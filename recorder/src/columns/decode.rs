//! Columns back into records, a batch at a time ([`Decoder::run`], what the reader's merge
//! consumes), or into a buffer's row encoding, the same bytes the thread wrote
//! ([`Decoder::decode`]).
//!
//! A batch is decoded column by column: the batch's operation bytes say how many values it
//! takes from each column, each column's varints are read in one tight loop
//! ([`super::varints`]) into an array, and then the records are put together from the
//! arrays, the pointer predictions run in record order, exactly as the encoder ran them.
use super::model::Model;
use super::varints::get_many;
use super::*;
use crate::buffer::{Args, Buf, RawRecord};
use crate::varint::unzigzag;

/// Records decoded at a time (at most).
pub const BATCH: usize = 128;

/// A batch's values, column by column, and how many of each have been used.
/// (One more slot than a batch can use in each: the common path reads a column's next slot
/// whether or not the record takes it.)
struct Vals {
    time: [u64; BATCH],
    size: [u64; BATCH + 1],
    alloc: [u64; BATCH + 1],
    free: [u64; BATCH + 1],
    miss: [u64; BATCH + 1],
    other: [u64; 3 * BATCH + 1],
    backend: [u64; BATCH + 1],
}

/// Where the record being put together is in a batch's values.
#[derive(Default)]
struct At {
    size: usize,
    alloc: usize,
    free: usize,
    miss: usize,
    other: usize,
    backend: usize,
}

/// Takes the next value of one of a batch's columns. The counts from the operation bytes
/// bound every index; the arrays' bounds checks stay, never failing.
macro_rules! take {
    ($v:expr, $at:expr, $col:ident) => {{
        let x = $v.$col[$at.$col];
        $at.$col += 1;
        x
    }};
}

mod records;
use records::*;

/// Where a frame's columns are being read, and the predictions so far.
pub struct Decoder {
    model: Model,
    pos: [usize; N_COLS],
    /// Records decoded, of `n`.
    i: usize,
    n: usize,
    vals: Box<Vals>,
    need: Box<[u64; 256]>,
    kind: Box<[u16; 256]>,
    /// Every operation by its code (the unknown ones as End: a batch's operation bytes are
    /// checked before its records are put together).
    op_of: [Op; 64],
    pub tuning: Tuning,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

#[cold]
fn short(col: usize) -> String {
    format!("column {} ends early", COLUMN_NAMES[col])
}

impl Decoder {
    pub fn new() -> Decoder {
        // SAFETY: Vals is arrays of u64, for which zero is a value.
        let vals: Box<Vals> = unsafe { Box::new_zeroed().assume_init() };
        let (need, kind) = tables();
        Decoder {
            model: Model::new(),
            pos: [0; N_COLS],
            i: 0,
            n: 0,
            vals,
            need,
            kind,
            op_of: std::array::from_fn(|i| Op::from_u8(i as u8).unwrap_or(Op::End)),
            tuning: Tuning::default(),
        }
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

    /// Decodes the frame's next records, at most `max` (and [`BATCH`]), handing each to `f`;
    /// returns how many. 0 at the end of the frame, once every column was found used up.
    /// `PEXT`: see [`crate::cpu::has_fast_pext`]; true only where inlined into code compiled
    /// for BMI2.
    #[inline(always)]
    pub fn run<const PEXT: bool>(
        &mut self,
        cols: &Columns,
        max: usize,
        mut f: impl FnMut(&RawRecord),
    ) -> Result<usize, String> {
        let m = (self.n - self.i).min(max).min(BATCH);
        if m == 0 {
            return self.end(cols);
        }
        let ops = &cols.0[OPS][self.i..self.i + m];
        let mut need = 0u64;
        for &t in ops {
            need += self.need[t as usize];
        }
        let count = |sh: u32| ((need >> sh) & 1023) as usize; // (inlined: no intrinsics)
        if count(SH_BAD) != 0 {
            return Err(self.bad(ops));
        }
        let (v, pos) = (&mut *self.vals, &mut self.pos);
        // (A macro, not a closure: a closure would be a function of its own, not compiled
        // for the features of the function this is inlined into.)
        macro_rules! get {
            ($c:expr, $out:expr) => {
                if !get_many::<PEXT>(&cols.0[$c], &mut pos[$c], $out) {
                    return Err(short($c));
                }
            };
        }
        get!(TIME, &mut v.time[..m]);
        get!(SIZE, &mut v.size[..count(SH_SIZE)]);
        get!(ALLOC, &mut v.alloc[..count(SH_ALLOC)]);
        let frees = count(SH_FREE);
        get!(FREE, &mut v.free[..frees]);
        let misses = v.free[..frees].iter().filter(|&&k| k == 0).count();
        get!(MISS, &mut v.miss[..misses]);
        get!(OTHER, &mut v.other[..count(SH_OTHER)]);
        get!(BACKEND, &mut v.backend[..count(SH_BACKEND)]);
        let v = &*self.vals;
        let mut at = At::default();
        let (dod, class_alloc) = (self.tuning.dod, self.tuning.class_alloc);
        let (kinds, op_of) = (&*self.kind, &self.op_of);
        let md = &mut self.model;
        let (mut ticks, mut last_dt) = (md.last_ticks, md.last_dt);
        // The frame's allocations out of the model for the loop, so that their length and
        // address stay in registers (put back for the general path).
        let mut allocs = std::mem::take(&mut md.allocs);
        let (mut r, mut bad) = (Ok(()), false);
        for (&tag, &tv) in ops.iter().zip(&v.time) {
            let tv = unzigzag(tv);
            let dt = if dod { tv.wrapping_add(last_dt) } else { tv };
            last_dt = dt;
            ticks = ticks.wrapping_add(dt as u64);
            let kind = kinds[tag as usize];
            let op = op_of[(tag & COL_OP_MASK) as usize];
            let plain = kind & !K_TIMED;
            let args = if plain == K_COMMON | K_SIZE | K_ALLOCATES && class_alloc {
                Ok(malloc(md, &mut allocs, v, &mut at))
            } else if plain == K_COMMON | K_RELEASES {
                Ok(free(md, &allocs, v, &mut at, &mut bad))
            } else if kind & K_COMMON != 0 {
                Ok(common(md, &mut allocs, v, &mut at, kind, class_alloc, &mut bad))
            } else {
                md.allocs = allocs;
                let a = general(md, v, &mut at, tag, op, class_alloc);
                allocs = std::mem::take(&mut md.allocs);
                a
            };
            let args = match args {
                Ok(a) => a,
                Err(e) => {
                    r = Err(e);
                    break;
                }
            };
            let backend = v.backend[at.backend];
            at.backend += (tag & COL_TIMED != 0) as usize;
            let backend_ticks = if tag & COL_TIMED != 0 { Some(backend) } else { None };
            f(&RawRecord { op, ticks, args, backend_ticks });
        }
        md.allocs = allocs;
        r?;
        if bad {
            return Err("a free of an allocation before the frame's first".into());
        }
        (md.last_ticks, md.last_dt) = (ticks, last_dt);
        self.i += m;
        Ok(m)
    }

    /// After the last record: every column must be used up.
    #[cold]
    #[allow(
        clippy::needless_range_loop,
        reason = "c indexes the positions, the columns and their names alike"
    )]
    fn end(&self, cols: &Columns) -> Result<usize, String> {
        for c in 1..N_COLS {
            if self.pos[c] != cols.0[c].len() {
                return Err(format!(
                    "column {} has {} bytes left over",
                    COLUMN_NAMES[c],
                    cols.0[c].len() - self.pos[c]
                ));
            }
        }
        Ok(0)
    }

    #[cold]
    fn bad(&self, ops: &[u8]) -> String {
        let t = ops.iter().find(|&&t| self.need[t as usize] >> SH_BAD != 0).copied().unwrap_or(0);
        format!("unknown operation {}", t & COL_OP_MASK)
    }

    /// Rebuilds the `n` records of `cols` into `out` (reset for `stream` first), in the row
    /// encoding.
    pub fn decode(
        &mut self,
        cols: &Columns,
        n: u32,
        first_ticks: u64,
        stream: u32,
        out: &mut Buf,
    ) -> Result<(), String> {
        out.reset(stream);
        self.start(cols, n, first_ticks)?;
        let mut full = false;
        while self.run::<false>(cols, BATCH, |r| {
            if !out.has_room() {
                full = true;
                return;
            }
            let x = &r.args;
            let a =
                Args { size: x.size, count: x.count, align: x.align, old: x.old, ptr: x.ptr, value: x.value };
            out.push(r.op, r.ticks, &a, r.backend_ticks);
        })? > 0
        {
            if full {
                return Err("records overflow a buffer".into());
            }
        }
        Ok(())
    }
}
