//! Programs that bring their own allocator (issue #18): the shim patches the allocator's entry
//! points in the executable at start-up, so that every call is recorded. With SHIM_BACKEND
//! unset ("own" below) the program keeps its allocator; with glibc, jemalloc or mimalloc its
//! entry points are switched to that backend.
//!
//! The programs (`make ownalloc` builds them into target/ownalloc/bin):
//! - validator-je / validator-rjem / validator-mi (workloads/validator): Rust, worker threads
//!   and channels, tikv-jemallocator unprefixed (malloc, mallocx, sdallocx, ... defined in the
//!   executable) or prefixed (_rjem_*, .symtab only), or the mimalloc crate (mi_*), behind a
//!   counting GlobalAlloc that prints its counts;
//! - c_static_jemalloc, c_je_prefix (jemalloc's API renamed je_*, as Valkey builds it),
//!   cxx_static_tcmalloc (itest/programs/ownalloc): C and C++ programs that call their allocator's
//!   whole API and count each call;
//! - c_static_jemalloc_ctor, cxx_static_tcmalloc_ctor: the same, linked with libctorblock.so,
//!   whose constructor allocated two blocks with the program's allocator before the shim's
//!   constructor ran; main grows one and frees both, under every SHIM_BACKEND;
//! - validator-rjem-stripped (its allocator's symbols are gone) and unpatchable (its `free` is
//!   one `ret`, too short to patch): the shim says so in one stderr line and changes nothing;
//! - itest/programs/c/exe_defines_malloc.c: a bump allocator in the executable, recorded.
//!
//! What is checked, for each program and mode: exit 0 and the output of the run without the
//! shim; no line on stderr; the header's own_allocators names the allocator and the mode
//! ("recorded" in own mode, "switched" otherwise); and the log holds exactly the calls the
//! program counted: allocations (every op that returns a new block), frees (free and
//! free_sized), reallocs, and the free_sized among the frees. The C library and the language
//! runtime allocate on their own too (before main, at thread start, for stdio), reaching the
//! same allocator uncounted: so the program runs twice, with N iterations and with 0, and the
//! difference between the two logs must equal the difference between the two counts. Then
//! `shimlog replay` of the own-mode log must succeed on every backend.
use itest::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// (name in the test, SHIM_BACKEND): None leaves it unset.
const MODES: [(&str, Option<&str>); 4] =
    [("own", None), ("glibc", Some("glibc")), ("jemalloc", Some("jemalloc")), ("mimalloc", Some("mimalloc"))];

/// Calls of each class, as a program counted them or as a log holds them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Classes {
    /// Calls that return a new block: malloc, calloc, posix_memalign, aligned_alloc,
    /// memalign, valloc, pvalloc (and whatever the allocator's API calls them).
    allocs: i64,
    /// free and free_sized.
    frees: i64,
    /// free_sized alone (sdallocx, sized operator delete, Rust's dealloc through jemalloc).
    free_sized: i64,
    /// realloc and reallocarray (rallocx).
    reallocs: i64,
}

impl std::ops::Sub for Classes {
    type Output = Classes;
    fn sub(self, o: Classes) -> Classes {
        Classes {
            allocs: self.allocs - o.allocs,
            frees: self.frees - o.frees,
            free_sized: self.free_sized - o.free_sized,
            reallocs: self.reallocs - o.reallocs,
        }
    }
}

const ALLOC_OPS: [&str; 7] =
    ["malloc", "calloc", "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc"];

fn log_classes(a: &Analysis) -> Classes {
    let c = |op: &str| a.count(op) as i64;
    Classes {
        allocs: ALLOC_OPS.iter().map(|op| c(op)).sum(),
        frees: c("free") + c("free_sized"),
        free_sized: c("free_sized"),
        reallocs: c("realloc") + c("reallocarray"),
    }
}

/// How a program reports its counts (the last line of its stdout, JSON).
#[derive(Clone, Copy, Debug)]
enum Counts {
    /// workloads/validator: {"alloc","alloc_zeroed","realloc","dealloc"}; `sized`: its
    /// allocator frees with the size (tikv-jemallocator's sdallocx), else with free (mi_free).
    Validator { sized: bool },
    /// itest/programs/ownalloc: {"allocs","frees","reallocs","free_sized",...}.
    Own,
}

fn last_json(out: &Output) -> Value {
    let text = out.stdout_str();
    let line = text.lines().last().unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|e| {
        panic!("the last stdout line is not JSON ({e}): {line:?}\nstdout:\n{text}\nstderr:\n{}", out.stderr)
    })
}

