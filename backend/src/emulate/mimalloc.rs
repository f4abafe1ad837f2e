//! mimalloc's introspection (`mi_process_info`, `mi_stats_print_out`, `mi_stats_print`,
//! `mi_stats_reset`, `mi_stats_merge`) answered by the serving backend: the shim's own
//! mimalloc when it serves, otherwise the process's figures (getrusage, /proc/self/statm)
//! and the backend's statistics in mimalloc's terms.
use super::{number, read_proc, rss_now, snapshot, Buf};
use crate::Backend;
use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// mimalloc's output callback: `void (*)(const char* msg, void* arg)`.
pub type OutputFun = Option<unsafe extern "C" fn(*const c_char, *mut c_void)>;

/// The eight figures of `mi_process_info`, in its order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    pub elapsed_msecs: usize,
    pub user_msecs: usize,
    pub system_msecs: usize,
    pub current_rss: usize,
    pub peak_rss: usize,
    pub current_commit: usize,
    pub peak_commit: usize,
    pub page_faults: usize,
}

static PEAK_COMMIT: AtomicUsize = AtomicUsize::new(0);

/// Milliseconds since the process started (its start time in /proc/self/stat against the
/// boot clock), as mimalloc counts from its start-up.
fn elapsed_msecs() -> usize {
    let mut buf = [0u8; 1024];
    let text = read_proc(c"/proc/self/stat", &mut buf);
    // Fields after the command name (which may hold spaces) start after the last ')';
    // starttime is field 22, the 20th after it.
    let Some(close) = text.iter().rposition(|&c| c == b')') else { return 0 };
    let Some(start) = text[close + 1..].split(|&c| c == b' ').filter(|f| !f.is_empty()).nth(19) else {
        return 0;
    };
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut now: libc::timespec = unsafe { core::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) };
    let now_ms = now.tv_sec as u64 * 1000 + now.tv_nsec as u64 / 1_000_000;
    now_ms.saturating_sub(number(start) * 1000 / hz) as usize
}

/// `mi_process_info`'s figures under backend `b`.
pub fn process_info(b: Backend) -> ProcessInfo {
    if b == Backend::Mimalloc {
        let mut p = ProcessInfo::default();
        unsafe {
            libmimalloc_sys::mi_process_info(
                &mut p.elapsed_msecs,
                &mut p.user_msecs,
                &mut p.system_msecs,
                &mut p.current_rss,
                &mut p.peak_rss,
                &mut p.current_commit,
                &mut p.peak_commit,
                &mut p.page_faults,
            )
        };
        return p;
    }
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ms = |t: libc::timeval| t.tv_sec as usize * 1000 + t.tv_usec as usize / 1000;
    let commit = snapshot(b).mapped;
    let peak = PEAK_COMMIT.fetch_max(commit, Relaxed).max(commit);
    ProcessInfo {
        elapsed_msecs: elapsed_msecs(),
        user_msecs: ms(ru.ru_utime),
        system_msecs: ms(ru.ru_stime),
        current_rss: rss_now(),
        peak_rss: ru.ru_maxrss as usize * 1024,
        current_commit: commit,
        peak_commit: peak,
        page_faults: ru.ru_majflt as usize,
    }
}

/// `mi_process_info(...)`: each pointer may be NULL.
///
/// # Safety
/// Each pointer NULL or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe fn process_info_c(
    b: Backend,
    elapsed: *mut usize,
    user: *mut usize,
    system: *mut usize,
    rss: *mut usize,
    peak_rss: *mut usize,
    commit: *mut usize,
    peak_commit: *mut usize,
    faults: *mut usize,
) {
    let p = process_info(b);
    for (out, v) in [
        (elapsed, p.elapsed_msecs),
        (user, p.user_msecs),
        (system, p.system_msecs),
        (rss, p.current_rss),
        (peak_rss, p.peak_rss),
        (commit, p.current_commit),
        (peak_commit, p.peak_commit),
        (faults, p.page_faults),
    ] {
        if !out.is_null() {
            unsafe { *out = v };
        }
    }
}

