//! Start-up, on the first call whichever thread makes it (which can come before the
//! constructor): the settings (config.rs), the backend (and a program's allocator library,
//! patched or kept: patch/), the call stacks' setup, and the log with its header when there
//! is one to write; then the recording state's first transition (state.rs).
use crate::config;
use crate::shared::{self, say, Globals, G, TPS_BITS};
use crate::state;
use crate::thread::tls;
use core::sync::atomic::{AtomicU8, Ordering::*};
use recorder::clock;
use recorder::ownfd::OwnFd;
use recorder::transport::Pool;
use shim_backend::{self as be, Backend};

const UNINIT: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;
static INIT: AtomicU8 = AtomicU8::new(UNINIT);
/// SHIM_BACKEND as read at start-up (config::Choice, encoded), for the constructor.
static CHOICE: AtomicU8 = AtomicU8::new(0);

pub fn choice() -> config::Choice {
    match CHOICE.load(Relaxed) {
        0 => config::Choice::Unset,
        1 => config::Choice::Own,
        v => config::Choice::Switch(Backend::ALL.get((v - 2) as usize).copied().unwrap_or(Backend::Glibc)),
    }
}

/// SHIM_BACKEND's settings (NAME:KEY=VALUE,...) and MALLOC_CONF, handed to the chosen
/// backend before its first allocation. Refused settings: one line, and the backend runs on
/// its defaults (MALLOC_CONF still applies). Allocates nothing.
fn apply_settings(cfg: &config::Config) {
    use shim_backend::settings::{self, Context};
    let on = matches!(cfg.choice, config::Choice::Switch(_));
    let set = cfg.backend_settings.filter(|s| !s.is_empty());
    let mut ok = false;
    match set {
        Some(s) if on => match settings::apply(cfg.backend, s, cfg.malloc_conf, Context::Shim) {
            Ok(()) => {
                settings::set_applied(s);
                ok = true;
            }
            Err(e) => {
                // Longer than say's lines: the list of the keys the allocator knows.
                let mut buf = [0u8; 1536];
                let mut w = Cursor { buf: &mut buf[..1535], n: 0 };
                let _ = core::fmt::write(&mut w, format_args!("shim: SHIM_BACKEND: {e}; running {} on its defaults", cfg.backend.name()));
                let n = w.n;
                buf[n] = b'\n';
                unsafe { libc::write(2, buf.as_ptr() as *const libc::c_void, n + 1) };
            }
        },
        // An unknown name was said already (config's warning).
        Some(_) if cfg.choice == config::Choice::Own => say("shim: SHIM_BACKEND: own takes no settings (they go with a backend: jemalloc:KEY=VALUE,...); ignored"),
        Some(_) => {}
        None => {}
    }
    if cfg.backend == Backend::Jemalloc && !ok {
        if let Some(conf) = cfg.malloc_conf {
            // The prefixed jemalloc reads _RJEM_MALLOC_CONF; users set MALLOC_CONF. The value
            // points into the environment, NUL-terminated, and is read once at jemalloc's init.
            settings::set_malloc_conf(conf);
        }
    }
}

/// A `core::fmt::Write` into a fixed buffer (what does not fit is cut).
struct Cursor<'a> {
    buf: &'a mut [u8],
    n: usize,
}
impl core::fmt::Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.buf.len() - self.n;
        let mut k = s.len().min(room);
        while !s.is_char_boundary(k) {
            k -= 1;
        }
        self.buf[self.n..self.n + k].copy_from_slice(&s.as_bytes()[..k]);
        self.n += k;
        Ok(())
    }
}

/// Initialises on the first call, whichever thread makes it; the caller has `busy` set so
/// that allocations made here pass straight through.
pub fn ensure_init() {
    if INIT.load(Acquire) == DONE {
        return;
    }
    if INIT.compare_exchange(UNINIT, RUNNING, AcqRel, Acquire).is_ok() {
        init();
        if state::get() == state::UNINIT {
            state::init_off();
        }
        INIT.store(DONE, Release);
    } else {
        while INIT.load(Acquire) != DONE {
            core::hint::spin_loop();
        }
    }
}

/// For entry points that forward without recording (malloc_usable_size).
pub fn ensure_init_untraced() {
    if INIT.load(Acquire) != DONE {
        let t = tls::get();
        t.busy += 1;
        ensure_init();
        t.busy -= 1;
    }
}

