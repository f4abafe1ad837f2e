//! jemalloc's `mallctl` namespace (jemalloc 5.3), answered from another backend's
//! statistics: `mallctl`, `mallctlnametomib`, `mallctlbymib` and `malloc_stats_print` with
//! jemalloc's calling conventions, as its src/ctl.c has them:
//!
//! - a name is looked up element by element in a tree of named and indexed nodes; a name
//!   that is not in it, or stops at an inner node, or names an arena that does not exist,
//!   is ENOENT; a MIB is the path of child numbers (named nodes) and indices (arenas), so
//!   that `mallctlnametomib` then `mallctlbymib` is `mallctl`; a MIB buffer shorter than
//!   the name gets the partial MIB;
//! - a read with `*oldlenp` not the value's size copies what fits, sets `*oldlenp` to it
//!   and is EINVAL; a write of the wrong size is EINVAL; a write to a read-only name (or a
//!   read or write of an action) is EPERM; an action or setting the backend cannot carry
//!   out is EFAULT (jemalloc's "an interface with side effects failed"), `arenas.create`
//!   EAGAIN;
//! - statistics are a snapshot refreshed by writing `epoch`, as jemalloc's are.
//!
//! The serving backend is shown as one arena: `arenas.narenas` is 1, and arena 0 and
//! `MALLCTL_ARENAS_ALL` (4096) both hold everything. What each name returns under each
//! backend is in docs/introspection.md.
use super::{page_size, say_once, snapshot, Buf, Snapshot, Trouble};
use crate::Backend;
use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::*};
use libc::{EAGAIN, EFAULT, EINVAL, ENOENT, EPERM};

/// `MALLCTL_ARENAS_ALL`: the arena index that means all arenas merged.
pub const ARENAS_ALL: usize = 4096;
/// `MALLCTL_ARENAS_DESTROYED`.
pub const ARENAS_DESTROYED: usize = 4097;
/// The arenas shown: one, the whole backend.
pub const NARENAS: u32 = 1;
/// jemalloc's CTL_MAX_DEPTH.
const MAX_DEPTH: usize = 7;

/// A statistic of `stats.*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stat {
    Allocated,
    Active,
    Metadata,
    Resident,
    Mapped,
    Retained,
}

/// A per-arena page count of `stats.arenas.<i>.*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pages {
    Active,
    Dirty,
    Muzzy,
}

/// An `opt.*` or `config.*` setting (read-only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    OptAbort,
    OptAbortConf,
    OptBackgroundThread,
    OptDss,
    OptJunk,
    OptNarenas,
    OptPercpuArena,
    OptRetain,
    OptStatsPrint,
    OptTcache,
    OptThp,
    OptUtrace,
    OptXmalloc,
    OptZero,
    ConfigDebug,
    ConfigMallocConf,
    ConfigProf,
    ConfigStats,
}

/// What a leaf of the tree does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctl {
    Version,
    Epoch,
    BackgroundThread,
    ThreadTcacheEnabled,
    ThreadTcacheFlush,
    ThreadArena,
    ArenaPurge,
    ArenaDecay,
    ArenasNarenas,
    ArenasPage,
    ArenasQuantum,
    ArenasCreate,
    Conf(Setting),
    Stat(Stat),
    ArenaPages(Pages),
}

/// Which index an indexed node takes.
#[derive(Clone, Copy, Debug)]
enum Index {
    /// `arena.<i>`: up to `narenas`, all, destroyed (jemalloc's arena_i_index).
    Arena,
    /// `stats.arenas.<i>`: the arenas that exist, and all (stats_arenas_i_index).
    StatsArena,
}

impl Index {
    fn valid(self, i: usize) -> bool {
        match self {
            Index::Arena => i <= NARENAS as usize || i == ARENAS_ALL || i == ARENAS_DESTROYED,
            Index::StatsArena => i < NARENAS as usize || i == ARENAS_ALL,
        }
    }
}

enum Node {
    Named(&'static [(&'static str, Node)]),
    Indexed(Index, &'static Node),
    Leaf(Ctl),
}

use Ctl::*;
use Node::{Indexed, Leaf, Named};
use Setting::*;

