//! One thread's stream as the merge reads it: its frames decoded a batch at a time, each
//! record keyed for the merge; and what a pool's worker (pool.rs) runs to decode a frame
//! ahead ([`Worker`], [`Decoded`]), with the pool as the merge sees it ([`Ahead`]).
use super::mapped::POPULATE_AHEAD;
use super::*;

/// Records a cursor decodes at a time: small enough that the batches of many streams stay
/// in cache, large enough that decoding runs as a tight loop.
pub(super) const BATCH: usize = 128;
const _: () = assert!(BATCH.is_power_of_two());

/// One thread's stream while the merge reads it.
pub(super) struct Cursor {
    pub(super) stream: u32,
    pub(super) tid: u32,
    /// Indices into `LogReader::frames` still to read, in file order.
    pub(super) frames: std::vec::IntoIter<usize>,
    pub(super) data: Vec<u8>,
    pub(super) state: DecodeState,
    pub(super) cur_offset: u64,
    /// The stream's decoded records, `len` of them, not yet handed out from `pos` on,
    /// with their keys.
    /// The frame in hand is columnar: its columns and where they are being read (`data`
    /// is then empty).
    pub(super) columnar: bool,
    pub(super) cols: Option<Box<(crate::columns::Columns, crate::columns::Decoder)>>,
    pub(super) batch: Box<[Event; BATCH]>,
    pub(super) keys: Box<[Key; BATCH]>,
    pub(super) len: usize,
    pub(super) pos: usize,
    /// The frame in hand when a pool decoded it (see pool.rs).
    pub(super) pre: Option<Box<Decoded>>,
}

impl Cursor {
    pub(super) fn new(stream: u32) -> Cursor {
        Cursor {
            stream,
            tid: 0,
            frames: Vec::new().into_iter(),
            data: Vec::new(),
            state: DecodeState::default(),
            cur_offset: 0,
            columnar: false,
            cols: None,
            batch: Box::new([Event::default(); BATCH]),
            keys: Box::new([EMPTY; BATCH]),
            len: 0,
            pos: 0,
            pre: None,
        }
    }

    /// Starts on `stream`, whose frames (in file order) are `frames`.
    pub(super) fn reset(&mut self, stream: u32, frames: Vec<usize>) {
        self.stream = stream;
        self.tid = 0;
        self.frames = frames.into_iter();
        self.data.clear();
        self.columnar = false;
        self.state = DecodeState::default();
        self.cur_offset = 0;
        self.len = 0;
        self.pos = 0;
    }
}

/// Merge order, packed into one integer so that comparing two is one instruction: ticks
/// since the log's earliest frame (high bits), then a free before anything else (its block
/// may be the one the other record returns), then the cursor's slot (the low `Order::slot_bits`
/// bits). `EMPTY` (every bit set) marks a slot with no stream.
pub(super) type Key = u64;
pub(super) const EMPTY: Key = Key::MAX;
/// In [`Events::ahead`]: the slot's batch has no record after the one in the tournament.
/// (`Order::max_rel` keeps every record's key at most u64::MAX - 4.)
pub(super) const REFILL: Key = Key::MAX - 1;

/// How keys are packed for one log: enough slot bits for every stream in it, the rest for
/// ticks. Ticks beyond what fits (a log spanning more than ~2^(63 - slot_bits) ticks, over a
/// year for a log of a thousand threads at the shim's clock rate) or before the earliest
/// frame (only a corrupt log) are clamped, and such records merge at the clamp.
#[derive(Clone, Copy)]
pub(super) struct Order {
    pub(super) base: u64,
    pub(super) slot_bits: u32,
    pub(super) max_rel: u64,
}

impl Order {
    /// The order of `r`'s records.
    pub(super) fn of(r: &LogReader) -> Order {
        let streams: std::collections::HashSet<u32> = r.frames.iter().map(|f| f.h.stream).collect();
        Order::new(r.frames.iter().map(|f| f.h.first_ticks).min().unwrap_or(0), streams.len())
    }

    pub(super) fn new(base: u64, streams: usize) -> Order {
        let slot_bits = (usize::BITS - streams.max(1).leading_zeros()).max(1);
        Order { base, slot_bits, max_rel: (1u64 << (63 - slot_bits)) - 2 }
    }

    #[inline(always)]
    pub(super) fn key(&self, ticks: u64, op: Op, slot: u32) -> Key {
        let rel = ticks.saturating_sub(self.base).min(self.max_rel);
        let class = !op.is_free() as u64;
        (rel << (self.slot_bits + 1)) | (class << self.slot_bits) | slot as u64
    }