/// `mi_stats_print_out(out, arg)` (and `mi_stats_print(out)`, the same with no argument):
/// the statistics through `out`, or on stderr when it is None.
///
/// # Safety
/// `out` callable with `arg`.
pub unsafe fn stats_print_out(b: Backend, out: OutputFun, arg: *mut c_void) {
    if b == Backend::Mimalloc {
        return unsafe { libmimalloc_sys::mi_stats_print_out(out, arg) };
    }
    use core::fmt::Write;
    let s = snapshot(b);
    let p = process_info(b);
    let mut w = Buf::<1024>::new();
    let _ = write!(
        w,
        "mimalloc statistics, emulated by the shim: {} serves this program's mimalloc calls\n\
         {:>11} {:>12}\n\
         {:>11}: {:>12}\n{:>11}: {:>12}\n{:>11}: {:>12}\n{:>11}: {:>12}\n{:>11}: {:>12}\n\
         {:>11}: {:>12}\n{:>11}: {:>12}\n{:>11}: {:>12}\n",
        b.name(),
        "",
        "current",
        "allocated",
        s.allocated,
        "committed",
        s.mapped,
        "reserved",
        s.mapped + s.retained,
        "rss",
        p.current_rss,
        "peak rss",
        p.peak_rss,
        "elapsed ms",
        p.elapsed_msecs,
        "process ms",
        p.user_msecs + p.system_msecs,
        "page faults",
        p.page_faults,
    );
    match out {
        Some(f) => unsafe { f(w.as_c_ptr(), arg) },
        None => w.write_to_fd(2),
    }
}

/// `mi_stats_reset()`: the shim's mimalloc's own; other backends' statistics are not reset.
pub fn stats_reset(b: Backend) {
    if b == Backend::Mimalloc {
        unsafe { libmimalloc_sys::mi_stats_reset() };
    }
}

/// `mi_collect(force)`: the shim's mimalloc's own; with another backend, forced, memory back
/// to the system (jemalloc's `arena.<i>.purge` above), else the thread's cache flushed.
pub fn collect(b: Backend, force: bool) {
    match (b, force) {
        (Backend::Mimalloc, _) => unsafe { libmimalloc_sys::mi_collect(force) },
        (_, true) => super::purge(b),
        (_, false) => super::flush_thread_cache(b),
    }
}

/// `mi_stats_merge()`: nothing to do (mimalloc 3 merges its threads' statistics itself and
/// no longer defines it; the other backends keep process-wide figures).
pub fn stats_merge(_: Backend) {}

// ---- heaps ----
//
// When another backend serves, a `mi_heap_t*` is the address of one of these slots: its
// blocks come from the serving backend and are kept in one table (block address -> heap),
// so that `mi_heap_destroy` frees them, `mi_heap_contains_block` and `mi_heap_visit_blocks`
// answer, and a block freed by `mi_free` leaves its heap ([`heap_forget`]).

/// The most heaps alive at once (slot 0 is the default heap, never deleted).
pub const HEAPS: usize = 1024;

#[repr(C, align(64))]
pub struct Heap {
    live: core::sync::atomic::AtomicBool,
}

static HEAP_SLOTS: [Heap; HEAPS] =
    [const { Heap { live: core::sync::atomic::AtomicBool::new(false) } }; HEAPS];

/// The default heap (`mi_heap_get_default`, `mi_heap_get_backing`): the one the standard
/// calls allocate from; its blocks are not kept in the table.
pub fn heap_default() -> *mut c_void {
    &HEAP_SLOTS[0] as *const Heap as *mut c_void
}

/// The slot number of heap `h`, if it is one of ours and alive (the default: 0).
fn heap_index(h: *const c_void) -> Option<usize> {
    let base = HEAP_SLOTS.as_ptr() as usize;
    let off = (h as usize).checked_sub(base)?;
    let size = core::mem::size_of::<Heap>();
    if off % size != 0 || off / size >= HEAPS {
        return None;
    }
    let i = off / size;
    (i == 0 || HEAP_SLOTS[i].live.load(Relaxed)).then_some(i)
}

/// `mi_heap_new()`: a free slot, NULL when all are taken.
pub fn heap_new() -> *mut c_void {
    for (i, s) in HEAP_SLOTS.iter().enumerate().skip(1) {
        if s.live.compare_exchange(false, true, Relaxed, Relaxed).is_ok() {
            return &HEAP_SLOTS[i] as *const Heap as *mut c_void;
        }
    }
    say_heaps_full();
    core::ptr::null_mut()
}

