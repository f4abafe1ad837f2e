//! The total of several logs (a parent and the processes it forked or exec'd).
//!
//! What adds up (calls, sizes, blocks made, lifetimes, threads, latency) is merged from the
//! per-process states at the end. What depends on the moment (live bytes, their peak, the
//! blocks live per size at that peak, RSS) is followed while the logs are read together in
//! one time order (CLOCK_MONOTONIC, which all processes of a machine share): each
//! process's analysis tells a [`Follow`] of every block made and freed: [`Alone`] for a
//! log read on its own, the [`Tracker`] of the total for several.
use super::memory::Memory;
use super::sizes::Sizes;

/// What a process's analysis reports, as it happens, to whoever follows the total.
pub trait Follow {
    /// A block of size id `sid` and `size` bytes was made at `ts` (the process's clock).
    fn made(&mut self, sid: u32, size: u64, ts: u64);
    /// A block went away.
    fn freed(&mut self, sid: u32, size: u64);
    /// An event at `ts`.
    fn tick(&mut self, ts: u64);
    /// An RSS record.
    fn rss(&mut self, ts: u64, bytes: u64);
}

/// One log on its own: nothing follows.
pub struct Alone;

impl Follow for Alone {
    #[inline(always)]
    fn made(&mut self, _: u32, _: u64, _: u64) {}
    #[inline(always)]
    fn freed(&mut self, _: u32, _: u64) {}
    #[inline(always)]
    fn tick(&mut self, _: u64) {}
    #[inline(always)]
    fn rss(&mut self, _: u64, _: u64) {}
}

/// Follows the total's live state across processes.
pub struct Tracker {
    /// The process being fed now, and where its time 0 lies on the total's clock.
    pub cur: usize,
    pub offset: u64,
    pub live_bytes: u64,
    pub live_blocks: u64,
    pub peak_bytes: u64,
    pub peak_blocks: u64,
    pub peak_ts: u64,
    /// Blocks live per size, now and at the peak.
    pub sizes: Sizes,
    /// The last RSS of each process.
    rss: Vec<u64>,
    pub mem: Memory,
}

impl Tracker {
    pub fn new(logs: usize) -> Tracker {
        Tracker {
            cur: 0,
            offset: 0,
            live_bytes: 0,
            live_blocks: 0,
            peak_bytes: 0,
            peak_blocks: 0,
            peak_ts: 0,
            sizes: Sizes::default(),
            rss: vec![0; logs],
            mem: Memory::new(),
        }
    }

    pub fn finish(&mut self) {
        self.sizes.finish();
    }
}

impl Follow for Tracker {
    #[inline(always)]
    fn made(&mut self, sid: u32, size: u64, ts: u64) {
        self.live_bytes += size;
        self.live_blocks += 1;
        let new_peak = self.live_bytes > self.peak_bytes;
        self.sizes.made(sid, new_peak);
        self.mem.grew(self.live_bytes);
        if new_peak {
            self.peak_bytes = self.live_bytes;
            self.peak_blocks = self.live_blocks;
            self.peak_ts = ts + self.offset;
            self.mem.peak(self.peak_ts, self.live_bytes);
        }
    }

    #[inline(always)]
    fn freed(&mut self, sid: u32, size: u64) {
        self.live_bytes -= size;
        self.live_blocks -= 1;
        self.sizes.freed(sid, false);
    }

    #[inline(always)]
    fn tick(&mut self, ts: u64) {
        self.mem.tick(ts + self.offset, self.live_bytes, self.live_blocks);
    }

    fn rss(&mut self, ts: u64, bytes: u64) {
        self.rss[self.cur] = bytes;
        let sum = self.rss.iter().sum();
        self.mem.rss(ts + self.offset, sum, self.live_bytes, self.live_blocks);
    }
}