    /// The smallest key a record of `ticks` or later can have (EMPTY for u64::MAX: no
    /// stream waiting to start).
    #[inline(always)]
    pub(super) fn start_key(&self, ticks: u64) -> Key {
        if ticks == u64::MAX {
            return EMPTY;
        }
        ticks.saturating_sub(self.base).min(self.max_rel) << (self.slot_bits + 1)
    }

    #[inline(always)]
    pub(super) fn slot(&self, k: Key) -> u32 {
        (k & ((1u64 << self.slot_bits) - 1)) as u32
    }
}

/// What decoding needs besides the cursor being filled.
pub(super) struct Src<'a> {
    pub(super) r: &'a LogReader,
    pub(super) comp: Vec<u8>,
    pub(super) dctx: Option<zstd::bulk::Decompressor<'static>>,
    /// Rebuilds columnar frames' records.
    pub(super) cols: Option<Box<crate::columns::Reader>>,
    /// Ticks are nanoseconds already (ticks_per_sec == 1e9 and ref_ticks == 0).
    pub(super) ticks_are_ns: bool,
    pub(super) scale: format::NsScale,
    pub(super) order: Order,
    /// Decode with PEXT (the CPU has a fast one).
    pub(super) pext: bool,
    /// Run the copies compiled for x86-64-v3 (the CPU has its features).
    pub(super) v3: bool,
    /// Problems met while decoding frames.
    pub(super) issues: Vec<ReadIssue>,
    /// Which frames have been read, the first not yet read, and how far the mapping has
    /// been released (see [`Src::sweep`]).
    pub(super) done: Vec<bool>,
    pub(super) low: usize,
    pub(super) released: u64,
    /// How far the mapping has been populated ahead (see [`Src::sweep`]).
    pub(super) populated: u64,
    pub(super) bytes_read: u64,
    pub(super) clean_end: bool,
    pub(super) after_cut: u64,
    /// Whether reading a frame releases the mapping behind (not on a pool's workers).
    pub(super) sweeps: bool,
    /// The pool decoding frames ahead (None: each frame decoded here when the merge gets to
    /// it), and the decoder for a frame no worker has started.
    pub(super) pool: Option<&'a dyn Ahead<'a>>,
    pub(super) inline: Option<Box<Worker<'a>>>,
}

impl<'a> Src<'a> {
    pub(super) fn new(r: &'a LogReader, order: Order) -> Src<'a> {
        let h = &r.header;
        Src {
            r,
            comp: Vec::new(),
            dctx: None,
            cols: None,
            ticks_are_ns: h.ticks_per_sec == 1e9 && h.ref_ticks == 0,
            scale: format::NsScale::of(h),
            pext: crate::cpu::has_fast_pext(),
            v3: crate::cpu::has_v3(),
            order,
            issues: Vec::new(),
            done: vec![false; r.frames.len()],
            low: 0,
            released: 0,
            populated: 0,
            bytes_read: 0,
            clean_end: false,
            after_cut: 0,
            sweeps: true,
            pool: None,
            inline: None,
        }
    }
}

impl Src<'_> {
    #[inline(always)]
    pub(super) fn ns(&self, ticks: u64) -> u64 {
        if self.ticks_are_ns {
            ticks
        } else {
            self.scale.ns(ticks)
        }
    }