fn say_heaps_full() {
    super::say_once("mi_heap_new", b"more than 1024 heaps", super::Trouble::CannotHonour, crate::selected());
}

/// The table of heap blocks: open addressing over a mapping reserved once (2^20 entries of
/// two words, touched as used), under a spin lock (heap calls are rare next to malloc).
const TABLE: usize = 1 << 20;
const EMPTY: usize = 0;
const GONE: usize = 1;
static TABLE_PTR: AtomicUsize = AtomicUsize::new(0);
static TABLE_LOCK: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
static TABLE_USED: AtomicUsize = AtomicUsize::new(0);
/// Whether a heap block was ever kept (frees skip the table until then).
static ANY: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

struct Locked;
impl Drop for Locked {
    fn drop(&mut self) {
        TABLE_LOCK.store(false, core::sync::atomic::Ordering::Release);
    }
}
fn lock() -> Locked {
    while TABLE_LOCK
        .compare_exchange_weak(false, true, core::sync::atomic::Ordering::Acquire, Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
        unsafe { libc::sched_yield() };
    }
    Locked
}

/// The table (entries: [block, heap index]), mapped on first use; None if it cannot be.
fn table(_: &Locked) -> Option<&'static mut [[usize; 2]]> {
    let mut p = TABLE_PTR.load(Relaxed);
    if p == 0 {
        let m = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                TABLE * 16,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if m == libc::MAP_FAILED {
            return None;
        }
        p = m as usize;
        TABLE_PTR.store(p, Relaxed);
    }
    Some(unsafe { core::slice::from_raw_parts_mut(p as *mut [usize; 2], TABLE) })
}

