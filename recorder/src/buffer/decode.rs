//! Reading a frame's records back: the general decoder, one record at a time by its op's
//! layout, and the fast path for the allocation records that make up nearly every log.
use super::MAX_RECORD;
use crate::event::{Field, Op};
use crate::format::{PTR_SHIFT, TAG_PTR_BYTES, TAG_TIMED};
use crate::varint;

/// A record decoded from a frame's payload (ticks not yet converted).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawRecord {
    pub op: Op,
    pub ticks: u64,
    pub args: RawArgs,
    pub backend_ticks: Option<u64>,
}

/// A decoded record's arguments: the same fields the thread wrote.
pub type RawArgs = super::Args;

/// What [`DecodeState::next_common`] needs to know of a tag's op and timing bits (its low 7
/// bits): the fields before the pointer (bits 0-1), what the first of two is (bits 2-3: 1
/// count, 2 align, 3 old), the index of the record's last varint after the tag (bits 4-5),
/// and whether it takes the fast path at all (bit 6). Reallocarray (three fields before the
/// pointer), a timed record with two fields before its pointer (five varints), and the
/// thread and process records do not.
const COMMON: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < COMMON_OPS.len() {
        let (op, pre, first_is) = COMMON_OPS[i];
        let mut timed = 0u8;
        while timed < 2 {
            // Varints: the time delta, `pre` fields, the pointer, the backend time if timed.
            let last = pre + 1 + timed;
            if last < 4 {
                t[op as usize | (timed as usize) << 6] = 0x40 | last << 4 | first_is << 2 | pre;
            }
            timed += 1;
        }
        i += 1;
    }
    t
};

/// The ops of the fast path: the fields before the pointer, and what the first of two is.
const COMMON_OPS: [(Op, u8, u8); 10] = [
    (Op::Malloc, 1, 0),
    (Op::FreeSized, 1, 0),
    (Op::Valloc, 1, 0),
    (Op::Pvalloc, 1, 0),
    (Op::Free, 0, 0),
    (Op::Calloc, 2, 1),
    (Op::PosixMemalign, 2, 2),
    (Op::AlignedAlloc, 2, 2),
    (Op::Memalign, 2, 2),
    (Op::Realloc, 2, 3),
];

/// COMMON's `pre` again, two bits per op code (all under 32), so that the length of a fast
/// record comes from its tag by a shift rather than a load: it is on the chain from one
/// record to the next.
const PRE_BITS: u64 = {
    let mut b = 0u64;
    let mut i = 0;
    while i < COMMON_OPS.len() {
        let (op, pre, _) = COMMON_OPS[i];
        b |= (pre as u64) << (2 * op as u32);
        i += 1;
    }
    b
};

/// Bit i set when byte i of the 16 has its continuation bit (the top bit) set.
#[inline(always)]
fn continuation_bits(b: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_movemask_epi8};
        let b: &[u8; 16] = b.try_into().expect("16 bytes");
        // SAFETY: SSE2 is part of x86_64; the load reads the 16 bytes of `b`.
        unsafe { _mm_movemask_epi8(_mm_loadu_si128(b.as_ptr() as *const __m128i)) as u32 }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        b.iter().enumerate().fold(0u32, |m, (i, &x)| m | (((x >> 7) as u32) << i))
    }
}

/// The varint starting at byte `first` (counted from after the tag) of a record whose bytes
/// are `w`, if it is at most 8 bytes long (the caller checks; a longer one gives garbage).
/// With `PEXT` (only inlined into code compiled for BMI2, see [`crate::cpu::has_fast_pext`]) the 7-bit
/// groups are packed by one instruction.
#[inline(always)]
fn field<const PEXT: bool>(w: &[u8; MAX_RECORD], first: u32) -> u64 {
    // first <= 33 (one past a trailing_zeros of a u32); the mask only shows the compiler
    // that the 8 bytes lie inside `w`.
    let i = (1 + first as usize) & 63;
    let x = u64::from_le_bytes(w[i..i + 8].try_into().expect("8 bytes"));
    // Keep the bytes up to the first without the continuation bit.
    let stop = !x & 0x8080_8080_8080_8080;
    let x = x & (stop ^ stop.wrapping_sub(1));
    #[cfg(target_arch = "x86_64")]
    if PEXT {
        // SAFETY: PEXT is only true in functions compiled with BMI2, called after
        // cpu::has_fast_pext() said the CPU has it.
        return unsafe { core::arch::x86_64::_pext_u64(x, 0x7f7f_7f7f_7f7f_7f7f) };
    }
    let x = x & 0x7f7f_7f7f_7f7f_7f7f;
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// Decodes the records of one frame. Stops with an error at the first malformed record.
pub struct Decoder<'a> {
    data: &'a [u8],
    state: DecodeState,
}

