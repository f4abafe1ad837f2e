//! Threads: what each thread did, blocks freed by a thread other than the one that made
//! them, and bursts of frees (runs of at least N frees on one thread with no allocation in
//! between: what overflows jemalloc's thread cache and triggers its remote-free flush).
use rustc_hash::FxHashMap;
use serde::Serialize;

/// How many bursts, thread pairs and threads the report details.
pub const TOP_BURSTS: usize = 10;
pub const TOP_PAIRS: usize = 10;
const DIRECT: usize = 1 << 16;
const DENSE: usize = 32;
const NONE: u32 = u32::MAX;

#[derive(Clone, Debug, Default)]
pub struct ThreadStat {
    pub pid: u32,
    pub tid: u32,
    pub first_ns: u64,
    pub last_ns: u64,
    pub allocs: u64,
    pub frees: u64,
    pub bytes: u64,
    /// Frees by this thread of blocks another thread made.
    pub cross_frees: u64,
    pub dropped: u64,
    run: u64,
    run_start: u64,
    run_last: u64,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Burst {
    pub pid: u32,
    pub tid: u32,
    pub frees: u64,
    pub start_ns: u64,
    pub end_ns: u64,
}

#[derive(Clone, Default)]
pub struct Threads {
    /// Slot by stream, for streams below DIRECT; `index` for the others.
    direct: Vec<u32>,
    index: FxHashMap<u32, u32>,
    pub list: Vec<ThreadStat>,
    pid: u32,
    min_run: u64,
    /// Frees of known blocks, and those freed by another thread than the maker.
    known_frees: u64,
    cross: u64,
    pairs: FxHashMap<(u32, u32), u64>,
    /// Counts of `pairs` between the first DENSE threads while the log is read (maker *
    /// DENSE + freer), moved into `pairs` by `finish`: a cross-thread free is then an
    /// increment, not a hash-map update.
    dense: Vec<u64>,
    bursts: u64,
    burst_frees: u64,
    /// The longest bursts, longest first.
    top: Vec<Burst>,
}

impl Threads {
    pub fn new(pid: u32, min_run: u64) -> Threads {
        Threads { pid, min_run, ..Default::default() }
    }

    /// The slot of the thread writing `stream` (created on first sight). The shim numbers
    /// streams from 1 up, so a direct index serves them; a map the unusual rest.
    #[inline(always)]
    pub fn slot(&mut self, stream: u32, tid: u32, ts: u64) -> u32 {
        if let Some(&s) = self.direct.get(stream as usize) {
            if s != NONE {
                return s;
            }
        }
        self.slow_slot(stream, tid, ts)
    }

    #[cold]
    fn slow_slot(&mut self, stream: u32, tid: u32, ts: u64) -> u32 {
        if let Some(&s) = self.index.get(&stream) {
            return s;
        }
        let s = self.list.len() as u32;
        self.list.push(ThreadStat { pid: self.pid, tid, first_ns: ts, last_ns: ts, ..Default::default() });
        if (stream as usize) < DIRECT {
            if self.direct.len() <= stream as usize {
                self.direct.resize(stream as usize + 1, NONE);
            }
            self.direct[stream as usize] = s;
        } else {
            self.index.insert(stream, s);
        }
        s
    }

    /// An allocating call (successful or not) by thread `t`: ends its run of frees.
    #[inline(always)]
    pub fn alloc_call(&mut self, t: u32, ts: u64) {
        let th = &mut self.list[t as usize];
        th.last_ns = ts;
        // Whether a run of frees just ended is data (about every other call on a thread
        // that mixes the two); whether it was long enough to be a burst is rare.
        if th.run >= self.min_run.max(1) {
            self.end_run(t);
        } else {
            th.run = 0;
        }
    }

    /// A successful allocation of `bytes` by `t`.
    #[inline(always)]
    pub fn allocated(&mut self, t: u32, bytes: u64) {
        let th = &mut self.list[t as usize];
        th.allocs += 1;
        th.bytes += bytes;
    }

    /// A free() call of a non-null pointer by `t`.
    #[inline(always)]
    pub fn free_call(&mut self, t: u32, ts: u64) {
        let th = &mut self.list[t as usize];
        th.last_ns = ts;
        th.frees += 1;
        th.run_start = std::hint::select_unpredictable(th.run == 0, ts, th.run_start);
        th.run += 1;
        th.run_last = ts;
    }

    /// A known block made by `maker` was freed (by free or realloc) by `by`.
    #[inline(always)]
    pub fn block_freed(&mut self, by: u32, maker: u32) {
        self.known_frees += 1;
        if by != maker {
            self.cross_free(by, maker);
        }
    }

    #[inline(always)]
    fn cross_free(&mut self, by: u32, maker: u32) {
        self.cross += 1;
        self.list[by as usize].cross_frees += 1;
        let (m, b) = (maker as usize, by as usize);
        if m < DENSE && b < DENSE {
            if self.dense.is_empty() {
                self.dense = vec![0; DENSE * DENSE];
            }
            self.dense[m * DENSE + b] += 1;
        } else {
            *self.pairs.entry((maker, by)).or_default() += 1;
        }
    }

    pub fn dropped(&mut self, t: u32, n: u64) {
        self.list[t as usize].dropped += n;
    }

    #[cold]
    pub fn end_run(&mut self, t: u32) {
        let th = &mut self.list[t as usize];
        let run = std::mem::take(&mut th.run);
        if run < self.min_run || run == 0 {
            return;
        }
        self.bursts += 1;
        self.burst_frees += run;
        let b = Burst { pid: self.pid, tid: th.tid, frees: run, start_ns: th.run_start, end_ns: th.run_last };
        push_top(&mut self.top, b);
    }