fn program_classes(kind: Counts, out: &Output) -> Classes {
    let j = last_json(out);
    let n = |k: &str| j[k].as_i64().unwrap_or_else(|| panic!("no count {k:?} in the program's output: {j}"));
    match kind {
        Counts::Validator { sized } => Classes {
            allocs: n("alloc") + n("alloc_zeroed"),
            frees: n("dealloc"),
            free_sized: if sized { n("dealloc") } else { 0 },
            reallocs: n("realloc"),
        },
        Counts::Own => Classes {
            allocs: n("allocs"),
            frees: n("frees"),
            free_sized: n("free_sized"),
            reallocs: n("reallocs"),
        },
    }
}

/// The part of the output that must not change under the shim: all of it for the C programs,
/// the checksum line for the validator (its counts depend on the threads' timing).
fn comparable(kind: Counts, out: &Output) -> String {
    let s = out.stdout_str();
    match kind {
        Counts::Validator { .. } => s.lines().next().unwrap_or("").to_string(),
        Counts::Own => s,
    }
}

struct Prog {
    bin: &'static str,
    /// own_allocators[].family and (when known) prefix.
    family: &'static str,
    prefixes: &'static [&'static str],
    args: &'static [&'static str],
    zero: &'static [&'static str],
    kind: Counts,
}

const VALIDATOR_ARGS: &[&str] = &["300", "3"];
const VALIDATOR_ZERO: &[&str] = &["0", "3"];
const C_ARGS: &[&str] = &["200"];
const C_ZERO: &[&str] = &["0"];

const VALIDATOR_JE: Prog = Prog {
    bin: "validator-je",
    family: "jemalloc",
    prefixes: &[""],
    args: VALIDATOR_ARGS,
    zero: VALIDATOR_ZERO,
    kind: Counts::Validator { sized: true },
};
const VALIDATOR_RJEM: Prog = Prog {
    bin: "validator-rjem",
    family: "jemalloc",
    prefixes: &["_rjem_"],
    args: VALIDATOR_ARGS,
    zero: VALIDATOR_ZERO,
    kind: Counts::Validator { sized: true },
};
const VALIDATOR_MI: Prog = Prog {
    bin: "validator-mi",
    family: "mimalloc",
    prefixes: &["mi_"],
    args: VALIDATOR_ARGS,
    zero: VALIDATOR_ZERO,
    kind: Counts::Validator { sized: false },
};
/// The validators again, longer and on more threads (about 80 blocks over 1 MiB, 200,000
/// calls): the patched entry points under contention.
const BUSY_ARGS: &[&str] = &["5000", "4"];
const BUSY_ZERO: &[&str] = &["0", "4"];
const VALIDATOR_JE_BUSY: Prog = Prog { args: BUSY_ARGS, zero: BUSY_ZERO, ..VALIDATOR_JE };
const VALIDATOR_RJEM_BUSY: Prog = Prog { args: BUSY_ARGS, zero: BUSY_ZERO, ..VALIDATOR_RJEM };
const VALIDATOR_MI_BUSY: Prog = Prog { args: BUSY_ARGS, zero: BUSY_ZERO, ..VALIDATOR_MI };
const C_STATIC_JEMALLOC: Prog = Prog {
    bin: "c_static_jemalloc",
    family: "jemalloc",
    prefixes: &[""],
    args: C_ARGS,
    zero: C_ZERO,
    kind: Counts::Own,
};
const C_STATIC_JEMALLOC_CTOR: Prog = Prog { bin: "c_static_jemalloc_ctor", ..C_STATIC_JEMALLOC };
const C_JE_PREFIX: Prog = Prog {
    bin: "c_je_prefix",
    family: "jemalloc",
    prefixes: &["je_"],
    args: C_ARGS,
    zero: C_ZERO,
    kind: Counts::Own,
};
const CXX_STATIC_TCMALLOC: Prog = Prog {
    bin: "cxx_static_tcmalloc",
    family: "tcmalloc",
    prefixes: &["", "tc_"],
    args: C_ARGS,
    zero: C_ZERO,
    kind: Counts::Own,
};
const CXX_STATIC_TCMALLOC_CTOR: Prog = Prog { bin: "cxx_static_tcmalloc_ctor", ..CXX_STATIC_TCMALLOC };

fn cmd(bin: &Path, args: &[&str]) -> std::process::Command {
    let mut c = command(bin);
    c.args(args);
    c
}

fn stderr_lines(out: &Output) -> Vec<String> {
    out.stderr.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect()
}

