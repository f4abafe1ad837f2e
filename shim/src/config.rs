//! The environment variables, read once at start-up without allocating (the first malloc can
//! come before libc has set `environ`; then /proc/self/environ is read instead).
use shim_backend::Backend;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Timing {
    All,
    None,
    /// Time one call in N.
    Every(u32),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OnFull {
    Block,
    Drop,
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
    /// One line each, printed once initialisation is far enough to print.
    pub warnings: [Option<&'static str>; 6],
}

/// Default SHIM_TIMING: one call in 64 is timed (plus every call over 1 ms, found by the
/// recorder's watchdog), which keeps the recording cost within the benchmark's target.
pub const DEFAULT_TIMING: Timing = Timing::Every(64);
pub const DEFAULT_LOG: &str = "shim.%e.%p.shimlog";

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
    let mut w: [Option<&'static str>; 6] = [None; 6];
    let choice = match getenv(b"SHIM_BACKEND") {
        None => Choice::Unset,
        Some(v) if v.is_empty() => Choice::Unset,
        Some(v) if v.eq_ignore_ascii_case(b"own") => Choice::Own,
        Some(v) => match Backend::parse(v) {
            Some(b) => Choice::Switch(b),
            None => {
                w[0] = Some("shim: unknown SHIM_BACKEND (accepted: own, glibc, jemalloc, mimalloc); using the default");
                Choice::Unset
            }
        },
    };
    let backend = match choice {
        Choice::Switch(b) => b,
        _ => Backend::Glibc,
    };
    let trace = match getenv(b"SHIM_TRACE") {
        None | Some(b"1") | Some(b"on") | Some(b"yes") | Some(b"true") | Some(b"") => true,
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
        Some(v) => match parse_u32(v) {
            Some(n) if n > 1 => Timing::Every(n),
            _ => {
                w[2] = Some("shim: unknown SHIM_TIMING (accepted: all, none, or N to time one call in N); using 64");
                DEFAULT_TIMING
            }
        },
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
        Some(v) => match v.strip_prefix(b"-").map_or(parse_u32(v).map(|n| n as i64), |m| {
            parse_u32(m).map(|n| -(n as i64))
        }) {
            Some(n) if (1..=19).contains(&n) || (-7..=-1).contains(&n) => n as i32,
            _ => {
                w[5] = Some("shim: unknown SHIM_ZSTD_LEVEL (accepted: 1 to 19, or -1 to -7: faster, larger logs); using 1");
                1
            }
        },
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
        warnings: w,
    }
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
