//! The pre-pass: turns a log into one op stream per recorded thread, with every block named
//! by a replay slot instead of its recorded address.
//!
//! One pass over `reader.events()` (the merged total order) keeps a map from live recorded
//! pointers to slots. A slot is reused once its block is freed, preferring the freeing
//! thread's own recently freed slots, so the slot table is bounded by the peak number of live
//! blocks plus [`LOCAL_FREE_MAX`] per live thread, never by the number of events.
//!
//! Every op on a slot carries the slot's sequence number. When the previous op on the slot
//! was made by another thread the op is flagged [`WAIT`]: the replaying thread waits until the
//! slot's counter reaches that number. Since every wait is on an op earlier in the merged
//! order, and each thread replays its ops in that order, the earliest unfinished op never
//! waits and the replay cannot deadlock, whatever cycles the threads' hand-offs form.
//!
//! The op streams go to one temporary file in chunks of at most [`CHUNK`] bytes; each thread
//! keeps one chunk in memory while planning and the child reads its chunks back with pread.
use recorder::{varint, Event, LogReader, Op};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

/// Bytes of one thread's ops kept in memory before they are appended to the plan file.
pub const CHUNK: usize = 16 * 1024;
/// The longest encoded op: two bytes and at most five varints.
pub const MAX_OP: usize = 2 + 5 * varint::MAX_LEN;
/// A thread keeps at most this many freed slots for itself; more go to the shared pool.
pub const LOCAL_FREE_MAX: usize = 2048;

/// Tag bit: wait for the slot's sequence number before replaying.
pub const WAIT: u8 = 0x80;
pub const ACTION_MASK: u8 = 0x07;

/// What the replaying thread does (the backend call it makes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Action {
    /// malloc(size) into an empty slot. Args: size.
    Malloc = 0,
    /// calloc(count, size) into an empty slot. Args: count, size.
    Calloc = 1,
    /// memalign(align, size) into an empty slot. Args: align, size, requested.
    Memalign = 2,
    /// realloc(slot's block, max(size, 1)). Args: requested (new) size.
    Realloc = 3,
    /// free(slot's block). No args.
    Free = 4,
}

impl Action {
    pub fn from_u8(v: u8) -> Option<Action> {
        Some(match v {
            0 => Action::Malloc,
            1 => Action::Calloc,
            2 => Action::Memalign,
            3 => Action::Realloc,
            4 => Action::Free,
            _ => return None,
        })
    }
    /// The backend function it calls (the latency histograms are kept per function).
    pub fn name(self) -> &'static str {
        match self {
            Action::Malloc => "malloc",
            Action::Calloc => "calloc",
            Action::Memalign => "memalign",
            Action::Realloc => "realloc",
            Action::Free => "free",
        }
    }
    pub const ALL: [Action; 5] =
        [Action::Malloc, Action::Calloc, Action::Memalign, Action::Realloc, Action::Free];
}

/// One decoded op.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOp {
    pub action: u8,
    /// The recorded C function (an [`Op`] as u8), for the per-operation counts.
    pub op: u8,
    pub ts_ns: u64,
    pub slot: u32,
    /// Some(n): wait until the slot's counter is n (the previous op was on another thread).
    pub wait: Option<u32>,
    pub count: u64,
    pub size: u64,
    pub align: u64,
    /// Bytes the program asked for (what the ideal and the slop are measured against).
    pub requested: u64,
}

/// Appends `o` to `out`, delta-encoding its time against `prev_ts`.
pub fn encode(out: &mut Vec<u8>, o: &PlanOp, prev_ts: u64) {
    let mut b = [0u8; MAX_OP];
    b[0] = o.action | if o.wait.is_some() { WAIT } else { 0 };
    b[1] = o.op;
    let mut i = 2;
    i += varint::put(&mut b[i..], varint::zigzag(o.ts_ns.wrapping_sub(prev_ts) as i64));
    i += varint::put(&mut b[i..], o.slot as u64);
    if let Some(w) = o.wait {
        i += varint::put(&mut b[i..], w as u64);
    }
    match Action::from_u8(o.action) {
        Some(Action::Malloc) => i += varint::put(&mut b[i..], o.size),
        Some(Action::Calloc) => {
            i += varint::put(&mut b[i..], o.count);
            i += varint::put(&mut b[i..], o.size);
        }
        Some(Action::Memalign) => {
            i += varint::put(&mut b[i..], o.align);
            i += varint::put(&mut b[i..], o.size);
            i += varint::put(&mut b[i..], o.requested);
        }
        Some(Action::Realloc) => i += varint::put(&mut b[i..], o.requested),
        Some(Action::Free) | None => {}
    }
    out.extend_from_slice(&b[..i]);
}

