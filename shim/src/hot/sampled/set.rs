//! The set of live sampled blocks (SHIM_RECORD=sample), which every free asks: is this
//! block one of the sampled ones? Lock-free and allocation-free, in static memory (its
//! pages are mapped on first touch).
//!
//! An address hashes to one bucket: a cache line of 8 slots. Inserting takes a zero slot
//! of the bucket with a compare-and-swap; removing swaps the address back to zero, so no
//! tombstone is ever left and a lookup reads one line. Each bucket has a count, raised
//! before its slot is taken and lowered after it is given back, so a count of 0 proves
//! the bucket holds nothing: the free of an unsampled block, nearly every free, reads one
//! 2-byte word of a 16 KiB array that stays in cache. A block is inserted before its
//! allocation returns to the program, and removed before its free reaches the allocator
//! (which could hand the address out again at once), so an address is in the set only
//! while its block is live.
//!
//! A full bucket (9 live samples hashing alike: at 64 Ki slots, only with tens of
//! thousands of live samples) refuses the sample; the caller counts it.
use core::sync::atomic::{AtomicU16, AtomicU64, Ordering::*};

const BUCKET_BITS: u32 = 13;
const BUCKETS: usize = 1 << BUCKET_BITS;
const WAYS: usize = 8;

#[repr(C, align(64))]
struct Bucket([AtomicU64; WAYS]);

static SLOTS: [Bucket; BUCKETS] = [const { Bucket([const { AtomicU64::new(0) }; WAYS]) }; BUCKETS];
static COUNTS: [AtomicU16; BUCKETS] = [const { AtomicU16::new(0) }; BUCKETS];

#[inline(always)]
fn bucket(p: u64) -> usize {
    // Blocks are at least 16-byte aligned: the low bits say nothing.
    ((p >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BUCKET_BITS)) as usize
}

/// Adds live block `p` (non-zero). False when its bucket is full.
pub fn insert(p: u64) -> bool {
    let b = bucket(p);
    COUNTS[b].fetch_add(1, AcqRel);
    for slot in &SLOTS[b].0 {
        if slot.load(Relaxed) == 0 && slot.compare_exchange(0, p, AcqRel, Relaxed).is_ok() {
            return true;
        }
    }
    COUNTS[b].fetch_sub(1, AcqRel);
    false
}

/// Removes `p` if it is a sampled block; true if it was.
#[inline(always)]
pub fn remove(p: u64) -> bool {
    let b = bucket(p);
    if COUNTS[b].load(Acquire) == 0 {
        return false;
    }
    remove_slow(b, p)
}

#[cold]
#[inline(never)]
fn remove_slow(b: usize, p: u64) -> bool {
    for slot in &SLOTS[b].0 {
        if slot.load(Acquire) == p && slot.compare_exchange(p, 0, AcqRel, Relaxed).is_ok() {
            COUNTS[b].fetch_sub(1, AcqRel);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_and_a_full_bucket() {
        // Addresses far apart in a range no other test uses.
        let base = 0x7e00_0000_0000u64;
        let ps: Vec<u64> = (0..2000).map(|i| base + i * 4096).collect();
        for &p in &ps {
            assert!(insert(p));
        }
        for &p in &ps {
            assert!(remove(p), "{p:#x} was inserted");
            assert!(!remove(p), "{p:#x} removed twice");
        }
        // Nine addresses of one bucket: the ninth is refused, and nothing is lost.
        let b = bucket(base);
        let same: Vec<u64> =
            (0..1u64 << 24).map(|i| base + i * 16).filter(|&p| bucket(p) == b).take(9).collect();
        assert_eq!(same.len(), 9);
        for &p in &same[..8] {
            assert!(insert(p));
        }
        assert!(!insert(same[8]));
        assert!(!remove(same[8]));
        for &p in &same[..8] {
            assert!(remove(p));
        }
        assert_eq!(COUNTS[b].load(Relaxed), 0);
    }

    #[test]
    fn threads_race_on_one_bucket() {
        let base = 0x7d00_0000_0000u64;
        let b = bucket(base);
        let same: Vec<u64> =
            (0..1u64 << 24).map(|i| base + i * 16).filter(|&p| bucket(p) == b).take(8).collect();
        std::thread::scope(|s| {
            for t in 0..4 {
                let mine = [same[2 * t], same[2 * t + 1]];
                s.spawn(move || {
                    for _ in 0..20_000 {
                        for &p in &mine {
                            assert!(insert(p));
                        }
                        for &p in &mine {
                            assert!(remove(p));
                        }
                    }
                });
            }
        });
        assert_eq!(COUNTS[b].load(Relaxed), 0);
    }
}
