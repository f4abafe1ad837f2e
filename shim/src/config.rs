//! The settings: every `SHIM_*` environment variable (and MALLOC_CONF) is parsed here, once
//! at start-up, without allocating (the first malloc can come before libc has set
//! `environ`; then /proc/self/environ is read instead). A bad value becomes one line for
//! stderr naming what is accepted, and the default. The bottom layer: imports nothing of
//! the crate.
use shim_backend::Backend;

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
pub const MAX_STACK_DEPTH: u32 = 256;

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
    pub warnings: [Option<&'static str>; 6],
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
    pub warnings: [Option<&'static str>; 20],
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

/// A size: a number with an optional unit `k`, `M`, `G`, `T` (powers of 1024, an optional
/// `B` or `iB` after it).
pub fn parse_size(s: &[u8]) -> Option<u64> {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > 15 {
        return None;
    }
    let mut n = 0u64;
    for &c in &s[..digits] {
        n = n * 10 + (c - b'0') as u64;
    }
    let unit =
        s[digits..].strip_suffix(b"iB").or_else(|| s[digits..].strip_suffix(b"B")).unwrap_or(&s[digits..]);
    let shift = match unit {
        b"" => 0,
        b"k" | b"K" => 10,
        b"m" | b"M" => 20,
        b"g" | b"G" => 30,
        b"t" | b"T" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// Default SHIM_STALL: 1 ms.
pub const DEFAULT_STALL_NS: u64 = 1_000_000;

/// A duration: a number with a unit `ns`, `us`, `ms`, `s`, `m`, `h`, `d` (none: seconds).
pub fn parse_duration(s: &[u8]) -> Option<u64> {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let n = parse_u32(&s[..digits])? as u64;
    let unit: u64 = match &s[digits..] {
        b"ns" => 1,
        b"us" => 1_000,
        b"ms" => 1_000_000,
        b"" | b"s" => 1_000_000_000,
        b"m" | b"min" => 60_000_000_000,
        b"h" => 3_600_000_000_000,
        b"d" => 86_400_000_000_000,
        _ => return None,
    };
    n.checked_mul(unit)
}

/// Default SHIM_TIMING: one call in 64 is timed (plus every call over 1 ms, found by the
/// recorder's watchdog), which keeps the recording cost within the benchmark's target.
pub const DEFAULT_TIMING: Timing = Timing::Every(64);
pub const DEFAULT_LOG: &str = "shim.%e.%p.shimlog";
/// Default SHIM_SAMPLE_BYTES: 512 KiB.
pub const DEFAULT_SAMPLE_BYTES: u64 = 512 << 10;
/// Default SHIM_STACK_DEPTH.
pub const DEFAULT_STACK_DEPTH: u32 = 64;
/// Default SHIM_INFLIGHT_MAX: 64 MiB of dead processes' in-flight files (about 60 of them).
pub const DEFAULT_INFLIGHT_MAX: u64 = 64 << 20;

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

fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 18 || !s.iter().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some(s.iter().fold(0u64, |n, &c| n * 10 + (c - b'0') as u64))
}

fn parse_u32(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 9 {
        return None;
    }
    let mut v = 0u32;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u32;
    }
    Some(v)
}

pub fn read() -> Config {
    let mut w: [Option<&'static str>; 20] = [None; 20];
    // NAME:KEY=VALUE,...: the name chooses, the settings go to the backend chosen.
    let (backend_value, backend_settings) = match getenv(b"SHIM_BACKEND") {
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
                w[0] = Some("shim: SHIM_BACKEND=tcmalloc is not in this build (available: own, glibc, jemalloc, mimalloc, snmalloc, rpmalloc); using the default");
                Choice::Unset
            }
            None => {
                w[0] = Some("shim: unknown SHIM_BACKEND (accepted: own, glibc, jemalloc, mimalloc, tcmalloc, snmalloc, rpmalloc); using the default");
                Choice::Unset
            }
        },
    };
    let backend = match choice {
        Choice::Switch(b) => b,
        _ => Backend::Glibc,
    };
    let trace = match getenv(b"SHIM_TRACE") {
        // The shim's own unit-test binary exports the malloc family as libshim.so does: it
        // records itself only when asked, so that `cargo test` leaves no log in shim/.
        None => !cfg!(test),
        Some(b"1") | Some(b"on") | Some(b"yes") | Some(b"true") | Some(b"") => true,
        Some(b"0") | Some(b"off") | Some(b"no") | Some(b"false") => false,
        Some(_) => {
            w[1] = Some("shim: unknown SHIM_TRACE (accepted: 1, 0, on, off); recording");
            true
        }
    };
    let timing = match getenv(b"SHIM_TIMING") {
        None | Some(b"") => DEFAULT_TIMING,
        Some(b"all") | Some(b"1") => Timing::All,
        Some(b"none") | Some(b"off") | Some(b"0") => Timing::None,
        Some(v) => {
            match parse_u32(v) {
                Some(n) if n > 1 => Timing::Every(n),
                _ => {
                    w[2] = Some("shim: unknown SHIM_TIMING (accepted: all, none, or N to time one call in N); using 64");
                    DEFAULT_TIMING
                }
            }
        }
    };
    let on_full = match getenv(b"SHIM_ON_FULL") {
        None | Some(b"") | Some(b"block") => OnFull::Block,
        Some(b"drop") => OnFull::Drop,
        Some(_) => {
            w[3] = Some("shim: unknown SHIM_ON_FULL (accepted: block, drop); using block");
            OnFull::Block
        }
    };
    let monotonic_clock = match getenv(b"SHIM_CLOCK") {
        None | Some(b"") | Some(b"tsc") => false,
        Some(b"monotonic") => true,
        Some(_) => {
            w[4] = Some("shim: unknown SHIM_CLOCK (accepted: tsc, monotonic); using tsc");
            false
        }
    };
    // Negative levels are zstd's fast ones: they store the record bytes without Huffman
    // coding, which is all zstd gains on them at level 1 (the records are varint-packed
    // already), for a recorder thread that compresses several times faster.
    let zstd_level = match getenv(b"SHIM_ZSTD_LEVEL") {
        None | Some(b"") => 1,
        Some(v) => match v
            .strip_prefix(b"-")
            .map_or(parse_u32(v).map(|n| n as i64), |m| parse_u32(m).map(|n| -(n as i64)))
        {
            Some(n) if (1..=19).contains(&n) || (-7..=-1).contains(&n) => n as i32,
            _ => {
                w[5] = Some("shim: unknown SHIM_ZSTD_LEVEL (accepted: 1 to 19, or -1 to -7: faster, larger logs); using 1");
                1
            }
        },
    };
    let mut duration = |name: &[u8], slot: usize, msg: &'static str| match getenv(name) {
        None | Some(b"") => None,
        Some(v) => match parse_duration(v) {
            Some(d) if d > 0 => Some(d),
            _ => {
                w[slot] = Some(msg);
                None
            }
        },
    };
    let window = duration(
        b"SHIM_WINDOW",
        6,
        "shim: unknown SHIM_WINDOW (a duration: 60s, 500ms, 2m, 1h); recording from start to exit",
    );
    let start = duration(
        b"SHIM_START",
        7,
        "shim: unknown SHIM_START (a duration: 60s, 500ms, 2m, 1h); the first window starts at once",
    );
    let every = duration(
        b"SHIM_EVERY",
        8,
        "shim: unknown SHIM_EVERY (a duration: 60s, 500ms, 2m, 1h); one window only",
    );
    let stall_ns = duration(b"SHIM_STALL", 9, "shim: unknown SHIM_STALL (a duration: 1ms, 500us); using 1ms")
        .unwrap_or(DEFAULT_STALL_NS);
    let log_limit = match getenv(b"SHIM_LOG_LIMIT") {
        None | Some(b"") => u64::MAX,
        Some(v) => match parse_size(v) {
            Some(n) if n > 0 => n,
            _ => {
                w[10] = Some("shim: unknown SHIM_LOG_LIMIT (a size: 500M, 20G, 1T); no limit");
                u64::MAX
            }
        },
    };
    let rotate = match getenv(b"SHIM_LOG_FULL") {
        None | Some(b"") | Some(b"stop") => false,
        Some(b"rotate") => true,
        Some(_) => {
            w[11] = Some("shim: unknown SHIM_LOG_FULL (accepted: stop, rotate); using stop");
            false
        }
    };
    let control = match getenv(b"SHIM_CONTROL") {
        None | Some(b"") | Some(b"0") | Some(b"off") => false,
        Some(b"1") | Some(b"on") => true,
        Some(_) => {
            w[12] = Some("shim: unknown SHIM_CONTROL (accepted: 1, 0); no control socket");
            false
        }
    };
    let signal = match getenv(b"SHIM_SIGNAL") {
        None | Some(b"") => 0,
        Some(b"USR2") | Some(b"SIGUSR2") | Some(b"usr2") => libc::SIGUSR2,
        Some(b"USR1") | Some(b"SIGUSR1") | Some(b"usr1") => libc::SIGUSR1,
        Some(_) => {
            w[13] = Some("shim: unknown SHIM_SIGNAL (accepted: USR2, USR1); no signal");
            0
        }
    };
    let crash_safe = match getenv(b"SHIM_CRASH_SAFE") {
        None | Some(b"") | Some(b"1") | Some(b"on") => true,
        Some(b"0") | Some(b"off") => false,
        Some(_) => {
            w[14] = Some("shim: unknown SHIM_CRASH_SAFE (accepted: 1, 0); using 1");
            true
        }
    };
    let pack = match getenv(b"SHIM_PACK") {
        None | Some(b"") | Some(b"auto") => Pack::Auto,
        Some(b"columns") => Pack::Columns,
        Some(b"rows") => Pack::Rows,
        Some(_) => {
            w[17] = Some("shim: unknown SHIM_PACK (accepted: auto, columns, rows); using auto");
            Pack::Auto
        }
    };
    let sample_only = match getenv(b"SHIM_RECORD") {
        None | Some(b"") | Some(b"all") => false,
        Some(b"sample") => true,
        Some(_) => {
            w[15] = Some("shim: unknown SHIM_RECORD (accepted: all, sample); recording all");
            false
        }
    };
    let inflight_max = match getenv(b"SHIM_INFLIGHT_MAX") {
        None | Some(b"") => Some(DEFAULT_INFLIGHT_MAX),
        Some(b"off") | Some(b"none") => None,
        Some(v) => match parse_size(v) {
            Some(n) => Some(n),
            _ => {
                w[18] = Some("shim: unknown SHIM_INFLIGHT_MAX (a size: 64M, 512k, 1G, 0; or off); using 64M");
                Some(DEFAULT_INFLIGHT_MAX)
            }
        },
    };
    let inflight_base: &'static [u8] = match getenv(b"SHIM_INFLIGHT_DIR") {
        None | Some(b"") => recorder::inflight::DEFAULT_BASE.as_bytes(),
        Some(v) if v.starts_with(b"/") && core::str::from_utf8(v).is_ok() => v,
        Some(_) => {
            w[19] = Some("shim: unknown SHIM_INFLIGHT_DIR (an absolute path, on tmpfs); using /dev/shm");
            recorder::inflight::DEFAULT_BASE.as_bytes()
        }
    };
    let windows = match (window, start, every) {
        // A limit, a control socket or a signal needs somewhere to go on watching: one
        // window from start to exit.
        (None, None, None) if log_limit != u64::MAX || control || signal != 0 => {
            Some(Windows { length: u64::MAX, start: 0, every: 0 })
        }
        (None, None, None) => None,
        (length, start, every) => {
            let length = length.unwrap_or(u64::MAX);
            let every = every.unwrap_or(0);
            if every != 0 && length >= every {
                w[8] = Some("shim: SHIM_EVERY must exceed SHIM_WINDOW; one window only");
                Some(Windows { length, start: start.unwrap_or(0), every: 0 })
            } else {
                Some(Windows { length, start: start.unwrap_or(0), every })
            }
        }
    };
    let sample_only = if sample_only && windows.is_some() {
        w[16] = Some("shim: SHIM_RECORD=sample does not go with capture windows (or a limit, control, signal); recording all in the windows");
        false
    } else {
        sample_only
    };
    Config {
        backend,
        choice,
        trace,
        timing,
        on_full,
        monotonic_clock,
        zstd_level,
        log: getenv(b"SHIM_LOG").filter(|v| !v.is_empty()),
        malloc_conf: getenv(b"MALLOC_CONF").filter(|v| !v.is_empty()),
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
    let mut w: [Option<&'static str>; 6] = [None; 6];
    let asked = getenv(b"SHIM_STACKS").is_some();
    let mut mode = match getenv(b"SHIM_STACKS") {
        None | Some(b"slow") => StackMode::Slow,
        Some(b"off") | Some(b"0") => StackMode::Off,
        Some(b"sample") => StackMode::Sample,
        Some(b"all") => StackMode::All,
        Some(_) => {
            w[0] = Some("shim: unknown SHIM_STACKS (off, slow, sample, all); using slow");
            StackMode::Slow
        }
    };
    let sample_bytes = match getenv(b"SHIM_SAMPLE_BYTES").map(|v| parse_size(v).filter(|&n| n > 0)) {
        None => DEFAULT_SAMPLE_BYTES,
        Some(Some(n)) => n,
        Some(None) => {
            w[1] = Some("shim: unknown SHIM_SAMPLE_BYTES (a size over 0: 512k, 4M); using 512k");
            DEFAULT_SAMPLE_BYTES
        }
    };
    let depth = match getenv(b"SHIM_STACK_DEPTH").map(parse_u64) {
        None => DEFAULT_STACK_DEPTH,
        Some(Some(n)) if (1..=MAX_STACK_DEPTH as u64).contains(&n) => n as u32,
        Some(_) => {
            w[2] = Some("shim: unknown SHIM_STACK_DEPTH (1 to 256); using 64");
            DEFAULT_STACK_DEPTH
        }
    };
    let frame_pointers = match getenv(b"SHIM_UNWIND") {
        None | Some(b"tables") => false,
        Some(b"fp") => true,
        Some(_) => {
            w[3] = Some("shim: unknown SHIM_UNWIND (tables, fp); using tables");
            false
        }
    };
    let seed = getenv(b"SHIM_SAMPLE_SEED").and_then(parse_u64).map(|s| s | 1);
    if sample_only && mode != StackMode::Sample {
        // The sampled-only log is the sampled allocations' stacks: the sampler must run.
        if asked {
            w[4] =
                Some("shim: SHIM_RECORD=sample takes the stacks of sampled allocations; SHIM_STACKS=sample");
        }
        mode = StackMode::Sample;
    }
    if mode != StackMode::Off && windows {
        // Each window's log would need the stacks again; the default just stays out of the way.
        if asked {
            w[5] = Some("shim: SHIM_STACKS is not supported with capture windows; stacks off");
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
    use super::parse_duration;
    #[test]
    fn durations() {
        assert_eq!(parse_duration(b"60s"), Some(60_000_000_000));
        assert_eq!(parse_duration(b"2"), Some(2_000_000_000));
        assert_eq!(parse_duration(b"500ms"), Some(500_000_000));
        assert_eq!(parse_duration(b"1h"), Some(3_600_000_000_000));
        assert_eq!(parse_duration(b"250us"), Some(250_000));
        assert_eq!(parse_duration(b"s"), None);
        assert_eq!(parse_duration(b"5x"), None);
        assert_eq!(parse_duration(b""), None);
    }
    #[test]
    fn sizes() {
        use super::parse_size;
        assert_eq!(parse_size(b"20G"), Some(20 << 30));
        assert_eq!(parse_size(b"500MiB"), Some(500 << 20));
        assert_eq!(parse_size(b"4096"), Some(4096));
        assert_eq!(parse_size(b"1kB"), Some(1024));
        assert_eq!(parse_size(b"G"), None);
        assert_eq!(parse_size(b"5X"), None);
    }
}
