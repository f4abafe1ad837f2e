//! The in-flight file: where the threads' buffers live while they are filled, so that what a
//! thread recorded survives the process however it ends.
//!
//! For each log the shim creates an in-flight file, on tmpfs where it can
//! (`/dev/shm/shim-UID/PID-START.inflight`, or under `SHIM_INFLIGHT_DIR`; beside the log as `L.inflight` otherwise, and
//! the log's header names it), maps it shared, and takes every buffer from it: a record a thread stores is in the page cache the moment it is stored,
//! and the kernel keeps it when the process dies (a signal, a crash, SIGKILL, the OOM
//! killer). The recorder compresses full buffers into the log as before and marks each one
//! written (`n = 0`); a clean exit deletes the file. What a dead process left in it is put
//! into its log by [`crate::recover`]. The process holds an exclusive `flock` on the file
//! for as long as it lives, which is how a reader tells a dead process's file from a live
//! one's.
//!
//! Layout: one page of [`InflightHeader`], then `slots` buffers of `slot_size` bytes, each
//! a [`Buf`] as the shim fills it. The file is sparse: a slot takes disk only once used,
//! and slots are reused, never added, so it never grows past what the threads use at once.
use crate::buffer::Buf;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::io;

pub const MAGIC: &[u8; 8] = b"SHIMINFL";
pub const VERSION: u32 = 1;
/// Bytes before the first slot.
pub const HEADER_LEN: usize = 4096;
/// Buffers the file holds at most; a process that needs more (over a thousand threads
/// recording at once) takes the rest from the heap, where a crash loses them.
pub const SLOTS: usize = 1024;
/// Longest log path the header can name.
pub const PATH_MAX: usize = 1800;

/// The file's first page. Written by the shim (the recorder thread, but `ending`), read by
/// recovery. Every field but the path is one aligned word, so none is ever torn.
#[repr(C)]
pub struct InflightHeader {
    pub magic: [u8; 8],
    pub version: u32,
    /// Bytes per slot (`size_of::<Buf>()` rounded up to 64).
    pub slot_size: u32,
    pub slots: u32,
    pub pid: u32,
    /// The clock at the shim's start and as the recorder last saw it (raw clock ticks,
    /// CLOCK_MONOTONIC ns): recovery's clock rate when the process died before the log's
    /// header had one.
    pub p0_ticks: u64,
    pub p0_mono: u64,
    pub last_ticks: AtomicU64,
    pub last_mono: AtomicU64,
    /// How the process is ending, once known ([`crate::event::recovered_end`]).
    pub ending: AtomicU32,
    /// The window whose log is open (0: none), and that log's path.
    pub window: AtomicU32,
    pub window_path_len: AtomicU32,
    pub window_path: [u8; PATH_MAX],
    /// The process's main log (or watch log), where the records of slots with `log` 0 go.
    pub log_path_len: u32,
    pub log_path: [u8; PATH_MAX],
}

const _: () = assert!(core::mem::size_of::<InflightHeader>() <= HEADER_LEN);

const _: () =
    assert!(core::mem::offset_of!(InflightHeader, pid) == 20, "docs/format.md and recover.rs read pid at 20");

/// Bytes per slot.
pub fn slot_size() -> usize {
    core::mem::size_of::<Buf>().next_multiple_of(64)
}

/// The in-flight file's path for a log beside it (where no tmpfs can take it).
pub fn path_for(log: &str) -> String {
    format!("{log}.inflight")
}

/// Where the users' in-flight directories are made unless `SHIM_INFLIGHT_DIR` names another.
pub const DEFAULT_BASE: &str = "/dev/shm";

/// The directory the in-flight directories are made in: `SHIM_INFLIGHT_DIR` when set to an
/// absolute path, else [`DEFAULT_BASE`]. For shimlog (the shim reads its settings without
/// allocating, in its config).
pub fn base_from_env() -> String {
    std::env::var("SHIM_INFLIGHT_DIR")
        .ok()
        .filter(|v| v.starts_with('/'))
        .unwrap_or_else(|| DEFAULT_BASE.to_string())
}

/// The user's in-flight directory under `base`: `BASE/shim-UID`.
pub fn user_dir(base: &str) -> String {
    format!("{}/shim-{}", base.trim_end_matches('/'), unsafe { libc::getuid() })
}

