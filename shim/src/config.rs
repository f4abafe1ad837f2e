//! The settings: every `SHIM_*` environment variable (and MALLOC_CONF) is read here, once
//! at start-up, without allocating (the first malloc can come before libc has set
//! `environ`; then /proc/self/environ is read instead), by its row of the settings table
//! (`shim_config::SETTINGS`: its name, the words it accepts, its default, its line for a
//! value that cannot be read). A bad value becomes that row's line for stderr, naming what
//! is accepted, and the default is used; an empty value is the default. The bottom layer:
//! imports nothing of the crate.
use shim_backend::Backend;
pub use shim_config::{parse_duration, parse_size};
use shim_config::{parse_int, parse_u32, parse_u64, setting, Setting};

// The rows read here (a name the table lacks does not build).
const BACKEND: &Setting = setting("SHIM_BACKEND");
const TRACE: &Setting = setting("SHIM_TRACE");
const LOG: &Setting = setting("SHIM_LOG");
const TIMING: &Setting = setting("SHIM_TIMING");
const ON_FULL: &Setting = setting("SHIM_ON_FULL");
const CLOCK: &Setting = setting("SHIM_CLOCK");
const ZSTD_LEVEL: &Setting = setting("SHIM_ZSTD_LEVEL");
const WINDOW: &Setting = setting("SHIM_WINDOW");
const START: &Setting = setting("SHIM_START");
const EVERY: &Setting = setting("SHIM_EVERY");
const STALL: &Setting = setting("SHIM_STALL");
const LOG_LIMIT: &Setting = setting("SHIM_LOG_LIMIT");
const LOG_FULL: &Setting = setting("SHIM_LOG_FULL");
const CONTROL: &Setting = setting("SHIM_CONTROL");
const SIGNAL: &Setting = setting("SHIM_SIGNAL");
const STACKS: &Setting = setting("SHIM_STACKS");
const RECORD: &Setting = setting("SHIM_RECORD");
const SAMPLE_BYTES: &Setting = setting("SHIM_SAMPLE_BYTES");
const STACK_DEPTH: &Setting = setting("SHIM_STACK_DEPTH");
const UNWIND: &Setting = setting("SHIM_UNWIND");
const SAMPLE_SEED: &Setting = setting("SHIM_SAMPLE_SEED");
const PACK: &Setting = setting("SHIM_PACK");
const CRASH_SAFE: &Setting = setting("SHIM_CRASH_SAFE");
const INFLIGHT_MAX: &Setting = setting("SHIM_INFLIGHT_MAX");
const INFLIGHT_DIR: &Setting = setting("SHIM_INFLIGHT_DIR");
const MALLOC_CONF: &Setting = setting("MALLOC_CONF");

/// Said when SHIM_BACKEND names the one backend a build can lack.
const BACKEND_MISSING: &str = shim_config::text!(
    .push("shim: SHIM_BACKEND=tcmalloc is not in this build (available: own, ")
    .push(shim_config::BACKENDS_LIST_NO_TCMALLOC)
    .push("); using the default")
);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Timing {
    All,
    None,
    /// Time one call in N.
    Every(u32),
}

/// How the recorder packs buffers, as SHIM_PACK says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pack {
    Rows,
    Columns,
    Auto,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OnFull {
    Block,
    Drop,
}

/// SHIM_STACKS: which calls' stacks are taken.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum StackMode {
    Off = 0,
    /// Calls that stay inside the allocator over SHIM_STALL.
    Slow = 1,
    /// Those, and allocations the byte sampler takes (mean SHIM_SAMPLE_BYTES).
    Sample = 2,
    /// Every allocation.
    All = 3,
}

/// The largest SHIM_STACK_DEPTH.
pub const MAX_STACK_DEPTH: u32 = STACK_DEPTH.max() as u32;

/// The call stacks' settings: SHIM_STACKS (as capture windows and SHIM_RECORD=sample leave
/// it), SHIM_SAMPLE_BYTES, SHIM_STACK_DEPTH, SHIM_UNWIND, SHIM_SAMPLE_SEED.
pub struct Stacks {
    pub mode: StackMode,
    /// The byte sampler's mean distance between samples.
    pub sample_bytes: u64,
    /// Frames kept per stack.
    pub depth: u32,
    /// SHIM_UNWIND=fp: follow frame pointers rather than the unwind tables.
    pub frame_pointers: bool,
    /// SHIM_SAMPLE_SEED (odd), for a repeatable sampler.
    pub seed: Option<u64>,
    /// One line each, said when the stacks are set up: only in a process that records.
    pub warnings: Warnings,
}