/// Decodes the op at `buf[*pos..]`; None when the bytes are not a valid op.
#[inline]
pub fn decode(buf: &[u8], pos: &mut usize, prev_ts: u64) -> Option<PlanOp> {
    let tag = *buf.get(*pos)?;
    let op = *buf.get(*pos + 1)?;
    *pos += 2;
    let action = Action::from_u8(tag & ACTION_MASK)?;
    let dts = varint::unzigzag(varint::get(buf, pos)?);
    let mut o = PlanOp {
        action: action as u8,
        op,
        ts_ns: prev_ts.wrapping_add(dts as u64),
        slot: u32::try_from(varint::get(buf, pos)?).ok()?,
        ..PlanOp::default()
    };
    if tag & WAIT != 0 {
        o.wait = Some(u32::try_from(varint::get(buf, pos)?).ok()?);
    }
    match action {
        Action::Malloc => {
            o.size = varint::get(buf, pos)?;
            o.requested = o.size;
        }
        Action::Calloc => {
            o.count = varint::get(buf, pos)?;
            o.size = varint::get(buf, pos)?;
            o.requested = o.count.checked_mul(o.size)?;
        }
        Action::Memalign => {
            o.align = varint::get(buf, pos)?;
            o.size = varint::get(buf, pos)?;
            o.requested = varint::get(buf, pos)?;
        }
        Action::Realloc => {
            o.requested = varint::get(buf, pos)?;
            o.size = o.requested.max(1);
        }
        Action::Free => {}
    }
    Some(o)
}

/// Where one chunk of a thread's ops lies in the plan file.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Chunk {
    pub offset: u64,
    pub len: u32,
}

/// One recorded thread's part of the plan.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ThreadPlan {
    pub stream: u32,
    pub tid: u32,
    pub ops: u64,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    pub chunks: Vec<Chunk>,
}

/// Calls in the log that the replay does not make, by reason.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Skipped {
    /// free() of a pointer the log never saw allocated (allocated before capture began).
    pub unknown_free: u64,
    /// realloc()/reallocarray() of a pointer the log never saw allocated: the old block is
    /// skipped and the result is replayed as a fresh block of the new size.
    pub unknown_realloc: u64,
    /// Calls whose recorded result was NULL (failed): replayed as such, i.e. no block.
    pub null_result: u64,
    /// free(NULL): nothing to do.
    pub free_null: u64,
    /// Blocks the log never freed though their address was handed out again (their free was
    /// dropped, or never recorded): they stay allocated for the rest of the replay.
    pub missed_free: u64,
}

/// Everything the children need besides the op file, and what the pre-pass found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PlanMeta {
    pub threads: Vec<ThreadPlan>,
    /// Size of the slot table (blocks the replay may hold at once, plus free slots kept).
    pub slots: u32,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    /// Events read from the log (all kinds).
    pub events: u64,
    /// malloc-family calls in the log.
    pub calls: u64,
    /// Ops the replay makes, by recorded C function.
    pub ops: BTreeMap<String, u64>,
    pub skipped: Skipped,
    /// free() (and realloc to 0 bytes) of a block last allocated by another thread.
    pub cross_thread_frees: u64,
    /// realloc() of a block last allocated by another thread.
    pub cross_thread_reallocs: u64,
    /// Ops that wait for another thread's op on the same slot.
    pub waiting_ops: u64,
    /// reallocs that moved a block whose old address another thread's allocation got first
    /// in log order (a realloc is stamped when it returns, after it freed the old address):
    /// matched to the reallocating thread's own block.
    pub late_realloc_frees: u64,
    /// Peak of live requested bytes in log order: the ideal footprint.
    pub ideal_bytes: u64,
    pub peak_live_blocks: u64,
    pub end_live_bytes: u64,
    pub end_live_blocks: u64,
    /// Events the shim discarded (SHIM_ON_FULL=drop) and calls it served untraced.
    pub dropped_events: u64,
    pub untraced_calls: u64,
    pub page_size: u64,
    /// Bytes of the op file.
    pub plan_bytes: u64,
    /// Problems the reader met (truncation, corrupt frames).
    pub issues: Vec<String>,
}