/// Where a decoder is in a frame's records, kept apart from the bytes so that a reader can
/// own both.
#[derive(Clone, Copy, Debug, Default)]
pub struct DecodeState {
    pos: usize,
    last_ticks: u64,
    prev_ptr: u64,
}

impl DecodeState {
    pub fn new(first_ticks: u64) -> Self {
        DecodeState { pos: 0, last_ticks: first_ticks, prev_ptr: 0 }
    }
    pub fn pos(&self) -> usize {
        self.pos
    }
}

impl<'a> Decoder<'a> {
    pub fn new(data: &'a [u8], first_ticks: u64) -> Self {
        Decoder { data, state: DecodeState::new(first_ticks) }
    }

    pub fn is_done(&self) -> bool {
        self.state.pos >= self.data.len()
    }

    /// Bytes of the frame decoded so far.
    pub fn pos(&self) -> usize {
        self.state.pos
    }

    /// Next record, `Ok(None)` at the end, `Err(offset)` at a malformed record.
    pub fn next_record(&mut self) -> Result<Option<RawRecord>, usize> {
        self.state.next_record(self.data)
    }
}

impl DecodeState {
    /// Next record of `data`, `Ok(None)` at the end, `Err(offset)` at a malformed record.
    /// Inlined into the reader's batch loop, so that the record never goes through memory.
    #[inline(always)]
    pub fn next_record(&mut self, data: &[u8]) -> Result<Option<RawRecord>, usize> {
        if self.pos >= data.len() {
            return Ok(None);
        }
        let at = self.pos;
        let tag = data[self.pos];
        self.pos += 1;
        let op = Op::from_u8(tag & crate::format::TAG_OP_MASK).ok_or(at)?;
        let d = data;
        let dt = varint::get(d, &mut self.pos).ok_or(at)?;
        let ticks = self.last_ticks.wrapping_add(varint::unzigzag(dt) as u64);
        let mut a = RawArgs::default();
        let shift = if tag & TAG_PTR_BYTES != 0 { 0 } else { PTR_SHIFT };
        // One arm per op with its layout a constant, so that the field loop unrolls into
        // straight-line code (a loop over a runtime layout costs an indirect jump per field).
        macro_rules! by_op {
            ($($o:ident),*) => {
                match op { $(Op::$o => self.fields(d, Op::$o.layout(), &mut a, shift),)* }
            };
        }
        let ok = by_op!(
            Malloc,
            Free,
            Calloc,
            Realloc,
            Reallocarray,
            PosixMemalign,
            AlignedAlloc,
            Memalign,
            Valloc,
            Pvalloc,
            FreeSized,
            ThreadStart,
            ThreadExit,
            Dropped,
            Rss,
            Fork,
            Clock,
            Untraced,
            End,
            Stall,
            AllocStat,
            Window,
            ThreadSeen,
            Stack,
            StackPc,
            Site,
            Mapping,
            MappingBias,
            MappingPath,
            MappingBuildId,
            Exit,
            Recovered
        );
        if !ok {
            return Err(at);
        }
        let backend_ticks =
            if tag & TAG_TIMED != 0 { Some(varint::get(d, &mut self.pos).ok_or(at)?) } else { None };
        self.last_ticks = ticks;
        Ok(Some(RawRecord { op, ticks, args: a, backend_ticks }))
    }