/// The names answered, in jemalloc's tree shape.
static ROOT: Node = Named(&[
    ("version", Leaf(Version)),
    ("epoch", Leaf(Epoch)),
    ("background_thread", Leaf(BackgroundThread)),
    (
        "thread",
        Named(&[
            ("tcache", Named(&[("enabled", Leaf(ThreadTcacheEnabled)), ("flush", Leaf(ThreadTcacheFlush))])),
            ("arena", Leaf(ThreadArena)),
        ]),
    ),
    (
        "config",
        Named(&[
            ("debug", Leaf(Conf(ConfigDebug))),
            ("malloc_conf", Leaf(Conf(ConfigMallocConf))),
            ("prof", Leaf(Conf(ConfigProf))),
            ("stats", Leaf(Conf(ConfigStats))),
        ]),
    ),
    (
        "opt",
        Named(&[
            ("abort", Leaf(Conf(OptAbort))),
            ("abort_conf", Leaf(Conf(OptAbortConf))),
            ("background_thread", Leaf(Conf(OptBackgroundThread))),
            ("dss", Leaf(Conf(OptDss))),
            ("junk", Leaf(Conf(OptJunk))),
            ("narenas", Leaf(Conf(OptNarenas))),
            ("percpu_arena", Leaf(Conf(OptPercpuArena))),
            ("retain", Leaf(Conf(OptRetain))),
            ("stats_print", Leaf(Conf(OptStatsPrint))),
            ("tcache", Leaf(Conf(OptTcache))),
            ("thp", Leaf(Conf(OptThp))),
            ("utrace", Leaf(Conf(OptUtrace))),
            ("xmalloc", Leaf(Conf(OptXmalloc))),
            ("zero", Leaf(Conf(OptZero))),
        ]),
    ),
    ("arena", Indexed(Index::Arena, &Named(&[("decay", Leaf(ArenaDecay)), ("purge", Leaf(ArenaPurge))]))),
    (
        "arenas",
        Named(&[
            ("narenas", Leaf(ArenasNarenas)),
            ("page", Leaf(ArenasPage)),
            ("quantum", Leaf(ArenasQuantum)),
            ("create", Leaf(ArenasCreate)),
        ]),
    ),
    (
        "stats",
        Named(&[
            ("allocated", Leaf(Stat(Stat::Allocated))),
            ("active", Leaf(Stat(Stat::Active))),
            ("metadata", Leaf(Stat(Stat::Metadata))),
            ("resident", Leaf(Stat(Stat::Resident))),
            ("mapped", Leaf(Stat(Stat::Mapped))),
            ("retained", Leaf(Stat(Stat::Retained))),
            (
                "arenas",
                Indexed(
                    Index::StatsArena,
                    &Named(&[
                        ("pactive", Leaf(ArenaPages(Pages::Active))),
                        ("pdirty", Leaf(ArenaPages(Pages::Dirty))),
                        ("pmuzzy", Leaf(ArenaPages(Pages::Muzzy))),
                    ]),
                ),
            ),
        ]),
    ),
]);

/// jemalloc's malloc_strtoumax on one name element: leading blanks, a sign, decimal digits
/// (none: 0); u64::MAX on overflow.
fn strtoumax(s: &[u8]) -> u64 {
    let mut i = s.iter().take_while(|c| c.is_ascii_whitespace()).count();
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut v: u64 = 0;
    for &c in s[i.min(s.len())..].iter().take_while(|c| c.is_ascii_digit()) {
        match v.checked_mul(10).and_then(|v| v.checked_add((c - b'0') as u64)) {
            Some(n) => v = n,
            None => return u64::MAX,
        }
    }
    if neg {
        v.wrapping_neg()
    } else {
        v
    }
}

/// ctl_lookup: follows `name` down the tree for at most `cap` elements, filling `mib`.
/// Ok((leaf reached, if any, and the depth)): a lookup cut short by `cap` returns the partial
/// path with depth `cap` and no leaf.
fn lookup(name: &[u8], mib: &mut [usize; MAX_DEPTH], cap: usize) -> Result<(Option<Ctl>, usize), c_int> {
    let cap = cap.min(MAX_DEPTH);
    let mut rest = name;
    let mut node = &ROOT;
    for (i, slot) in mib.iter_mut().take(cap).enumerate() {
        let dot = rest.iter().position(|&c| c == b'.');
        let elm = &rest[..dot.unwrap_or(rest.len())];
        if i == 0 && elm.is_empty() {
            return Err(ENOENT);
        }
        node = match node {
            Named(children) => {
                let Some(j) = children.iter().position(|(n, _)| n.as_bytes() == elm) else {
                    return Err(ENOENT);
                };
                *slot = j;
                &children[j].1
            }
            Indexed(ix, child) => {
                let index = strtoumax(elm);
                if index == u64::MAX || !ix.valid(index as usize) {
                    return Err(ENOENT);
                }
                *slot = index as usize;
                child
            }
            Leaf(_) => return Err(ENOENT),
        };
        let leaf = match node {
            Leaf(c) => Some(*c),
            _ => None,
        };
        if leaf.is_some() || dot.is_none() {
            if dot.is_some() {
                return Err(ENOENT); // more elements than this path has
            }
            return Ok((leaf, i + 1));
        }
        rest = dot.map_or(&rest[rest.len()..], |d| &rest[d + 1..]);
    }
    Ok((None, cap))
}

/// ctl_lookupbymib.
fn lookup_mib(mib: &[usize]) -> Result<Ctl, c_int> {
    let mut node = &ROOT;
    for &m in mib {
        node = match node {
            Named(children) => match children.get(m) {
                Some((_, n)) => n,
                None => return Err(ENOENT),
            },
            Indexed(ix, child) if ix.valid(m) => child,
            Indexed(..) | Leaf(_) => return Err(ENOENT),
        };
    }
    match node {
        Leaf(c) => Ok(*c),
        _ => Err(ENOENT),
    }
}