fn hash(p: usize) -> usize {
    (p >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44
}

/// Keeps block `p` as heap `h`'s. False when `h` is not a heap of ours or the table is full
/// (the block is then the default heap's: never freed by `mi_heap_destroy`).
pub fn heap_keep(h: *const c_void, p: *mut c_void) -> bool {
    let Some(i) = heap_index(h) else { return false };
    if i == 0 || p.is_null() {
        return i == 0;
    }
    let g = lock();
    let Some(t) = table(&g) else { return false };
    if TABLE_USED.load(Relaxed) >= TABLE / 2 {
        super::say_once(
            "mi_heap_malloc",
            b"more than 2^19 heap blocks",
            super::Trouble::CannotHonour,
            crate::selected(),
        );
        return false;
    }
    ANY.store(true, Relaxed);
    let mut k = hash(p as usize) % TABLE;
    loop {
        let e = &mut t[k];
        if e[0] == EMPTY || e[0] == GONE || e[0] == p as usize {
            if e[0] != p as usize {
                TABLE_USED.fetch_add(1, Relaxed);
            }
            *e = [p as usize, i];
            return true;
        }
        k = (k + 1) % TABLE;
    }
}

fn find(t: &[[usize; 2]], p: usize) -> Option<usize> {
    let mut k = hash(p) % TABLE;
    loop {
        match t[k][0] {
            EMPTY => return None,
            x if x == p => return Some(k),
            _ => k = (k + 1) % TABLE,
        }
    }
}

/// Block `p` leaves its heap (freed, or moved by a realloc). Cheap until a heap block exists.
#[inline]
pub fn heap_forget(p: *mut c_void) {
    if !ANY.load(Relaxed) || p.is_null() {
        return;
    }
    let g = lock();
    let Some(t) = table(&g) else { return };
    if let Some(k) = find(t, p as usize) {
        t[k] = [GONE, 0];
        TABLE_USED.fetch_sub(1, Relaxed);
    }
}

/// The heap block `p` is kept in (0 for the default heap, None: not a heap block).
pub fn heap_of(p: *const c_void) -> Option<usize> {
    if !ANY.load(Relaxed) || p.is_null() {
        return None;
    }
    let g = lock();
    let t = table(&g)?;
    find(t, p as usize).map(|k| t[k][1])
}

/// `mi_heap_contains_block(heap, p)`: `p` is one of `heap`'s blocks (for the default heap:
/// a block of the backend's that no other heap holds).
pub fn heap_contains(h: *const c_void, p: *const c_void) -> bool {
    match heap_index(h) {
        None => false,
        Some(_) if p.is_null() => false,
        Some(0) => heap_of(p).is_none(),
        Some(i) => heap_of(p) == Some(i),
    }
}

/// Calls `f` on each block of heap `h` (not the default heap's, which are not kept) until it
/// returns false; false then. The blocks are copied out first so that `f` may allocate or
/// free.
pub fn heap_blocks(h: *const c_void, mut f: impl FnMut(*mut c_void) -> bool) -> bool {
    let Some(i) = heap_index(h) else { return true };
    if i == 0 || !ANY.load(Relaxed) {
        return true;
    }
    let mut batch = [0usize; 256];
    let mut from = 0;
    loop {
        let (n, next) = {
            let g = lock();
            let Some(t) = table(&g) else { return true };
            let mut n = 0;
            let mut k = from;
            while k < TABLE && n < batch.len() {
                if t[k][0] > GONE && t[k][1] == i {
                    batch[n] = t[k][0];
                    n += 1;
                }
                k += 1;
            }
            (n, k)
        };
        for &b in &batch[..n] {
            if !f(b as *mut c_void) {
                return false;
            }
        }
        if next >= TABLE {
            return true;
        }
        from = next;
    }
}

/// `mi_heap_destroy(heap)`: each of its blocks goes to `free` (the backend's) and the heap
/// ends; `mi_heap_delete(heap)` (`free` None): its blocks stay, the default heap's now.
pub fn heap_end(h: *const c_void, free: Option<unsafe fn(*mut c_void)>) {
    let Some(i) = heap_index(h) else { return };
    if i == 0 {
        return;
    }
    if ANY.load(Relaxed) {
        loop {
            let mut batch = [0usize; 256];
            let n = {
                let g = lock();
                let Some(t) = table(&g) else { break };
                let mut n = 0;
                for e in t.iter_mut() {
                    if e[0] > GONE && e[1] == i {
                        batch[n] = e[0];
                        *e = [GONE, 0];
                        TABLE_USED.fetch_sub(1, Relaxed);
                        n += 1;
                        if n == batch.len() {
                            break;
                        }
                    }
                }
                n
            };
            if let Some(free) = free {
                for &b in &batch[..n] {
                    unsafe { free(b as *mut c_void) };
                }
            }
            if n < batch.len() {
                break;
            }
        }
    }
    HEAP_SLOTS[i].live.store(false, Relaxed);
}

// ---- the rest of the header ----

/// `mi_check_owned(p)` / `mi_is_in_heap_region(p)`: whether the serving backend knows `p`
/// as a block: a heap block kept here, or one whose usable size the backend reports, for a
/// pointer in the process's heap mappings only (never a read of memory that is not a block).
pub fn owned(b: Backend, p: *const c_void) -> bool {
    if p.is_null() {
        return false;
    }
    // As mimalloc answers: a block of the default heap only (not of another heap).
    if let Some(i) = heap_of(p) {
        return i == 0;
    }
    let _ = b;
    in_anonymous_mapping(p as usize)
}

/// `mi_is_in_heap_region(p)`: a block of any heap.
pub fn in_heap_region(b: Backend, p: *const c_void) -> bool {
    let _ = b;
    !p.is_null() && (heap_of(p).is_some() || in_anonymous_mapping(p as usize))
}

/// Whether `addr` lies in an anonymous writable mapping or the brk heap (where every
/// backend's blocks live), not a stack (the main one, nor the calling thread's), from
/// /proc/self/maps read with no allocation.
#[inline(never)]
fn in_anonymous_mapping(addr: usize) -> bool {
    let here = 0u8;
    let sp = core::hint::black_box(&here) as *const u8 as usize;
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let mut buf = [0u8; 4096];
    let mut have = 0usize;
    let mut found = false;
    'read: loop {
        let n = unsafe { libc::read(fd, buf[have..].as_mut_ptr() as *mut c_void, buf.len() - have) };
        if n <= 0 {
            break;
        }
        have += n as usize;
        let mut start = 0;
        while let Some(nl) = buf[start..have].iter().position(|&c| c == b'\n') {
            if let Some(hit) = mapping_holds(&buf[start..start + nl], addr) {
                // The calling thread's stack is an anonymous mapping too.
                found = hit && mapping_holds(&buf[start..start + nl], sp).is_none();
                break 'read;
            }
            start += nl + 1;
        }
        buf.copy_within(start..have, 0);
        have -= start;
        if have == buf.len() {
            break; // a line longer than the buffer: not a mapping line
        }
    }
    unsafe { libc::close(fd) };
    found
}

