//! The shim's own descriptors (logs, the in-flight file, `/proc/stat`, the control socket),
//! kept apart from the program's.
//!
//! A program may close every descriptor it did not open (a loop over /proc/self/fd,
//! `closefrom`, `close_range`: Firefox's content processes, daemons, shells) and open its own
//! files, pipes and sockets under the numbers freed. A write through a number the shim
//! remembered would then land in the program's file. So each descriptor the shim keeps is:
//! - moved above the numbers a program uses ([`high_base`]), close-on-exec;
//! - registered here with its device and inode, so that the C library's `close`,
//!   `close_range`, `closefrom`, `dup2` and `dup3` (interposed by the shim, shim/src/fds.rs)
//!   leave it alone ([`is_ours`], [`make_room`]);
//! - checked before each use ([`OwnFd::with`]): when a raw system call took it away, it is
//!   reopened by its path (the same file, by device and inode, or nothing is written);
//! - closed only while still ours ([`OwnFd::close`]).
//!
//! One lock ([`LOCK`]) covers a check and the use that follows it, and the moving of a
//! descriptor out of a `dup2`'s way, so that neither happens between the other's steps. It
//! is held for one write at most, never across a blocking call, and reset in a fork child.
//! No allocation here but the path each owner keeps.
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::*};
use std::io;

/// Descriptors registered at once at most (logs of windows, the watch log, the in-flight
/// file, /proc/stat, the control socket, a recovery's log).
const SLOTS: usize = 32;

struct Slot {
    /// The number now (-1: free).
    fd: AtomicI32,
    dev: AtomicU64,
    ino: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot { fd: AtomicI32::new(-1), dev: AtomicU64::new(0), ino: AtomicU64::new(0) };
static TABLE: [Slot; SLOTS] = [FREE; SLOTS];
/// The lowest number registered (i32::MAX: none): a program's `close` of a lower number
/// needs no look at the table.
static LOWEST: AtomicI32 = AtomicI32::new(i32::MAX);
/// Held across a check and the use of a descriptor, and across a move out of the way.
static LOCK: AtomicBool = AtomicBool::new(false);

struct Held;
fn lock() -> Held {
    while LOCK.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
        unsafe { libc::sched_yield() };
    }
    Held
}
impl Drop for Held {
    fn drop(&mut self) {
        LOCK.store(false, Release);
    }
}

/// In a fork child: the lock may have been held by a thread the child does not have.
pub fn after_fork_child() {
    LOCK.store(false, Release);
}

/// The descriptor's device and inode; None when `fd` is not open.
fn id_of(fd: i32) -> Option<(u64, u64)> {
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: fstat into a local.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// The first number the shim's descriptors take: well above what a program opens (most
/// programs and `select` stay under 1024), under the soft limit, and never so high that
/// the kernel grows the table for it (a soft limit of a million would cost 8 MiB).
pub fn high_base() -> i32 {
    static BASE: AtomicI32 = AtomicI32::new(0);
    let b = BASE.load(Relaxed);
    if b > 0 {
        return b;
    }
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit into a local.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 { r.rlim_cur } else { 1024 };
    let soft = soft.min(1024) as i32;
    let b = if soft >= 256 { soft - 64 } else { (soft / 2).max(3) };
    BASE.store(b, Relaxed);
    b
}

/// Moves `fd` above the program's numbers, close-on-exec; `fd` itself when it cannot be.
fn move_high(fd: i32) -> i32 {
    // SAFETY: fcntl and close on a descriptor this module owns.
    unsafe {
        let to = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, high_base());
        if to < 0 {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            return fd;
        }
        real_close(fd);
        to
    }
}

/// One line on stderr, once per process: the program took a descriptor of the shim's away
/// past the C library.
fn say_once(path: &str) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if SAID.swap(true, Relaxed) {
        return;
    }
    let line = format!(
        "shim: the program closed the shim's descriptor of {path} by a system call; reopened, recording goes on\n"
    );
    // SAFETY: write(2) of a local buffer.
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

/// close(2) itself, past the shim's interposed `close`.
pub fn real_close(fd: i32) -> i32 {
    // SAFETY: a system call on a number.
    unsafe { libc::syscall(libc::SYS_close, fd) as i32 }
}

fn recompute_lowest() {
    let low = TABLE.iter().map(|s| s.fd.load(Relaxed)).filter(|&f| f >= 0).min().unwrap_or(i32::MAX);
    LOWEST.store(low, Relaxed);
}