/// The program's name for the log's `%e`: the name it was started with (argv[0], as
/// shimlog names it: `redis-server`, a symlink to redis-check-rdb), else the executable
/// /proc/self/exe resolves to.
fn exe_path() -> String {
    let started = std::fs::read("/proc/self/cmdline").ok().and_then(|b| {
        let a = b.split(|&c| c == 0).next()?;
        let name = a.rsplit(|&c| c == b'/').next()?;
        (!name.is_empty()).then(|| String::from_utf8_lossy(a).into_owned())
    });
    started.unwrap_or_else(|| {
        std::fs::read_link("/proc/self/exe").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default()
    })
}

fn init() {
    let cfg = config::read();
    crate::patch::early(cfg.choice);
    CHOICE.store(
        match cfg.choice {
            config::Choice::Unset => 0,
            config::Choice::Own => 1,
            config::Choice::Switch(b) => 2 + b as u8,
        },
        Relaxed,
    );
    apply_settings(&cfg);
    let backend = select(&cfg);
    shared::set_page_size();
    for w in cfg.warnings.iter().flatten() {
        say(w);
    }
    if !cfg.trace {
        return;
    }
    if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 {
        return; // setuid/setgid: forward only, write nothing.
    }
    clock::init(cfg.monotonic_clock);
    let p0 = clock::pair();
    let start_unix_ns = clock::unix_ns();
    let pattern = cfg.log.map(|v| String::from_utf8_lossy(v).into_owned());
    let window = cfg.windows.map(|_| 0);
    let Some((fd, log_path)) = open_log(pattern.as_deref(), window) else { return };
    unsafe {
        libc::syscall(libc::SYS_membarrier, 16 /* REGISTER_PRIVATE_EXPEDITED */, 0, 0);
    }
    crate::thread::init_exit_key();
    let inflight_base = String::from_utf8_lossy(cfg.inflight_base).into_owned();
    let g = Box::new(Globals {
        pool: new_pool(&log_path, cfg.crash_safe, &inflight_base, p0),
        inflight_base,
        inflight_max: cfg.inflight_max,
        timing_period: cfg.timing.period(),
        timing: cfg.timing,
        on_full: cfg.on_full,
        backend,
        zstd_level: cfg.zstd_level,
        fd: std::sync::Arc::new(fd),
        log_path,
        header_reserved: 0,
        log_pattern: pattern,
        p0,
        start_unix_ns,
        forked: false,
        ppid: unsafe { libc::getppid() } as u32,
        pid: unsafe { libc::getpid() } as u32,
        windows: cfg.windows,
        stall_ns: cfg.stall_ns,
        log_limit: cfg.log_limit,
        rotate: cfg.rotate,
        control: cfg.control,
        crash_safe: cfg.crash_safe,
        sample_only: cfg.sample_only,
        pack: cfg.pack,
        parent_log: None,
        fork_ticks: None,
    });
    crate::stacks::setup(&cfg.stacks);
    let Some(g) = with_header(g) else { return };
    if cfg.signal != 0 {
        // SHIM_SIGNAL: the program's own handler of that signal, if it had one, is replaced
        // (the user asked for it); SA_RESTART keeps its system calls going.
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = shared::on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(cfg.signal, &sa, core::ptr::null_mut());
        }
    }
    let watching = g.windows.is_some();
    let g_sample_only = g.sample_only;
    G.set(g);
    if watching {
        state::start_watching();
    } else {
        state::start_recording(g_sample_only);
    }
}

/// Selects what serves the shim's exported malloc family, before the first allocation. A
/// program that brings its allocator, linked in (Debian's redis-server with libjemalloc.so.2)
/// or defined by its executable (Firefox's mozjemalloc, a static jemalloc), has it settled
/// here, all of it at once: kept (`own`, the default), its entry points recorded in place and
/// each standard name the shim exports forwarded to the program's (libc's own calls, strdup or
/// realpath, allocate there: what the shim's names take back must go there too); or switched,
/// its entry points patched to the backend. What cannot be switched runs on the program's
/// allocator, said in one line: never two allocators behind one heap.
fn select(cfg: &config::Config) -> Backend {
    let ahead = be::own::ahead_malloc();
    let Some(lib) = ahead.or_else(be::own::next_malloc) else {
        be::select(cfg.backend);
        return cfg.backend;
    };
    let installed = crate::patch::install(cfg.choice, cfg.trace);
    if let config::Choice::Switch(b) = cfg.choice {
        if installed.switched == Some(b) {
            be::select(b);
            return b;
        }
        // One cause, one line: patching said already why it left the allocator alone.
        if !installed.said {
            let file = be::own::file_of(lib).map(|f| f.to_string_lossy()).unwrap_or_default();
            say(&format!(
                "shim: {file} serves the program's malloc and cannot be switched to {}; it runs on its own allocator",
                b.name()
            ));
        }
    }
    let kept = if ahead.is_some() { be::select_executable_own() } else { be::select_own() };
    if kept {
        return Backend::Own;
    }
    // A library that defines malloc but not calloc, realloc or free: no allocator.
    be::select(Backend::Glibc);
    Backend::Glibc
}