struct Live {
    slot: u32,
    owner: u32,
    requested: u64,
}

#[derive(Clone, Copy, Default)]
struct SlotState {
    last_thread: u32,
    seq: u32,
}

struct ThreadBuild {
    plan: ThreadPlan,
    buf: Vec<u8>,
    prev_ts: u64,
    free_slots: Vec<u32>,
}

/// Builds the plan into `file`; `progress` is called now and then with compressed bytes read.
pub fn build(
    reader: &LogReader,
    file: &mut File,
    mut progress: impl FnMut(u64),
) -> Result<PlanMeta, String> {
    let mut p = Planner {
        meta: PlanMeta {
            page_size: if reader.header.page_size.is_power_of_two() {
                reader.header.page_size
            } else {
                4096
            },
            ..PlanMeta::default()
        },
        live: FxHashMap::default(),
        displaced: FxHashMap::default(),
        slots: Vec::new(),
        shared_free: Vec::new(),
        threads: Vec::new(),
        by_stream: FxHashMap::default(),
        live_bytes: 0,
        file,
        file_off: 0,
    };
    let mut events = reader.events();
    let mut first = true;
    while let Some(e) = events.next() {
        p.meta.events += 1;
        if first {
            p.meta.first_ts_ns = e.ts_ns;
            first = false;
        }
        p.meta.last_ts_ns = p.meta.last_ts_ns.max(e.ts_ns);
        p.event(&e)?;
        if p.meta.events.is_multiple_of(65536) {
            progress(events.bytes_read);
        }
    }
    progress(events.bytes_read);
    for i in reader.issues.iter().chain(events.issues.iter()) {
        p.meta.issues.push(i.to_string());
    }
    if !events.clean_end {
        p.meta.issues.push("the log has no end record: the program did not close it cleanly (killed, or still running)".into());
    }
    p.finish()
}

struct Planner<'f> {
    meta: PlanMeta,
    live: FxHashMap<u64, Live>,
    /// Blocks whose address was handed out again while they were live, by (owner, address):
    /// kept for their owner's realloc, which the log may show after the reuse.
    displaced: FxHashMap<(u32, u64), Live>,
    slots: Vec<SlotState>,
    shared_free: Vec<u32>,
    threads: Vec<ThreadBuild>,
    by_stream: FxHashMap<u32, u32>,
    live_bytes: u64,
    file: &'f mut File,
    file_off: u64,
}