/// A value read out, as jemalloc's C types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    Bool(bool),
    Unsigned(u32),
    U64(u64),
    Size(usize),
    Str(&'static CStr),
}

impl Value {
    /// The value's bytes and size.
    fn bytes(self) -> ([u8; 8], usize) {
        let mut b = [0u8; 8];
        let n = match self {
            Value::Bool(v) => {
                b[0] = v as u8;
                1
            }
            Value::Unsigned(v) => {
                b[..4].copy_from_slice(&v.to_ne_bytes());
                4
            }
            Value::U64(v) => {
                b.copy_from_slice(&v.to_ne_bytes());
                8
            }
            Value::Size(v) => {
                b.copy_from_slice(&(v as u64).to_ne_bytes());
                core::mem::size_of::<usize>()
            }
            Value::Str(s) => {
                b.copy_from_slice(&(s.as_ptr() as usize as u64).to_ne_bytes());
                core::mem::size_of::<*const c_char>()
            }
        };
        (b, n)
    }
}

/// The caller's buffers.
struct Io {
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
}

impl Io {
    /// READONLY()
    fn read_only(&self) -> Result<(), c_int> {
        if !self.newp.is_null() || self.newlen != 0 {
            Err(EPERM)
        } else {
            Ok(())
        }
    }
    /// NEITHER_READ_NOR_WRITE()
    fn neither(&self) -> Result<(), c_int> {
        if !self.oldp.is_null() || !self.oldlenp.is_null() || !self.newp.is_null() || self.newlen != 0 {
            Err(EPERM)
        } else {
            Ok(())
        }
    }
    /// READ(v): nothing without both pointers; the wrong size copies what fits, EINVAL.
    unsafe fn read(&self, v: Value) -> Result<(), c_int> {
        if self.oldp.is_null() || self.oldlenp.is_null() {
            return Ok(());
        }
        let (bytes, n) = v.bytes();
        unsafe {
            let want = *self.oldlenp;
            let copy = n.min(want);
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.oldp as *mut u8, copy);
            if want != n {
                *self.oldlenp = copy;
                return Err(EINVAL);
            }
        }
        Ok(())
    }
    /// VERIFY_READ(t): a read is required, of exactly `n` bytes.
    unsafe fn verify_read(&self, n: usize) -> Result<(), c_int> {
        if self.oldp.is_null() || self.oldlenp.is_null() || unsafe { *self.oldlenp } != n {
            if !self.oldlenp.is_null() {
                unsafe { *self.oldlenp = 0 };
            }
            return Err(EINVAL);
        }
        Ok(())
    }
    /// WRITE(v, t): the new value's bytes, if one is given (EINVAL when its size is not `N`).
    unsafe fn write<const N: usize>(&self) -> Result<Option<[u8; N]>, c_int> {
        if self.newp.is_null() {
            return Ok(None);
        }
        if self.newlen != N {
            return Err(EINVAL);
        }
        let mut b = [0u8; N];
        unsafe { core::ptr::copy_nonoverlapping(self.newp as *const u8, b.as_mut_ptr(), N) };
        Ok(Some(b))
    }
}

/// The statistics as of the last `epoch` write (jemalloc's ctl_refresh): each figure an
/// atomic of its own, with no lock (a fork in the middle of a refresh leaves the child a
/// usable snapshot, never a held lock); two refreshes at once may mix their figures, each
/// of them true.
static FIGURES: [AtomicUsize; 8] = [const { AtomicUsize::new(0) }; 8];
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// The backend the figures are of (`u8::MAX`: none yet).
static FIGURES_OF: AtomicU8 = AtomicU8::new(u8::MAX);

/// The snapshot of `b` and its epoch; `refresh`: a new one first (an `epoch` write). The
/// first use takes one, as jemalloc's ctl_init does.
fn cached(b: Backend, refresh: bool) -> (Snapshot, u64) {
    if refresh || FIGURES_OF.load(Acquire) != b as u8 {
        let s = snapshot(b);
        let v = [s.allocated, s.active, s.metadata, s.resident, s.mapped, s.retained, s.dirty, s.muzzy];
        for (f, v) in FIGURES.iter().zip(v) {
            f.store(v, Relaxed);
        }
        FIGURES_OF.store(b as u8, Release);
        EPOCH.fetch_add(1, Release);
    }
    let epoch = EPOCH.load(Acquire);
    let f = |i: usize| FIGURES[i].load(Relaxed);
    let snap = Snapshot {
        allocated: f(0),
        active: f(1),
        metadata: f(2),
        resident: f(3),
        mapped: f(4),
        retained: f(5),
        dirty: f(6),
        muzzy: f(7),
    };
    (snap, epoch)
}

