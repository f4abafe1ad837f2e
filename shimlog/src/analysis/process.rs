//! One process's analysis: every event of its log goes through [`Analysis::feed`] once, in
//! time order, and updates each section's state. Nothing here allocates per event.
//!
//! Semantics: an allocating call with a non-null result makes a block of the requested
//! size (count * size for the array forms). free(p) with p non-null frees p. realloc and
//! reallocarray free `old` when it is non-null and the call succeeded (a non-null result,
//! or a zero size, which glibc's realloc(p, 0) answers by freeing p and returning NULL),
//! then make the new block. A free of a pointer that is not live is counted
//! (`unknown_frees`); an allocation returning a live address takes the old block as freed
//! (`address_reuse_conflicts`).
use super::blocks::Block;
use super::classes::SizeTable;
use super::heap::Heap;
use super::latency::Latency;
use super::lifetimes::Lifetimes;
use super::memory::Memory;
use super::sizes::Sizes;
use super::threads::Threads;
use super::totals::{DropRecord, Totals};
use super::tracker::Follow;
use super::watch::Watch;
use recorder::{Event, Op};

pub struct Analysis {
    pub pid: u32,
    pub totals: Totals,
    pub heap: Heap,
    pub sizes: Sizes,
    pub life: Lifetimes,
    pub threads: Threads,
    pub mem: Memory,
    pub lat: Latency,
    pub watch: Watch,
    /// A fork child read with its parent's log: the blocks it inherited.
    pub inherit: Option<super::inherit::Inheritance>,
    /// The run in time slices, for `shimlog compare` (None unless asked for: slices.rs).
    pub slices: Option<Box<super::slices::Slices>>,
    /// The call sites, for a log written with stacks (None otherwise): one more consumer
    /// of the same pass (sites/collect.rs).
    pub stacks: Option<Box<super::sites::Collector>>,
}

impl Analysis {
    pub fn new(pid: u32, burst: u64) -> Analysis {
        Analysis {
            pid,
            totals: Totals::default(),
            heap: Heap::new(),
            sizes: Sizes::default(),
            life: Lifetimes::default(),
            threads: Threads::new(pid, burst),
            mem: Memory::new(),
            lat: Latency::new(pid),
            watch: Watch::default(),
            inherit: None,
            slices: None,
            stacks: None,
        }
    }

    /// Starts loading the live-table slots that `e` will touch (a few events ahead).
    #[inline(always)]
    pub fn prefetch(&self, e: &Event) {
        if e.op.is_alloc_family() {
            self.heap.prefetch(e.ptr);
            if e.old != 0 {
                self.heap.prefetch(e.old);
            }
            // The backend-time count of a timed call (a few in a hundred). The per-size
            // counts of the size asked for (of the element size for the array forms, a guess
            // that costs nothing when wrong; of the last small id for a large size).
            if let Some(ns) = e.backend_ns() {
                self.lat.prefetch(e.op, ns);
            }
            self.sizes.prefetch(SizeTable::small_id_or_last(e.size));
        }
    }

    /// One event, in time order.
    #[inline(always)]
    pub fn feed<F: Follow>(&mut self, e: &Event, t: &mut SizeTable, f: &mut F) {
        let ts = e.ts_ns;
        if let Some(s) = self.slices.as_deref_mut() {
            s.take(e, self.heap.live_bytes);
        }
        let tot = &mut self.totals;
        tot.events += 1;
        tot.last_ns = ts;
        if tot.first_ns.is_none() {
            tot.first_ns = Some(ts);
        }
        self.totals.calls[e.op as usize] += 1;
        self.mem.tick(ts, self.heap.live_bytes, self.heap.blocks());
        f.tick(ts);
        let op = e.op;
        if !op.is_alloc_family() {
            return self.record(e, f);
        }
        if let Some(k) = self.stacks.as_deref_mut() {
            k.call(e);
        }
        let th = self.threads.slot(e.stream, e.tid, ts);
        if let Some(ns) = e.backend_ns() {
            // The size of the block the call frees, asked (of the table, before the call
            // below frees it) only for a call slow enough to be listed.
            let heap = &self.heap;
            self.lat.record(e, ns, || heap.size_at(Self::freed_ptr(e)?, t));
        }
        if op.is_free() {
            if e.ptr == 0 {
                self.totals.free_null += 1;
                return;
            }
            self.threads.free_call(th, ts);
            self.release(e.ptr, th, ts, t, f);
            return;
        }
        let req = e.requested();
        self.totals.bytes[op as usize] += req;
        self.threads.alloc_call(th, ts);
        let sid = t.id(req);
        self.sizes.request(sid, req);
        let ok = e.ptr != 0;
        let resizes = op == Op::Realloc || op == Op::Reallocarray;
        if Self::frees_old(e, ok, req) {
            self.release(e.old, th, ts, t, f);
        }
        if ok {
            self.make(e.ptr, req, sid, th, ts, t, f);
        } else if !(resizes && req == 0) {
            self.totals.failed[op as usize] += 1;
        }
    }