impl Planner<'_> {
    fn thread(&mut self, e: &Event) -> u32 {
        if let Some(&t) = self.by_stream.get(&e.stream) {
            return t;
        }
        let t = self.threads.len() as u32;
        self.threads.push(ThreadBuild {
            plan: ThreadPlan {
                stream: e.stream,
                tid: e.tid,
                first_ts_ns: e.ts_ns,
                ..ThreadPlan::default()
            },
            buf: Vec::with_capacity(CHUNK),
            prev_ts: 0,
            free_slots: Vec::new(),
        });
        self.by_stream.insert(e.stream, t);
        t
    }

    fn event(&mut self, e: &Event) -> Result<(), String> {
        match e.op {
            Op::ThreadStart => {
                let t = self.thread(e);
                self.threads[t as usize].plan.tid = e.tid;
                return Ok(());
            }
            Op::ThreadExit => {
                if let Some(&t) = self.by_stream.get(&e.stream) {
                    let th = &mut self.threads[t as usize];
                    self.shared_free.append(&mut th.free_slots);
                    th.free_slots.shrink_to_fit();
                    self.flush(t)?;
                    self.threads[t as usize].buf = Vec::new();
                }
                return Ok(());
            }
            Op::Dropped => {
                self.meta.dropped_events += e.value();
                return Ok(());
            }
            Op::Untraced => {
                self.meta.untraced_calls += e.value();
                return Ok(());
            }
            op if !op.is_alloc_family() => return Ok(()),
            _ => {}
        }
        self.meta.calls += 1;
        let t = self.thread(e);
        let page = self.meta.page_size;
        match e.op {
            Op::Free | Op::FreeSized => {
                if e.ptr == 0 {
                    self.meta.skipped.free_null += 1;
                } else if let Some(l) = self.live.remove(&e.ptr) {
                    self.free_block(t, e, l)?;
                } else {
                    self.meta.skipped.unknown_free += 1;
                }
            }
            Op::Malloc => self.alloc(t, e, Action::Malloc, 0, e.size, 0)?,
            Op::Calloc if e.count().checked_mul(e.size).is_none() => self.meta.skipped.null_result += 1,
            Op::Calloc => self.alloc(t, e, Action::Calloc, e.count(), e.size, 0)?,
            Op::PosixMemalign if e.value() != 0 => self.meta.skipped.null_result += 1,
            Op::PosixMemalign | Op::AlignedAlloc | Op::Memalign => {
                self.alloc(t, e, Action::Memalign, 0, e.size, norm_align(e.align()))?
            }
            Op::Valloc => self.alloc(t, e, Action::Memalign, 0, e.size, page)?,
            Op::Pvalloc => {
                let size = e.size.max(1).div_ceil(page).saturating_mul(page);
                self.alloc(t, e, Action::Memalign, 0, size, page)?
            }
            Op::Realloc | Op::Reallocarray => self.realloc(t, e)?,
            _ => {}
        }
        Ok(())
    }

    fn take_slot(&mut self, t: u32) -> u32 {
        if let Some(s) = self.threads[t as usize].free_slots.pop() {
            return s;
        }
        if let Some(s) = self.shared_free.pop() {
            return s;
        }
        self.slots.push(SlotState::default());
        (self.slots.len() - 1) as u32
    }

    /// The slot's sequence number for the next op, and whether it must wait for it.
    fn step(&mut self, t: u32, slot: u32) -> Option<u32> {
        let s = &mut self.slots[slot as usize];
        let wait = (s.seq != 0 && s.last_thread != t).then_some(s.seq);
        s.seq = s.seq.wrapping_add(1);
        s.last_thread = t;
        if wait.is_some() {
            self.meta.waiting_ops += 1;
        }
        wait
    }

    fn count(&mut self, op: Op) {
        *self.meta.ops.entry(op.name().to_string()).or_insert(0) += 1;
    }

    fn alloc(
        &mut self,
        t: u32,
        e: &Event,
        action: Action,
        count: u64,
        size: u64,
        align: u64,
    ) -> Result<(), String> {
        if e.ptr == 0 {
            self.meta.skipped.null_result += 1;
            return Ok(());
        }
        let requested = e.requested();
        let slot = self.take_slot(t);
        let wait = self.step(t, slot);
        self.count(e.op);
        let o = PlanOp {
            action: action as u8,
            op: e.op as u8,
            ts_ns: e.ts_ns,
            slot,
            wait,
            count,
            size,
            align,
            requested,
        };
        self.push(t, &o)?;
        self.insert_live(e.ptr, Live { slot, owner: t, requested });
        Ok(())
    }

    fn insert_live(&mut self, ptr: u64, l: Live) {
        self.live_bytes += l.requested;
        if let Some(old) = self.live.insert(ptr, l) {
            // The earlier block at this address is still live in log order: either its
            // owner's realloc moved it but sorts later, or its free was never recorded.
            // Until its owner reallocs it, it stays allocated (as it was in the program).
            if let Some(lost) = self.displaced.insert((old.owner, ptr), old) {
                self.meta.skipped.missed_free += 1;
                self.live_bytes -= lost.requested;
            }
        }
        self.meta.ideal_bytes = self.meta.ideal_bytes.max(self.live_bytes);
        let blocks = (self.live.len() + self.displaced.len()) as u64;
        self.meta.peak_live_blocks = self.meta.peak_live_blocks.max(blocks);
    }

    fn free_block(&mut self, t: u32, e: &Event, l: Live) -> Result<(), String> {
        self.live_bytes -= l.requested;
        if l.owner != t {
            self.meta.cross_thread_frees += 1;
        }
        let wait = self.step(t, l.slot);
        self.count(e.op);
        let o = PlanOp {
            action: Action::Free as u8,
            op: e.op as u8,
            ts_ns: e.ts_ns,
            slot: l.slot,
            wait,
            ..PlanOp::default()
        };
        self.push(t, &o)?;
        let th = &mut self.threads[t as usize];
        th.free_slots.push(l.slot);
        if th.free_slots.len() > LOCAL_FREE_MAX {
            // Hand the oldest half to the other threads; their last op is long replayed.
            let half: Vec<u32> = th.free_slots.drain(..LOCAL_FREE_MAX / 2).collect();
            self.shared_free.extend(half);
        }
        Ok(())
    }

    fn realloc(&mut self, t: u32, e: &Event) -> Result<(), String> {
        let requested = e.requested();
        if e.old == 0 {
            // realloc(NULL, n) is malloc(n).
            return self.alloc(t, e, Action::Malloc, 0, requested.max(1), 0);
        }
        let displaced = self.displaced.contains_key(&(t, e.old));
        if !displaced && !self.live.contains_key(&e.old) {
            self.meta.skipped.unknown_realloc += 1;
            if e.ptr == 0 {
                return Ok(());
            }
            return self.alloc(t, e, Action::Malloc, 0, requested.max(1), 0);
        }
        if e.ptr == 0 {
            if requested == 0 && e.op == Op::Realloc {
                // glibc's realloc(p, 0) frees p and returns NULL.
                let l = self.take_old(t, e.old, displaced);
                return self.free_block(t, e, l);
            }
            // A failed realloc leaves the old block as it was.
            self.meta.skipped.null_result += 1;
            return Ok(());
        }
        let l = self.take_old(t, e.old, displaced);
        self.live_bytes -= l.requested;
        if l.owner != t {
            self.meta.cross_thread_reallocs += 1;
        }
        let wait = self.step(t, l.slot);
        self.count(e.op);
        let o = PlanOp {
            action: Action::Realloc as u8,
            op: e.op as u8,
            ts_ns: e.ts_ns,
            slot: l.slot,
            wait,
            requested,
            ..PlanOp::default()
        };
        self.push(t, &o)?;
        self.insert_live(e.ptr, Live { slot: l.slot, owner: t, requested });
        Ok(())
    }

    /// The block a realloc on thread `t` of `old` takes (checked to exist).
    fn take_old(&mut self, t: u32, old: u64, displaced: bool) -> Live {
        if displaced {
            self.meta.late_realloc_frees += 1;
            self.displaced.remove(&(t, old)).expect("checked by the caller")
        } else {
            self.live.remove(&old).expect("checked by the caller")
        }
    }

    fn push(&mut self, t: u32, o: &PlanOp) -> Result<(), String> {
        let th = &mut self.threads[t as usize];
        if th.buf.capacity() == 0 {
            th.buf.reserve(CHUNK);
        }
        encode(&mut th.buf, o, th.prev_ts);
        th.prev_ts = o.ts_ns;
        th.plan.ops += 1;
        th.plan.last_ts_ns = o.ts_ns;
        if th.buf.len() + MAX_OP > CHUNK {
            self.flush(t)?;
        }
        Ok(())
    }

    fn flush(&mut self, t: u32) -> Result<(), String> {
        let th = &mut self.threads[t as usize];
        if th.buf.is_empty() {
            return Ok(());
        }
        self.file
            .write_all_at(&th.buf, self.file_off)
            .map_err(|e| format!("writing the replay plan: {e}"))?;
        th.plan.chunks.push(Chunk { offset: self.file_off, len: th.buf.len() as u32 });
        self.file_off += th.buf.len() as u64;
        th.buf.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<PlanMeta, String> {
        for t in 0..self.threads.len() {
            self.flush(t as u32)?;
        }
        self.file.flush().map_err(|e| format!("writing the replay plan: {e}"))?;
        let mut meta = self.meta;
        meta.slots = self.slots.len() as u32;
        meta.end_live_bytes = self.live_bytes;
        meta.end_live_blocks = (self.live.len() + self.displaced.len()) as u64;
        meta.skipped.missed_free += self.displaced.len() as u64;
        meta.plan_bytes = self.file_off;
        // Threads that made no malloc-family call have nothing to replay.
        meta.threads = self.threads.into_iter().map(|t| t.plan).filter(|p| p.ops > 0).collect();
        Ok(meta)
    }
}