/// Rewrites the header in place, with what is known now (the program's own allocators).
pub fn rewrite_header() {
    let g = G.get();
    let tps = f64::from_bits(TPS_BITS.load(Relaxed));
    let h = crate::header::build(g, tps);
    if let Err(e) = g.fd.with(|fd| recorder::writer::rewrite_header(fd, &h, g.header_reserved)) {
        say(&format!("shim: cannot rewrite the header of {}: {e}", g.log_path));
    }
}

/// Writes the header of a new log (provisional clock rate until the recorder calibrates).
/// None, with one line on stderr, when the write fails.
pub fn with_header(mut g: Box<Globals>) -> Option<Box<Globals>> {
    let tps = f64::from_bits(TPS_BITS.load(Relaxed));
    match recorder::writer::write_header(&g.fd, &crate::header::build(&g, tps)) {
        Ok(r) => {
            g.header_reserved = r;
            Some(g)
        }
        Err(e) => {
            say(&format!("shim: cannot write log {}: {e}; the program runs without recording", g.log_path));
            None
        }
    }
}

/// The pool of the log at `log_path`: its buffers in the in-flight file (under `inflight_base`, or beside it; with
/// `crash_safe`; on the heap when the file cannot be made, said in one line).
pub fn new_pool(log_path: &str, crash_safe: bool, inflight_base: &str, p0: clock::Pair) -> Pool {
    let slots = if crash_safe {
        let pid = unsafe { libc::getpid() } as u32;
        let path = recorder::inflight::place(inflight_base, log_path, pid, clock::unix_ns());
        match recorder::inflight::Inflight::create(&path, log_path, p0.ticks, p0.mono_ns) {
            Ok(f) => Some(f),
            Err(e) => {
                say(&format!(
                    "shim: cannot create {path}: {e}; buffers on the heap (a crash loses what was not yet written)"
                ));
                None
            }
        }
    } else {
        None
    };
    // Up to 64 shared buffers of 64 KiB, one more per thread beyond that. On the heap, 16
    // made now; in the in-flight file the two a one-thread process fills (its thread's, the
    // recorder's own), the rest as threads need them: each slot takes its tmpfs when made,
    // so a process that dies young leaves its header and those two, not sixteen
    // (docs/canaries.md, "The in-flight directory's life cycle"). Made now, the first
    // thread's does not wait for the descriptor's lock, which the recorder holds while it
    // writes (recorder::ownfd).
    let prealloc = if slots.is_some() { 2 } else { 16 };
    Pool::new(8192, 64, prealloc, slots)
}

/// Creates the log named by SHIM_LOG (or the default); None, with one line on stderr, when
/// it cannot be created.
/// With capture windows, `window` is the window's number (0: the watch log).
pub fn open_log(pattern: Option<&str>, window: Option<u32>) -> Option<(OwnFd, String)> {
    let exe = exe_path();
    let name = exe.rsplit('/').next().unwrap_or("unknown");
    let pid = unsafe { libc::getpid() } as u32;
    let pattern = pattern.unwrap_or(config::DEFAULT_LOG);
    let pattern = match window {
        Some(n) => recorder::writer::window_pattern(pattern, n),
        // Without windows the one log is window 1.
        None if pattern.replace("%%", "").contains("%n") => recorder::writer::window_pattern(pattern, 1),
        None => pattern.to_string(),
    };
    let path = recorder::writer::expand_pattern(&pattern, pid, name);
    match recorder::writer::create_log(&path) {
        Ok(x) => Some(x),
        Err(e) => {
            say(&format!("shim: cannot create log {path}: {e}; the program runs without recording"));
            None
        }
    }
}