/// What SHIM_BACKEND asks of a program that brings its own allocator.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Choice {
    /// Not set: a program's own allocator is kept (and recorded); others get glibc.
    Unset,
    /// `own`: keep the program's own allocator, and say so if it has none.
    Own,
    /// A backend: it serves every call, the program's own allocator's entry points too.
    Switch(Backend),
}

pub struct Config {
    /// The backend of the shim's own allocations and of the calls LD_PRELOAD reaches.
    pub backend: Backend,
    pub choice: Choice,
    pub trace: bool,
    pub timing: Timing,
    pub on_full: OnFull,
    pub monotonic_clock: bool,
    pub zstd_level: i32,
    /// SHIM_LOG, or None for the default pattern.
    pub log: Option<&'static [u8]>,
    /// MALLOC_CONF, handed to jemalloc.
    pub malloc_conf: Option<&'static [u8]>,
    /// The settings of SHIM_BACKEND=NAME:KEY=VALUE,... (what follows the colon), for the
    /// chosen backend; checked and applied by `shim_backend::settings` in init.
    pub backend_settings: Option<&'static [u8]>,
    /// Capture windows (SHIM_WINDOW, SHIM_START, SHIM_EVERY); None: one window from start
    /// to exit.
    pub windows: Option<Windows>,
    /// SHIM_STALL: a call inside the allocator for longer is a stall (ns).
    pub stall_ns: u64,
    /// SHIM_CONTROL=1: the control socket (`shimlog ctl`).
    pub control: bool,
    /// SHIM_SIGNAL: the signal that toggles a window (0: none).
    pub signal: i32,
    /// SHIM_LOG_LIMIT in bytes (u64::MAX: none).
    pub log_limit: u64,
    /// SHIM_LOG_FULL=rotate: delete the oldest window's log rather than stop recording.
    pub rotate: bool,
    /// SHIM_CRASH_SAFE=1 (the default): the threads' buffers live in the in-flight file
    /// beside the log, so that a process that dies leaves them recoverable.
    pub crash_safe: bool,
    /// SHIM_RECORD=sample: only the sampled allocations (with their stacks), their frees
    /// and the slow calls are recorded.
    pub sample_only: bool,
    /// SHIM_PACK: columns (about half the log bytes, at up to 4 times the recorder's CPU), rows
    /// (zstd alone), or auto (the default: columns while a core is idle).
    pub pack: Pack,
    /// SHIM_INFLIGHT_MAX: the most bytes dead processes' in-flight files may take in the
    /// user's in-flight directory before the oldest are recovered or removed at once (None,
    /// `off`: this process leaves other processes' files alone).
    pub inflight_max: Option<u64>,
    /// SHIM_INFLIGHT_DIR: where the user's in-flight directory `shim-UID` is made (absolute
    /// path; default /dev/shm).
    pub inflight_base: &'static [u8],
    /// The call stacks' settings (stacks/).
    pub stacks: Stacks,
    /// One line each, printed once initialisation is far enough to print.
    pub warnings: Warnings,
}

/// The lines said about the settings, in the order they were found (room for one a row and
/// the few that say two settings do not go together). Allocates nothing.
pub struct Warnings([Option<&'static str>; 32]);

impl Warnings {
    const fn new() -> Self {
        Warnings([None; 32])
    }
    pub fn iter(&self) -> core::slice::Iter<'_, Option<&'static str>> {
        self.0.iter()
    }
    fn push(&mut self, line: &'static str) {
        if let Some(slot) = self.0.iter_mut().find(|s| s.is_none()) {
            *slot = Some(line);
        }
    }
    /// The word `row`'s value spells (its first spelling); None when unset, or not one of
    /// its words (then the row's line is said).
    fn word(&mut self, row: &Setting) -> Option<&'static str> {
        let v = value(row)?;
        let w = row.word(v);
        if w.is_none() {
            self.push(row.warning);
        }
        w
    }
    /// A duration over 0 (ns).
    fn duration(&mut self, row: &Setting) -> Option<u64> {
        let v = value(row)?;
        match parse_duration(v) {
            Some(d) if d > 0 => Some(d),
            _ => {
                self.push(row.warning);
                None
            }
        }
    }
    /// A size over 0 (bytes).
    fn size(&mut self, row: &Setting) -> Option<u64> {
        let v = value(row)?;
        match parse_size(v) {
            Some(n) if n > 0 => Some(n),
            _ => {
                self.push(row.warning);
                None
            }
        }
    }
    /// An integer in the row's ranges.
    fn int(&mut self, row: &Setting) -> Option<i64> {
        let shim_config::Kind::Int(ranges) = row.kind else { return None };
        let v = value(row)?;
        let n = parse_int(v, ranges);
        if n.is_none() {
            self.push(row.warning);
        }
        n
    }
}

/// The value of `row`'s variable; None when unset or empty.
fn value(row: &Setting) -> Option<&'static [u8]> {
    #[cfg(test)]
    tests::seen(row);
    getenv(row.var.as_bytes()).filter(|v| !v.is_empty())
}