/// The alignment to pass to memalign: a power of two, at least the size of a pointer.
fn norm_align(a: u64) -> u64 {
    a.max(8).checked_next_power_of_two().unwrap_or(1 << 63)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ops_roundtrip(ops in prop::collection::vec(
            (0u8..5, 1u8..11, any::<u32>(), any::<u32>(), any::<Option<u32>>(),
             0u64..1 << 20, 0u64..1 << 40, 0u32..30), 1..100)) {
            let mut buf = Vec::new();
            let mut want = Vec::new();
            let mut ts = 0u64;
            let mut prev = 0u64;
            for (action, op, dts, slot, wait, count, size, align_shift) in ops {
                ts += dts as u64;
                let a = Action::from_u8(action).unwrap();
                let mut o = PlanOp { action, op, ts_ns: ts, slot, wait, ..PlanOp::default() };
                match a {
                    Action::Malloc => { o.size = size; o.requested = size; }
                    Action::Calloc => { o.count = count; o.size = size >> 20;
                                        o.requested = o.count * o.size; }
                    Action::Memalign => { o.align = 1 << align_shift; o.size = size;
                                          o.requested = size / 2; }
                    Action::Realloc => { o.requested = size; o.size = size.max(1); }
                    Action::Free => {}
                }
                encode(&mut buf, &o, prev);
                prev = ts;
                want.push(o);
            }
            let mut pos = 0;
            let mut prev = 0;
            for w in want {
                let got = decode(&buf, &mut pos, prev).unwrap();
                prev = got.ts_ns;
                prop_assert_eq!(got, w);
            }
            prop_assert_eq!(pos, buf.len());
        }
    }

    #[test]
    fn align_is_a_power_of_two_and_at_least_a_pointer() {
        assert_eq!(norm_align(0), 8);
        assert_eq!(norm_align(1), 8);
        assert_eq!(norm_align(16), 16);
        assert_eq!(norm_align(24), 32);
        assert_eq!(norm_align(4096), 4096);
    }
}

