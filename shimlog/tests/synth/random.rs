//! A random multi-threaded workload (deterministic for a seed): mallocs of skewed sizes,
//! callocs, aligned allocations, reallocs and frees of random live blocks (so many frees are
//! cross-thread), a backend time on one call in three, RSS and allocator-statistics
//! records, for the tests that compare what report and export show with stats --json.
use super::{header, Log};
use recorder::buffer::Args;
use recorder::Op;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Writes the workload of `calls` calls on `threads` threads to `path` as process `pid`,
/// whose reference point is `start_mono_ns`; returns the log's path.
pub fn workload(path: &str, pid: u32, start_mono_ns: u64, threads: u32, calls: u64, seed: u64) -> String {
    let mut h = header(pid, start_mono_ns);
    h.start_unix_ns = 1_750_000_000_000_000_000 + start_mono_ns;
    let mut l = Log::create(path, &h);
    let mut r = Rng(seed | 1);
    let tids: Vec<u32> = (0..threads).map(|i| pid * 100 + i).collect();
    let mut ts = 1_000u64;
    for &t in &tids {
        l.thread(t, ts);
        ts += 1;
    }
    // Live blocks: (ptr, maker); addresses handed out fresh, or reused after a free.
    let mut live: Vec<u64> = Vec::new();
    let mut next_ptr = 0x10_0000u64;
    let mut freed: Vec<u64> = Vec::new();
    let mut addr = |r: &mut Rng, freed: &mut Vec<u64>| {
        if !freed.is_empty() && r.below(2) == 0 {
            let i = r.below(freed.len() as u64) as usize;
            freed.swap_remove(i)
        } else {
            next_ptr += 0x1000;
            next_ptr
        }
    };
    let mut rss = 8u64 << 20;
    for i in 0..calls {
        ts += 1 + r.below(40);
        let t = tids[r.below(threads as u64) as usize];
        let bt = (r.below(3) == 0)
            .then(|| 20 + r.below(100) * r.below(30) + if r.below(200) == 0 { 50_000 } else { 0 });
        let size = match r.below(10) {
            0..=5 => 8 + r.below(120),
            6..=8 => 128 + r.below(4000),
            _ => 4096 + r.below(200_000),
        };
        let k = r.below(100);
        if k < 40 || live.is_empty() {
            let p = addr(&mut r, &mut freed);
            l.call(t, ts, Op::Malloc, Args { size, ptr: p, ..Default::default() }, bt);
            live.push(p);
        } else if k < 45 {
            let p = addr(&mut r, &mut freed);
            l.call(
                t,
                ts,
                Op::Calloc,
                Args { count: 1 + r.below(8), size: 1 + size / 8, ptr: p, ..Default::default() },
                bt,
            );
            live.push(p);
        } else if k < 48 {
            let p = addr(&mut r, &mut freed) & !0xfff;
            l.call(t, ts, Op::PosixMemalign, Args { align: 64, size, ptr: p, ..Default::default() }, bt);
            live.push(p);
        } else if k < 55 {
            let j = r.below(live.len() as u64) as usize;
            let old = live.swap_remove(j);
            let p = addr(&mut r, &mut freed);
            l.call(t, ts, Op::Realloc, Args { old, size: size * 2, ptr: p, ..Default::default() }, bt);
            freed.push(old);
            live.push(p);
        } else if k < 56 {
            // A failed allocation: no block.
            l.call(t, ts, Op::Malloc, Args { size: 1 << 45, ptr: 0, ..Default::default() }, bt);
        } else {
            let j = r.below(live.len() as u64) as usize;
            let p = live.swap_remove(j);
            l.call(t, ts, Op::Free, Args { ptr: p, ..Default::default() }, bt);
            freed.push(p);
        }
        if i % 2000 == 0 {
            rss = (rss + r.below(1 << 20)).saturating_sub(r.below(1 << 19));
            l.process(ts, Op::Rss, rss);
            l.watch(ts, Op::AllocStat, 1, rss / 2, None);
        }
    }
    l.finish(true)
}