/// Where the in-flight file of the log at `log` goes: `BASE/shim-UID/PID-START.inflight`
/// (BASE is /dev/shm unless `SHIM_INFLIGHT_DIR` says otherwise) when BASE is a tmpfs and
/// that directory is (or can be made) the user's own, mode 0700; beside the log otherwise.
/// On tmpfs a page the threads store into costs a minor fault; on a disk file system the
/// first store into each page costs the file system's page_mkwrite (ext4 here: about 25 ms
/// for a process's first sixteen buffers).
pub fn place(base: &str, log: &str, pid: u32, start_ns: u64) -> String {
    let uid = unsafe { libc::getuid() };
    let dir = user_dir(base);
    let private = (|| {
        let mut fs: libc::statfs = unsafe { core::mem::zeroed() };
        let shm = cstr(base).ok()?;
        if unsafe { libc::statfs(shm.as_ptr(), &mut fs) } != 0 || fs.f_type != libc::TMPFS_MAGIC {
            return None;
        }
        let c = cstr(&dir).ok()?;
        unsafe { libc::mkdir(c.as_ptr(), 0o700) };
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        // lstat: a symlink planted there is refused, as is a directory of someone else's.
        (unsafe { libc::lstat(c.as_ptr(), &mut st) } == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFDIR
            && st.st_uid == uid
            && st.st_mode & 0o077 == 0)
            .then_some(())
    })();
    match private {
        Some(()) => format!("{dir}/{pid}-{start_ns}.inflight"),
        None => path_for(log),
    }
}

/// Locks a file this process has just created. Another process's reclaimer (crate::reclaim)
/// probing the directory can hold the lock for a moment (it finds the header empty and the
/// pid in the name alive, and lets go): wait for it, 20 ms at most.
fn lock_new(fd: i32) -> bool {
    for _ in 0..200 {
        if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return true;
        }
        unsafe { libc::usleep(100) };
    }
    false
}

/// A mapped in-flight file, as the shim holds it.
pub struct Inflight {
    /// One of the shim's own descriptors ([`crate::ownfd`]): a program that closes what it
    /// did not open does not take the file's lock (its sign of life) or its disk.
    fd: crate::ownfd::OwnFd,
    pub path: String,
    base: *mut u8,
    removed: core::sync::atomic::AtomicBool,
    /// A slot could not be given disk: the rest come from the heap.
    no_room: core::sync::atomic::AtomicBool,
}

unsafe impl Send for Inflight {}
unsafe impl Sync for Inflight {}

fn cstr(path: &str) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(path).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

