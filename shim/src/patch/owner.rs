//! Which allocator owns a block, when the program's allocator is switched to a backend.
//!
//! The program's own allocator made every block that existed before the switch (ld.so's,
//! libc's and libstdc++'s start-up, other libraries' constructors), and makes none after
//! it. So the memory it had then is fixed: the anonymous mappings (and the executable's
//! writable data) that existed at the shim's first moment, before its backend made any
//! allocation, are snapshotted here; a pointer inside them is the program allocator's, and
//! everything the backend hands out later comes from mappings or break growth made after.
//! Two things could break that, and are closed:
//! - the program's allocator unmapping part of that memory (on a free of an old block) and
//!   the backend then mapping at the same address: `munmap` of snapshotted memory leaves the
//!   range reserved (PROT_NONE, no memory) instead ([`guarded_munmap`]);
//! - an old block resized by its own allocator into new memory: the result is adopted
//!   ([`adopt`]), exactly, until it is freed.
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};

const MAX_RANGES: usize = 1024;
static mut RANGES: [(usize, usize); MAX_RANGES] = [(0, 0); MAX_RANGES];

/// The ranges, read-only (written only while the process has one thread, before `activate`).
#[inline(always)]
fn ranges() -> &'static [(usize, usize); MAX_RANGES] {
    let p = &raw const RANGES;
    unsafe { &*p }
}
static COUNT: AtomicUsize = AtomicUsize::new(0);
static LOW: AtomicUsize = AtomicUsize::new(usize::MAX);
static HIGH: AtomicUsize = AtomicUsize::new(0);
/// The switch is in force: old blocks go to their own allocator, munmap is guarded.
static ACTIVE: AtomicBool = AtomicBool::new(false);

const MAX_ADOPTED: usize = 4096;
static ADOPTED: [AtomicUsize; MAX_ADOPTED] = [const { AtomicUsize::new(0) }; MAX_ADOPTED];
static ADOPTED_HIGH: AtomicUsize = AtomicUsize::new(0);

static mut MAPS: [u8; 256 * 1024] = [0; 256 * 1024];
static mut EXE: [u8; 4096] = [0; 4096];

/// Records the memory that exists now. Called once, first thing at start-up, without
/// allocating (the backend has made no allocation yet).
pub fn snapshot() {
    unsafe {
        let exe = &raw mut EXE;
        let n = libc::readlink(c"/proc/self/exe".as_ptr(), (*exe).as_mut_ptr() as *mut libc::c_char, 4095);
        let exe: &[u8] = if n > 0 { &(&(*exe))[..n as usize] } else { &[] };
        let fd = libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        let buf = &raw mut MAPS;
        let mut len = 0usize;
        loop {
            let r = libc::read(fd, (*buf).as_mut_ptr().add(len) as *mut libc::c_void, (*buf).len() - len);
            if r <= 0 {
                break;
            }
            len += r as usize;
        }
        libc::close(fd);
        let text: &[u8] = &(&(*buf))[..len];
        let ranges = &raw mut RANGES;
        let mut count = 0usize;
        for line in text.split(|&c| c == b'\n') {
            let Some((a, b, perms, path)) = parse_line(line) else { continue };
            let anonymous = path.is_empty() || path == b"[heap]" || path == b"[stack]";
            let exe_data = !exe.is_empty() && path == exe && perms.get(1) == Some(&b'w');
            if !(anonymous || exe_data) || count == MAX_RANGES {
                continue;
            }
            if count > 0 && (*ranges)[count - 1].1 == a {
                (*ranges)[count - 1].1 = b;
            } else {
                (*ranges)[count] = (a, b);
                count += 1;
            }
        }
        if count > 0 {
            LOW.store((*ranges)[0].0, Relaxed);
            HIGH.store((*ranges)[count - 1].1, Relaxed);
        }
        COUNT.store(count, Release);
    }
}

