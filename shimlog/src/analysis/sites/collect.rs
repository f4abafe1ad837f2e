//! One pass over a log for its call sites: the stack table and the loaded objects as the
//! shim wrote them (format version 4), each `site` record joined to the call just before it
//! in its stream, and every block followed so that a site's bytes live at the peak and at
//! the end are known. Sampled blocks count with their weight (1 / the chance they had).
use recorder::event::site_flags;
use recorder::{Event, LogReader, Op};
use rustc_hash::FxHashMap;

/// A loaded object, as the log names it.
#[derive(Clone, Debug, Default)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub bias: u64,
    pub path: String,
    /// Lowercase hex (empty: none recorded).
    pub build_id: String,
    path_bytes: Vec<u8>,
    path_len: usize,
    id_bytes: Vec<u8>,
    id_len: usize,
}

/// What one stack's calls add up to (estimates in sample mode).
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub alloc_calls: f64,
    pub alloc_bytes: f64,
    /// Allocations with this stack in the log (samples, in sample mode).
    pub samples: u64,
    pub live_objects: f64,
    pub live_bytes: f64,
    pub peak_objects: f64,
    pub peak_bytes: f64,
    /// The peak epoch of the last snapshot (see [`Collected::snapshot`]).
    epoch: u64,
    pub slow_calls: u64,
    pub slow_ns: u64,
    /// Time inside the allocator of this stack's timed calls, and how many were timed.
    pub timed_ns: u64,
    pub timed_calls: u64,
}

#[derive(Default)]
pub struct Collected {
    pub stacks: FxHashMap<u32, Vec<u64>>,
    depth: FxHashMap<u32, u64>,
    pub mappings: Vec<Mapping>,
    pub sites: FxHashMap<u32, Totals>,
    /// Problems met, one line each (corrupt or missing stack definitions...).
    pub issues: Vec<String>,
    /// The heap's peak (all blocks, not only those with a stack), and when.
    pub peak_bytes: u64,
    pub peak_ns: u64,
    epoch: u64,
    pub mean: Option<u64>,
}

struct Live {
    size: u64,
    stack: u32,
    weight: f32,
}

/// The weight of a sampled allocation of `size` bytes at sampling mean `mean`: 1 over the
/// chance it was taken (pprof's 1 / (1 - exp(-size / mean))); 1 for a block at least as
/// large as the mean, which the shim always takes.
pub fn weight(size: u64, mean: u64) -> f64 {
    if size >= mean || size == 0 {
        return 1.0;
    }
    1.0 / (1.0 - (-(size as f64) / mean as f64).exp())
}

impl Collected {
    /// Before a site's live totals change: keep what they were at the last peak.
    fn snapshot(t: &mut Totals, epoch: u64) {
        if t.epoch < epoch {
            t.peak_bytes = t.live_bytes;
            t.peak_objects = t.live_objects;
            t.epoch = epoch;
        }
    }
}

/// Collects a log's call sites, event by event in the log's time order: a consumer of the
/// analysis' one pass (process.rs feeds it), or of a pass of its own ([`collect`], for
/// `pprof` and `flamegraph`). `light` (SHIM_STACKS=slow, whose site records are slow calls
/// only and carry no block): no table of blocks, only each stream's last call, so that a
/// log with no stack record pays a store per call for its stacks; the heap's peak is then
/// the analysis' own, given to [`Collector::finish`].
pub struct Collector {
    c: Collected,
    light: bool,
    heap: FxHashMap<u64, Live>,
    live_total: u64,
    // Per stream: the last call, the mapping being described; and whether the call that
    // set the peak is waiting for its site.
    last: Vec<Option<Event>>,
    cur_map: Vec<Option<usize>>,
    peak_pending: Option<u64>,
}

/// Whether a log's header says its stacks are the slow calls' alone (see [`Collector`]).
pub fn light(h: &recorder::format::Header) -> bool {
    h.stacks.as_deref() == Some("slow")
}