/// True when `fd` is one of the shim's descriptors now (registered, and still the same
/// file: a number the program took back by a raw system call is the program's).
pub fn is_ours(fd: i32) -> bool {
    if fd < LOWEST.load(Relaxed) {
        return false;
    }
    TABLE
        .iter()
        .any(|s| s.fd.load(Acquire) == fd && id_of(fd) == Some((s.dev.load(Relaxed), s.ino.load(Relaxed))))
}

/// Any of the shim's descriptors in `lo..=hi`, lowest first; None when none is.
pub fn ours_in(lo: u32, hi: u32) -> Option<i32> {
    if (hi as u64) < LOWEST.load(Relaxed).max(0) as u64 {
        return None;
    }
    TABLE
        .iter()
        .map(|s| s.fd.load(Acquire))
        .filter(|&f| f >= 0 && (f as u32) >= lo && (f as u32) <= hi)
        .filter(|&f| is_ours(f))
        .min()
}

/// Before the program makes `fd` a copy of another descriptor (dup2, dup3): when `fd` is
/// one of the shim's, the shim's moves to another number first.
pub fn make_room(fd: i32) {
    if !is_ours(fd) {
        return;
    }
    let _l = lock();
    for s in &TABLE {
        if s.fd.load(Relaxed) == fd {
            // SAFETY: fcntl on our own descriptor.
            let to = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, high_base()) };
            let to = if to == fd || to < 0 {
                // Nowhere above: anywhere else.
                unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) }
            } else {
                to
            };
            if to >= 0 {
                s.fd.store(to, Release);
                real_close(fd);
            } else {
                // No number left at all: the program's call takes it; the next use reopens.
                s.fd.store(-2, Release);
            }
        }
    }
    recompute_lowest();
}

/// One of the shim's descriptors: registered here, checked before each use, reopened by
/// `path` with `flags` when lost.
pub struct OwnFd {
    slot: usize,
    path: String,
    flags: i32,
    /// flock(LOCK_EX) held on it (the in-flight file's sign of life): taken again on reopen.
    locked: bool,
    /// Closed already ([`OwnFd::close_now`]): its slot may be another's.
    closed: AtomicBool,
    /// Times it was reopened by path.
    reopens: core::sync::atomic::AtomicU32,
}