/// The capture schedule: record for `length`, first after `start`, then every `every`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Windows {
    /// SHIM_WINDOW in ns (u64::MAX: until exit).
    pub length: u64,
    /// SHIM_START in ns (0: at once).
    pub start: u64,
    /// SHIM_EVERY in ns (0: one window only).
    pub every: u64,
}

/// Default SHIM_STALL: 1 ms.
pub const DEFAULT_STALL_NS: u64 = parse_duration(STALL.default_value()).unwrap();

/// Default SHIM_TIMING: one call in 64 is timed (plus every call over 1 ms, found by the
/// recorder's watchdog), which keeps the recording cost within the benchmark's target.
pub const DEFAULT_TIMING: Timing = Timing::Every(parse_u32(TIMING.default_value()).unwrap());
pub const DEFAULT_LOG: &str = match core::str::from_utf8(LOG.default_value()) {
    Ok(s) => s,
    Err(_) => panic!("SHIM_LOG's default"),
};
/// Default SHIM_SAMPLE_BYTES: 512 KiB.
pub const DEFAULT_SAMPLE_BYTES: u64 = parse_size(SAMPLE_BYTES.default_value()).unwrap();
/// Default SHIM_STACK_DEPTH.
pub const DEFAULT_STACK_DEPTH: u32 = parse_u32(STACK_DEPTH.default_value()).unwrap();
/// Default SHIM_INFLIGHT_MAX: 64 MiB of dead processes' in-flight files (about 60 of them).
pub const DEFAULT_INFLIGHT_MAX: u64 = parse_size(INFLIGHT_MAX.default_value()).unwrap();
/// Default SHIM_ZSTD_LEVEL.
pub const DEFAULT_ZSTD_LEVEL: i32 = match ZSTD_LEVEL.kind {
    shim_config::Kind::Int(r) => parse_int(ZSTD_LEVEL.default_value(), r).unwrap() as i32,
    _ => panic!("SHIM_ZSTD_LEVEL is an integer"),
};

static mut PROC_ENV: [u8; 65536] = [0; 65536];
static mut PROC_ENV_LEN: usize = 0;

unsafe extern "C" {
    static environ: *const *const libc::c_char;
}

/// The value of `name` in the environment, without allocating.
pub fn getenv(name: &[u8]) -> Option<&'static [u8]> {
    unsafe {
        let env = environ;
        if !env.is_null() {
            let mut p = env;
            while !(*p).is_null() {
                let s = core::ffi::CStr::from_ptr(*p).to_bytes();
                if s.len() > name.len() && s.starts_with(name) && s[name.len()] == b'=' {
                    return Some(&s[name.len() + 1..]);
                }
                p = p.add(1);
            }
            return None;
        }
        // Before libc's start-up: the kernel's copy.
        let buf = &raw mut PROC_ENV;
        if PROC_ENV_LEN == 0 {
            let fd = libc::open(c"/proc/self/environ".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                let mut n = 0usize;
                loop {
                    let r = libc::read(fd, (*buf).as_mut_ptr().add(n) as *mut _, (*buf).len() - n);
                    if r <= 0 {
                        break;
                    }
                    n += r as usize;
                }
                libc::close(fd);
                PROC_ENV_LEN = n.max(1);
            }
        }
        let all: &'static [u8] = &(&(*buf))[..PROC_ENV_LEN];
        for s in all.split(|&c| c == 0) {
            if s.len() > name.len() && s.starts_with(name) && s[name.len()] == b'=' {
                return Some(&s[name.len() + 1..]);
            }
        }
        None
    }
}