/// The header's own_allocators, as JSON (for the messages).
fn own_allocators(a: &Analysis) -> Vec<recorder::format::OwnAllocator> {
    a.header.own_allocators.clone()
}

fn describe(a: &Analysis) -> String {
    serde_json::to_string(&own_allocators(a)).unwrap_or_default()
}

/// Checks the header names `family` (with one of `prefixes`, when given) in `mode`.
fn check_header(c: &mut Checks, what: &str, a: &Analysis, family: &str, prefixes: &[&str], mode: &str) {
    let all = own_allocators(a);
    let found = all
        .iter()
        .find(|o| o.family == family && (prefixes.is_empty() || prefixes.contains(&o.prefix.as_str())));
    match found {
        None => c.check(false, || {
            format!(
                "{what}: the header's own_allocators has no {family} allocator (prefix {prefixes:?}): {}",
                describe(a)
            )
        }),
        Some(o) => {
            c.check(o.mode == mode, || {
                format!(
                    "{what}: own_allocators gives {family} mode {:?}, want {mode:?}: {}",
                    o.mode,
                    describe(a)
                )
            });
            c.check(o.entry_points > 0, || {
                format!("{what}: own_allocators gives {family} no entry points: {}", describe(a))
            });
        }
    }
}

/// One program under one mode: output, stderr, header, and the counts (N against 0).
fn check_prog(p: &Prog, mode: &str, backend: Option<&str>) {
    let bin = ownalloc_bin(p.bin);
    let plain = run(cmd(&bin, p.args));
    plain.assert_success(&format!("{} {:?} without the shim", p.bin, p.args));
    let plain0 = run(cmd(&bin, p.zero));
    plain0.assert_success(&format!("{} {:?} without the shim", p.bin, p.zero));

    let t = run_traced_mode(backend, || cmd(&bin, p.args));
    let t0 = run_traced_mode(backend, || cmd(&bin, p.zero));
    let what = format!("{} {:?} under the shim, {mode}", p.bin, p.args);
    let what0 = format!("{} {:?} under the shim, {mode}", p.bin, p.zero);
    t.out.assert_success(&what);
    t0.out.assert_success(&what0);

    let mut c = Checks::new();
    c.eq(&format!("{what}: output"), comparable(p.kind, &t.out), comparable(p.kind, &plain));
    c.eq(&format!("{what0}: output"), comparable(p.kind, &t0.out), comparable(p.kind, &plain0));
    c.eq(&format!("{what}: stderr lines"), stderr_lines(&t.out), vec![]);
    c.eq(&format!("{what0}: stderr lines"), stderr_lines(&t0.out), vec![]);

    let log = t.only_log();
    let log0 = t0.only_log();
    let a = analyze(&log, |_| false);
    let a0 = analyze(&log0, |_| false);
    let want_mode = if backend.is_none() { "recorded" } else { "switched" };
    check_header(&mut c, &what, &a, p.family, p.prefixes, want_mode);
    check_header(&mut c, &what0, &a0, p.family, p.prefixes, want_mode);
    for f in a.consistency_failures(false).into_iter().chain(a0.consistency_failures(false)) {
        c.check(false, || f);
    }

    let (l, l0) = (log_classes(&a), log_classes(&a0));
    let (g, g0) = (program_classes(p.kind, &t.out), program_classes(p.kind, &t0.out));
    let (dl, dg) = (l - l0, g - g0);
    let detail = || {
        format!(
            "log {l:?}, log with 0 iterations {l0:?}; program {g:?}, with 0 iterations {g0:?}; \
             log ops {:?} / {:?}",
            a.ops, a0.ops
        )
    };
    let classes: [(&str, i64, i64); 4] = [
        ("allocations", dl.allocs, dg.allocs),
        ("frees (free + free_sized)", dl.frees, dg.frees),
        ("free_sized", dl.free_sized, dg.free_sized),
        ("reallocs", dl.reallocs, dg.reallocs),
    ];
    for (name, got, want) in classes {
        c.check(got == want, || {
            format!(
                "{what}: {name}: the log has {got} more than with 0 iterations, the program made {want} more ({})",
                detail()
            )
        });
    }
    // The C jemalloc programs also say what each call is in the log (issue #18's mapping:
    // mallocx -> malloc, mallocx(ZERO) -> calloc, mallocx(ALIGN) -> memalign, rallocx ->
    // realloc, dallocx -> free, sdallocx -> free_sized).
    let j = last_json(&t.out);
    let j0 = last_json(&t0.out);
    if let (Some(ops), Some(ops0)) = (j["ops"].as_object(), j0["ops"].as_object()) {
        for (op, n) in ops {
            let want = n.as_i64().unwrap_or(0) - ops0[op].as_i64().unwrap_or(0);
            let got = a.count(op) as i64 - a0.count(op) as i64;
            c.check(got == want, || {
                format!("{what}: op {op}: the log has {got} more than with 0 iterations, the program's calls are {want} more ({})", detail())
            });
        }
    }
    c.finish(&format!("{} under the shim, {mode}", p.bin));

    if backend.is_none() {
        replay_succeeds(&log);
    }
}

