//! A thread's event buffer: records are encoded into it with plain stores, and the recorder
//! thread compresses a full one into one frame. Nothing here locks or allocates. Reading the
//! records back is `buffer/decode.rs`.
use crate::event::{Field, Op};
use crate::format::{PTR_SHIFT, TAG_PTR_BYTES, TAG_TIMED};
use crate::varint;

mod decode;
pub use decode::{DecodeState, Decoder, RawArgs, RawRecord};

/// Bytes of records per buffer (one frame).
pub const BUF_CAP: usize = 64 * 1024;
/// The longest record: tag, time delta, five fields and a backend time.
pub const MAX_RECORD: usize = 1 + 7 * varint::MAX_LEN;

/// The arguments of one record; [`Op::layout`] says which of them are written.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Args {
    pub size: u64,
    pub count: u64,
    pub align: u64,
    pub old: u64,
    pub ptr: u64,
    pub value: u64,
}

impl Args {
    /// Bytes a call of `op` with these arguments asked for (count * size for the array
    /// forms), as [`crate::event::Event::requested`] reads it back from the log.
    #[inline(always)]
    pub fn requested(&self, op: Op) -> u64 {
        op.requested(self.count, self.size)
    }
}

#[repr(C)]
pub struct Buf {
    /// The stream these records belong to (0: process records, else a thread).
    pub stream: u32,
    pub n: u32,
    pub len: u32,
    /// Which log of the process the buffer's records go to (0: the main or watch log, N:
    /// window N's), for recovery from the in-flight file (it fills what was padding).
    pub log: u32,
    pub first_ticks: u64,
    pub last_ticks: u64,
    prev_ptr: u64,
    pub data: [u8; BUF_CAP],
}

impl Buf {
    /// A zeroed buffer on the heap (through the global allocator).
    pub fn new_boxed(stream: u32) -> Box<Buf> {
        // Box::new would build 64 KiB on the stack first.
        let b: Box<core::mem::MaybeUninit<Buf>> = Box::new_zeroed();
        let mut b = unsafe { b.assume_init() };
        b.stream = stream;
        b
    }

    /// Empties the buffer for reuse, possibly by another stream.
    #[inline]
    pub fn reset(&mut self, stream: u32) {
        self.stream = stream;
        self.n = 0;
        self.len = 0;
        self.prev_ptr = 0;
    }

    /// True when one more record of any kind fits.
    #[inline(always)]
    pub fn has_room(&self) -> bool {
        (self.len as usize) + MAX_RECORD <= BUF_CAP
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    pub fn records(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }

    /// Appends one record. The caller has checked [`Buf::has_room`]. `ticks` and
    /// `backend_ticks` are in the log's units (the header's ticks_per_sec).
    #[inline(always)]
    pub fn push(&mut self, op: Op, ticks: u64, a: &Args, backend_ticks: Option<u64>) {
        // The two records that make up nearly every log get straight-line code (`op` is a
        // constant wherever this is inlined, so the choice costs nothing).
        match op {
            Op::Malloc => return self.push_one(op, ticks, Some(a.size), a.ptr, backend_ticks),
            Op::Free => return self.push_one(op, ticks, None, a.ptr, backend_ticks),
            Op::FreeSized => return self.push_one(op, ticks, Some(a.size), a.ptr, backend_ticks),
            _ => {}
        }
        if self.n == 0 {
            self.first_ticks = ticks;
            self.last_ticks = ticks;
        }
        // Pointer deltas first: when all are multiples of 8 (always, for pointers the
        // allocators hand out) they are stored divided by 8.
        let layout = op.layout();
        let mut prev = self.prev_ptr;
        let mut odd = 0u64;
        for f in layout {
            let p = match f {
                Field::Old => a.old,
                Field::Ptr => a.ptr,
                _ => continue,
            };
            odd |= p.wrapping_sub(prev);
            prev = p;
        }
        let shift = if odd & 7 == 0 { PTR_SHIFT } else { 0 };
        let mut tag = op as u8;
        if backend_ticks.is_some() {
            tag |= TAG_TIMED;
        }
        if shift == 0 {
            tag |= TAG_PTR_BYTES;
        }
        // SAFETY: has_room() left MAX_RECORD bytes after `len`; each varint is at most
        // varint::MAX_LEN bytes and a record at most MAX_RECORD.
        unsafe {
            let start = self.data.as_mut_ptr().add(self.len as usize);
            *start = tag;
            let mut w = start.add(1);
            w = varint::put_raw(w, varint::zigzag(ticks.wrapping_sub(self.last_ticks) as i64));
            for f in layout {
                let v = match f {
                    Field::Size => a.size,
                    Field::Count => a.count,
                    Field::Align => a.align,
                    Field::Value | Field::Tid => a.value,
                    Field::Old | Field::Ptr => {
                        let p = if *f == Field::Old { a.old } else { a.ptr };
                        let d = (p.wrapping_sub(self.prev_ptr) as i64) >> shift;
                        self.prev_ptr = p;
                        varint::zigzag(d)
                    }
                };
                w = varint::put_raw(w, v);
            }
            if let Some(t) = backend_ticks {
                w = varint::put_raw(w, t);
            }
            // The record's bytes are stored before the length that covers them, so that a
            // process killed at any instruction leaves whole records below `len` in its
            // in-flight buffer (an ordering for the compiler only: free on x86).
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::Release);
            self.len += w.offset_from(start) as u32;
        }
        self.n += 1;
        self.last_ticks = ticks;
    }
}