impl Inflight {
    /// Creates `path` (mode 0600, never through a symlink, never over a file), sizes it for
    /// [`SLOTS`] buffers (sparse), maps it and locks it. Makes no allocation through the
    /// program's malloc beyond the path's.
    pub fn create(path: &str, log: &str, p0_ticks: u64, p0_mono: u64) -> io::Result<Inflight> {
        let c = cstr(path)?;
        let len = HEADER_LEN + SLOTS * slot_size();
        unsafe {
            let fd = libc::open(
                c.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            );
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let fail = |fd: i32| {
                let e = io::Error::last_os_error();
                libc::close(fd);
                libc::unlink(c.as_ptr());
                Err(e)
            };
            // The header's page gets its disk now (a store into a page of a shared mapping
            // that the file system cannot back is a SIGBUS); each slot's when first used.
            if !lock_new(fd)
                || libc::ftruncate(fd, len as libc::off_t) != 0
                || libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, 0, HEADER_LEN as libc::off_t) != 0
            {
                return fail(fd);
            }
            let p = libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            if p == libc::MAP_FAILED {
                return fail(fd);
            }
            let mut fd = match crate::ownfd::OwnFd::adopt(fd, path, libc::O_RDWR) {
                Ok(fd) => fd,
                Err(e) => {
                    libc::munmap(p, len);
                    libc::unlink(c.as_ptr());
                    return Err(e);
                }
            };
            fd.note_locked();
            let f = Inflight {
                fd,
                path: path.to_string(),
                base: p as *mut u8,
                removed: Default::default(),
                no_room: Default::default(),
            };
            let h = &mut *(p as *mut InflightHeader);
            h.version = VERSION;
            h.slot_size = slot_size() as u32;
            h.slots = SLOTS as u32;
            h.pid = libc::getpid() as u32;
            h.p0_ticks = p0_ticks;
            h.p0_mono = p0_mono;
            let n = log.len().min(PATH_MAX);
            h.log_path[..n].copy_from_slice(&log.as_bytes()[..n]);
            h.log_path_len = n as u32;
            h.magic = *MAGIC;
            Ok(f)
        }
    }

    pub fn header(&self) -> &InflightHeader {
        unsafe { &*(self.base as *const InflightHeader) }
    }

    /// Slot `i`'s buffer (zeroed when never used), with its disk reserved; None past the
    /// last slot, or when the file system cannot give it room (full, or no fallocate): the
    /// caller takes a buffer from the heap, and no later slot is tried.
    pub fn slot(&self, i: usize) -> Option<*mut Buf> {
        if i >= SLOTS || self.no_room.load(Relaxed) || self.removed.load(Relaxed) {
            return None;
        }
        let at = (HEADER_LEN + i * slot_size()) as libc::off_t;
        // The program may have closed the descriptor (and opened another file under its
        // number): only our own file gets disk (OwnFd::with checks, and reopens).
        let room = self.fd.with(|fd| {
            // SAFETY: fallocate on the descriptor known ours.
            match unsafe { libc::fallocate(fd, libc::FALLOC_FL_KEEP_SIZE, at, slot_size() as libc::off_t) } {
                0 => Ok(()),
                _ => Err(io::Error::last_os_error()),
            }
        });
        if room.is_err() {
            self.no_room.store(true, Relaxed);
            return None;
        }
        Some(unsafe { self.base.add(at as usize) as *mut Buf })
    }

    /// Bytes of the header and the first `slots` slots resident in memory now (`mincore`):
    /// what the file adds to the process's resident set, since only this process touches
    /// its pages (reserved disk a slot never wrote is not counted). Allocation-free.
    /// Where mincore is refused (a seccomp sandbox: Firefox's content processes log each
    /// refusal), it is not asked again: every page of the slots made counts.
    pub fn resident_bytes(&self, slots: usize) -> u64 {
        static REFUSED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        let len = HEADER_LEN + slots.min(SLOTS) * slot_size();
        if REFUSED.load(Relaxed) {
            return len as u64;
        }
        let mut v = [0u8; 2048];
        let (mut at, mut resident) = (0usize, 0u64);
        while at < len {
            let n = (len - at).min(v.len() * page);
            // SAFETY: [base + at, base + at + n) lies inside the mapping made in create();
            // `v` has a byte for each of its pages.
            if unsafe { libc::mincore(self.base.add(at) as *mut libc::c_void, n, v.as_mut_ptr()) } != 0 {
                let e = io::Error::last_os_error().raw_os_error();
                if matches!(e, Some(libc::ENOSYS) | Some(libc::EPERM)) {
                    REFUSED.store(true, Relaxed);
                    return len as u64;
                }
                return 0;
            }
            resident += v[..n.div_ceil(page)].iter().filter(|&&b| b & 1 != 0).count() as u64;
            at += n;
        }
        resident * page as u64
    }

    /// Notes the clock as the recorder sees it now (raw ticks, CLOCK_MONOTONIC ns).
    pub fn note_clock(&self, ticks: u64, mono: u64) {
        let h = self.header();
        h.last_ticks.store(ticks, Relaxed);
        h.last_mono.store(mono, Relaxed);
    }

    /// How the process is ending (async-signal-safe: one store).
    pub fn note_ending(&self, how: u32) {
        self.header().ending.store(how, Relaxed);
    }

    /// The log the threads' buffers go to now: window `n`'s at `path`, or none but the main
    /// log (`n` 0).
    pub fn note_window(&self, n: u32, path: &str) {
        let h = self.header();
        h.window.store(0, Relaxed);
        let len = path.len().min(PATH_MAX);
        // SAFETY: only the recorder thread writes the path, inside the mapped header.
        unsafe {
            let dst = core::ptr::addr_of_mut!((*(self.base as *mut InflightHeader)).window_path) as *mut u8;
            core::ptr::copy_nonoverlapping(path.as_ptr(), dst, len);
        }
        h.window_path_len.store(len as u32, Relaxed);
        h.window.store(n, Relaxed);
    }

    /// Checks that the file's descriptor (and so its lock, the sign of life that keeps other
    /// processes from recovering it) is still ours; reopens and locks it again when the
    /// program closed it by a raw system call.
    pub fn keep_alive(&self) {
        let _ = self.fd.with(|_| Ok(()));
    }

    /// After a clean close: the file goes (everything in it is in the log). The mapping
    /// stays until the process ends: a thread the final flush could not wait for may still
    /// store into its buffer.
    pub fn remove(&self) {
        if self.removed.swap(true, Relaxed) {
            return;
        }
        if let Ok(c) = cstr(&self.path) {
            unsafe { libc::unlink(c.as_ptr()) };
        }
        self.fd.close_now();
    }

    /// In a fork child: the parent's file stays the parent's (its lock too, which the
    /// child's copy of the descriptor would otherwise keep alive). The mapping stays, unused.
    pub fn forget_in_child(&self) {
        if !self.removed.swap(true, Relaxed) {
            self.fd.close_now();
        }
    }
}