/// `version` under each backend: jemalloc's release, and who really serves.
fn version(b: Backend) -> &'static CStr {
    match b {
        Backend::Glibc => c"5.3.0-0-shim-emulated-on-glibc",
        Backend::Jemalloc => c"5.3.0-0-shim-emulated-on-jemalloc",
        Backend::Mimalloc => c"5.3.0-0-shim-emulated-on-mimalloc",
        Backend::Tcmalloc => c"5.3.0-0-shim-emulated-on-tcmalloc",
        Backend::Snmalloc => c"5.3.0-0-shim-emulated-on-snmalloc",
        Backend::Rpmalloc => c"5.3.0-0-shim-emulated-on-rpmalloc",
        // The program's own library serves itself: never emulated.
        Backend::Own => c"5.3.0-0-shim-emulated-on-own",
    }
}

/// An `opt.*`/`config.*` value under `b`, None where the setting means nothing there.
fn setting(s: Setting, b: Backend) -> Option<Value> {
    Some(match s {
        OptAbort | OptAbortConf | OptBackgroundThread | OptStatsPrint | OptUtrace | OptXmalloc | OptZero => {
            Value::Bool(false)
        }
        // Every backend keeps per-thread caches of free blocks.
        OptTcache => Value::Bool(true),
        // Address space kept when the memory goes back: tcmalloc's unmapped page heap.
        OptRetain => Value::Bool(b == Backend::Tcmalloc),
        // glibc's main arena grows with sbrk; the others map.
        OptDss => Value::Str(if b == Backend::Glibc { c"primary" } else { c"disabled" }),
        OptJunk => Value::Str(c"false"),
        OptPercpuArena => Value::Str(c"disabled"),
        OptThp => Value::Str(c"default"),
        OptNarenas => Value::Unsigned(NARENAS),
        ConfigDebug | ConfigProf => Value::Bool(false),
        ConfigStats => Value::Bool(true),
        ConfigMallocConf => Value::Str(c""),
    })
}

/// Runs leaf `ctl` reached by `mib`.
unsafe fn run(b: Backend, ctl: Ctl, mib: &[usize], io: &Io, name: &[u8]) -> Result<(), c_int> {
    unsafe {
        match ctl {
            Version => {
                io.read_only()?;
                io.read(Value::Str(version(b)))
            }
            Epoch => {
                let new = io.write::<8>()?;
                let (_, epoch) = cached(b, new.is_some());
                io.read(Value::U64(epoch))
            }
            Stat(s) => {
                io.read_only()?;
                let (snap, _) = cached(b, false);
                io.read(Value::Size(match s {
                    Stat::Allocated => snap.allocated,
                    Stat::Active => snap.active,
                    Stat::Metadata => snap.metadata,
                    Stat::Resident => snap.resident,
                    Stat::Mapped => snap.mapped,
                    Stat::Retained => snap.retained,
                }))
            }
            ArenaPages(p) => {
                io.read_only()?;
                let (snap, _) = cached(b, false);
                let page = page_size();
                io.read(Value::Size(match p {
                    Pages::Active => snap.active.div_ceil(page),
                    Pages::Dirty => snap.dirty / page,
                    Pages::Muzzy => snap.muzzy / page,
                }))
            }
            ArenasNarenas => {
                io.read_only()?;
                io.read(Value::Unsigned(NARENAS))
            }
            ArenasPage => {
                io.read_only()?;
                io.read(Value::Size(page_size()))
            }
            ArenasQuantum => {
                io.read_only()?;
                io.read(Value::Size(16))
            }
            ArenasCreate => {
                io.verify_read(4)?;
                say_once("mallctl", name, Trouble::CannotHonour, b);
                Err(EAGAIN)
            }
            Conf(s) => {
                io.read_only()?;
                match setting(s, b) {
                    Some(v) => io.read(v),
                    None => Err(ENOENT),
                }
            }
            ThreadTcacheFlush => {
                io.neither()?;
                super::flush_thread_cache(b);
                Ok(())
            }
            ArenaPurge | ArenaDecay => {
                io.neither()?;
                let arena = mib.get(1).copied().unwrap_or(0);
                if arena > u32::MAX as usize {
                    return Err(EFAULT);
                }
                if arena != ARENAS_DESTROYED {
                    super::purge(b);
                }
                Ok(())
            }
            ThreadArena => {
                let new = io.write::<4>()?.map(u32::from_ne_bytes);
                io.read(Value::Unsigned(0))?;
                match new {
                    // There is one arena, 0: jemalloc's answer for one it does not have.
                    Some(n) if n != 0 => Err(EFAULT),
                    _ => Ok(()),
                }
            }
            BackgroundThread | ThreadTcacheEnabled => {
                // background_thread is off and cannot be turned on; the thread cache is on
                // and cannot be turned off.
                let now = ctl == ThreadTcacheEnabled;
                let new = io.write::<1>()?.map(|v| v[0] != 0);
                io.read(Value::Bool(now))?;
                match new {
                    Some(v) if v != now => {
                        say_once("mallctl", name, Trouble::CannotHonour, b);
                        Err(EFAULT)
                    }
                    _ => Ok(()),
                }
            }
        }
    }
}

