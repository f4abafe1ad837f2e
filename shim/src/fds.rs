//! The C library's calls that close or replace descriptors, as the program makes them:
//! `close`, `close_range`, `closefrom`, `dup2`, `dup3`. A program may close every descriptor
//! it did not open (Firefox's content processes, daemons, shells before exec) and reuse the
//! numbers; the shim's own (its logs, the in-flight file, /proc/stat, the control socket:
//! recorder::ownfd) are left open under it, and moved out of a `dup2`'s way. Each call costs
//! one comparison when the number is below the shim's (they sit above what programs use).
//!
//! A `close` of one of the shim's descriptors returns 0 and leaves it open: the program
//! believes it closed something it never knew, and the number stays taken, as before the
//! call. Raw system calls (`syscall(SYS_close_range, ...)`) pass the C library by: then the
//! descriptor is found gone or another file's before its next use and reopened by its path
//! (recorder::ownfd::OwnFd::with), so that no byte of a log reaches a program's file.
use core::ffi::{c_int, c_uint};
use recorder::ownfd;

unsafe extern "C" {
    /// The C library's own close (a cancellation point, as `close` is).
    #[link_name = "__close"]
    fn libc_close(fd: c_int) -> c_int;
    #[link_name = "__dup2"]
    fn libc_dup2(old: c_int, new: c_int) -> c_int;
}

/// # Safety
/// As close(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if ownfd::is_ours(fd) {
        return 0;
    }
    unsafe { libc_close(fd) }
}

/// close_range(2) less the shim's descriptors: the parts of `lo..=hi` between them.
fn close_range_sparing(lo: c_uint, hi: c_uint, flags: c_int) -> c_int {
    let raw = |a: c_uint, b: c_uint| unsafe { libc::syscall(libc::SYS_close_range, a, b, flags) as c_int };
    // Setting close-on-exec on them harms nothing (they have it).
    if flags & libc::CLOSE_RANGE_CLOEXEC as c_int != 0 || lo > hi {
        return raw(lo, hi);
    }
    let mut from = lo;
    while let Some(ours) = ownfd::ours_in(from, hi) {
        if ours as c_uint > from {
            let rc = raw(from, ours as c_uint - 1);
            if rc != 0 {
                return rc;
            }
        }
        if ours as c_uint == hi {
            return 0;
        }
        from = ours as c_uint + 1;
    }
    raw(from, hi)
}

/// # Safety
/// As close_range(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn close_range(lo: c_uint, hi: c_uint, flags: c_int) -> c_int {
    close_range_sparing(lo, hi, flags)
}

/// # Safety
/// As closefrom(3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn closefrom(lo: c_int) {
    let lo = lo.max(0) as c_uint;
    if close_range_sparing(lo, c_uint::MAX, 0) == 0 {
        return;
    }
    // No close_range (a kernel before 5.9): one by one, up to the highest number in use.
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    let top = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur.min(1 << 20)
    } else {
        1024
    };
    for fd in lo as u64..top {
        let fd = fd as c_int;
        if !ownfd::is_ours(fd) {
            unsafe { libc_close(fd) };
        }
    }
}

/// # Safety
/// As dup2(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old != new {
        ownfd::make_room(new);
    }
    unsafe { libc_dup2(old, new) }
}

/// # Safety
/// As dup3(2).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if old != new {
        ownfd::make_room(new);
    }
    unsafe { libc::syscall(libc::SYS_dup3, old, new, flags) as c_int }
}