impl Buf {
    /// A record whose fields are an optional size and one pointer (malloc, free); the same
    /// bytes as [`Buf::push`] writes for them.
    #[inline(always)]
    fn push_one(&mut self, op: Op, ticks: u64, size: Option<u64>, ptr: u64, backend_ticks: Option<u64>) {
        if self.n == 0 {
            self.first_ticks = ticks;
            self.last_ticks = ticks;
        }
        let d = ptr.wrapping_sub(self.prev_ptr);
        self.prev_ptr = ptr;
        let mut tag = op as u8;
        let d = if d & 7 == 0 {
            (d as i64) >> PTR_SHIFT
        } else {
            tag |= TAG_PTR_BYTES;
            d as i64
        };
        if backend_ticks.is_some() {
            tag |= TAG_TIMED;
        }
        // SAFETY: as in push().
        unsafe {
            let start = self.data.as_mut_ptr().add(self.len as usize);
            *start = tag;
            let mut w =
                varint::put_raw(start.add(1), varint::zigzag(ticks.wrapping_sub(self.last_ticks) as i64));
            if let Some(sz) = size {
                w = varint::put_raw(w, sz);
            }
            w = varint::put_raw(w, varint::zigzag(d));
            if let Some(t) = backend_ticks {
                w = varint::put_raw(w, t);
            }
            // The record's bytes are stored before the length that covers them, so that a
            // process killed at any instruction leaves whole records below `len` in its
            // in-flight buffer (an ordering for the compiler only: free on x86).
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::Release);
            self.len += w.offset_from(start) as u32;
        }
        self.n += 1;
        self.last_ticks = ticks;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop::sample::select(vec![
            Op::Malloc,
            Op::Free,
            Op::Calloc,
            Op::Realloc,
            Op::Reallocarray,
            Op::PosixMemalign,
            Op::AlignedAlloc,
            Op::Memalign,
            Op::Valloc,
            Op::Pvalloc,
            Op::FreeSized,
            Op::ThreadStart,
            Op::ThreadExit,
            Op::Dropped,
            Op::Rss,
            Op::Fork,
            Op::Clock,
            Op::Untraced,
            Op::End,
            Op::Stall,
            Op::AllocStat,
            Op::Window,
            Op::ThreadSeen,
            Op::Stack,
            Op::StackPc,
            Op::Site,
            Op::Mapping,
            Op::MappingBias,
            Op::MappingPath,
            Op::MappingBuildId,
            Op::Exit,
            Op::Recovered,
        ])
    }

    proptest! {
        #[test]
        fn records_roundtrip(recs in prop::collection::vec(
            (op_strategy(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(),
             any::<u64>(), any::<u64>(), any::<Option<u64>>()), 1..200)) {
            let mut b = Buf::new_boxed(3);
            let mut want = Vec::new();
            for (op, t, size, count, align, old, ptr, value, bt) in recs {
                let a = Args { size, count, align, old, ptr, value };
                b.push(op, t, &a, bt);
                let mut r = RawArgs::default();
                for f in op.layout() {
                    match f {
                        Field::Size => r.size = size,
                        Field::Count => r.count = count,
                        Field::Align => r.align = align,
                        Field::Old => r.old = old,
                        Field::Ptr => r.ptr = ptr,
                        Field::Value | Field::Tid => r.value = value,
                    }
                }
                want.push(RawRecord {
                    op,
                    ticks: t,
                    args: r,
                    backend_ticks: bt,
                });
            }
            let mut d = Decoder::new(b.records(), b.first_ticks);
            let mut got = Vec::new();
            while let Some(r) = d.next_record().unwrap() { got.push(r); }
            prop_assert_eq!(got, want);
        }

        /// The fast path for allocation records gives what the general decoder gives, on valid
        /// records and on arbitrary bytes, and never takes a record the general one rejects.
        #[test]
        fn common_path_agrees(recs in prop::collection::vec(
            (op_strategy(),
             prop_oneof![0u64..300, 0u64..1 << 40, any::<u64>()],
             prop_oneof![0u64..200, 0u64..1 << 20, any::<u64>()],
             prop_oneof![0u64..1 << 16, 0u64..1 << 44, any::<u64>()],
             prop_oneof![Just(None), (0u64..1000).prop_map(Some), any::<Option<u64>>()]), 1..300),
            junk: Vec<u8>) {
            // Mostly what real logs hold (small time steps, nearby pointers, small sizes), and
            // some of everything else.
            let mut b = Buf::new_boxed(1);
            let mut t = 0u64;
            for (op, dt, size, off, bt) in recs {
                t = t.wrapping_add(dt);
                let ptr = 0x7f00_0000_0000u64.wrapping_add(off);
                b.push(op, t, &Args { size, ptr, old: ptr ^ 8, value: size, ..Default::default() }, bt);
            }
            let both: &[bool] = if crate::cpu::has_fast_pext() { &[false, true] } else { &[false] };
            for (data, &pext) in [b.records().to_vec(), junk].iter().flat_map(|d| both.iter().map(move |p| (d.clone(), p))) {
                let (mut slow, mut fast) = (DecodeState::new(7), DecodeState::new(7));
                loop {
                    let want = slow.next_record(&data);
                    let got = match if pext { fast.next_common::<true>(&data) } else { fast.next_common::<false>(&data) } {
                        Some(r) => Ok(Some(r)),
                        None => fast.next_record(&data),
                    };
                    prop_assert_eq!(&got, &want);
                    prop_assert_eq!(fast.pos(), slow.pos());
                    if !matches!(want, Ok(Some(_))) {
                        break;
                    }
                }
            }
        }

        #[test]
        fn decoder_never_panics(bytes: Vec<u8>, first: u64) {
            let mut d = Decoder::new(&bytes, first);
            while let Ok(Some(_)) = d.next_record() {}
        }
    }
}