/// The bytes of a C string, or None for NULL.
unsafe fn c_bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

/// jemalloc's `mallctl`, answered from backend `b`.
///
/// # Safety
/// As jemalloc's `mallctl`: `name` a C string, the pointers valid for what they point to.
pub unsafe fn mallctl(
    b: Backend,
    name: *const c_char,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> c_int {
    let Some(name) = (unsafe { c_bytes(name) }) else { return ENOENT };
    let mut mib = [0usize; MAX_DEPTH];
    let found = match lookup(name, &mut mib, MAX_DEPTH) {
        Ok((Some(ctl), depth)) => Ok((ctl, depth)),
        Ok((None, _)) => Err(ENOENT),
        Err(e) => Err(e),
    };
    let (ctl, depth) = match found {
        Ok(f) => f,
        Err(e) => {
            say_once("mallctl", name, Trouble::UnknownName, b);
            return e;
        }
    };
    let io = Io { oldp, oldlenp, newp, newlen };
    match unsafe { run(b, ctl, &mib[..depth], &io, name) } {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// jemalloc's `mallctlnametomib`, for the names [`mallctl`] answers.
///
/// # Safety
/// As jemalloc's: `mibp` holds `*miblenp` entries.
pub unsafe fn nametomib(b: Backend, name: *const c_char, mibp: *mut usize, miblenp: *mut usize) -> c_int {
    let Some(name) = (unsafe { c_bytes(name) }) else { return ENOENT };
    if miblenp.is_null() || mibp.is_null() {
        return EINVAL;
    }
    let cap = unsafe { *miblenp };
    let mut mib = [0usize; MAX_DEPTH];
    match lookup(name, &mut mib, cap) {
        Ok((_, depth)) => {
            unsafe {
                core::ptr::copy_nonoverlapping(mib.as_ptr(), mibp, depth.min(cap));
                *miblenp = depth;
            }
            0
        }
        Err(e) => {
            say_once("mallctlnametomib", name, Trouble::UnknownName, b);
            e
        }
    }
}

/// jemalloc's `mallctlbymib`, for the MIBs [`nametomib`] gives.
///
/// # Safety
/// As jemalloc's: `mib` holds `miblen` entries.
pub unsafe fn bymib(
    b: Backend,
    mib: *const usize,
    miblen: usize,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> c_int {
    if mib.is_null() && miblen != 0 {
        return ENOENT;
    }
    let mib = if miblen == 0 { &[][..] } else { unsafe { core::slice::from_raw_parts(mib, miblen) } };
    let ctl = match lookup_mib(mib) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let io = Io { oldp, oldlenp, newp, newlen };
    match unsafe { run(b, ctl, mib, &io, b"(by MIB)") } {
        Ok(()) => 0,
        Err(e) => e,
    }
}

/// `malloc_stats_print`'s write callback.
pub type WriteCb = Option<unsafe extern "C" fn(*mut c_void, *const c_char)>;

/// jemalloc's `malloc_stats_print` from backend `b`: the totals jemalloc prints first, as
/// text or (`opts` with 'J') JSON, each line through `write_cb` (stderr when it is None).
/// The statistics are refreshed first, as jemalloc does.
///
/// # Safety
/// `opts` NULL or a C string; `write_cb` callable with `cbopaque`.
pub unsafe fn stats_print(b: Backend, write_cb: WriteCb, cbopaque: *mut c_void, opts: *const c_char) {
    use core::fmt::Write;
    let json = unsafe { c_bytes(opts) }.is_some_and(|o| o.contains(&b'J'));
    let (s, _) = cached(b, true);
    let ver = version(b).to_str().unwrap_or("");
    let page = page_size();
    let mut line = Buf::<512>::new();
    let emit = |line: &mut Buf<512>| {
        match write_cb {
            Some(cb) => unsafe { cb(cbopaque, line.as_c_ptr()) },
            None => line.write_to_fd(2),
        }
        line.clear();
    };
    if json {
        let _ = write!(
            line,
            "{{\n\"jemalloc\": {{\n\"version\": \"{ver}\",\n\"emulated_on\": \"{}\",\n",
            b.name()
        );
        emit(&mut line);
        let _ = write!(line, "\"arenas\": {{\n\"narenas\": {NARENAS},\n\"page\": {page}\n}},\n");
        emit(&mut line);
        let _ = write!(
            line,
            "\"stats\": {{\n\"allocated\": {},\n\"active\": {},\n\"metadata\": {},\n\"resident\": {},\n\"mapped\": {},\n\"retained\": {}\n}}\n}}\n}}\n",
            s.allocated, s.active, s.metadata, s.resident, s.mapped, s.retained
        );
        emit(&mut line);
    } else {
        let _ = write!(line, "___ Begin jemalloc statistics ___\nVersion: \"{ver}\"\n");
        emit(&mut line);
        let _ = writeln!(line, "Emulated by the shim: {} serves this program's jemalloc calls", b.name());
        emit(&mut line);
        let _ = write!(line, "Arenas: {NARENAS}\nPage size: {page}\n");
        emit(&mut line);
        let _ = writeln!(
            line,
            "Allocated: {}, active: {}, metadata: {} (n_thp 0), resident: {}, mapped: {}, retained: {}",
            s.allocated, s.active, s.metadata, s.resident, s.mapped, s.retained
        );
        emit(&mut line);
        let _ = writeln!(line, "___ End jemalloc statistics ___");
        emit(&mut line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::ptr::null_mut;
    use tikv_jemalloc_sys as je;

    /// The emulation on glibc (its statistics always exist in a test process).
    const B: Backend = Backend::Glibc;

    unsafe fn emu(
        name: &CStr,
        oldp: *mut c_void,
        oldlenp: *mut usize,
        newp: *mut c_void,
        newlen: usize,
    ) -> c_int {
        unsafe { mallctl(B, name.as_ptr(), oldp, oldlenp, newp, newlen) }
    }
    unsafe fn real(
        name: &CStr,
        oldp: *mut c_void,
        oldlenp: *mut usize,
        newp: *mut c_void,
        newlen: usize,
    ) -> c_int {
        unsafe { je::mallctl(name.as_ptr(), oldp, oldlenp, newp, newlen) }
    }

    /// Every name the emulation answers, with its C size (0: an action).
    const NAMES: &[(&CStr, usize)] = &[
        (c"version", 8),
        (c"epoch", 8),
        (c"stats.allocated", 8),
        (c"stats.active", 8),
        (c"stats.metadata", 8),
        (c"stats.resident", 8),
        (c"stats.mapped", 8),
        (c"stats.retained", 8),
        (c"stats.arenas.0.pactive", 8),
        (c"stats.arenas.4096.pactive", 8),
        (c"stats.arenas.4096.pdirty", 8),
        (c"stats.arenas.4096.pmuzzy", 8),
        (c"arenas.narenas", 4),
        (c"arenas.page", 8),
        (c"arenas.quantum", 8),
        (c"opt.narenas", 4),
        (c"opt.tcache", 1),
        (c"opt.abort", 1),
        (c"opt.dss", 8),
        (c"opt.junk", 8),
        (c"thread.tcache.enabled", 1),
        (c"thread.arena", 4),
        (c"background_thread", 1),
        (c"config.stats", 1),
    ];

    #[test]
    fn the_sizes_are_jemallocs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        for &(name, size) in NAMES {
            // The real jemalloc says how big the value is: a read of 64 bytes is EINVAL
            // with *oldlenp set to the size.
            for f in [emu as unsafe fn(&CStr, *mut c_void, *mut usize, *mut c_void, usize) -> c_int, real] {
                let mut buf = [0u8; 64];
                let mut len = buf.len();
                let rc = unsafe { f(name, buf.as_mut_ptr() as *mut c_void, &mut len, null_mut(), 0) };
                assert_eq!((rc, len), (EINVAL, size), "{name:?}");
            }
        }
    }

    #[test]
    fn errors_match_jemallocs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut v = 0usize;
        let vp = &mut v as *mut _ as *mut c_void;
        // The real jemalloc's thread cache exists once this thread has allocated.
        unsafe { je::free(je::malloc(8)) };
        let mut small;
        for f in [emu as unsafe fn(&CStr, *mut c_void, *mut usize, *mut c_void, usize) -> c_int, real] {
            unsafe {
                let mut len = 8usize;
                // read-only
                assert_eq!(f(c"stats.allocated", vp, &mut len, vp, 8), EPERM);
                assert_eq!(f(c"arenas.narenas", null_mut(), null_mut(), vp, 4), EPERM);
                assert_eq!(f(c"opt.narenas", null_mut(), null_mut(), vp, 4), EPERM);
                // unknown, partial, too long, arena that does not exist
                assert_eq!(f(c"stats.nonesuch", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"stats", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"stats.allocated.x", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"stats.arenas.4000.pactive", vp, &mut len, null_mut(), 0), ENOENT);
                assert_eq!(f(c"arena.4000.purge", null_mut(), null_mut(), null_mut(), 0), ENOENT);
                // epoch: wrong write size; a short read copies 4 bytes
                let e: u64 = 1;
                assert_eq!(f(c"epoch", null_mut(), null_mut(), &e as *const _ as *mut c_void, 4), EINVAL);
                small = 4;
                assert_eq!(f(c"epoch", vp, &mut small, null_mut(), 0), EINVAL);
                assert_eq!(small, 4);
                // actions take no buffers
                assert_eq!(f(c"thread.tcache.flush", vp, &mut len, null_mut(), 0), EPERM);
                assert_eq!(f(c"thread.tcache.flush", null_mut(), null_mut(), null_mut(), 0), 0);
                assert_eq!(f(c"arena.4096.purge", null_mut(), null_mut(), null_mut(), 0), 0);
                assert_eq!(f(c"arena.0.decay", null_mut(), null_mut(), null_mut(), 0), 0);
                assert_eq!(f(c"arena.4096.purge", vp, &mut len, null_mut(), 0), EPERM);
                // a NULL oldp reads nothing and succeeds
                assert_eq!(f(c"stats.allocated", null_mut(), &mut len, null_mut(), 0), 0);
                // thread.arena: an arena that does not exist
                let bad: u32 = 3000;
                assert_eq!(
                    f(c"thread.arena", null_mut(), null_mut(), &bad as *const _ as *mut c_void, 4),
                    EFAULT
                );
                let zero: u32 = 0;
                assert_eq!(
                    f(c"thread.arena", null_mut(), null_mut(), &zero as *const _ as *mut c_void, 4),
                    0
                );
                // arenas.create wants a read of an unsigned
                assert_eq!(f(c"arenas.create", null_mut(), null_mut(), null_mut(), 0), EINVAL);
            }
        }
    }

    #[test]
    fn nametomib_round_trips_and_partial_mibs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        for &(name, size) in NAMES {
            let mut mib = [0usize; 8];
            let mut n = mib.len();
            assert_eq!(unsafe { nametomib(B, name.as_ptr(), mib.as_mut_ptr(), &mut n) }, 0, "{name:?}");
            if size != 8 {
                continue;
            }
            let (mut a, mut b) = (0usize, 0usize);
            let (mut la, mut lb) = (8usize, 8usize);
            let rc =
                unsafe { bymib(B, mib.as_ptr(), n, &mut a as *mut _ as *mut c_void, &mut la, null_mut(), 0) };
            let rc2 = unsafe { emu(name, &mut b as *mut _ as *mut c_void, &mut lb, null_mut(), 0) };
            assert_eq!((rc, rc2), (0, 0), "{name:?}");
        }
        // A MIB for stats.arenas.<i>.pmuzzy with the index replaced, as programs do.
        let mut mib = [0usize; 4];
        let mut n = 4;
        assert_eq!(unsafe { nametomib(B, c"stats.arenas.0.pmuzzy".as_ptr(), mib.as_mut_ptr(), &mut n) }, 0);
        assert_eq!(n, 4);
        assert_eq!(mib[2], 0);
        mib[2] = ARENAS_ALL;
        let mut v = 0usize;
        let mut l = 8usize;
        assert_eq!(
            unsafe { bymib(B, mib.as_ptr(), 4, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0) },
            0
        );
        mib[2] = 7;
        assert_eq!(
            unsafe { bymib(B, mib.as_ptr(), 4, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0) },
            ENOENT
        );
        // A partial MIB: the first two elements, then completed.
        let mut part = [0usize; 4];
        let mut n = 2;
        assert_eq!(unsafe { nametomib(B, c"stats.arenas.0.pmuzzy".as_ptr(), part.as_mut_ptr(), &mut n) }, 0);
        assert_eq!((n, part[..2] == mib[..2]), (2, true));
        // A MIB that stops at an inner node, or goes past a leaf.
        assert_eq!(
            unsafe { bymib(B, mib.as_ptr(), 2, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0) },
            ENOENT
        );
        let long = [mib[0], mib[1], 0, mib[3], 0];
        assert_eq!(
            unsafe { bymib(B, long.as_ptr(), 5, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0) },
            ENOENT
        );
        assert_eq!(
            unsafe {
                bymib(B, [99usize].as_ptr(), 1, &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0)
            },
            ENOENT
        );
    }

    #[test]
    fn statistics_follow_the_epoch() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let page = page_size();
        for b in [Backend::Glibc, Backend::Mimalloc, Backend::Snmalloc, Backend::Rpmalloc] {
            let read = |name: &CStr| {
                let mut v = 0usize;
                let mut l = 8usize;
                let rc = unsafe {
                    mallctl(b, name.as_ptr(), &mut v as *mut _ as *mut c_void, &mut l, null_mut(), 0)
                };
                assert_eq!(rc, 0, "{name:?} on {b:?}");
                v
            };
            let advance = || {
                let mut e: u64 = 1;
                let mut l = 8usize;
                let p = &mut e as *mut u64 as *mut c_void;
                assert_eq!(unsafe { mallctl(b, c"epoch".as_ptr(), p, &mut l, p, 8) }, 0);
            };
            advance();
            let before = read(c"stats.allocated");
            // 64 MiB from the backend itself, touched.
            let blocks: Vec<*mut c_void> = (0..64)
                .map(|_| unsafe {
                    let p = super::super::alloc_in(b, 1 << 20);
                    core::ptr::write_bytes(p as *mut u8, 1, 1 << 20);
                    p
                })
                .collect();
            assert_eq!(read(c"stats.allocated"), before, "{b:?}: statistics moved without an epoch");
            advance();
            let during = read(c"stats.allocated");
            eprintln!("{b:?}: allocated {before} then {during}");
            assert!(during >= before + (32 << 20), "{b:?}: {before} then {during}");
            assert!(read(c"stats.arenas.4096.pactive") * page >= during.min(read(c"stats.active")) / 2);
            assert!(read(c"stats.resident") >= read(c"stats.active"));
            for p in blocks {
                unsafe { super::super::free_in(b, p) };
            }
            assert_eq!(
                unsafe { mallctl(b, c"arena.4096.purge".as_ptr(), null_mut(), null_mut(), null_mut(), 0) },
                0
            );
            advance();
            let after = read(c"stats.allocated");
            eprintln!("{b:?}: after the frees {after}");
            assert!(after + (32 << 20) <= during, "{b:?}: {during} then {after} after the frees");
        }
    }

    #[test]
    fn stats_print_reaches_the_callback() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        unsafe extern "C" fn cb(arg: *mut c_void, s: *const c_char) {
            let out = unsafe { &mut *(arg as *mut Vec<u8>) };
            out.extend_from_slice(unsafe { CStr::from_ptr(s) }.to_bytes());
        }
        let mut out: Vec<u8> = Vec::new();
        unsafe { stats_print(B, Some(cb), &mut out as *mut _ as *mut c_void, null_mut()) };
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("___ Begin jemalloc statistics ___"), "{text}");
        assert!(text.contains("Allocated: "), "{text}");
        let mut out: Vec<u8> = Vec::new();
        unsafe { stats_print(B, Some(cb), &mut out as *mut _ as *mut c_void, c"J".as_ptr()) };
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"allocated\": ") && text.trim_end().ends_with('}'), "{text}");
    }

    #[test]
    fn bad_input_is_an_error_not_a_crash() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut v = 0usize;
        let mut l = 8usize;
        let vp = &mut v as *mut _ as *mut c_void;
        unsafe {
            assert_eq!(mallctl(B, core::ptr::null(), vp, &mut l, null_mut(), 0), ENOENT);
            let mut mib = [0usize; 4];
            assert_eq!(nametomib(B, c"stats.allocated".as_ptr(), mib.as_mut_ptr(), null_mut()), EINVAL);
            assert_eq!(nametomib(B, core::ptr::null(), mib.as_mut_ptr(), &mut l), ENOENT);
            assert_eq!(bymib(B, core::ptr::null(), 3, vp, &mut l, null_mut(), 0), ENOENT);
            assert_eq!(bymib(B, mib.as_ptr(), 0, vp, &mut l, null_mut(), 0), ENOENT);
            // A name of many elements, and a huge index.
            assert_eq!(mallctl(B, c"a.b.c.d.e.f.g.h.i.j".as_ptr(), vp, &mut l, null_mut(), 0), ENOENT);
            assert_eq!(
                mallctl(
                    B,
                    c"stats.arenas.99999999999999999999999.pactive".as_ptr(),
                    vp,
                    &mut l,
                    null_mut(),
                    0
                ),
                ENOENT
            );
            // Settings that cannot be taken: jemalloc's error for a failed operation.
            let on = true;
            assert_eq!(
                mallctl(
                    B,
                    c"background_thread".as_ptr(),
                    null_mut(),
                    null_mut(),
                    &on as *const _ as *mut c_void,
                    1
                ),
                EFAULT
            );
            let off = false;
            assert_eq!(
                mallctl(
                    B,
                    c"background_thread".as_ptr(),
                    null_mut(),
                    null_mut(),
                    &off as *const _ as *mut c_void,
                    1
                ),
                0
            );
            assert_eq!(
                mallctl(
                    B,
                    c"thread.tcache.enabled".as_ptr(),
                    null_mut(),
                    null_mut(),
                    &off as *const _ as *mut c_void,
                    1
                ),
                EFAULT
            );
            let mut ind = 0u32;
            let mut il = 4usize;
            assert_eq!(
                mallctl(
                    B,
                    c"arenas.create".as_ptr(),
                    &mut ind as *mut _ as *mut c_void,
                    &mut il,
                    null_mut(),
                    0
                ),
                EAGAIN
            );
            assert_eq!(
                mallctl(B, c"opt.tcache".as_ptr(), null_mut(), null_mut(), &on as *const _ as *mut c_void, 1),
                EPERM
            );
        }
    }

    #[test]
    fn strtoumax_is_jemallocs() {
        let _serial = crate::emulate::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(strtoumax(b"4096"), 4096);
        assert_eq!(strtoumax(b""), 0);
        assert_eq!(strtoumax(b"x"), 0);
        assert_eq!(strtoumax(b"99999999999999999999999"), u64::MAX);
    }
}
