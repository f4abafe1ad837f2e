//! The pre-pass: turns a log into one op stream per recorded thread, with every block named
//! by a replay slot instead of its recorded address.
//!
//! One pass over `reader.events()` (the merged total order) keeps a map from live recorded
//! pointers to slots. A slot is reused once its block is freed, preferring the freeing
//! thread's own recently freed slots, so the slot table is bounded by the peak number of live
//! blocks plus [`LOCAL_FREE_MAX`] per live thread, never by the number of events.
//!
//! When the previous op on a slot was made by another thread, that op is flagged [`NOTIFY`]
//! (patched in place once the next op is known) and the op is flagged [`WAIT`] with the
//! number of NOTIFY ops the slot will have seen once its predecessor is done: a NOTIFY op
//! adds one to the slot's counter (and wakes a sleeper), a waiting op waits until the counter
//! reaches its number, and every other op leaves the counter alone, so that ops no other
//! thread waits for pay nothing for the ordering. Since every wait is on an op earlier in the
//! merged order, and each thread replays its ops in that order, the earliest unfinished op
//! never waits and the replay cannot deadlock, whatever cycles the threads' hand-offs form.
//!
//! Threads live as they lived: every thread start and exit in the log gets an index in log
//! order, and becomes a [`Action::Spawn`] or [`Action::Join`] op that waits until every
//! start and exit before it is done. A start goes into the stream of the thread whose call
//! came last before it (the thread that most likely created it) when that thread is alive,
//! an exit into the stream of the next thread to make a call that was alive at the exit
//! (the one that most likely joined it); the rest go to the child's main thread (`control`).
//! So the replay never has more threads alive than the program had at that point in the
//! log, threads end (their allocator caches flushed) where they ended, and since every
//! wait is still on an event earlier in log order, made by a thread alive at that point,
//! the argument above still holds.
use super::*;
use crate::replay::run::measure::{slop_report, Slop};
use recorder::{Event, LogReader, Op};
use rustc_hash::FxHashMap;
use shim_backend::Backend;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

mod order;

/// A thread keeps at most this many freed slots for itself; more go to the shared pool.
pub const LOCAL_FREE_MAX: usize = 2048;
/// New slots are given to a thread this many at a time.
const SLOT_RUN: u32 = 8;

struct Live {
    slot: u32,
    owner: u32,
    requested: u64,
}

#[derive(Clone, Copy, Default)]
struct SlotState {
    last_thread: u32,
    /// Ops on the slot: none yet when 0 (its first op never waits).
    ops: u32,
    /// Its ops flagged NOTIFY so far.
    notifies: u32,
    /// Where the tag of the slot's last op lies: its chunk (the number of chunks its thread
    /// had flushed before it) and its offset in that chunk.
    last_chunk: u32,
    last_pos: u32,
}

struct ThreadBuild {
    plan: ThreadPlan,
    buf: Vec<u8>,
    prev_ts: u64,
    free_slots: Vec<u32>,
    /// The lifecycle index of its start, and whether its exit was seen.
    start_index: u32,
    exited: bool,
}

