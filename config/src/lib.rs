//! The shim's settings, one row each in [`SETTINGS`]: every `SHIM_*` environment variable
//! (and the allocators' own variables the shim honours), with its `shimlog record` flag, the
//! type of its value, its default, the values accepted, one line of `--help`, its line and
//! paragraph in docs/configuration.md, and the shim's line on stderr for a value it cannot
//! read. And [`BACKENDS`], the one list of the backends' names.
//!
//! Who reads it: the shim (`shim/src/config.rs`, at start-up, inside the first malloc: every
//! function here is `const` or allocation-free), `shimlog record` (its flags,
//! `shimlog/src/record/settings.rs`), `shimlog generate configuration` (docs/configuration.md,
//! checked by a test), the backend crate (its names in messages), the integration tests.
//!
//! Adding a setting: one row here, and the code that uses it (a field and its reading in
//! `shim/src/config.rs`). Nothing here allocates, and this crate depends on nothing.
#![no_std]

/// Text built at compile time from `&str` constants (which `concat!` cannot take): the
/// messages and docs cells that name every backend. Used through [`text!`].
pub struct Text<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Text<N> {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Text { buf: [0; N], len: 0 }
    }
    pub const fn push(mut self, s: &str) -> Self {
        let b = s.as_bytes();
        assert!(self.len + b.len() <= N, "Text: too long");
        let mut i = 0;
        while i < b.len() {
            self.buf[self.len + i] = b[i];
            i += 1;
        }
        self.len += b.len();
        self
    }
    /// `items` (but `skip`), each between `quote`s, `sep` between them.
    pub const fn list(mut self, items: &[&str], quote: &str, sep: &str, skip: &str) -> Self {
        let mut i = 0;
        let mut first = true;
        while i < items.len() {
            if !eq(items[i].as_bytes(), skip.as_bytes()) {
                if !first {
                    self = self.push(sep);
                }
                self = self.push(quote).push(items[i]).push(quote);
                first = false;
            }
            i += 1;
        }
        self
    }
    pub const fn as_str(&self) -> &str {
        match core::str::from_utf8(self.buf.split_at(self.len).0) {
            Ok(s) => s,
            Err(_) => panic!("Text: not UTF-8"),
        }
    }
}

/// A `&'static str` made at compile time: `text!(.push("a").list(&BACKENDS, "", ", ", ""))`.
#[macro_export]
macro_rules! text {
    ($($call:tt)*) => {{
        const T: &$crate::Text<512> = &$crate::Text::new()$($call)*;
        T.as_str()
    }};
}

/// Every backend `SHIM_BACKEND` names, in the order reports list them (`own`, the program's
/// own allocator, is not one: see the `SHIM_BACKEND` row). The backend crate's `Backend`
/// enum has one variant each (a test holds them equal).
pub const BACKENDS: [&str; 6] = ["glibc", "jemalloc", "mimalloc", "tcmalloc", "snmalloc", "rpmalloc"];

/// [`BACKENDS`], comma-separated: `glibc, jemalloc, ...`.
pub const BACKENDS_LIST: &str = text!(.list(&BACKENDS, "", ", ", ""));
/// [`BACKENDS`] less tcmalloc, the one a build can lack (Debian's static library absent at
/// build time), comma-separated.
pub const BACKENDS_LIST_NO_TCMALLOC: &str = text!(.list(&BACKENDS, "", ", ", "tcmalloc"));

const BACKEND_VALUES: &str = text!(.push("`own`, ").list(&BACKENDS, "`", ", ", "").push("; or `NAME:KEY=VALUE,...` ([settings.md](settings.md))"));
const BACKEND_UNKNOWN: &str = text!(.push("shim: unknown SHIM_BACKEND (accepted: own, ").push(BACKENDS_LIST).push("); using the default"));

