//! The table of live blocks, keyed by address: the one structure every allocation and
//! free touches, at an address that is effectively random.
//!
//! On logs with a large live set, a lookup is a cache and TLB miss, which costs more than
//! everything else done per event. So this is an open-addressing table (linear probing,
//! backward-shift deletion, no tombstones) that can be *prefetched*: the reader runs a few
//! events ahead and [`BlockTable::prefetch`]es the slot each will touch, and the slots
//! live in transparent huge pages where the kernel offers them. General-purpose maps
//! (hashbrown) have no prefetch. Address 0 marks an empty slot: a null pointer is never a
//! block.
use super::heap::Block;

/// Slots allocated in one zeroed piece. A large table is mapped directly and advised to
/// use huge pages before any page is touched (advice given after the pages exist would only
/// be acted on later, by khugepaged).
struct Slots<T> {
    ptr: *mut T,
    len: usize,
    mapped: bool,
}

const HUGE: usize = 2 << 20;

impl<T: Copy> Slots<T> {
    /// `len` all-zero values (zero must be a valid T).
    fn zeroed(len: usize) -> Slots<T> {
        let bytes = len * std::mem::size_of::<T>();
        if bytes >= HUGE {
            // SAFETY: a private anonymous mapping, zero-filled by the kernel.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                // Advice only: without huge pages the table works the same, slower.
                unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
                return Slots {
                    ptr: p as *mut T,
                    len,
                    mapped: true,
                };
            }
        }
        let layout = Self::layout(len);
        // SAFETY: len >= MIN, so the layout is not empty; all-zero is a valid (empty) value.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Slots {
            ptr,
            len,
            mapped: false,
        }
    }

    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::array::<T>(len).expect("table layout")
    }

    #[inline(always)]
    fn as_slice(&self) -> &[T] {
        // SAFETY: ptr holds len initialised slots for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    #[inline(always)]
    fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, and &mut self is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed`, by mmap or with this layout.
        unsafe {
            if self.mapped {
                libc::munmap(
                    self.ptr as *mut libc::c_void,
                    self.len * std::mem::size_of::<T>(),
                );
            } else {
                let layout = std::alloc::Layout::array::<T>(self.len).expect("table layout");
                std::alloc::dealloc(self.ptr as *mut u8, layout);
            }
        }
    }
}

// SAFETY: Slots owns its memory like a Vec.
unsafe impl<T: Send> Send for Slots<T> {}

const MIN: usize = 1 << 12;

pub struct BlockTable {
    /// The addresses, apart from the blocks: a probe or a deletion's scan reads only
    /// these, eight to a cache line.
    keys: Slots<u64>,
    vals: Slots<Block>,
    mask: usize,
    shift: u32,
    len: usize,
}

impl Default for BlockTable {
    fn default() -> Self {
        BlockTable::with_slots(MIN)
    }
}

impl BlockTable {
    fn with_slots(n: usize) -> BlockTable {
        debug_assert!(n.is_power_of_two());
        BlockTable {
            keys: Slots::zeroed(n),
            vals: Slots::zeroed(n),
            mask: n - 1,
            shift: 64 - n.trailing_zeros(),
            len: 0,
        }
    }

    /// Fibonacci hashing: the high bits of a multiplication mix every bit of the address
    /// (allocator addresses share their low and high bits).
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Starts loading the slot `key` hashes to, for a lookup a few events later: the line
    /// of keys (a probe rarely leaves it) and the block's line.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let h = self.home(key);
            let k = self.keys.as_slice().as_ptr().wrapping_add(h) as *const i8;
            let v = self.vals.as_slice().as_ptr().wrapping_add(h) as *const i8;
            // SAFETY: prefetch never faults.
            unsafe {
                _mm_prefetch(k, _MM_HINT_T0);
                _mm_prefetch(v, _MM_HINT_T0);
                _mm_prefetch(v.wrapping_add(64), _MM_HINT_T0);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = key;
    }

    /// Where `key` is (Ok), or the empty slot that ends its cluster when it is absent (Err).
    #[inline(always)]
    fn probe(&self, key: u64) -> Result<usize, usize> {
        let mask = self.mask;
        let ks = self.keys.as_slice();
        let mut i = self.home(key);
        loop {
            let k = ks[i];
            if k == key {
                return Ok(i);
            }
            if k == 0 {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Inserts; returns the block that was at `key` (which is replaced).
    #[inline(always)]
    pub fn insert(&mut self, key: u64, b: Block) -> Option<Block> {
        debug_assert!(key != 0);
        match self.probe(key) {
            Ok(i) => Some(std::mem::replace(&mut self.vals.as_mut_slice()[i], b)),
            Err(i) => {
                self.keys.as_mut_slice()[i] = key;
                self.vals.as_mut_slice()[i] = b;
                self.len += 1;
                if self.len * 8 > (self.mask + 1) * 5 {
                    self.grow();
                }
                None
            }
        }
    }

    /// Removes and returns the block at `key`.
    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<Block> {
        if key == 0 {
            return None;
        }
        let Ok(i) = self.probe(key) else {
            return None;
        };
        let mask = self.mask;
        let ks = self.keys.as_mut_slice();
        let shift = self.shift;
        let vs = self.vals.as_mut_slice();
        let out = vs[i];
        // Backward-shift deletion: pull later entries of the cluster into the hole when
        // their home is not between the hole and them.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let k = ks[j];
            if k == 0 {
                break;
            }
            let home = (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize;
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                ks[hole] = k;
                vs[hole] = vs[j];
                hole = j;
            }
        }
        ks[hole] = 0;
        self.len -= 1;
        Some(out)
    }

    #[cold]
    fn grow(&mut self) {
        let old = std::mem::replace(self, BlockTable::with_slots((self.mask + 1) * 2));
        for (k, b) in old.keys.as_slice().iter().zip(old.vals.as_slice()) {
            if *k != 0 {
                self.insert(*k, *b);
            }
        }
    }

    /// Every live block.
    #[cfg(test)]
    pub fn values(&self) -> impl Iterator<Item = &Block> {
        self.keys
            .as_slice()
            .iter()
            .zip(self.vals.as_slice())
            .filter(|(k, _)| **k != 0)
            .map(|(_, b)| b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn blk(i: u64) -> Block {
        Block {
            ts_ns: i,
            alloc_index: i,
            size_id: i as u32,
            thread: 0,
        }
    }

    proptest! {
        /// The table agrees with a HashMap through any sequence of inserts and removes,
        /// including keys that collide and the growth of the table.
        #[test]
        fn behaves_like_a_map(ops in prop::collection::vec((any::<bool>(), 1u64..3000), 1..6000)) {
            let mut t = BlockTable::default();
            let mut m: HashMap<u64, u64> = HashMap::new();
            for (n, (ins, k)) in ops.into_iter().enumerate() {
                let key = k * 16;
                if ins {
                    let got = t.insert(key, blk(n as u64)).map(|b| b.ts_ns);
                    prop_assert_eq!(got, m.insert(key, n as u64));
                } else {
                    prop_assert_eq!(t.remove(key).map(|b| b.ts_ns), m.remove(&key));
                }
                prop_assert_eq!(t.len(), m.len());
            }
            let mut a: Vec<u64> = t.values().map(|b| b.ts_ns).collect();
            let mut b: Vec<u64> = m.values().copied().collect();
            a.sort();
            b.sort();
            prop_assert_eq!(a, b);
        }
    }
}
