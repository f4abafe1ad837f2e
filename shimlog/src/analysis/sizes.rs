//! Per-size accounting: requests per exact size and per power-of-two bucket, and for each
//! size how many blocks were made, are live now, and were live at the peak of live bytes.
//!
//! Size-class waste, never-freed blocks by size and the state at the peak are all derived
//! from these counts when the report is built, so an allocation or a free updates one
//! 32-byte record here. The state at the peak is kept without copying every size at every
//! new peak: sizes changed since the last snapshot are marked, and only those are copied,
//! once, just before the first change that leaves the peak behind.
use super::classes::SizeTable;
use serde::Serialize;

/// How many exact sizes the report lists.
pub const TOP: usize = 20;

#[derive(Clone, Copy, Default, Debug)]
pub struct SizeStat {
    /// Allocating calls asking for this size (failed ones too).
    pub requests: u64,
    /// Blocks made.
    pub made: u64,
    /// Blocks live now, and at the last snapshot (the peak).
    pub live: u64,
    pub at_peak: u64,
}

#[derive(Clone)]
pub struct Sizes {
    /// Bucket 0 holds size 0; bucket k >= 1 holds [2^(k-1), 2^k).
    count: [u64; 65],
    bytes: [u64; 65],
    /// Indexed by size id (of the shared [`SizeTable`]).
    pub stats: Vec<SizeStat>,
    /// One bit per size id: changed since the last snapshot.
    dirty_bits: Vec<u64>,
    dirty: Vec<u32>,
    /// The live state is a peak not yet snapshotted.
    pending: bool,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes {
            count: [0; 65],
            bytes: [0; 65],
            stats: Vec::new(),
            dirty_bits: Vec::new(),
            dirty: Vec::new(),
            pending: false,
        }
    }
}

#[inline(always)]
fn bucket(size: u64) -> usize {
    (64 - size.leading_zeros()) as usize
}

impl Sizes {
    #[inline(always)]
    fn stat(&mut self, id: u32) -> &mut SizeStat {
        let i = id as usize;
        if i >= self.stats.len() {
            self.grow(i);
        }
        &mut self.stats[i]
    }

    #[cold]
    fn grow(&mut self, i: usize) {
        let n = (i + 1).max(self.stats.len() * 2).max(256);
        self.stats.resize(n, SizeStat::default());
        self.dirty_bits.resize(n.div_ceil(64), 0);
    }

    /// Starts loading size `id`'s counts.
    #[inline(always)]
    pub fn prefetch(&self, id: u32) {
        recorder::cpu::prefetch(self.stats.as_ptr().wrapping_add(id as usize));
    }

    /// An allocating call asked for `size` bytes (id `id`).
    #[inline(always)]
    pub fn request(&mut self, id: u32, size: u64) {
        let k = bucket(size);
        self.count[k] += 1;
        self.bytes[k] = self.bytes[k].wrapping_add(size);
        self.stat(id).requests += 1;
    }

    /// Call before changing size `id`'s live count: if the state now is an unsnapshotted
    /// peak that this change leaves, snapshot it; then mark `id` changed.
    #[inline(always)]
    fn before_change(&mut self, id: u32, new_peak: bool) {
        if self.pending && !new_peak {
            self.snapshot();
        }
        let (w, b) = ((id / 64) as usize, 1u64 << (id % 64));
        if self.dirty_bits[w] & b == 0 {
            self.dirty_bits[w] |= b;
            self.dirty.push(id);
        }
    }

    /// A block of size `id` was made; `new_peak`: live bytes reached a new peak with it.
    #[inline(always)]
    pub fn made(&mut self, id: u32, new_peak: bool) {
        self.stat(id);
        self.before_change(id, new_peak);
        let s = &mut self.stats[id as usize];
        s.made += 1;
        s.live += 1;
        if new_peak {
            self.pending = true;
        }
    }

    /// A block of size `id` went away (`new_peak`: only for a block displaced by an
    /// allocation that is itself a new peak).
    #[inline(always)]
    pub fn freed(&mut self, id: u32, new_peak: bool) {
        self.before_change(id, new_peak);
        self.stats[id as usize].live -= 1;
    }

    #[cold]
    fn snapshot(&mut self) {
        self.pending = false;
        for &id in &self.dirty {
            let s = &mut self.stats[id as usize];
            s.at_peak = s.live;
            self.dirty_bits[(id / 64) as usize] = 0;
        }
        self.dirty.clear();
    }

    /// Ends the run: the last peak is snapshotted if nothing changed after it.
    pub fn finish(&mut self) {
        if self.pending {
            self.snapshot();
        }
    }

    /// Adds another process's requests and blocks made (live counts are per process).
    pub fn merge(&mut self, o: &Sizes) {
        for k in 0..65 {
            self.count[k] += o.count[k];
            self.bytes[k] = self.bytes[k].wrapping_add(o.bytes[k]);
        }
        if self.stats.len() < o.stats.len() {
            self.grow(o.stats.len() - 1);
        }
        for (a, b) in self.stats.iter_mut().zip(&o.stats) {
            a.requests += b.requests;
            a.made += b.made;
        }
    }

    pub fn report(&self, t: &SizeTable) -> SizesReport {
        let buckets = (0..65)
            .filter(|&k| self.count[k] > 0)
            .map(|k| {
                let from = if k == 0 { 0 } else { 1u64 << (k - 1) };
                let to = if k == 64 { u64::MAX } else { (1u64 << k) - 1 };
                SizeBucket { from, to, requests: self.count[k], bytes: self.bytes[k] }
            })
            .collect();
        let mut ids: Vec<usize> = (0..self.stats.len()).filter(|&i| self.stats[i].requests > 0).collect();
        let distinct = ids.len() as u64;
        ids.sort_by(|&a, &b| {
            self.stats[b].requests.cmp(&self.stats[a].requests).then(t.sizes[a].cmp(&t.sizes[b]))
        });
        let top = ids
            .iter()
            .take(TOP)
            .map(|&i| ExactSize { size: t.sizes[i], requests: self.stats[i].requests })
            .collect();
        SizesReport { distinct, buckets, top }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct SizesReport {
    /// Distinct exact sizes requested.
    pub distinct: u64,
    /// Non-empty power-of-two buckets, [from, to] bytes inclusive, of every allocating
    /// call (count * size for calloc and reallocarray; failed calls included).
    pub buckets: Vec<SizeBucket>,
    /// The most frequent exact sizes, most frequent first.
    pub top: Vec<ExactSize>,
}

#[derive(Serialize, Clone, Debug)]
pub struct SizeBucket {
    pub from: u64,
    pub to: u64,
    pub requests: u64,
    pub bytes: u64,
}

#[derive(Serialize, Clone, Debug)]
pub struct ExactSize {
    pub size: u64,
    pub requests: u64,
}