/// What a setting's value may be.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// One of these words, each with its spellings: the first is the one the docs and
    /// `shimlog record` give, the others are accepted too (`on` for `1`).
    Words(&'static [&'static [&'static str]]),
    /// A backend of [`BACKENDS`] or `own`, with its settings if any
    /// (`jemalloc:dirty_decay_ms=0,...`; the backend crate's `settings` checks them).
    Backend,
    /// A number with a unit `ns`, `us`, `ms`, `s`, `m`, `h`, `d` (none: seconds): [`parse_duration`].
    Duration,
    /// A number with a unit `k`, `M`, `G`, `T` (powers of 1024), over 0: [`parse_size`].
    Size,
    /// A size (0 too), or `off`.
    SizeOrOff,
    /// An integer in one of these inclusive ranges: [`parse_int`].
    Int(&'static [(i64, i64)]),
    /// `all`, `none`, or N (time one call in N).
    Timing,
    /// An absolute path.
    AbsPath,
    /// Any text, taken as it is (SHIM_LOG's pattern, MALLOC_CONF).
    Text,
    /// Not read by the shim: an allocator's own variables, listed for the docs.
    Foreign,
}

/// One setting.
#[derive(Debug)]
pub struct Setting {
    /// The environment variable.
    pub var: &'static str,
    /// `shimlog record`'s flag (`--FLAG`), named after the variable (`SHIM_LOG_LIMIT` is
    /// `log-limit`); empty when `record` has none.
    pub flag: &'static str,
    /// The flag's value in `--help` (`DURATION`).
    pub value_name: &'static str,
    pub kind: Kind,
    /// The default, as docs/configuration.md says it (a value in backquotes, or words).
    pub default: &'static str,
    /// The values accepted, as docs/configuration.md says them.
    pub values: &'static str,
    /// The flag's one line of `shimlog record --help`.
    pub help: &'static str,
    /// The line of docs/configuration.md's table ("what it does").
    pub line: &'static str,
    /// The shim's line on stderr for a value it cannot read (empty: such a value is ignored
    /// without a word).
    pub warning: &'static str,
    /// The paragraph of docs/configuration.md's details.
    pub details: &'static str,
}

const ON_OFF: Kind = Kind::Words(&[&["1", "on"], &["0", "off"]]);

/// Every setting, in the order docs/configuration.md and `shimlog record --help` list them.
pub const SETTINGS: &[Setting] = &[
    Setting {
        var: "SHIM_BACKEND",
        flag: "backend",
        value_name: "NAME[:KEY=VALUE,...]",
        kind: Kind::Backend,
        default: "`own` if the program brings one, else `glibc`",
        values: BACKEND_VALUES,
        help: "The allocator that serves every call, with its settings if any (docs/settings.md; default: own where the program brings one, else glibc)",
        line: "The allocator that serves every call, and its settings",
        warning: BACKEND_UNKNOWN,
        details: "The allocator that serves every call, chosen before the first one. A backend may carry settings, `jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0`, `mimalloc:purge_delay=0`, `glibc:arena_max=2` ([settings.md](settings.md) lists each allocator's keys): they are applied before its first allocation and named in the log header (`backend_settings`); a setting the allocator does not know prints one line on stderr and it runs on its defaults. `own` keeps the allocator a program links in ([own-allocators.md](own-allocators.md)); a backend name switches even that one. An unknown value, or a backend this build lacks (tcmalloc without Debian's static library at build time), prints one line on stderr naming the ones accepted and runs on the default.",
    },
    Setting {
        var: "SHIM_TRACE",
        flag: "",
        value_name: "",
        kind: Kind::Words(&[&["1", "on", "yes", "true"], &["0", "off", "no", "false"]]),
        default: "`1`",
        values: "`1`, `0` (also `on`/`off`)",
        help: "",
        line: "0: forward only, an allocator switch with no recording and no log",
        warning: "shim: unknown SHIM_TRACE (accepted: 1, 0, on, off); recording",
        details: "`0` forwards only: an allocator switch with no recording and no log.",
    },
    Setting {
        var: "SHIM_LOG",
        flag: "",
        value_name: "",
        kind: Kind::Text,
        default: "`shim.%e.%p.shimlog` in the current directory",
        values: "a path; `%p` = pid, `%e` = the program's name as started (argv[0]'s file name: `redis-server`, not the `redis-check-rdb` it links to; the executable's when there is none), `%%` = `%`",
        help: "",
        line: "Where the log goes (`shimlog record`: `-o DIR`)",
        warning: "",
        details: "Where the log goes. Created with mode 0600, never through a symlink, never over an existing file (`.1`, `.2`, ... is appended instead). If it cannot be created or written, the program runs on without recording and the shim says so once.",
    },
    Setting {
        var: "SHIM_TIMING",
        flag: "timing",
        value_name: "all|none|N",
        kind: Kind::Timing,
        default: "`64`",
        values: "`all`, `none`, or `N` (time one call in N)",
        help: "Which calls carry their time inside the allocator (default: one in 64)",
        line: "Which calls carry their time inside the allocator",
        warning: "shim: unknown SHIM_TIMING (accepted: all, none, or N to time one call in N); using 64",
        details: "Which calls carry the time spent inside the allocator. Whatever the setting, a call that stays over ~1 ms inside the allocator is recorded with (a lower bound of) its time: the recorder thread's watchdog sees it.",
    },
    Setting {
        var: "SHIM_ON_FULL",
        flag: "on-full",
        value_name: "WHAT",
        kind: Kind::Words(&[&["block"], &["drop"]]),
        default: "`block`",
        values: "`block`, `drop`",
        help: "When the recorder falls behind: wait for a buffer, or drop the thread's events",
        line: "When the recorder falls behind: wait for a buffer, or drop the thread's events",
        warning: "shim: unknown SHIM_ON_FULL (accepted: block, drop); using block",
        details: "When the recorder falls behind: `block` makes the thread wait for a free buffer (the log is complete); `drop` discards the thread's buffer and records how many events were dropped, on which thread, and when.",
    },
    Setting {
        var: "SHIM_CLOCK",
        flag: "clock",
        value_name: "CLOCK",
        kind: Kind::Words(&[&["tsc"], &["monotonic"]]),
        default: "`tsc`",
        values: "`tsc`, `monotonic`",
        help: "The event clock",
        line: "The event clock",
        warning: "shim: unknown SHIM_CLOCK (accepted: tsc, monotonic); using tsc",
        details: "Event clock: the invariant TSC (falls back to CLOCK_MONOTONIC where there is none).",
    },
    Setting {
        var: "SHIM_ZSTD_LEVEL",
        flag: "zstd-level",
        value_name: "LEVEL",
        kind: Kind::Int(&[(1, 19), (-7, -1)]),
        default: "`1`",
        values: "`1` to `19`, or `-1` to `-7`",
        help: "zstd level of the log (default 1)",
        line: "zstd level of the log",
        warning: "shim: unknown SHIM_ZSTD_LEVEL (accepted: 1 to 19, or -1 to -7: faster, larger logs); using 1",
        details: "zstd level of the log. The records are varint-packed already, and at level 1 zstd gains only by Huffman-coding their bytes, a small ratio; the negative (fast) levels store them as they are: the recorder thread compresses several times faster, `shimlog stats` reads a little faster, and the log is somewhat larger. To measure it on your program, record it once at `-1` and once at `1` and compare the logs' sizes (`ls -l`) and `time shimlog stats LOG`; the compression speed alone: `zstd -b1` against `zstd -b --fast=1` on the raw records.",
    },
    Setting {
        var: "SHIM_WINDOW",
        flag: "window",
        value_name: "DURATION",
        kind: Kind::Duration,
        default: "until exit",
        values: "a duration: `500ms`, `60s`, `2m`, `1h`, `1d` (a bare number is seconds)",
        help: "Record for this long, then watch (turns capture windows on)",
        line: "Record for this long, then watch (turns capture windows on)",
        warning: "shim: unknown SHIM_WINDOW (a duration: 60s, 500ms, 2m, 1h); recording from start to exit",
        details: "Record for this long, then watch. Setting any of `SHIM_WINDOW`, `SHIM_START`, `SHIM_EVERY` turns windows on.",
    },
    Setting {
        var: "SHIM_START",
        flag: "start",
        value_name: "DURATION",
        kind: Kind::Duration,
        default: "`0`",
        values: "a duration",
        help: "Watch this long before the first window",
        line: "Watch this long before the first window",
        warning: "shim: unknown SHIM_START (a duration: 60s, 500ms, 2m, 1h); the first window starts at once",
        details: "Watch this long before the first window.",
    },
    Setting {
        var: "SHIM_EVERY",
        flag: "every",
        value_name: "DURATION",
        kind: Kind::Duration,
        default: "one window only",
        values: "a duration, longer than `SHIM_WINDOW`",
        help: "Open a window this often",
        line: "Open a window this often",
        warning: "shim: unknown SHIM_EVERY (a duration: 60s, 500ms, 2m, 1h); one window only",
        details: "Open a window this often (counted from the first's start).",
    },
    Setting {
        var: "SHIM_STALL",
        flag: "stall",
        value_name: "DURATION",
        kind: Kind::Duration,
        default: "`1ms`",
        values: "a duration",
        help: "A call inside the allocator for longer is a stall (default 1ms)",
        line: "A call inside the allocator for longer is a stall",
        warning: "shim: unknown SHIM_STALL (a duration: 1ms, 500us); using 1ms",
        details: "A call that stays longer inside the allocator is a stall in the watch log (seen by the recorder's watchdog, which looks every 500 µs while the program calls the allocator: [recording.md](recording.md), \"The recorder's pace\").",
    },
    Setting {
        var: "SHIM_LOG_LIMIT",
        flag: "log-limit",
        value_name: "SIZE",
        kind: Kind::Size,
        default: "none",
        values: "a size: `500M`, `20G` (powers of 1024)",
        help: "The most bytes all of a process's logs may take (500M, 20G)",
        line: "The most bytes all of a process's logs may take (500M, 20G)",
        warning: "shim: unknown SHIM_LOG_LIMIT (a size: 500M, 20G, 1T); no limit",
        details: "The most bytes all of the process's logs may take together (exceeded by at most one frame, about 64 KiB). Turns windows on: without `SHIM_WINDOW` one window from start to exit.",
    },
    Setting {
        var: "SHIM_LOG_FULL",
        flag: "log-full",
        value_name: "WHAT",
        kind: Kind::Words(&[&["stop"], &["rotate"]]),
        default: "`stop`",
        values: "`stop`, `rotate`",
        help: "At the limit: stop recording, or delete the oldest window's log",
        line: "At the limit: stop recording, or delete the oldest window's log",
        warning: "shim: unknown SHIM_LOG_FULL (accepted: stop, rotate); using stop",
        details: "At the limit: `stop` closes the window, opens no other and stops the watch log's samples; `rotate` deletes the oldest window's log (closing the open window when no other is left). The watch log says which.",
    },
    Setting {
        var: "SHIM_CONTROL",
        flag: "control",
        value_name: "1|0",
        kind: ON_OFF,
        default: "`0`",
        values: "`1`, `0`",
        help: "1: a control socket for `shimlog ctl PID`",
        line: "1: a control socket for `shimlog ctl PID`",
        warning: "shim: unknown SHIM_CONTROL (accepted: 1, 0); no control socket",
        details: "`1` opens a control socket for `shimlog ctl`: `$TMPDIR` (or `/tmp`) `/shim-UID/ctl.PID`, the directory mode 0700 and checked to be the user's own, the socket 0600, each client's user checked (SO_PEERCRED: the process's own user, or root). Turns windows on: without `SHIM_WINDOW` one window from start to exit.",
    },
    Setting {
        var: "SHIM_SIGNAL",
        flag: "signal",
        value_name: "SIGNAL",
        kind: Kind::Words(&[&["USR2", "SIGUSR2", "usr2"], &["USR1", "SIGUSR1", "usr1"]]),
        default: "none",
        values: "`USR2`, `USR1`",
        help: "Each delivery of this signal opens or closes a window",
        line: "Each delivery of this signal opens or closes a window",
        warning: "shim: unknown SHIM_SIGNAL (accepted: USR2, USR1); no signal",
        details: "Each delivery of that signal toggles a window: opens one (for `SHIM_WINDOW`, or until the next signal) or closes the open one. The program's own handler of that signal is replaced. Turns windows on.",
    },
    Setting {
        var: "SHIM_STACKS",
        flag: "stacks",
        value_name: "WHICH",
        kind: Kind::Words(&[&["off", "0"], &["slow"], &["sample"], &["all"]]),
        default: "`slow`",
        values: "`off`, `slow`, `sample`, `all`",
        help: "Which calls record their call stack (default slow)",
        line: "Which calls record their call stack",
        warning: "shim: unknown SHIM_STACKS (off, slow, sample, all); using slow",
        details: "Call stacks. `slow`: a call that stays inside the allocator over `SHIM_STALL` records its stack, taken after it returns. `sample`: also allocations sampled by bytes (mean `SHIM_SAMPLE_BYTES`), as tcmalloc's and jemalloc's heap profiles do. `all`: every allocation (heaptrack's cost: for short debug runs). Not with capture windows: stacks are then off (one line on stderr if `SHIM_STACKS` was set).",
    },
    Setting {
        var: "SHIM_RECORD",
        flag: "record",
        value_name: "WHAT",
        kind: Kind::Words(&[&["all"], &["sample"]]),
        default: "`all`",
        values: "`all`, `sample`",
        help: "sample: only the sampled allocations and the slow calls (the always-on heap profile)",
        line: "sample: only the sampled allocations and the slow calls (the always-on heap profile)",
        warning: "shim: unknown SHIM_RECORD (accepted: all, sample); recording all",
        details: "`sample`: the always-on heap profile. No full event log: only the allocations the byte sampler takes (mean `SHIM_SAMPLE_BYTES`, with their stacks), their frees, and the calls that stay in the allocator over `SHIM_STALL` (with their stacks), plus the RSS each 100 ms. Not with capture windows (or a limit, control socket or signal, which turn them on): every call is then recorded in the windows, with one line on stderr. Below.",
    },
    Setting {
        var: "SHIM_SAMPLE_BYTES",
        flag: "sample-bytes",
        value_name: "SIZE",
        kind: Kind::Size,
        default: "`512k`",
        values: "a size: `512k`, `4M`",
        help: "Mean distance in requested bytes between sampled allocations (default 512k)",
        line: "Mean distance in requested bytes between sampled allocations",
        warning: "shim: unknown SHIM_SAMPLE_BYTES (a size over 0: 512k, 4M); using 512k",
        details: "The mean distance in requested bytes between sampled allocations; an allocation at least this large is always sampled.",
    },
    Setting {
        var: "SHIM_STACK_DEPTH",
        flag: "stack-depth",
        value_name: "N",
        kind: Kind::Int(&[(1, 256)]),
        default: "`64`",
        values: "`1` to `256`",
        help: "Frames kept per stack (default 64)",
        line: "Frames kept per stack",
        warning: "shim: unknown SHIM_STACK_DEPTH (1 to 256); using 64",
        details: "Frames kept per stack, innermost first.",
    },
    Setting {
        var: "SHIM_UNWIND",
        flag: "unwind",
        value_name: "HOW",
        kind: Kind::Words(&[&["tables"], &["fp"]]),
        default: "`tables`",
        values: "`tables`, `fp`",
        help: "Unwind with the .eh_frame tables or frame pointers",
        line: "Unwind with the .eh_frame tables or frame pointers",
        warning: "shim: unknown SHIM_UNWIND (tables, fp); using tables",
        details: "How stacks are unwound: `tables` reads each object's `.eh_frame` unwind tables (libgcc's unwinder, which C++ exceptions use; correct for any code that has them, which Debian's libraries and Rust's and C's default builds do); `fp` follows frame pointers (faster, for programs built with `-fno-omit-frame-pointer` / `-C force-frame-pointers=yes`; a frame without one ends the stack).",
    },
    Setting {
        var: "SHIM_SAMPLE_SEED",
        flag: "sample-seed",
        value_name: "N",
        kind: Kind::Int(&[(0, i64::MAX)]),
        default: "from the clock",
        values: "a number",
        help: "Seeds the sampler, for repeatable runs",
        line: "Seeds the sampler, for repeatable runs",
        warning: "",
        details: "Seeds the sampler (with each thread's id), for repeatable tests.",
    },
    Setting {
        var: "SHIM_PACK",
        flag: "pack",
        value_name: "HOW",
        kind: Kind::Words(&[&["auto"], &["columns"], &["rows"]]),
        default: "`auto`",
        values: "`auto`, `columns`, `rows`",
        help: "How the recorder packs a buffer before zstd",
        line: "How the recorder packs a buffer before zstd",
        warning: "shim: unknown SHIM_PACK (accepted: auto, columns, rows); using auto",
        details: "How the recorder packs a buffer before zstd: `columns` by column with predicted pointers, a smaller log for up to a few times the recorder thread's CPU per event (both, by workload: BENCHMARKS.md, section \"Columnar frames (format version 5)\"); `rows` as recorded; `auto` columns while the CPUs the process may run on have half a core idle, rows while they have less than a quarter or the process's cgroup is at its CPU quota ([recording.md](recording.md)).",
    },
    Setting {
        var: "SHIM_CRASH_SAFE",
        flag: "crash-safe",
        value_name: "1|0",
        kind: ON_OFF,
        default: "`1`",
        values: "`1`, `0`",
        help: "1: the threads' buffers in an in-flight file, recoverable after a crash (default)",
        line: "1: the threads' buffers in an in-flight file, recoverable after a crash",
        warning: "shim: unknown SHIM_CRASH_SAFE (accepted: 1, 0); using 1",
        details: "`1` keeps the threads' buffers in an in-flight file on tmpfs (nothing is lost when the process dies); `0` keeps them on the heap, where a crash or SIGKILL loses what was not yet written. If the file cannot be made, the buffers go on the heap and the shim says so in one line.",
    },
    Setting {
        var: "SHIM_INFLIGHT_MAX",
        flag: "inflight-max",
        value_name: "SIZE|off",
        kind: Kind::SizeOrOff,
        default: "`64M`",
        values: "a size: `64M`, `512k`, `1G`, `0`; or `off`",
        help: "The most bytes dead processes' in-flight files may take before the oldest are recovered (default 64M)",
        line: "The most bytes dead processes' in-flight files may take before the oldest are recovered",
        warning: "shim: unknown SHIM_INFLIGHT_MAX (a size: 64M, 512k, 1G, 0; or off); using 64M",
        details: "The most bytes (of tmpfs, i.e. RAM) dead processes' in-flight files may take in the user's in-flight directory: past it, a process that starts recovers (or removes) the oldest first, beyond the 8 it does anyway; and a process that starts while the directory holds so many files that the smallest dead ones would fill half of it recovers the 4 oldest at once, which keeps a crash loop of processes that live a millisecond under it ([canaries.md](canaries.md), \"The in-flight directory's life cycle\"). `off`: this process leaves other processes' files alone. An unreadable value prints one line naming what is accepted and uses `64M`.",
    },
    Setting {
        var: "SHIM_INFLIGHT_DIR",
        flag: "inflight-dir",
        value_name: "DIR",
        kind: Kind::AbsPath,
        default: "`/dev/shm`",
        values: "an absolute path, on tmpfs",
        help: "Where the user's in-flight directory shim-UID is made (default /dev/shm)",
        line: "Where the user's in-flight directory shim-UID is made",
        warning: "shim: unknown SHIM_INFLIGHT_DIR (an absolute path, on tmpfs); using /dev/shm",
        details: "Where the user's in-flight directory `shim-UID` is made (and where `shimlog recover --all` looks). Not a tmpfs: the in-flight file goes beside the log. For tests and sandboxes that must not touch the user's own files.",
    },
    Setting {
        var: "MALLOC_CONF",
        flag: "",
        value_name: "",
        kind: Kind::Text,
        default: "",
        values: "jemalloc options",
        help: "",
        line: "jemalloc's own options, honoured by the jemalloc backend",
        warning: "",
        details: "Honoured by `SHIM_BACKEND=jemalloc` as by any jemalloc (do not enable `background_thread`); settings in `SHIM_BACKEND` come after it.",
    },
    Setting {
        var: "MIMALLOC_*",
        flag: "",
        value_name: "",
        kind: Kind::Foreign,
        default: "",
        values: "mimalloc options",
        help: "",
        line: "mimalloc's own options, honoured by the mimalloc backend",
        warning: "",
        details: "Honoured by `SHIM_BACKEND=mimalloc`.",
    },
];

/// The row of `var` (at compile time: `const ROW: &Setting = setting("SHIM_STALL");` fails
/// to build when there is none).
pub const fn setting(var: &str) -> &'static Setting {
    let mut i = 0;
    while i < SETTINGS.len() {
        if eq(SETTINGS[i].var.as_bytes(), var.as_bytes()) {
            return &SETTINGS[i];
        }
        i += 1;
    }
    panic!("no such setting in shim-config's table")
}

impl Setting {
    /// The word `v` spells ([`Kind::Words`]), as the first spelling of its entry.
    pub const fn word(&self, v: &[u8]) -> Option<&'static str> {
        let Kind::Words(words) = self.kind else { return None };
        let mut i = 0;
        while i < words.len() {
            let mut j = 0;
            while j < words[i].len() {
                if eq(words[i][j].as_bytes(), v) {
                    return Some(words[i][0]);
                }
                j += 1;
            }
            i += 1;
        }
        None
    }

    /// The default as a value: the first text in backquotes of [`Setting::default`] (`64M`;
    /// `shim.%e.%p.shimlog` of "`shim.%e.%p.shimlog` in the current directory").
    pub const fn default_value(&self) -> &'static [u8] {
        let mut d = self.default.as_bytes();
        while let [c, rest @ ..] = d {
            d = rest;
            if *c == b'`' {
                break;
            }
        }
        let mut n = 0;
        while n < d.len() && d[n] != b'`' {
            n += 1;
        }
        assert!(n < d.len(), "this setting's default has no value in backquotes");
        d.split_at(n).0
    }

    /// The largest value of an [`Kind::Int`] setting.
    pub const fn max(&self) -> i64 {
        let Kind::Int(ranges) = self.kind else { panic!("not an integer setting") };
        let mut m = i64::MIN;
        let mut i = 0;
        while i < ranges.len() {
            if ranges[i].1 > m {
                m = ranges[i].1;
            }
            i += 1;
        }
        m
    }
}

const fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The number of leading ASCII digits.
const fn digits(s: &[u8]) -> usize {
    let mut n = 0;
    while n < s.len() && s[n].is_ascii_digit() {
        n += 1;
    }
    n
}

/// Up to `max` digits and nothing else, as a number.
const fn number(s: &[u8], max: usize) -> Option<u64> {
    if s.is_empty() || s.len() > max || digits(s) != s.len() {
        return None;
    }
    let mut n = 0u64;
    let mut i = 0;
    while i < s.len() {
        n = n * 10 + (s[i] - b'0') as u64;
        i += 1;
    }
    Some(n)
}

/// Up to 9 digits (an u32).
pub const fn parse_u32(s: &[u8]) -> Option<u32> {
    match number(s, 9) {
        Some(n) => Some(n as u32),
        None => None,
    }
}

/// Up to 18 digits.
pub const fn parse_u64(s: &[u8]) -> Option<u64> {
    number(s, 18)
}

/// An integer, `-` before it if negative, in one of `ranges` (inclusive).
pub const fn parse_int(s: &[u8], ranges: &[(i64, i64)]) -> Option<i64> {
    let n = match s {
        [b'-', rest @ ..] => match number(rest, 18) {
            Some(n) => -(n as i64),
            None => return None,
        },
        _ => match number(s, 18) {
            Some(n) => n as i64,
            None => return None,
        },
    };
    let mut i = 0;
    while i < ranges.len() {
        if ranges[i].0 <= n && n <= ranges[i].1 {
            return Some(n);
        }
        i += 1;
    }
    None
}

/// A size: a number with an optional unit `k`, `M`, `G`, `T` (powers of 1024, an optional
/// `B` or `iB` after it).
pub const fn parse_size(s: &[u8]) -> Option<u64> {
    let d = digits(s);
    if d == 0 || d > 15 {
        return None;
    }
    let (num, unit) = s.split_at(d);
    let unit = match unit {
        [u @ .., b'i', b'B'] | [u @ .., b'B'] => u,
        u => u,
    };
    let shift = match unit {
        b"" => 0,
        b"k" | b"K" => 10,
        b"m" | b"M" => 20,
        b"g" | b"G" => 30,
        b"t" | b"T" => 40,
        _ => return None,
    };
    match number(num, 15) {
        Some(n) => n.checked_mul(1u64 << shift),
        None => None,
    }
}

/// A duration in ns: a number with a unit `ns`, `us`, `ms`, `s`, `m`, `h`, `d` (none: seconds).
pub const fn parse_duration(s: &[u8]) -> Option<u64> {
    let (num, unit) = s.split_at(digits(s));
    let n = match parse_u32(num) {
        Some(n) => n as u64,
        None => return None,
    };
    let unit: u64 = match unit {
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

#[cfg(test)]
mod tests;