/// Reads every setting. The lines are found in the table's rows, in the order of the
/// variables read here (the checks of two settings together where the second is read).
pub fn read() -> Config {
    let mut w = Warnings::new();
    // NAME:KEY=VALUE,...: the name chooses, the settings go to the backend chosen.
    let (backend_value, backend_settings) = match getenv(BACKEND.var.as_bytes()) {
        Some(v) => {
            let (name, set) = shim_backend::settings::split_label(v);
            (Some(name), set)
        }
        None => (None, None),
    };
    let choice = match backend_value {
        None | Some(b"") => Choice::Unset,
        Some(v) if v.eq_ignore_ascii_case(b"own") => Choice::Own,
        Some(v) => match Backend::parse(v) {
            Some(b) if b.available() => Choice::Switch(b),
            // Only tcmalloc can be missing (Debian's static library absent at build time).
            Some(_) => {
                w.push(BACKEND_MISSING);
                Choice::Unset
            }
            None => {
                w.push(BACKEND.warning);
                Choice::Unset
            }
        },
    };
    let backend = match choice {
        Choice::Switch(b) => b,
        _ => Backend::Glibc,
    };
    let trace = match value(TRACE) {
        // The shim's own unit-test binary exports the malloc family as libshim.so does: it
        // records itself only when asked, so that `cargo test` leaves no log in shim/.
        None => !cfg!(test),
        // A word it does not know: recording.
        Some(_) => w.word(TRACE) != Some("0"),
    };
    let timing = match value(TIMING) {
        None => DEFAULT_TIMING,
        Some(b"all") | Some(b"1") => Timing::All,
        Some(b"none") | Some(b"off") | Some(b"0") => Timing::None,
        Some(v) => match parse_u32(v) {
            Some(n) if n > 1 => Timing::Every(n),
            _ => {
                w.push(TIMING.warning);
                DEFAULT_TIMING
            }
        },
    };
    let on_full = match w.word(ON_FULL) {
        Some("drop") => OnFull::Drop,
        _ => OnFull::Block,
    };
    let monotonic_clock = w.word(CLOCK) == Some("monotonic");
    // Negative levels are zstd's fast ones: they store the record bytes without Huffman
    // coding, which is all zstd gains on them at level 1 (the records are varint-packed
    // already), for a recorder thread that compresses several times faster.
    let zstd_level = w.int(ZSTD_LEVEL).map_or(DEFAULT_ZSTD_LEVEL, |n| n as i32);
    let window = w.duration(WINDOW);
    let start = w.duration(START);
    let every = w.duration(EVERY);
    // A window as long as its period, or longer: one window only.
    let one_window = matches!(every, Some(e) if window.unwrap_or(u64::MAX) >= e);
    if one_window {
        w.push("shim: SHIM_EVERY must exceed SHIM_WINDOW; one window only");
    }
    let stall_ns = w.duration(STALL).unwrap_or(DEFAULT_STALL_NS);
    let log_limit = w.size(LOG_LIMIT).unwrap_or(u64::MAX);
    let rotate = w.word(LOG_FULL) == Some("rotate");
    let control = w.word(CONTROL) == Some("1");
    let signal = match w.word(SIGNAL) {
        Some("USR2") => libc::SIGUSR2,
        Some("USR1") => libc::SIGUSR1,
        _ => 0,
    };
    let crash_safe = w.word(CRASH_SAFE) != Some("0");
    let windows = match (window, start, every) {
        // A limit, a control socket or a signal needs somewhere to go on watching: one
        // window from start to exit.
        (None, None, None) if log_limit != u64::MAX || control || signal != 0 => {
            Some(Windows { length: u64::MAX, start: 0, every: 0 })
        }
        (None, None, None) => None,
        (length, start, every) => Some(Windows {
            length: length.unwrap_or(u64::MAX),
            start: start.unwrap_or(0),
            every: if one_window { 0 } else { every.unwrap_or(0) },
        }),
    };
    let sample_only = w.word(RECORD) == Some("sample");
    let sample_only = if sample_only && windows.is_some() {
        w.push("shim: SHIM_RECORD=sample does not go with capture windows (or a limit, control, signal); recording all in the windows");
        false
    } else {
        sample_only
    };
    let pack = match w.word(PACK) {
        Some("columns") => Pack::Columns,
        Some("rows") => Pack::Rows,
        _ => Pack::Auto,
    };
    let inflight_max = match value(INFLIGHT_MAX) {
        None => Some(DEFAULT_INFLIGHT_MAX),
        Some(b"off") | Some(b"none") => None,
        Some(v) => match parse_size(v) {
            Some(n) => Some(n),
            _ => {
                w.push(INFLIGHT_MAX.warning);
                Some(DEFAULT_INFLIGHT_MAX)
            }
        },
    };
    let inflight_base: &'static [u8] = match value(INFLIGHT_DIR) {
        None => recorder::inflight::DEFAULT_BASE.as_bytes(),
        Some(v) if v.starts_with(b"/") && core::str::from_utf8(v).is_ok() => v,
        Some(_) => {
            w.push(INFLIGHT_DIR.warning);
            recorder::inflight::DEFAULT_BASE.as_bytes()
        }
    };
    Config {
        backend,
        choice,
        trace,
        timing,
        on_full,
        monotonic_clock,
        zstd_level,
        log: value(LOG),
        malloc_conf: value(MALLOC_CONF),
        backend_settings,
        windows,
        stall_ns,
        control,
        signal,
        log_limit,
        rotate,
        crash_safe,
        sample_only,
        stacks: read_stacks(windows.is_some(), sample_only),
        pack,
        inflight_max,
        inflight_base,
        warnings: w,
    }
}