/// Builds the plan into `file`; `progress` is called now and then with compressed bytes read.
pub fn build(reader: &LogReader, file: &mut File, mut progress: impl FnMut(u64)) -> Result<PlanMeta, String> {
    let mut p = Planner {
        meta: PlanMeta {
            page_size: if reader.header.page_size.is_power_of_two() { reader.header.page_size } else { 4096 },
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
        life_next: 0,
        alive: 0,
        last_caller: None,
        pending_joins: Vec::new(),
        slop: Backend::ALL.iter().map(|_| Slop::new()).collect(),
        op_counts: [0; 32],
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
        p.meta.issues.push(
            "the log has no end record: the program did not close it cleanly (killed, or still running)"
                .into(),
        );
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
    /// The next thread start or exit's index; threads started and not exited.
    life_next: u32,
    alive: u32,
    /// The thread of the latest op pushed.
    last_caller: Option<u32>,
    /// Exits not yet given to a thread to join: (thread, index).
    pending_joins: Vec<(u32, u32)>,
    /// Per backend (in Backend::ALL's order), the slop of every allocation.
    slop: Vec<Slop>,
    /// Ops planned, by recorded C function (PlanMeta::ops once done).
    op_counts: [u64; 32],
}

impl Planner<'_> {
    fn event(&mut self, e: &Event) -> Result<(), String> {
        match e.op {
            Op::ThreadStart => {
                let t = self.thread(e)?;
                self.threads[t as usize].plan.tid = e.tid;
                return Ok(());
            }
            Op::ThreadExit => {
                if let Some(&t) = self.by_stream.get(&e.stream) {
                    if !self.threads[t as usize].exited {
                        self.threads[t as usize].exited = true;
                        self.alive -= 1;
                        self.pending_joins.push((t, self.life_next));
                        self.life_next += 1;
                    }
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
        let t = self.thread(e)?;
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
        // A run of new slots for this thread, so that slots next to each other in the table
        // (in one cache line) are mostly one thread's.
        let first = self.slots.len() as u32;
        self.slots.resize(self.slots.len() + SLOT_RUN as usize, SlotState::default());
        let free = &mut self.threads[t as usize].free_slots;
        free.extend((first + 1..first + SLOT_RUN).rev());
        first
    }

    /// Whether thread `t`'s next op on `slot` must wait, and for what counter value (see
    /// the module's doc); flags the slot's previous op NOTIFY when it must.
    fn step(&mut self, t: u32, slot: u32) -> Result<Option<u32>, String> {
        let s = &mut self.slots[slot as usize];
        let wait = (s.ops != 0 && s.last_thread != t).then(|| {
            s.notifies = s.notifies.wrapping_add(1);
            s.notifies
        });
        let (prev, chunk, pos) = (s.last_thread, s.last_chunk, s.last_pos);
        s.ops = s.ops.wrapping_add(1);
        s.last_thread = t;
        if wait.is_some() {
            self.meta.waiting_ops += 1;
            self.notify(prev, chunk, pos)?;
        }
        Ok(wait)
    }

    fn count(&mut self, op: Op) {
        self.op_counts[op as usize & 31] += 1;
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
        let wait = self.step(t, slot)?;
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
            notify: false,
        };
        self.push(t, &o)?;
        self.slop(requested, if action == Action::Calloc { requested } else { size });
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
        let wait = self.step(t, l.slot)?;
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
        let wait = self.step(t, l.slot)?;
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
        self.slop(requested, requested.max(1));
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

    /// Appends a call's op to thread `t`'s stream (after the exits it is to join).
    fn push(&mut self, t: u32, o: &PlanOp) -> Result<(), String> {
        if !self.pending_joins.is_empty() {
            self.take_joins(t)?;
        }
        self.last_caller = Some(t);
        if (o.action as usize) < Action::ALL.len() {
            let th = &mut self.threads[t as usize];
            th.plan.ops += 1;
            let s = &mut self.slots[o.slot as usize];
            s.last_chunk = th.plan.chunks.len() as u32;
            s.last_pos = th.buf.len() as u32;
        }
        self.encode_op(t, o)
    }

    fn encode_op(&mut self, t: u32, o: &PlanOp) -> Result<(), String> {
        let th = &mut self.threads[t as usize];
        if th.buf.capacity() == 0 {
            th.buf.reserve(CHUNK);
        }
        encode(&mut th.buf, o, th.prev_ts);
        th.prev_ts = o.ts_ns;
        th.plan.last_ts_ns = o.ts_ns;
        if th.buf.len() + MAX_OP > CHUNK {
            self.flush(t)?;
        }
        Ok(())
    }

    /// Counts the slop each backend's size classes give an allocation of `size` bytes for
    /// `requested`.
    fn slop(&mut self, requested: u64, size: u64) {
        for (s, b) in self.slop.iter_mut().zip(Backend::ALL) {
            let usable = shim_backend::size_class(b, size as usize) as u64;
            s.add(requested, usable.max(size));
        }
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
        for (j, index) in self.pending_joins {
            meta.control.push(LifeOp { start: false, thread: j, index });
        }
        meta.control.sort_by_key(|l| l.index);
        meta.lifecycle_events = self.life_next;
        for (i, &c) in self.op_counts.iter().enumerate() {
            if let (true, Some(op)) = (c > 0, Op::from_u8(i as u8)) {
                meta.ops.insert(op.name().to_string(), c);
            }
        }
        meta.slop =
            self.slop.iter().zip(Backend::ALL).map(|(s, b)| (b.name().to_string(), slop_report(s))).collect();
        meta.threads = self.threads.into_iter().map(|t| ThreadPlan { exited: t.exited, ..t.plan }).collect();
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

    #[test]
    fn align_is_a_power_of_two_and_at_least_a_pointer() {
        assert_eq!(norm_align(0), 8);
        assert_eq!(norm_align(1), 8);
        assert_eq!(norm_align(16), 16);
        assert_eq!(norm_align(24), 32);
        assert_eq!(norm_align(4096), 4096);
    }
}
