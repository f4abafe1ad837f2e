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
use super::plan::*;
use recorder::{Event, LogReader, Op};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

/// A thread keeps at most this many freed slots for itself; more go to the shared pool.
pub const LOCAL_FREE_MAX: usize = 2048;

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

    #[test]
    fn align_is_a_power_of_two_and_at_least_a_pointer() {
        assert_eq!(norm_align(0), 8);
        assert_eq!(norm_align(1), 8);
        assert_eq!(norm_align(16), 16);
        assert_eq!(norm_align(24), 32);
        assert_eq!(norm_align(4096), 4096);
    }
}