/// The call stacks' settings, as capture windows (`windows`) and SHIM_RECORD=sample
/// (`sample_only`) leave them.
fn read_stacks(windows: bool, sample_only: bool) -> Stacks {
    let mut w = Warnings::new();
    let asked = value(STACKS).is_some();
    let mut mode = match w.word(STACKS) {
        Some("off") => StackMode::Off,
        Some("sample") => StackMode::Sample,
        Some("all") => StackMode::All,
        _ => StackMode::Slow,
    };
    let sample_bytes = w.size(SAMPLE_BYTES).unwrap_or(DEFAULT_SAMPLE_BYTES);
    let depth = w.int(STACK_DEPTH).map_or(DEFAULT_STACK_DEPTH, |n| n as u32);
    let frame_pointers = w.word(UNWIND) == Some("fp");
    // A seed it cannot read is no seed (the sampler seeds itself from the clock).
    let seed = value(SAMPLE_SEED).and_then(parse_u64).map(|s| s | 1);
    if sample_only && mode != StackMode::Sample {
        // The sampled-only log is the sampled allocations' stacks: the sampler must run.
        if asked {
            w.push("shim: SHIM_RECORD=sample takes the stacks of sampled allocations; SHIM_STACKS=sample");
        }
        mode = StackMode::Sample;
    }
    if mode != StackMode::Off && windows {
        // Each window's log would need the stacks again; the default just stays out of the way.
        if asked {
            w.push("shim: SHIM_STACKS is not supported with capture windows; stacks off");
        }
        mode = StackMode::Off;
    }
    Stacks { mode, sample_bytes, depth, frame_pointers, seed, warnings: w }
}

impl Timing {
    pub fn describe(self) -> String {
        match self {
            Timing::All => "all".into(),
            Timing::None => "none".into(),
            Timing::Every(n) => format!("1/{n}"),
        }
    }
    /// The countdown start: time when the countdown reaches zero (0 = never).
    pub fn period(self) -> u32 {
        match self {
            Timing::All => 1,
            Timing::None => 0,
            Timing::Every(n) => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use shim_config::{Kind, Setting, SETTINGS};

    /// The rows `value` was asked for, one bit each.
    static SEEN: AtomicU64 = AtomicU64::new(0);

    pub(super) fn seen(row: &Setting) {
        if let Some(i) = SETTINGS.iter().position(|r| r.var == row.var) {
            SEEN.fetch_or(1 << i, Relaxed);
        }
    }

    /// A row of the table that the shim does not read is a setting that does nothing.
    #[test]
    fn every_row_is_read() {
        assert!(SETTINGS.len() <= 64);
        let _ = super::read();
        let seen = SEEN.load(Relaxed);
        for (i, row) in SETTINGS.iter().enumerate() {
            let read = seen & (1 << i) != 0 || row.var == "SHIM_BACKEND";
            assert_eq!(read, !matches!(row.kind, Kind::Foreign), "{}: read {read}", row.var);
        }
    }

    #[test]
    fn defaults_come_from_the_table() {
        assert_eq!(super::DEFAULT_STALL_NS, 1_000_000);
        assert_eq!(super::DEFAULT_TIMING, super::Timing::Every(64));
        assert_eq!(super::DEFAULT_LOG, "shim.%e.%p.shimlog");
        assert_eq!(super::DEFAULT_SAMPLE_BYTES, 512 << 10);
        assert_eq!(super::DEFAULT_STACK_DEPTH, 64);
        assert_eq!(super::DEFAULT_INFLIGHT_MAX, 64 << 20);
        assert_eq!(super::DEFAULT_ZSTD_LEVEL, 1);
        assert_eq!(super::MAX_STACK_DEPTH, 256);
    }
}