/// start, end, permissions and path of one /proc/self/maps line.
fn parse_line(line: &[u8]) -> Option<(usize, usize, &[u8], &[u8])> {
    let mut fields = line.splitn(6, |&c| c == b' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let (_off, _dev, rest) = (fields.next()?, fields.next()?, fields.next()?);
    // `rest` is the inode, then (after spaces) the path.
    let path = fields.next().map(|p| p.trim_ascii()).unwrap_or(&[]);
    let _ = rest;
    let dash = range.iter().position(|&c| c == b'-')?;
    Some((hex(&range[..dash])?, hex(&range[dash + 1..])?, perms, path))
}

fn hex(s: &[u8]) -> Option<usize> {
    let mut v = 0usize;
    for &c in s {
        v = v.checked_mul(16)? + (c as char).to_digit(16)? as usize;
    }
    Some(v)
}

/// Whether a snapshot was taken (so that a switch is possible).
pub fn taken() -> bool {
    COUNT.load(Acquire) > 0
}

/// Puts the switch in force.
pub fn activate() {
    ACTIVE.store(true, Release);
}

#[inline(always)]
pub fn active() -> bool {
    ACTIVE.load(Relaxed)
}

/// What a 2 MiB region of the address space holds, cached: the snapshot's ranges interleave
/// with the backend's mappings, so most frees would otherwise search the ranges.
const REGION_SHIFT: u32 = 21;
const CACHE_LEN: usize = 1024;
static REGIONS: [AtomicUsize; CACHE_LEN] = [const { AtomicUsize::new(0) }; CACHE_LEN];
/// Region states, in the low two bits of a cache entry (above them, the region number).
const NEW: usize = 1;
const OLD: usize = 2;
const MIXED: usize = 3;

/// True for a block the program's own allocator made (before the switch, or resized by it).
#[inline(always)]
pub fn is_old(p: *mut libc::c_void) -> bool {
    let p = p as usize;
    let r = p >> REGION_SHIFT;
    let e = REGIONS[r % CACHE_LEN].load(Relaxed);
    let state = if e >> 2 == r && e & 3 != 0 { e & 3 } else { classify(r) };
    match state {
        NEW => adopted(p),
        OLD => true,
        _ => in_ranges(p) || adopted(p),
    }
}

/// Whether region `r` lies wholly outside the snapshot, wholly inside it, or across a border;
/// remembered in the cache.
#[cold]
fn classify(r: usize) -> usize {
    let (a, b) = (r << REGION_SHIFT, (r + 1) << REGION_SHIFT);
    let n = COUNT.load(Relaxed);
    let ranges = &ranges()[..n];
    let state = if ranges.iter().any(|&(s, e)| s <= a && b <= e) {
        OLD
    } else if ranges.iter().any(|&(s, e)| s < b && a < e) {
        MIXED
    } else {
        NEW
    };
    REGIONS[r % CACHE_LEN].store(r << 2 | state, Relaxed);
    state
}

fn in_ranges(p: usize) -> bool {
    let n = COUNT.load(Relaxed);
    let ranges = &ranges()[..n];
    let i = ranges.partition_point(|&(a, _)| a <= p);
    i > 0 && p < ranges[i - 1].1
}

#[inline(always)]
fn adopted(p: usize) -> bool {
    let high = ADOPTED_HIGH.load(Relaxed);
    high != 0 && ADOPTED[..high].iter().any(|a| a.load(Relaxed) == p)
}

/// An old block that its own allocator resized to `p`: it stays that allocator's.
pub fn adopt(p: *mut libc::c_void) {
    let p = p as usize;
    if p == 0 || in_ranges(p) {
        return;
    }
    for a in ADOPTED.iter() {
        if a.compare_exchange(0, p, AcqRel, Relaxed).is_ok() {
            ADOPTED_HIGH.fetch_max(ADOPTED.iter().position(|x| core::ptr::eq(x, a)).unwrap_or(0) + 1, AcqRel);
            return;
        }
    }
}

/// The old block `p` was freed: forget it if it was adopted.
pub fn forget(p: *mut libc::c_void) {
    let high = ADOPTED_HIGH.load(Relaxed);
    for a in &ADOPTED[..high] {
        if a.compare_exchange(p as usize, 0, AcqRel, Relaxed).is_ok() {
            return;
        }
    }
}

/// munmap, except that snapshotted memory stays reserved (its pages are dropped): nothing
/// the backend maps later may land where old blocks were.
pub fn guarded_munmap(addr: *mut libc::c_void, len: usize) -> i32 {
    let a = addr as usize;
    let overlaps = active() && a < HIGH.load(Relaxed) && a.saturating_add(len) > LOW.load(Relaxed) && {
        let n = COUNT.load(Relaxed);
        let ranges = &ranges()[..n];
        ranges.iter().any(|&(s, e)| a < e && a.saturating_add(len) > s)
    };
    unsafe {
        if overlaps {
            let p = libc::mmap(
                addr,
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            );
            return if p == libc::MAP_FAILED { -1 } else { 0 };
        }
        libc::syscall(libc::SYS_munmap, addr, len) as i32
    }
}