    /// The event of `rec`, its `ts_ns` still in ticks (see `refill_with`).
    #[inline(always)]
    pub(super) fn raw_event(
        &self,
        rec: &crate::buffer::RawRecord,
        tid: u32,
        stream: u32,
        value: u64,
    ) -> Event {
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
    pub(super) fn refill(&mut self, c: &mut Cursor, slot: u32) -> bool {
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
    pub(super) fn refill_with<const PEXT: bool>(&mut self, c: &mut Cursor, slot: u32) -> bool {
        c.pos = 0;
        let cut = self.r.cut_ticks.unwrap_or(u64::MAX);
        loop {
            if let Some(d) = &mut c.pre {
                if d.pos < d.chunks.len() {
                    // The worker's batch becomes the cursor's, and the cursor's goes back.
                    let (b, k) = &mut d.chunks[d.pos];
                    std::mem::swap(&mut c.batch, b);
                    std::mem::swap(&mut c.keys, k);
                    let len = d.lens[d.pos];
                    for k in &mut c.keys[..len] {
                        *k |= slot as u64;
                    }
                    // The events before the frame's first thread_start: the stream's tid.
                    let unknown = d.before_start.saturating_sub(d.taken).min(len);
                    for e in &mut c.batch[..unknown] {
                        e.tid = c.tid;
                    }
                    d.pos += 1;
                    d.taken += len;
                    c.len = len;
                    return true;
                }
                let d = c.pre.take().expect("frame in hand");
                if let Some(t) = d.last_tid {
                    c.tid = t;
                }
                if let Some(p) = self.pool {
                    p.give_back(d);
                }
            }
            let len =
                if c.columnar { self.fill_columnar::<PEXT>(c, cut) } else { self.fill_rows::<PEXT>(c, cut) };
            let (batch, keys) = (&mut *c.batch, &mut *c.keys);
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
            if let Some(p) = self.pool {
                let mut d = p.take(fi, &mut self.inline);
                self.issues.append(&mut d.issues);
                self.after_cut += d.after_cut;
                self.clean_end |= d.clean_end;
                c.data.clear();
                c.columnar = false;
                c.pre = Some(d);
                self.sweep(fi);
                continue;
            }
            let r = self.r;
            c.columnar = info.h.columnar;
            let read = if info.h.columnar {
                c.data.clear();
                let cd = c.cols.get_or_insert_with(Default::default);
                r.read_columns(&info, &mut self.comp, &mut self.dctx, &mut cd.0)
                    .and_then(|()| cd.1.start(&cd.0, info.h.n_records, info.h.first_ticks))
            } else {
                r.read_frame(&info, &mut self.comp, &mut self.dctx, &mut self.cols, &mut c.data)
            };
            if let Err(reason) = read {
                self.issues.push(ReadIssue::CorruptFrame { offset: info.offset, reason });
                c.data.clear();
                c.columnar = false;
            }
            self.sweep(fi);
            c.state = DecodeState::new(info.h.first_ticks);
        }
    }

    /// Decodes the row frame in hand into `c.batch`, up to BATCH records; how many.
    #[inline(always)]
    fn fill_rows<const PEXT: bool>(&mut self, c: &mut Cursor, cut: u64) -> usize {
        // The decoder's state is copied out and back, so that the loop keeps it in
        // registers: stored in the cursor, it went through memory between records (the
        // compiler cannot tell that the batch's stores leave it alone).
        let (data, batch) = (&c.data[..], &mut *c.batch);
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
            if let Some(e) = self.general(&rec, &mut tid, stream, cut) {
                batch[len] = e;
                len += 1;
            }
        }
        c.state = state;
        c.tid = tid;
        len
    }

    /// The same for a columnar frame, decoded a batch of records at a time (column by
    /// column, see [`crate::columns::Decoder::run`]), every record through the general path.
    #[inline(always)]
    fn fill_columnar<const PEXT: bool>(&mut self, c: &mut Cursor, cut: u64) -> usize {
        let (batch, cd) = (&mut *c.batch, c.cols.as_mut().expect("columns"));
        let (cols, dec) = (&cd.0, &mut cd.1);
        let (stream, mut tid, mut len) = (c.stream, c.tid, 0);
        while len < BATCH {
            // What the run's records do to the stream, undone with them should it fail.
            let (before, tid0, after_cut0, clean_end0) = (len, tid, self.after_cut, self.clean_end);
            let ran = dec.run::<PEXT>(cols, BATCH - len, |rec| {
                if let Some(e) = self.general(rec, &mut tid, stream, cut) {
                    batch[len] = e;
                    len += 1;
                }
            });
            match ran {
                Ok(0) => c.columnar = false,
                Ok(_) => continue,
                Err(reason) => {
                    // The records decoded before the error in this run are left out too,
                    // and what they did (a thread_start's tid, an end, calls after the cut).
                    (len, tid, self.after_cut, self.clean_end) = (before, tid0, after_cut0, clean_end0);
                    self.issues.push(ReadIssue::CorruptFrame { offset: c.cur_offset, reason });
                    c.columnar = false;
                }
            }
            break;
        }
        c.tid = tid;
        len
    }

    /// The event of a record of any kind: None for a call stamped after the cut; a
    /// thread_start sets the stream's tid, an end's cut is converted to ns.
    #[inline(always)]
    fn general(
        &mut self,
        rec: &crate::buffer::RawRecord,
        tid: &mut u32,
        stream: u32,
        cut: u64,
    ) -> Option<Event> {
        if rec.op.is_alloc_family() && rec.ticks > cut {
            self.after_cut += 1;
            return None;
        }
        if rec.op == Op::ThreadStart {
            *tid = rec.args.value as u32;
        }
        let mut value = rec.args.value;
        if rec.op == Op::End {
            self.clean_end = true;
            if value != 0 {
                value = self.ns(value);
            }
        }
        Some(self.raw_event(rec, *tid, stream, value))
    }

    /// Frame `fi` has been read: the mapping is released up to the first frame still to be
    /// read, a MiB or more at a time. (Streams are read in time order, which is close to file
    /// order, so what stays mapped is about a frame per thread.)
    pub(super) fn sweep(&mut self, fi: usize) {
        let Some(m) = &self.r.map else {
            return;
        };
        if !self.sweeps {
            return;
        }
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
    pub(super) fn after(&self) -> Key {
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
pub(super) fn next_key(src: &mut Src<'_>, c: &mut Cursor, free_slots: &mut Vec<u32>, slot: u32) -> Key {
    if c.pos < c.len {
        c.keys[c.pos & (BATCH - 1)]
    } else {
        next_batch(src, c, free_slots, slot)
    }
}

/// [`next_key`] once the batch is used up: out of line, so that the merge loop stays small
/// enough to keep its state in registers.
#[inline(never)]
pub(super) fn next_batch(src: &mut Src<'_>, c: &mut Cursor, free_slots: &mut Vec<u32>, slot: u32) -> Key {
    if src.refill(c, slot) {
        c.keys[0]
    } else {
        free_slots.push(slot);
        EMPTY
    }
}

/// Frames decoded ahead of the merge (pool.rs's [`super::Pool`]): frame `fi` decoded (here,
/// with `w`, when no worker has started it), and a frame's buffers given back, done with.
pub(super) trait Ahead<'a>: Sync {
    fn take(&self, fi: usize, w: &mut Option<Box<Worker<'a>>>) -> Box<Decoded>;
    fn give_back(&self, d: Box<Decoded>);
}

/// One frame's events, decoded by a worker.
#[derive(Default)]
pub(super) struct Decoded {
    /// The events a batch at a time, as the worker's cursor decoded them (the merge swaps
    /// each with its cursor's batch: no event is copied), with their merge keys (slot 0:
    /// the merge ORs its slot in), and how many each batch holds.
    pub(super) chunks: Vec<Chunk>,
    pub(super) lens: Vec<usize>,
    /// Batches to fill again.
    pub(super) spare: Vec<Chunk>,
    /// Events in all.
    pub(super) events: usize,
    pub(super) issues: Vec<ReadIssue>,
    pub(super) after_cut: u64,
    pub(super) clean_end: bool,
    /// The events before the frame's first thread_start (all of them when it has none):
    /// their tid is the stream's from its earlier frames, which the worker did not know.
    pub(super) before_start: usize,
    /// The tid the frame's last thread_start set.
    pub(super) last_tid: Option<u32>,
    /// The next batch for the merge, and the events it took before it.
    pub(super) pos: usize,
    pub(super) taken: usize,
}

pub(super) type Chunk = (Box<[Event; BATCH]>, Box<[Key; BATCH]>);

impl Decoded {
    /// Ready to be filled again, its batches kept.
    fn recycle(&mut self) {
        let chunks = std::mem::take(&mut self.chunks);
        self.spare.extend(chunks);
        self.lens.clear();
        self.issues.clear();
        (self.events, self.pos, self.taken) = (0, 0, 0);
    }
}

/// A thread's decoder: the reader's own [`Src`] and a [`Cursor`] of its own.
pub(super) struct Worker<'a> {
    src: Src<'a>,
    c: Cursor,
}

impl<'a> Worker<'a> {
    pub(super) fn new(r: &'a LogReader) -> Worker<'a> {
        let mut src = Src::new(r, Order::of(r));
        src.sweeps = false;
        Worker { src, c: Cursor::new(0) }
    }

    pub(super) fn decode(&mut self, fi: usize, mut d: Box<Decoded>) -> Box<Decoded> {
        let (src, c) = (&mut self.src, &mut self.c);
        src.issues.clear();
        src.after_cut = 0;
        src.clean_end = false;
        c.reset(src.r.frames[fi].h.stream, vec![fi]);
        d.recycle();
        let mut start = None;
        while src.refill(c, 0) {
            if start.is_none() {
                if let Some(i) = c.batch[..c.len].iter().position(|e| e.op == Op::ThreadStart) {
                    start = Some(d.events + i);
                }
            }
            let (mut b, mut k) = d
                .spare
                .pop()
                .unwrap_or_else(|| (Box::new([Event::default(); BATCH]), Box::new([EMPTY; BATCH])));
            std::mem::swap(&mut c.batch, &mut b);
            std::mem::swap(&mut c.keys, &mut k);
            d.chunks.push((b, k));
            d.lens.push(c.len);
            d.events += c.len;
        }
        d.issues.append(&mut src.issues);
        d.after_cut = src.after_cut;
        d.clean_end = src.clean_end;
        d.before_start = start.unwrap_or(d.events);
        d.last_tid = start.map(|_| c.tid);
        d
    }
}