    /// The allocation records (all but reallocarray), nearly every record of a log, decoded
    /// without bounds checks or a branch on the op while at least [`MAX_RECORD`] bytes
    /// remain. None, with nothing consumed, for anything else (another record, a varint
    /// longer than 8 bytes or past the 16 bytes after the tag, the end of the frame): decode
    /// that one with [`DecodeState::next_record`]. Same results as it.
    /// `PEXT`: see [`crate::cpu::has_fast_pext`]; true only where inlined into code compiled for BMI2.
    #[inline(always)]
    pub fn next_common<const PEXT: bool>(&mut self, data: &[u8]) -> Option<RawRecord> {
        let at = self.pos;
        let w: &[u8; MAX_RECORD] = data.get(at..at + MAX_RECORD)?.try_into().ok()?;
        let tag = w[0];
        let kind = COMMON[(tag & 0x7f) as usize] as u32;
        if kind == 0 {
            return None;
        }
        debug_assert!(Op::from_u8(tag & crate::format::TAG_OP_MASK).is_some());
        // Where every varint of the record ends, from one look at the 16 bytes after the
        // tag: the bytes without the continuation bit. The fields are then read side by side
        // instead of each waiting for the length of the one before.
        let cont = continuation_bits(&w[1..17]);
        let e0 = !cont & 0xffff;
        let e1 = e0 & e0.wrapping_sub(1);
        let e2 = e1 & e1.wrapping_sub(1);
        let e3 = e2 & e2.wrapping_sub(1);
        // The last byte of each varint (32: not in these 16).
        let p = [e0.trailing_zeros(), e1.trailing_zeros(), e2.trailing_zeros(), e3.trailing_zeros()];
        let (pre, first_is) = (kind & 3, (kind >> 2) & 3);
        // kind's bits 4-5, computed from the tag (the same for every tag with a kind).
        let last = ((PRE_BITS >> ((2 * tag as u32) & 63)) & 3) as u32 + 1 + ((tag as u32 >> 6) & 1);
        debug_assert_eq!(last, (kind >> 4) & 3);
        // The next record starts after this one's last varint: on the chain from one
        // record to the next, so with PEXT's sibling PDEP (the (last+1)-th end, 32 when there
        // is none) rather than through the array.
        #[cfg(target_arch = "x86_64")]
        let end = if PEXT {
            // SAFETY: PEXT is only true in functions compiled with BMI2 (see `field`).
            unsafe { core::arch::x86_64::_pdep_u32(1 << last, e0).trailing_zeros() }
        } else {
            p[last as usize]
        };
        #[cfg(not(target_arch = "x86_64"))]
        let end = p[last as usize];
        // Bit i of `long`: bytes i..i+8 all continue, so a varint there is over 8 bytes.
        // Anywhere in the 16 bytes, even past this record: such varints are rare, and the
        // general decoder takes the record then.
        let long = cont & (cont >> 1);
        let long = long & (long >> 2);
        let long = long & (long >> 4);
        if (end >= 16) | (long != 0) {
            return None;
        }
        let v = [
            field::<PEXT>(w, 0),
            field::<PEXT>(w, p[0] + 1),
            field::<PEXT>(w, p[1] + 1),
            field::<PEXT>(w, p[2] + 1),
        ];
        // The fields by what they are (pre is 0, 1 or 2; a timed record has pre < 2), picked
        // with selects rather than by indexing `v`, which would go through memory.
        let sel = std::hint::select_unpredictable;
        let size = sel(pre == 0, 0, sel(pre == 1, v[1], v[2]));
        let ptr_field = sel(pre == 0, v[1], sel(pre == 1, v[2], v[3]));
        let backend = sel(pre == 0, v[2], v[3]);
        let shift = if tag & TAG_PTR_BYTES != 0 { 0 } else { PTR_SHIFT };
        let delta = |d: u64| (varint::unzigzag(d) << shift) as u64;
        // Two fields before the pointer: the first is the count, alignment or old pointer.
        let a = v[1];
        let is_old = first_is == 3;
        let old = self.prev_ptr.wrapping_add(delta(a));
        let base = sel(is_old, old, self.prev_ptr);
        let ptr = base.wrapping_add(delta(ptr_field));
        let ticks = self.last_ticks.wrapping_add(varint::unzigzag(v[0]) as u64);
        self.prev_ptr = ptr;
        self.last_ticks = ticks;
        self.pos = at + 2 + end as usize;
        let two = pre == 2;
        Some(RawRecord {
            // SAFETY: Op is repr(u8), and kind != 0 only for tags whose op bits are the code
            // of one of COMMON_OPS' ops (the COMMON table is built so). A checked conversion
            // here cost 3% of the reader's instructions.
            op: unsafe { std::mem::transmute::<u8, Op>(tag & crate::format::TAG_OP_MASK) },
            ticks,
            args: RawArgs {
                size,
                count: if two & (first_is == 1) { a } else { 0 },
                align: if two & (first_is == 2) { a } else { 0 },
                old: if is_old { old } else { 0 },
                ptr,
                value: 0,
            },
            backend_ticks: if tag & TAG_TIMED != 0 { Some(backend) } else { None },
        })
    }

    #[inline(always)]
    fn fields(&mut self, d: &[u8], layout: &[Field], a: &mut RawArgs, shift: u32) -> bool {
        for f in layout {
            let Some(v) = varint::get(d, &mut self.pos) else {
                return false;
            };
            match f {
                Field::Size => a.size = v,
                Field::Count => a.count = v,
                Field::Align => a.align = v,
                Field::Value | Field::Tid => a.value = v,
                Field::Old | Field::Ptr => {
                    let p = self.prev_ptr.wrapping_add((varint::unzigzag(v) << shift) as u64);
                    self.prev_ptr = p;
                    if *f == Field::Old {
                        a.old = p
                    } else {
                        a.ptr = p
                    }
                }
            }
        }
        true
    }
}