impl OwnFd {
    /// Takes over `fd`, opened from `path` with `flags` (O_CREAT, O_EXCL and O_TRUNC are
    /// dropped on a reopen): moved high, registered. Err when every slot is taken (the
    /// descriptor is closed then).
    pub fn adopt(fd: i32, path: &str, flags: i32) -> io::Result<OwnFd> {
        let Some(id) = id_of(fd) else { return Err(io::Error::last_os_error()) };
        let fd = move_high(fd);
        let _l = lock();
        for (i, s) in TABLE.iter().enumerate() {
            if s.fd.load(Relaxed) == -1 {
                s.dev.store(id.0, Relaxed);
                s.ino.store(id.1, Relaxed);
                s.fd.store(fd, Release);
                recompute_lowest();
                let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC);
                return Ok(OwnFd {
                    slot: i,
                    path: path.to_string(),
                    flags,
                    locked: false,
                    closed: AtomicBool::new(false),
                    reopens: Default::default(),
                });
            }
        }
        real_close(fd);
        Err(io::Error::other("too many descriptors of the shim's own"))
    }

    /// Notes that the descriptor holds an flock, to take again when it is reopened.
    pub fn note_locked(&mut self) {
        self.locked = true;
    }

    /// How many times it was reopened by path (a reopened descriptor's position is 0).
    pub fn reopens(&self) -> u32 {
        self.reopens.load(Relaxed)
    }

    /// The path it was opened from.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The number now, unchecked (for a message, or a call that harms nothing if the
    /// number is no longer ours).
    pub fn raw(&self) -> i32 {
        if self.closed.load(Relaxed) {
            return -1;
        }
        TABLE[self.slot].fd.load(Acquire)
    }

    /// Calls `f` with the descriptor, checked to be this file still (reopened by path when
    /// the program took the number away), under the lock: `f` must not block for long.
    pub fn with<R>(&self, f: impl FnOnce(i32) -> io::Result<R>) -> io::Result<R> {
        let _l = lock();
        if self.closed.load(Relaxed) {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        let fd = self.checked()?;
        f(fd)
    }

    /// The descriptor, checked (the lock is held by the caller).
    fn checked(&self) -> io::Result<i32> {
        let s = &TABLE[self.slot];
        let fd = s.fd.load(Acquire);
        let want = (s.dev.load(Relaxed), s.ino.load(Relaxed));
        if fd >= 0 && id_of(fd) == Some(want) {
            return Ok(fd);
        }
        // Lost: the same file again by its path, or nothing.
        let c = std::ffi::CString::new(self.path.as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: open and fstat on a path string this struct owns.
        let nfd = unsafe { libc::open(c.as_ptr(), self.flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
        if nfd < 0 {
            return Err(io::Error::other(format!(
                "its descriptor was closed by the program and it cannot be reopened: {}",
                io::Error::last_os_error()
            )));
        }
        if id_of(nfd) != Some(want) {
            real_close(nfd);
            return Err(io::Error::other(
                "its descriptor was closed by the program and the path now names another file",
            ));
        }
        let nfd = move_high(nfd);
        say_once(&self.path);
        if self.locked {
            // SAFETY: flock on our own descriptor.
            unsafe { libc::flock(nfd, libc::LOCK_EX | libc::LOCK_NB) };
        }
        s.fd.store(nfd, Release);
        recompute_lowest();
        self.reopens.fetch_add(1, Relaxed);
        Ok(nfd)
    }

    /// Closes it if the number is still this file's; unregisters it either way (as dropping
    /// it does).
    pub fn close(self) {
        drop(self)
    }

    /// Closes it now (if still this file's), through a shared reference; later uses fail
    /// with EBADF. Once only: a second call does nothing.
    pub fn close_now(&self) {
        let _l = lock();
        if self.closed.swap(true, Relaxed) {
            return;
        }
        let s = &TABLE[self.slot];
        let fd = s.fd.load(Acquire);
        if fd >= 0 && id_of(fd) == Some((s.dev.load(Relaxed), s.ino.load(Relaxed))) {
            real_close(fd);
        }
        s.fd.store(-1, Release);
        recompute_lowest();
    }
}

impl Drop for OwnFd {
    fn drop(&mut self) {
        self.close_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    fn open(path: &str) -> i32 {
        std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap()
            .into_raw_fd()
    }

    #[test]
    fn moved_high_and_known() {
        let d = tempfile_dir();
        let p = format!("{d}/a");
        let f = OwnFd::adopt(open(&p), &p, libc::O_RDWR).unwrap();
        assert!(f.raw() >= high_base());
        assert!(is_ours(f.raw()));
        let fd = f.raw();
        f.close();
        assert!(!is_ours(fd));
    }

    #[test]
    fn reopened_when_closed_and_never_writes_the_programs_file() {
        let d = tempfile_dir();
        let (p, q) = (format!("{d}/log"), format!("{d}/program"));
        let f = OwnFd::adopt(open(&p), &p, libc::O_RDWR).unwrap();
        let old = f.raw();
        // The program closes it behind the C library's back and opens its own file there.
        real_close(old);
        let theirs = open(&q);
        let theirs = unsafe { libc::dup2(theirs, old) };
        assert_eq!(theirs, old);
        assert!(!is_ours(old));
        f.with(|fd| {
            assert_ne!(fd, old);
            let n = unsafe { libc::pwrite(fd, b"log".as_ptr().cast(), 3, 0) };
            assert_eq!(n, 3);
            Ok(())
        })
        .unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"log");
        assert!(std::fs::read(&q).unwrap().is_empty());
        // Its close leaves the program's descriptor open.
        f.close();
        assert!(id_of(old).is_some());
        real_close(old);
    }

    #[test]
    fn a_replaced_path_is_not_written() {
        let d = tempfile_dir();
        let p = format!("{d}/log");
        let f = OwnFd::adopt(open(&p), &p, libc::O_RDWR).unwrap();
        real_close(f.raw());
        // (Renamed away, not removed: a removed file's inode number may be given again.)
        std::fs::rename(&p, format!("{p}.old")).unwrap();
        std::fs::write(&p, b"").unwrap();
        assert!(f.with(|_| Ok(())).is_err());
        assert!(std::fs::read(&p).unwrap().is_empty());
    }

    #[test]
    fn moved_out_of_a_dup2s_way() {
        let d = tempfile_dir();
        let p = format!("{d}/log");
        let f = OwnFd::adopt(open(&p), &p, libc::O_RDWR).unwrap();
        let old = f.raw();
        make_room(old);
        assert_ne!(f.raw(), old);
        assert!(is_ours(f.raw()));
        assert!(id_of(old).is_none());
        f.close();
    }

    fn tempfile_dir() -> String {
        let d = std::env::temp_dir().join(format!(
            "ownfd-{}-{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d.to_string_lossy().into_owned()
    }
}