#[cfg(test)]
mod sim {
    use super::*;
    use recorder::buffer::Args;

    /// Executes a plan on one thread, op by op, picking any thread whose next op may run
    /// (its wait satisfied), and checks that every op finds its slot as it expects.
    pub fn simulate(meta: &PlanMeta, file: &File) -> Result<(), String> {
        let mut streams: Vec<Vec<PlanOp>> = Vec::new();
        for t in &meta.threads {
            let mut v = Vec::new();
            let mut prev = 0;
            for c in &t.chunks {
                let mut b = vec![0u8; c.len as usize];
                file.read_exact_at(&mut b, c.offset).unwrap();
                let mut pos = 0;
                while pos < b.len() {
                    let o = decode(&b, &mut pos, prev).ok_or("corrupt")?;
                    prev = o.ts_ns;
                    v.push(o);
                }
            }
            streams.push(v);
        }
        let mut full = vec![false; meta.slots as usize];
        let mut done = vec![0u32; meta.slots as usize];
        let mut last = vec![u32::MAX; meta.slots as usize];
        let mut at = vec![0usize; streams.len()];
        loop {
            let mut progressed = false;
            for (t, s) in streams.iter().enumerate() {
                while at[t] < s.len() {
                    let o = &s[at[t]];
                    let k = o.slot as usize;
                    match o.wait {
                        Some(q) if done[k] != q => break,
                        Some(_) => {}
                        None => {
                            if last[k] != u32::MAX && last[k] != t as u32 {
                                return Err(format!("thread {t} op {} on slot {k} does not wait, but thread {} touched it last", at[t], last[k]));
                            }
                        }
                    }
                    let a = Action::from_u8(o.action).unwrap();
                    let needs_full = matches!(a, Action::Realloc | Action::Free);
                    if full[k] != needs_full {
                        return Err(format!("thread {t} op {} ({a:?}) finds slot {k} full={}", at[t], full[k]));
                    }
                    full[k] = a != Action::Free;
                    done[k] += 1;
                    last[k] = t as u32;
                    at[t] += 1;
                    progressed = true;
                }
            }
            if at.iter().zip(&streams).all(|(a, s)| *a == s.len()) {
                return Ok(());
            }
            if !progressed {
                return Err(format!("deadlock at {at:?}"));
            }
        }
    }