/// `shimlog replay LOG` against every backend succeeds.
fn replay_succeeds(log: &Path) {
    let mut c = command(shimlog_bin());
    c.arg("replay").arg(log).args(["--backend", &BACKENDS.join(",")]);
    let out = run(c);
    out.assert_success(&format!("shimlog replay {}", log.display()));
}

macro_rules! prog_tests {
    ($($name:ident: $prog:expr;)*) => {
        $(
            mod $name {
                use super::*;
                #[test]
                fn own() { check_prog(&$prog, MODES[0].0, MODES[0].1) }
                #[test]
                fn glibc() { check_prog(&$prog, MODES[1].0, MODES[1].1) }
                #[test]
                fn jemalloc() { check_prog(&$prog, MODES[2].0, MODES[2].1) }
                #[test]
                fn mimalloc() { check_prog(&$prog, MODES[3].0, MODES[3].1) }
            }
        )*
    };
}

prog_tests! {
    validator_je: VALIDATOR_JE;
    validator_rjem: VALIDATOR_RJEM;
    validator_mi: VALIDATOR_MI;
    validator_je_busy: VALIDATOR_JE_BUSY;
    validator_rjem_busy: VALIDATOR_RJEM_BUSY;
    validator_mi_busy: VALIDATOR_MI_BUSY;
    c_static_jemalloc: C_STATIC_JEMALLOC;
    c_static_jemalloc_ctor: C_STATIC_JEMALLOC_CTOR;
    c_je_prefix: C_JE_PREFIX;
    cxx_static_tcmalloc: CXX_STATIC_TCMALLOC;
    cxx_static_tcmalloc_ctor: CXX_STATIC_TCMALLOC_CTOR;
}

/// A program whose allocator cannot be patched: under every mode it runs as without the shim
/// and the shim says so in exactly one stderr line. `untouched`: the header must list the
/// allocator as untouched (with a note) and the log hold none of its calls.
fn check_unpatchable(bin: &str, args: &[&str], zero: &[&str], kind: Counts, untouched: Option<&str>) {
    let path = ownalloc_bin(bin);
    let plain = run(cmd(&path, args));
    plain.assert_success(&format!("{bin} without the shim"));
    let mut c = Checks::new();
    for (mode, backend) in MODES {
        let what = format!("{bin} {args:?} under the shim, {mode}");
        let t = run_traced_mode(backend, || cmd(&path, args));
        t.out.assert_success(&what);
        c.eq(&format!("{what}: output"), comparable(kind, &t.out), comparable(kind, &plain));
        let lines = stderr_lines(&t.out);
        c.check(lines.len() == 1, || {
            format!(
                "{what}: want exactly one stderr line saying the allocator cannot be patched, got {lines:?}"
            )
        });
        let Some(family) = untouched else { continue };
        let t0 = run_traced_mode(backend, || cmd(&path, zero));
        t0.out.assert_success(&format!("{bin} {zero:?} under the shim, {mode}"));
        let a = analyze(&t.only_log(), |_| false);
        let a0 = analyze(&t0.only_log(), |_| false);
        match a.header.own_allocators.iter().find(|o| o.family == family) {
            None => c.check(false, || {
                format!("{what}: own_allocators does not list the {family} allocator: {}", describe(&a))
            }),
            Some(o) => {
                c.check(o.mode == "untouched" && !o.note.is_empty(), || {
                    format!("{what}: want mode \"untouched\" with a note saying why: {}", describe(&a))
                });
            }
        }
        let d = log_classes(&a) - log_classes(&a0);
        c.eq(
            &format!(
                "{what}: calls recorded beyond the run with 0 iterations (none of an untouched allocator's)"
            ),
            d,
            Classes::default(),
        );
    }
    c.finish(&format!("{bin} under the shim"));
}

/// validator-rjem stripped: its _rjem_ symbols were only in .symtab, now gone; the shim
/// cannot find the allocator's entry points.
#[test]
fn stripped_prefixed_jemalloc() {
    check_unpatchable(
        "validator-rjem-stripped",
        VALIDATOR_ARGS,
        VALIDATOR_ZERO,
        Counts::Validator { sized: true },
        None,
    );
}