/// For one line of /proc/self/maps: None when `addr` is not in its range, else whether the
/// mapping is anonymous and writable (or the brk heap).
fn mapping_holds(line: &[u8], addr: usize) -> Option<bool> {
    let mut f = line.split(|&c| c == b' ').filter(|f| !f.is_empty());
    let range = f.next()?;
    let dash = range.iter().position(|&c| c == b'-')?;
    let hex = |s: &[u8]| -> Option<usize> { usize::from_str_radix(core::str::from_utf8(s).ok()?, 16).ok() };
    let (lo, hi) = (hex(&range[..dash])?, hex(&range[dash + 1..])?);
    if addr < lo || addr >= hi {
        return None;
    }
    let perms = f.next().unwrap_or(b"");
    let inode = f.nth(2).unwrap_or(b"1");
    let path = f.next().unwrap_or(b"");
    let writable = perms.get(1) == Some(&b'w');
    Some(writable && inode == b"0" && (path.is_empty() || path == b"[heap]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_info_is_the_processs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        for b in [Backend::Glibc, Backend::Mimalloc, Backend::Snmalloc] {
            let p = process_info(b);
            assert!(p.current_rss > 0 && p.peak_rss >= p.current_rss / 2, "{b:?}: {p:?}");
            assert!(p.elapsed_msecs < 3_600_000, "{b:?}: {p:?}");
            assert!(p.peak_commit >= p.current_commit, "{b:?}: {p:?}");
        }
    }

    #[test]
    fn stats_reach_the_callback() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        unsafe extern "C" fn out(msg: *const c_char, arg: *mut c_void) {
            let v = unsafe { &mut *(arg as *mut Vec<u8>) };
            v.extend_from_slice(unsafe { core::ffi::CStr::from_ptr(msg) }.to_bytes());
        }
        let mut v: Vec<u8> = Vec::new();
        unsafe { stats_print_out(Backend::Glibc, Some(out), &mut v as *mut _ as *mut c_void) };
        let text = String::from_utf8(v).unwrap();
        assert!(text.contains("allocated:") && text.contains("committed:"), "{text}");
    }

    #[test]
    fn heap_blocks_are_kept_visited_and_destroyed() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let h = heap_new();
        assert!(!h.is_null() && h != heap_default());
        let blocks: Vec<*mut c_void> = (0..600).map(|i| unsafe { libc::malloc(16 + i) }).collect();
        for &b in &blocks {
            assert!(heap_keep(h, b));
        }
        assert!(heap_contains(h, blocks[7]));
        assert!(!heap_contains(heap_default(), blocks[7]));
        heap_forget(blocks[7]);
        unsafe { libc::free(blocks[7]) };
        assert!(!heap_contains(h, blocks[7]));
        let mut seen = 0;
        assert!(heap_blocks(h, |_| {
            seen += 1;
            true
        }));
        assert_eq!(seen, 599);
        let mut stopped = 0;
        assert!(!heap_blocks(h, |_| {
            stopped += 1;
            stopped < 3
        }));
        assert_eq!(stopped, 3);
        unsafe fn free(p: *mut c_void) {
            unsafe { libc::free(p) }
        }
        heap_end(h, Some(free));
        assert!(heap_index(h).is_none(), "a destroyed heap is not alive");
        assert!(!heap_contains(h, blocks[8]));
        assert!(!heap_keep(h, blocks[8]));
        let h2 = heap_new();
        assert!(!h2.is_null());
        heap_end(h2, None);
    }

    #[test]
    fn owned_is_a_heap_block_not_the_stack() {
        let b = unsafe { libc::malloc(100) };
        let big = unsafe { libc::malloc(1 << 20) };
        let on_stack = 0u64;
        assert!(owned(Backend::Glibc, b));
        assert!(owned(Backend::Glibc, big));
        assert!(!owned(Backend::Glibc, &on_stack as *const u64 as *const c_void));
        assert!(!owned(Backend::Glibc, core::ptr::null()));
        assert!(!owned(Backend::Glibc, owned as *const c_void));
        unsafe { libc::free(b) };
        unsafe { libc::free(big) };
    }
}