    /// Writes a log of `calls` (thread, op, args), 1000 ticks apart (the log may keep ticks
    /// in coarser units), in that order.
    fn write_log(path: &std::path::Path, threads: usize, calls: &[(usize, Op, Args)]) {
        use recorder::buffer::Buf;
        use recorder::writer::{create_log, write_header, LogWriter};
        let (fd, _) = create_log(path.to_str().unwrap()).unwrap();
        let h = recorder::Header {
            format_version: recorder::format::VERSION,
            page_size: 4096,
            ticks_per_sec: 1e9,
            ..recorder::Header::default()
        };
        let reserved = write_header(fd, &h).unwrap();
        let mut w = LogWriter::new(fd, 1).unwrap();
        w.note_header(reserved);
        for t in 0..threads {
            let stream = t as u32 + 1;
            let mut b = Buf::new_boxed(stream);
            b.push(Op::ThreadStart, 1, &Args { value: 100 + t as u64, ..Args::default() }, None);
            for (i, (th, op, a)) in calls.iter().enumerate() {
                if *th == t {
                    if !b.has_room() {
                        w.write_buf(&b).unwrap();
                        b.reset(stream);
                    }
                    b.push(*op, 1000 + i as u64 * 1000, a, None);
                }
            }
            w.write_buf(&b).unwrap();
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Random hand-offs between threads, with addresses reused: the plan replays every
        /// call, each op finds its block as it expects, and no order of waits deadlocks.
        #[test]
        fn random_handoffs_plan_consistently(steps in proptest::collection::vec(
            (0usize..4, 0u8..3, proptest::prelude::any::<u16>(), 1u64..5000), 1..400)) {
            let mut live: Vec<u64> = Vec::new();
            let mut freed: Vec<u64> = Vec::new();
            let mut next = 0x10_0000u64;
            let mut calls = Vec::new();
            let mut fresh = |freed: &mut Vec<u64>, pick: u16| {
                if pick.is_multiple_of(3) && !freed.is_empty() {
                    freed.swap_remove(pick as usize % freed.len())
                } else {
                    next += 0x1000;
                    next
                }
            };
            for (t, kind, pick, size) in steps {
                match kind {
                    1 if !live.is_empty() => {
                        let p = live.swap_remove(pick as usize % live.len());
                        calls.push((t, Op::Free, Args { ptr: p, ..Args::default() }));
                        freed.push(p);
                    }
                    2 if !live.is_empty() => {
                        let i = pick as usize % live.len();
                        let old = live[i];
                        let new = if pick.is_multiple_of(2) { old } else { fresh(&mut freed, pick / 2) };
                        if new != old {
                            freed.push(old);
                        }
                        live[i] = new;
                        calls.push((t, Op::Realloc, Args { old, size, ptr: new, ..Args::default() }));
                    }
                    _ => {
                        let p = fresh(&mut freed, pick);
                        live.push(p);
                        calls.push((t, Op::Malloc, Args { size, ptr: p, ..Args::default() }));
                    }
                }
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("random.shimlog");
            write_log(&path, 4, &calls);
            let r = LogReader::open(path.to_str().unwrap()).unwrap();
            let mut f = tempfile::tempfile().unwrap();
            let m = build(&r, &mut f, |_| {}).unwrap();
            proptest::prop_assert_eq!(m.ops.values().sum::<u64>(), calls.len() as u64);
            proptest::prop_assert_eq!(&m.skipped, &Skipped::default());
            proptest::prop_assert_eq!(m.end_live_blocks, live.len() as u64);
            proptest::prop_assert!(m.slots as u64 <= m.peak_live_blocks + 4 * LOCAL_FREE_MAX as u64);
            if let Err(e) = simulate(&m, &f) {
                return Err(proptest::test_runner::TestCaseError::fail(e));
            }
        }
    }
}
