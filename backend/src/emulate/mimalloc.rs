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
}
