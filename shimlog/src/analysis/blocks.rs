//! The table of live blocks, keyed by address: the one structure every allocation and
//! free touches, at an address that is effectively random.
//!
//! On logs with a large live set, a lookup is a cache and TLB miss, and a branch that goes
//! one way or the other at random, each of which costs more than everything else done per
//! event. So this is a table in the manner of hashbrown's SwissTable, made to be
//! *prefetched*: a control byte per slot (empty, deleted, or 7 bits of the key's hash),
//! probed 16 at a time with SIMD compares, so that a lookup, an insert and a delete take the
//! same branches nearly every time; each key is stored with its block in one 32-byte slot,
//! so that a hit touches one line of slots. The reader runs a few events ahead and
//! [`BlockTable::prefetch`]es the lines each will touch, and the slots live in transparent
//! huge pages where the kernel offers them. General-purpose maps (hashbrown itself) have no
//! prefetch.
use recorder::cpu::prefetch;

/// A live block: when and by which thread it was made, its size (an id of the shared
/// [`super::classes::SizeTable`]) and how many allocations the process had made before it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Block {
    pub ts_ns: u64,
    pub alloc_index: u64,
    pub size_id: u32,
    pub thread: u32,
}

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
                return Slots { ptr: p as *mut T, len, mapped: true };
            }
        }
        let layout = Self::layout(len);
        // SAFETY: len >= MIN, so the layout is not empty; all-zero is a valid (empty) value.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Slots { ptr, len, mapped: false }
    }

    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::array::<T>(len).expect("table layout")
    }

    #[inline(always)]
    fn as_slice(&self) -> &[T] {
        // SAFETY: ptr holds len initialised slots for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed`, by mmap or with this layout.
        unsafe {
            if self.mapped {
                libc::munmap(self.ptr as *mut libc::c_void, self.len * std::mem::size_of::<T>());
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

/// Control bytes: an empty slot (the zeroed state), a deleted one (a tombstone: lookups go
/// on past it), and a full one, 0x80 | 7 bits of its key's hash.
const EMPTY: u8 = 0;
const DELETED: u8 = 1;
/// Control bytes compared at once.
const WIDTH: usize = 16;

/// A key and its block, in one half of a cache line.
#[repr(C, align(32))]
#[derive(Clone, Copy, Default)]
struct Slot {
    key: u64,
    b: Block,
}

/// 16 control bytes and the masks of those that match (bit i for byte i).
#[derive(Clone, Copy)]
struct Group {
    #[cfg(target_arch = "x86_64")]
    v: core::arch::x86_64::__m128i,
    #[cfg(not(target_arch = "x86_64"))]
    v: [u8; WIDTH],
}

impl Group {
    #[inline(always)]
    fn load(b: &[u8; WIDTH]) -> Group {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE2 is part of x86_64; an unaligned load of the 16 bytes of `b`.
        let v = unsafe { core::arch::x86_64::_mm_loadu_si128(b.as_ptr() as *const _) };
        #[cfg(not(target_arch = "x86_64"))]
        let v = *b;
        Group { v }
    }

    #[inline(always)]
    fn matching(self, byte: u8) -> u32 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE2 is part of x86_64.
        unsafe {
            use core::arch::x86_64::*;
            _mm_movemask_epi8(_mm_cmpeq_epi8(self.v, _mm_set1_epi8(byte as i8))) as u32
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.v.iter().enumerate().fold(0, |m, (i, &c)| m | ((c == byte) as u32) << i)
    }

    /// Empty or deleted: the top bit clear.
    #[inline(always)]
    fn free(self) -> u32 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE2 is part of x86_64.
        let full = unsafe { core::arch::x86_64::_mm_movemask_epi8(self.v) as u32 };
        #[cfg(not(target_arch = "x86_64"))]
        let full = self.v.iter().enumerate().fold(0, |m, (i, &c)| m | ((c >> 7) as u32) << i);
        !full & 0xffff
    }
}

pub struct BlockTable {
    /// One byte per slot, then the first WIDTH again, so that a group can be loaded at any
    /// slot without wrapping.
    ctrl: Slots<u8>,
    slots: Slots<Slot>,
    mask: usize,
    shift: u32,
    len: usize,
    /// Inserts into empty slots left before the table is rebuilt (tombstones use them up too).
    growth_left: usize,
}

impl Default for BlockTable {
    fn default() -> Self {
        BlockTable::with_slots(MIN)
    }
}

/// Slots in use (full or deleted) allowed in a table of `n`: half. Each insert takes the
/// first free slot from its hash on, so full slots gather in runs, and a delete inside a run
/// of 16 leaves a tombstone, which lengthens the run: the fuller the table, the faster
/// tombstones breed. Let them fill it to 5/8 and, on a synthetic log of 100,000
/// live blocks, 8% of lookups read a second group of slots that was not prefetched; at 1/2,
/// 3%.
fn limit(n: usize) -> usize {
    n / 2
}

/// Blocks in a table of `n` that make a rebuild double it: 7/16, which leaves room for at
/// least n/16 tombstones before the next rebuild (a rebuild costs n, so at most 16 per
/// tombstone).
fn grow_at(n: usize) -> usize {
    n / 16 * 7
}

impl BlockTable {
    fn with_slots(n: usize) -> BlockTable {
        debug_assert!(n.is_power_of_two() && n >= WIDTH);
        BlockTable {
            ctrl: Slots::zeroed(n + WIDTH),
            slots: Slots::zeroed(n),
            mask: n - 1,
            shift: 64 - n.trailing_zeros(),
            len: 0,
            growth_left: limit(n),
        }
    }

    /// Fibonacci hashing: the high bits of a multiplication mix every bit of the address
    /// (allocator addresses share their low and high bits). The top bits pick the first
    /// slot, bits 32-38 make the control byte (apart from the slot's bits in any table of
    /// under 2^25 slots).
    #[inline(always)]
    fn hash(&self, key: u64) -> (usize, u8) {
        let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((h >> self.shift) as usize, 0x80 | (h >> 32) as u8)
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Starts loading what a lookup of `key` will read a few events later: its control
    /// bytes and the line of slots where it is (nearly always at its first slot or the next).
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        let (pos, _) = self.hash(key);
        let s = self.slots.ptr.wrapping_add(pos);
        prefetch(self.ctrl.ptr.wrapping_add(pos));
        prefetch(s);
        // And the next line (slots are 32 bytes and a large table starts on a page). On the
        // synthetic log a block is 1 slot past its first slot in a quarter of the lookups and
        // 2 or 3 past in one in ten; the two lines reach 3 past an even first slot, 2 past an
        // odd one.
        prefetch(s.wrapping_add(2));
    }

    /// Where `key` is (Ok), or the first free slot on its probe sequence when it is absent
    /// and whether that slot is empty rather than deleted (Err). `pos` and `tag` are
    /// `hash(key)`. Groups are probed at triangular steps, which visit every slot.
    #[inline(always)]
    fn probe(&self, key: u64, mut pos: usize, tag: u8) -> Result<usize, (usize, bool)> {
        let mask = self.mask;
        let mut stride = 0;
        let mut free = None;
        loop {
            let g = self.group(pos);
            let mut m = g.matching(tag);
            while m != 0 {
                let i = (pos + m.trailing_zeros() as usize) & mask;
                if self.slot(i).key == key {
                    return Ok(i);
                }
                m &= m - 1;
            }
            let (f, empty) = (g.free(), g.matching(EMPTY));
            if free.is_none() && f != 0 {
                let at = f.trailing_zeros();
                free = Some(((pos + at as usize) & mask, (empty >> at) & 1 != 0));
            }
            // An empty slot ends the search: an insert would have used it.
            if empty != 0 {
                return Err(free.expect("an empty slot is free"));
            }
            stride += WIDTH;
            pos = (pos + stride) & mask;
        }
    }

    /// The WIDTH control bytes from slot `at` (masked) on.
    #[inline(always)]
    fn group(&self, at: usize) -> Group {
        let at = at & self.mask;
        debug_assert!(at + WIDTH <= self.ctrl.len);
        // SAFETY: ctrl holds mask + 1 + WIDTH bytes, so at..at + WIDTH lies inside it.
        Group::load(unsafe { &*(self.ctrl.ptr.add(at) as *const [u8; WIDTH]) })
    }

    /// Slot `i` (masked: always inside the table, so no bounds check).
    #[inline(always)]
    fn slot(&self, i: usize) -> &Slot {
        debug_assert!(i <= self.mask);
        // SAFETY: slots holds mask + 1 slots and i <= mask.
        unsafe { &*self.slots.ptr.add(i & self.mask) }
    }

    #[inline(always)]
    fn slot_mut(&mut self, i: usize) -> &mut Slot {
        debug_assert!(i <= self.mask);
        // SAFETY: as in `slot`, and &mut self is unique.
        unsafe { &mut *self.slots.ptr.add(i & self.mask) }
    }

    /// Sets slot i's control byte and its copy after the end.
    #[inline(always)]
    fn set_ctrl(&mut self, i: usize, c: u8) {
        let mask = self.mask;
        let copy = (i.wrapping_sub(WIDTH) & mask) + WIDTH;
        debug_assert!(i <= mask && copy < self.ctrl.len);
        // SAFETY: ctrl holds mask + 1 + WIDTH bytes; i & mask <= mask, copy <= mask + WIDTH.
        unsafe {
            *self.ctrl.ptr.add(i & mask) = c;
            *self.ctrl.ptr.add(copy) = c;
        }
    }

    /// Inserts; returns the block that was at `key` (which is replaced).
    #[inline(always)]
    pub fn insert(&mut self, key: u64, b: Block) -> Option<Block> {
        let (pos, tag) = self.hash(key);
        let (i, was_empty) = match self.probe(key, pos, tag) {
            Ok(i) => return Some(std::mem::replace(&mut self.slot_mut(i).b, b)),
            Err(free) => free,
        };
        if was_empty && self.growth_left == 0 {
            self.rebuild();
            return self.insert(key, b);
        }
        self.growth_left -= was_empty as usize;
        self.set_ctrl(i, tag);
        *self.slot_mut(i) = Slot { key, b };
        self.len += 1;
        None
    }

    /// The block at `key`, if live.
    pub fn get(&self, key: u64) -> Option<&Block> {
        let (pos, tag) = self.hash(key);
        let i = self.probe(key, pos, tag).ok()?;
        Some(&self.slot(i).b)
    }

    /// Removes and returns the block at `key`.
    #[inline(always)]
    pub fn remove(&mut self, key: u64) -> Option<Block> {
        let (pos, tag) = self.hash(key);
        let i = self.probe(key, pos, tag).ok()?;
        // The slot may go back to empty unless it lies in a run of WIDTH slots none of which
        // is empty: a probe may have passed over that run as full, and must still do so.
        let before = self.group(i.wrapping_sub(WIDTH)).matching(EMPTY) as u16;
        let after = self.group(i).matching(EMPTY) as u16;
        let run = before.leading_zeros() + after.trailing_zeros() >= WIDTH as u32;
        let c = if run { DELETED } else { EMPTY };
        self.growth_left += (c == EMPTY) as usize;
        self.set_ctrl(i, c);
        self.len -= 1;
        Some(self.slot(i).b)
    }

    /// Rebuilt without its tombstones, twice the size when its blocks fill [`grow_at`] of it
    /// (doubling sooner would double the memory the lookups roam over).
    #[cold]
    fn rebuild(&mut self) {
        let n = self.mask + 1;
        let n = if self.len >= grow_at(n) { n * 2 } else { n };
        let old = std::mem::replace(self, BlockTable::with_slots(n));
        for (c, s) in old.ctrl.as_slice().iter().zip(old.slots.as_slice()) {
            if c & 0x80 != 0 {
                self.insert(s.key, s.b);
            }
        }
    }

    /// Every live block with its address (a fork child's inheritance is copied from it;
    /// `shimlog export` writes the never-freed ones).
    pub fn entries(&self) -> impl Iterator<Item = (u64, &Block)> {
        self.ctrl
            .as_slice()
            .iter()
            .zip(self.slots.as_slice())
            .filter(|(c, _)| **c & 0x80 != 0)
            .map(|(_, s)| (s.key, &s.b))
    }

    /// Every live block.
    #[cfg(test)]
    pub fn values(&self) -> impl Iterator<Item = &Block> {
        self.ctrl
            .as_slice()
            .iter()
            .zip(self.slots.as_slice())
            .filter(|(c, _)| **c & 0x80 != 0)
            .map(|(_, s)| &s.b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn blk(i: u64) -> Block {
        Block { ts_ns: i, alloc_index: i, size_id: i as u32, thread: 0 }
    }

    proptest! {
        /// The table agrees with a HashMap through any sequence of inserts and removes,
        /// including keys that collide and the growth of the table; from the smallest table
        /// (16 slots) the same sequences also go through tombstones and rebuilds.
        #[test]
        fn behaves_like_a_map(ops in prop::collection::vec((any::<bool>(), 1u64..3000), 1..6000),
                              small in any::<bool>()) {
            let mut t = if small { BlockTable::with_slots(16) } else { BlockTable::default() };
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