    /// Ends every open run and gathers the pair counts (at the end of the log).
    pub fn finish(&mut self) {
        for (i, n) in std::mem::take(&mut self.dense).into_iter().enumerate() {
            if n > 0 {
                let k = ((i / DENSE) as u32, (i % DENSE) as u32);
                *self.pairs.entry(k).or_default() += n;
            }
        }
        for t in 0..self.list.len() {
            self.end_run(t as u32);
        }
    }

    /// Adds another process's threads; its times are shifted by `offset_ns`.
    pub fn merge(&mut self, o: &Threads, offset_ns: u64) {
        let base = self.list.len() as u32;
        for th in &o.list {
            let mut th = th.clone();
            th.first_ns += offset_ns;
            th.last_ns += offset_ns;
            self.list.push(th);
        }
        self.known_frees += o.known_frees;
        self.cross += o.cross;
        for (&(a, b), &n) in &o.pairs {
            *self.pairs.entry((a + base, b + base)).or_default() += n;
        }
        self.bursts += o.bursts;
        self.burst_frees += o.burst_frees;
        for b in &o.top {
            let mut b = b.clone();
            b.start_ns += offset_ns;
            b.end_ns += offset_ns;
            push_top(&mut self.top, b);
        }
        self.min_run = o.min_run;
    }

    /// Every (maker, freer) pair of threads with cross-thread frees, most first.
    pub fn pairs(&self) -> Vec<ThreadPair> {
        let pid_of = |s: u32| self.list[s as usize].pid;
        let mut pairs: Vec<ThreadPair> = self
            .pairs
            .iter()
            .map(|(&(m, f), &count)| ThreadPair {
                pid: pid_of(m),
                alloc_tid: self.list[m as usize].tid,
                free_tid: self.list[f as usize].tid,
                count,
            })
            .collect();
        pairs.sort_by(|a, b| {
            b.count.cmp(&a.count).then((a.alloc_tid, a.free_tid).cmp(&(b.alloc_tid, b.free_tid)))
        });
        pairs
    }

    pub fn report(&self) -> ThreadsReport {
        let pid_of = |s: u32| self.list[s as usize].pid;
        let mut per_thread: Vec<ThreadRow> = self
            .list
            .iter()
            .enumerate()
            .map(|(i, t)| ThreadRow {
                pid: pid_of(i as u32),
                tid: t.tid,
                allocs: t.allocs,
                frees: t.frees,
                bytes_allocated: t.bytes,
                cross_thread_frees: t.cross_frees,
                dropped_events: t.dropped,
                first_ns: t.first_ns,
                last_ns: t.last_ns,
            })
            .collect();
        per_thread.sort_by(|a, b| (b.allocs + b.frees).cmp(&(a.allocs + a.frees)).then(a.tid.cmp(&b.tid)));
        let mut pairs = self.pairs();
        let pair_count = pairs.len() as u64;
        pairs.truncate(TOP_PAIRS);
        ThreadsReport {
            per_thread,
            cross_thread_frees: CrossReport {
                count: self.cross,
                share: super::slop::ratio(self.cross, self.known_frees),
                of_frees: self.known_frees,
                pairs: pair_count,
                top_pairs: pairs,
            },
            free_bursts: BurstsReport {
                min_run: self.min_run,
                count: self.bursts,
                frees: self.burst_frees,
                longest: self.top.first().cloned(),
                top: self.top.clone(),
            },
        }
    }
}

fn push_top(top: &mut Vec<Burst>, b: Burst) {
    if top.len() == TOP_BURSTS && top.last().is_some_and(|l| l.frees >= b.frees) {
        return;
    }
    let at = top.partition_point(|x| x.frees >= b.frees);
    top.insert(at, b);
    top.truncate(TOP_BURSTS);
}

#[derive(Serialize, Clone, Debug)]
pub struct ThreadsReport {
    /// Every thread, busiest first.
    pub per_thread: Vec<ThreadRow>,
    pub cross_thread_frees: CrossReport,
    pub free_bursts: BurstsReport,
}

#[derive(Serialize, Clone, Debug)]
pub struct ThreadRow {
    pub pid: u32,
    pub tid: u32,
    pub allocs: u64,
    pub frees: u64,
    pub bytes_allocated: u64,
    pub cross_thread_frees: u64,
    pub dropped_events: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

#[derive(Serialize, Clone, Debug)]
pub struct CrossReport {
    /// Blocks freed (by free or realloc) by a thread other than the one that made them.
    pub count: u64,
    /// count / of_frees.
    pub share: f64,
    /// Frees of blocks whose allocation is in the log.
    pub of_frees: u64,
    /// Distinct (maker, freer) thread pairs.
    pub pairs: u64,
    pub top_pairs: Vec<ThreadPair>,
}

#[derive(Serialize, Clone, Debug)]
pub struct ThreadPair {
    pub pid: u32,
    pub alloc_tid: u32,
    pub free_tid: u32,
    pub count: u64,
}

#[derive(Serialize, Clone, Debug)]
pub struct BurstsReport {
    /// A burst is a run of at least this many free() calls on one thread with no
    /// allocating call in between (--burst).
    pub min_run: u64,
    pub count: u64,
    /// Frees inside bursts.
    pub frees: u64,
    pub longest: Option<Burst>,
    /// The longest bursts, longest first.
    pub top: Vec<Burst>,
}