/// An allocator whose free is one `ret` (itest/programs/ownalloc/unpatchable.c).
#[test]
fn free_too_short_to_patch() {
    check_unpatchable("unpatchable", C_ARGS, C_ZERO, Counts::Own, Some("malloc"));
}

/// validator-je stripped: mallocx, sdallocx and rallocx (what Rust calls) were only in
/// .symtab; malloc, free, ... are still exported. Whatever the shim makes of it, the program
/// runs as without it, and the shim says at most one line.
#[test]
fn stripped_unprefixed_jemalloc() {
    let path = ownalloc_bin("validator-je-stripped");
    let kind = Counts::Validator { sized: true };
    let plain = run(cmd(&path, VALIDATOR_ARGS));
    plain.assert_success("validator-je-stripped without the shim");
    let mut c = Checks::new();
    for (mode, backend) in MODES {
        let what = format!("validator-je-stripped under the shim, {mode}");
        let t = run_traced_mode(backend, || cmd(&path, VALIDATOR_ARGS));
        t.out.assert_success(&what);
        c.eq(&format!("{what}: output"), comparable(kind, &t.out), comparable(kind, &plain));
        let lines = stderr_lines(&t.out);
        c.check(lines.len() <= 1, || format!("{what}: more than one stderr line: {lines:?}"));
        let a = analyze(&t.only_log(), |_| false);
        for f in a.consistency_failures(false) {
            c.check(false, || f);
        }
    }
    c.finish("validator-je-stripped under the shim");
}

/// itest/programs/c/exe_defines_malloc.c: a bump allocator defining malloc, free, calloc and realloc
/// in the executable (1000 mallocs and 1000 frees of its own, then printf). Its calls are
/// recorded (family "malloc": a malloc family of unknown make). In own mode it runs exactly as
/// without the shim and the shim says nothing. With a backend, the entry points are switched:
/// its own allocator serves none of the calls (own_calls 0), the checksum stays.
fn check_exe_defines_malloc(mode: &str, backend: Option<&str>) {
    let exe: PathBuf = cprog("exe_defines_malloc");
    let plain = run(command(&exe));
    plain.assert_success("exe_defines_malloc without the shim");
    let t = run_traced_mode(backend, || command(&exe));
    let what = format!("exe_defines_malloc under the shim, {mode}");
    t.out.assert_success(&what);
    let a = analyze(&t.only_log(), |_| false);
    let mut c = Checks::new();
    c.eq(&format!("{what}: stderr lines"), stderr_lines(&t.out), vec![]);
    let entry = a.header.own_allocators.iter().find(|o| o.family == "malloc" && o.prefix.is_empty());
    let got_mode = entry.map(|o| o.mode.as_str()).unwrap_or("(none)");
    c.check(entry.is_some(), || {
        format!("{what}: own_allocators does not list the executable's malloc family: {}", describe(&a))
    });
    let plain_json = plain.json();
    let json = t.out.json();
    match backend {
        None => {
            c.eq(&format!("{what}: mode"), got_mode, "recorded");
            c.eq(&format!("{what}: output"), t.out.stdout_str(), plain.stdout_str());
        }
        Some(_) => {
            // Served by the backend: the program's own allocator sees none of its calls.
            c.eq(&format!("{what}: mode"), got_mode, "switched");
            c.eq(&format!("{what}: checksum"), &json["checksum"], &plain_json["checksum"]);
            c.eq(&format!("{what}: calls its own allocator served"), &json["own_calls"], &Value::from(0));
        }
    }
    // Its 1000 mallocs and frees, plus what the C runtime asks of it (stdio's buffer).
    c.within(&format!("{what}: malloc"), a.count("malloc"), 1000, RUNTIME_SLACK);
    c.within(&format!("{what}: free"), a.count("free") + a.count("free_sized"), 1000, RUNTIME_SLACK);
    for f in a.consistency_failures(false) {
        c.check(false, || f);
    }
    c.finish(&what);
}

#[test]
fn exe_defines_malloc_own() {
    check_exe_defines_malloc("own", None);
}

#[test]
fn exe_defines_malloc_glibc() {
    check_exe_defines_malloc("glibc", Some("glibc"));
}

#[test]
fn exe_defines_malloc_jemalloc() {
    check_exe_defines_malloc("jemalloc", Some("jemalloc"));
}

#[test]
fn exe_defines_malloc_mimalloc() {
    check_exe_defines_malloc("mimalloc", Some("mimalloc"));
}