impl Collector {
    pub fn new(h: &recorder::format::Header, light: bool) -> Collector {
        let sample = h.stacks.as_deref() == Some("sample");
        Collector {
            c: Collected {
                mean: if sample { h.sample_bytes.filter(|&m| m > 0) } else { None },
                ..Default::default()
            },
            light,
            heap: FxHashMap::default(),
            live_total: 0,
            last: Vec::new(),
            cur_map: Vec::new(),
            peak_pending: None,
        }
    }

    /// A call of the allocation family (malloc, free, realloc...).
    #[inline(always)]
    pub fn call(&mut self, e: &Event) {
        let s = e.stream as usize;
        if s >= self.last.len() {
            self.grow(s);
        }
        if !self.light {
            self.follow(e);
        }
        self.last[s] = Some(*e);
    }

    #[cold]
    fn grow(&mut self, s: usize) {
        self.last.resize(s + 1, None);
        self.cur_map.resize(s + 1, None);
    }

    /// The table of blocks and the heap's peak (not in light mode).
    fn follow(&mut self, e: &Event) {
        let (c, heap, live_total) = (&mut self.c, &mut self.heap, &mut self.live_total);
        let req = e.requested();
        if e.op.is_free() {
            if e.ptr != 0 {
                release(c, heap, live_total, e.ptr);
            }
            return;
        }
        let resizes = matches!(e.op, Op::Realloc | Op::Reallocarray);
        if resizes && e.old != 0 && (e.ptr != 0 || req == 0) {
            release(c, heap, live_total, e.old);
        }
        if e.ptr != 0 {
            if let Some(old) = heap.insert(e.ptr, Live { size: req, stack: 0, weight: 0.0 }) {
                *live_total -= old.size;
                drop_site(c, &old);
            }
            *live_total += req;
            if *live_total > c.peak_bytes {
                c.peak_bytes = *live_total;
                c.peak_ns = e.ts_ns;
                c.epoch += 1;
                self.peak_pending = Some(e.ptr);
            }
        }
    }

    /// Any event: calls go to [`Collector::call`]; the stack, site and mapping records are
    /// taken; the rest is left alone.
    pub fn take(&mut self, e: &Event) {
        if e.op.is_alloc_family() {
            return self.call(e);
        }
        self.record(e);
    }

    /// A record that is not a call of the allocation family.
    pub fn record(&mut self, e: &Event) {
        let s = e.stream as usize;
        if s >= self.last.len() {
            self.grow(s);
        }
        let c = &mut self.c;
        if e.op == Op::Stall && e.stream != 0 {
            // SHIM_RECORD=sample: a slow call on an unsampled block, in its thread's
            // stream, with its time; the site record after it names its stack.
            self.last[s] = Some(*e);
            return;
        }
        let (id, v) = (e.size as u32, e.arg);
        match e.op {
            Op::Stack => {
                if c.depth.insert(id, v).is_some() {
                    c.issues.push(format!("stack {id} is defined twice; the second definition is used"));
                }
                c.stacks.insert(id, Vec::with_capacity(v.min(256) as usize));
            }
            Op::StackPc => match c.stacks.get_mut(&id) {
                Some(pcs) => pcs.push(v),
                None => c.issues.push(format!("a frame of stack {id}, which is not defined before it")),
            },
            Op::Site => {
                let Some(call) = self.last[s].take() else {
                    c.issues.push(format!("a site record (stack {id}) with no call before it in stream {s}"));
                    return;
                };
                site(c, &mut self.heap, &call, id, v, &mut self.peak_pending);
            }
            Op::Mapping => {
                c.mappings.push(Mapping { start: e.size, end: v, ..Default::default() });
                self.cur_map[s] = Some(c.mappings.len() - 1);
            }
            Op::MappingBias | Op::MappingPath | Op::MappingBuildId => {
                let Some(m) = self.cur_map[s].and_then(|i| c.mappings.get_mut(i)) else {
                    c.issues.push(format!("a {} record with no mapping before it", e.op.name()));
                    return;
                };
                match e.op {
                    Op::MappingBias => m.bias = v,
                    Op::MappingPath => {
                        m.path_len = e.size as usize;
                        m.path_bytes.extend_from_slice(&v.to_le_bytes());
                    }
                    _ => {
                        m.id_len = e.size as usize;
                        m.id_bytes.extend_from_slice(&v.to_le_bytes());
                    }
                }
            }
            _ => {}
        }
    }

