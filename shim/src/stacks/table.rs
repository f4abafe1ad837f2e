//! The process's stack table: each distinct stack gets an id (1, 2, ...) the first time it is
//! seen, and its definition goes into the log once. Open addressing over a fixed array of
//! 64-bit hashes, mapped once: lookups and inserts are a few loads and one CAS, no lock and
//! no allocation. Two stacks with one 64-bit hash would share an id (about one chance in
//! 10^10 for a million stacks). A full table gives id 0 (the reader says so).
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::*};

const SLOTS: usize = 1 << 18;
const PROBES: usize = 128;

struct Slot {
    hash: AtomicU64,
    id: AtomicU32,
}

static TABLE: AtomicPtr<Slot> = AtomicPtr::new(core::ptr::null_mut());
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// Maps the table (once). False if it cannot be mapped.
pub fn init() -> bool {
    if !TABLE.load(Acquire).is_null() {
        return true;
    }
    let len = SLOTS * core::mem::size_of::<Slot>();
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    if TABLE.compare_exchange(core::ptr::null_mut(), p as *mut Slot, AcqRel, Acquire).is_err() {
        unsafe { libc::munmap(p, len) };
    }
    true
}

fn hash(pcs: &[u64]) -> u64 {
    let mut h = 0x243F_6A88_85A3_08D3u64 ^ pcs.len() as u64;
    for &pc in pcs {
        h = (h ^ pc).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^= h >> 29;
    }
    h | 1
}

/// The id of this stack, and whether it is new (the caller then writes its definition).
pub fn intern(pcs: &[u64]) -> (u32, bool) {
    let t = TABLE.load(Acquire);
    if t.is_null() {
        return (0, false);
    }
    let h = hash(pcs);
    let mut i = (h as usize >> 7) & (SLOTS - 1);
    for _ in 0..PROBES {
        let s = unsafe { &*t.add(i) };
        let cur = s.hash.load(Acquire);
        if cur == 0 {
            match s.hash.compare_exchange(0, h, AcqRel, Acquire) {
                Ok(_) => {
                    let id = NEXT_ID.fetch_add(1, Relaxed);
                    s.id.store(id, Release);
                    return (id, true);
                }
                Err(other) if other == h => return (wait_id(s), false),
                Err(_) => {}
            }
        } else if cur == h {
            return (wait_id(s), false);
        }
        i = (i + 1) & (SLOTS - 1);
    }
    (0, false)
}

/// The id of a slot another thread has just claimed (it stores the id right after).
fn wait_id(s: &Slot) -> u32 {
    loop {
        let id = s.id.load(Acquire);
        if id != 0 {
            return id;
        }
        core::hint::spin_loop();
    }
}

/// In a fork child (one thread): every stack is new to the child's log.
pub fn reset() {
    let t = TABLE.load(Acquire);
    if !t.is_null() {
        // Fresh zero pages in place of the parent's (clearing them would copy each one).
        let len = SLOTS * core::mem::size_of::<Slot>();
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED;
        let p = unsafe {
            libc::mmap(t as *mut libc::c_void, len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0)
        };
        if p == libc::MAP_FAILED {
            unsafe { core::ptr::write_bytes(t as *mut u8, 0, len) };
        }
    }
    NEXT_ID.store(1, Relaxed);
}