    /// A block goes away (free, or the old block of a realloc).
    #[inline(always)]
    fn release<F: Follow>(&mut self, ptr: u64, th: u32, ts: u64, t: &SizeTable, f: &mut F) {
        let Some(b) = self.heap.free(ptr, t) else {
            if self.inherit.is_some() {
                self.inherited_free(ptr, ts);
            }
            return;
        };
        {
            self.sizes.freed(b.size_id, false);
            f.freed(b.size_id, t.size(b.size_id));
            self.life.record(ts.saturating_sub(b.ts_ns), self.heap.allocs - b.alloc_index - 1);
            self.threads.block_freed(th, b.thread);
        }
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn make<F: Follow>(&mut self, ptr: u64, req: u64, sid: u32, th: u32, ts: u64, t: &SizeTable, f: &mut F) {
        let b = Block { ts_ns: ts, alloc_index: self.heap.allocs, size_id: sid, thread: th };
        let displaced = self.heap.alloc(ptr, req, b, t);
        let new_peak = self.heap.check_peak(ts);
        if let Some(d) = displaced {
            self.sizes.freed(d.size_id, new_peak);
            f.freed(d.size_id, t.size(d.size_id));
        }
        self.sizes.made(sid, new_peak);
        f.made(sid, req, ts);
        self.threads.allocated(th, req);
        let live = self.heap.live_bytes;
        self.mem.grew(live);
        if new_peak {
            self.mem.peak(ts, live);
        }
    }

    /// A free of a pointer not live here, in a fork child whose parent's log is read too:
    /// a block the child inherited at the fork, when the parent had it live then.
    #[cold]
    #[inline(never)]
    fn inherited_free(&mut self, ptr: u64, ts: u64) {
        let Some(inh) = self.inherit.as_mut() else { return };
        if let Some((size, made)) = inh.blocks.remove(&ptr) {
            self.heap.unknown_frees -= 1;
            inh.frees += 1;
            inh.bytes += size;
            inh.age_ns_sum += (ts + inh.offset).saturating_sub(made);
        }
    }

    /// Thread and process records.
    #[cold]
    fn record<F: Follow>(&mut self, e: &Event, f: &mut F) {
        match e.op {
            Op::ThreadStart => {
                self.threads.slot(e.stream, e.tid, e.ts_ns);
            }
            Op::ThreadExit => {
                let th = self.threads.slot(e.stream, e.tid, e.ts_ns);
                self.threads.end_run(th);
            }
            Op::Dropped => {
                let th = self.threads.slot(e.stream, e.tid, e.ts_ns);
                self.threads.dropped(th, e.value());
                self.totals.drop_record(DropRecord {
                    ts_ns: e.ts_ns,
                    pid: self.pid,
                    tid: e.tid,
                    events: e.value(),
                });
            }
            Op::Rss => {
                self.mem.rss(e.ts_ns, e.value(), self.heap.live_bytes, self.heap.blocks());
                f.rss(e.ts_ns, e.value());
            }
            Op::Untraced => self.totals.untraced += e.value(),
            _ => {
                if let Some(k) = self.stacks.as_deref_mut() {
                    k.record(e);
                }
                self.watch.take(e)
            }
        }
    }

    /// Whether a resizing call `e` frees its old block: `ok`, it returned a block; `req`,
    /// the size it asked for (a zero size frees the block and returns NULL).
    #[inline(always)]
    pub(crate) fn frees_old(e: &Event, ok: bool, req: u64) -> bool {
        (e.op == Op::Realloc || e.op == Op::Reallocarray) && e.old != 0 && (ok || req == 0)
    }

    /// The pointer `e` frees, if any.
    fn freed_ptr(e: &Event) -> Option<u64> {
        match e.op {
            Op::Free | Op::FreeSized => (e.ptr != 0).then_some(e.ptr),
            _ => Self::frees_old(e, e.ptr != 0, e.requested()).then_some(e.old),
        }
    }

    /// What a fork child read with its parent's log inherited (None for any other log).
    pub fn inherited(&self) -> Option<super::inherit::InheritedReport> {
        self.inherit.as_ref().map(|i| i.report())
    }

    /// Closes what is still open at the end of the log.
    pub fn finish(&mut self) {
        self.threads.finish();
        self.sizes.finish();
        if let Some(s) = self.slices.as_deref_mut() {
            s.finish(self.totals.last_ns, self.heap.live_bytes);
        }
    }
}