    /// What was collected. `peak`: the heap's peak (bytes, when) as the analysis found it,
    /// for a light collector, which follows no blocks.
    pub fn finish(self, peak: Option<(u64, u64)>) -> Collected {
        let mut c = self.c;
        if self.light {
            if let Some((bytes, ns)) = peak {
                (c.peak_bytes, c.peak_ns) = (bytes, ns);
            }
        }
        for (id, pcs) in &c.stacks {
            let want = c.depth.get(id).copied().unwrap_or(0);
            if pcs.len() as u64 != want {
                c.issues
                    .push(format!("stack {id} is corrupt: {} of its {want} frames in the log", pcs.len()));
            }
        }
        for m in &mut c.mappings {
            m.path_bytes.truncate(m.path_len);
            m.id_bytes.truncate(m.id_len);
            m.path = String::from_utf8_lossy(&m.path_bytes).into_owned();
            m.build_id = m.id_bytes.iter().map(|b| format!("{b:02x}")).collect();
        }
        let epoch = c.epoch;
        for t in c.sites.values_mut() {
            Collected::snapshot(t, epoch);
        }
        c.issues.sort();
        c.issues.dedup();
        c
    }
}

/// A pass of its own over a log, for its call sites (every block followed).
pub fn collect(r: &LogReader) -> Collected {
    let mut k = Collector::new(&r.header, false);
    for e in r.events() {
        k.take(&e);
    }
    k.finish(None)
}

fn site(
    c: &mut Collected,
    heap: &mut FxHashMap<u64, Live>,
    call: &Event,
    id: u32,
    flags: u64,
    pending: &mut Option<u64>,
) {
    let epoch = c.epoch;
    let t = c.sites.entry(id).or_default();
    if flags & site_flags::SLOW != 0 {
        t.slow_calls += 1;
        t.slow_ns += call.backend_ns().unwrap_or(0);
    }
    if flags & (site_flags::SAMPLED | site_flags::ALL) == 0 || !call.op.allocates() || call.ptr == 0 {
        return;
    }
    if let Some(ns) = call.backend_ns() {
        t.timed_ns += ns;
        t.timed_calls += 1;
    }
    let size = call.requested();
    let w = match c.mean {
        Some(mean) if flags & site_flags::SAMPLED != 0 => weight(size, mean),
        _ => 1.0,
    };
    t.samples += 1;
    t.alloc_calls += w;
    t.alloc_bytes += w * size as f64;
    let Some(b) = heap.get_mut(&call.ptr) else { return };
    b.stack = id;
    b.weight = w as f32;
    let at_peak = *pending == Some(call.ptr);
    if !at_peak {
        Collected::snapshot(t, epoch);
    }
    t.live_bytes += w * size as f64;
    t.live_objects += w;
    if at_peak {
        t.epoch = epoch.saturating_sub(1);
        Collected::snapshot(t, epoch);
        *pending = None;
    }
}

fn release(c: &mut Collected, heap: &mut FxHashMap<u64, Live>, live: &mut u64, ptr: u64) {
    if let Some(b) = heap.remove(&ptr) {
        *live -= b.size;
        drop_site(c, &b);
    }
}

fn drop_site(c: &mut Collected, b: &Live) {
    if b.weight == 0.0 {
        return;
    }
    let epoch = c.epoch;
    if let Some(t) = c.sites.get_mut(&b.stack) {
        Collected::snapshot(t, epoch);
        let w = b.weight as f64;
        t.live_bytes = (t.live_bytes - w * b.size as f64).max(0.0);
        t.live_objects = (t.live_objects - w).max(0.0);
    }
}
