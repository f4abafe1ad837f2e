//! Programs that read their own allocator's statistics while they work (issue #32): under
//! every SHIM_BACKEND their reads keep succeeding and follow the load, whoever serves.
//!
//! The programs (`make ownalloc` builds them into target/ownalloc/bin):
//! - c_je_stats_prefix / c_je_stats_static / c_je_stats_dynamic (itest/programs/ownalloc/stats_prog.c,
//!   API_JE): jemalloc renamed je_* as Redis and Valkey link it, Debian's static archive
//!   unprefixed, and Debian's libjemalloc.so.2. A second thread reads every 10 ms epoch,
//!   stats.{allocated,active,resident,mapped,retained,metadata}, arenas.{narenas,page},
//!   opt.{narenas,tcache}, version, stats.arenas.{0,4096}.{pactive,pdirty,pmuzzy} by name
//!   and through mallctlnametomib + mallctlbymib, thread.tcache.flush; once,
//!   malloc_stats_print into a callback, jemalloc's error conventions (EINVAL, EPERM,
//!   ENOENT) and malloc_usable_size; after the frees, arena.4096.purge and arena.0.decay;
//! - c_tc_stats_static / c_tc_stats_dynamic (API_TC): gperftools' tcmalloc, static archive
//!   and libtcmalloc_minimal.so.4, read through MallocExtension_GetNumericProperty and
//!   MallocExtension_GetStats; MallocExtension_GetAllocatedSize; ReleaseFreeMemory;
//! - jectl (workloads/jectl): Rust, tikv-jemallocator (`_rjem_` names) read through
//!   tikv-jemalloc-ctl: epoch::advance, then stats::* by name and by MIB;
//! - mistats (workloads/mistats): Rust, the mimalloc crate, read through mi_process_info
//!   (its resident set) and mi_stats_print_out, mi_collect(true) after the frees. The
//!   resident set is the process's whoever serves, and how soon it falls after the frees is
//!   each backend's own affair: only its rise is checked.
//!
//! Each fails (exit 1) on the first read that fails. What is checked, for each program and
//! mode (own, and switched to each of the six backends): exit 0; the header names the
//! program's allocator "recorded" (own) or "switched"; the reading thread read at least 3
//! times; the allocated bytes reported rose by half the burst (64 MiB of 1 MiB blocks and
//! 64 MiB of 256-byte ones) while it was held and fell by as much after the frees; and
//! stderr holds exactly the one line the shim says for the unknown name the program asks on
//! purpose when another backend answers for its allocator (and nothing else).
//!
//! The dynamic variants need the shim to find allocators in shared libraries from their
//! .dynsym (the lead's branch): before that they fail, saying the library is stripped.
use itest::*;
use serde_json::Value;

/// Bytes of the burst: 64 MiB of 1 MiB blocks and 64 MiB of small ones.
const BURST: i64 = 128 << 20;
const BURST_ARG: &str = "64";

/// How a program reads its statistics.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Api {
    /// mallctl: the shim's jemalloc answers itself when it serves.
    Jemalloc,
    /// MallocExtension: the shim's tcmalloc answers itself when it serves.
    Tcmalloc,
    /// tikv-jemalloc-ctl (mallctl underneath), which asks no unknown name.
    RustCtl,
    /// mimalloc's mi_process_info and mi_stats_print_out.
    Mimalloc,
}

struct Prog {
    bin: &'static str,
    family: &'static str,
    api: Api,
}

/// The stderr lines a run must print: the unknown name the C programs ask on purpose, said
/// once when a backend other than the program's own kind answers.
fn expected_lines(api: Api, backend: Option<&str>) -> Vec<&'static str> {
    match (api, backend) {
        (Api::Jemalloc, Some(b)) if b != "jemalloc" => vec!["mallctl(\"no.such.name\")"],
        (Api::Tcmalloc, Some(b)) if b != "tcmalloc" => {
            vec!["MallocExtension_GetNumericProperty(\"tcmalloc.no_such_property\")"]
        }
        _ => vec![],
    }
}

fn check(p: &Prog, backend: Option<&str>) {
    let mode = backend.unwrap_or("own");
    let bin = ownalloc_bin(p.bin);
    let t = run_traced_mode(backend, || {
        let mut c = command(&bin);
        c.arg(BURST_ARG);
        c
    });
    let what = format!("{} under the shim, {mode}", p.bin);
    t.out.assert_success(&what);
    let mut c = Checks::new();

    // stderr: exactly the expected lines, each once.
    let lines: Vec<String> =
        t.out.stderr.lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect();
    let want = expected_lines(p.api, backend);
    c.check(
        lines.len() == want.len()
            && want.iter().zip(&lines).all(|(w, l)| l.starts_with("shim: ") && l.contains(w)),
        || format!("{what}: stderr should be {want:?} (one line each), is {lines:?}"),
    );

    // The header: the program's allocator, switched or recorded.
    let a = analyze(&t.only_log(), |_| false);
    let want_mode = if backend.is_none() { "recorded" } else { "switched" };
    let own = &a.header.own_allocators;
    c.check(own.iter().any(|o| o.family == p.family && o.mode == want_mode), || {
        format!(
            "{what}: the header should name a {} allocator {want_mode}: {}",
            p.family,
            serde_json::to_string(own).unwrap_or_default()
        )
    });

    // The statistics it printed follow the load.
    let text = t.out.stdout_str();
    let line = text.lines().last().unwrap_or("");
    let j: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("{what}: the last stdout line is not JSON ({e}): {text:?}"));
    let n = |k: &str| j[k].as_i64().unwrap_or_else(|| panic!("{what}: no {k:?} in {j}"));
    let (before, during, after) = (n("before"), n("during"), n("after"));
    c.check(n("reads") >= 3, || format!("{what}: the reading thread read {} times: {j}", n("reads")));
    c.check(during >= before + BURST / 2, || {
        format!(
            "{what}: allocated {before} before the burst and {during} during it, not {} more: {j}",
            BURST / 2
        )
    });
    c.check(p.api == Api::Mimalloc || after + BURST / 2 <= during, || {
        format!(
            "{what}: allocated {during} during the burst and {after} after the frees, not {} less: {j}",
            BURST / 2
        )
    });
    if let Some(len) = j["stats_print"].as_i64() {
        c.check(len > 0, || format!("{what}: the statistics text (malloc_stats_print, GetStats, mi_stats_print_out) was empty: {j}"));
    }
    c.check(n("max_seen") >= before + BURST / 2, || {
        format!("{what}: the reading thread never saw the burst: {j}")
    });
    c.finish(&what);
}

macro_rules! prog_tests {
    ($($name:ident: $bin:expr, $family:expr, $api:expr;)*) => {
        $(
            mod $name {
                use super::*;
                const P: Prog = Prog { bin: $bin, family: $family, api: $api };
                #[test]
                fn own() { check(&P, None) }
                #[test]
                fn glibc() { check(&P, Some("glibc")) }
                #[test]
                fn jemalloc() { check(&P, Some("jemalloc")) }
                #[test]
                fn mimalloc() { check(&P, Some("mimalloc")) }
                #[test]
                fn tcmalloc() { check(&P, Some("tcmalloc")) }
                #[test]
                fn snmalloc() { check(&P, Some("snmalloc")) }
                #[test]
                fn rpmalloc() { check(&P, Some("rpmalloc")) }
            }
        )*
    };
}

prog_tests! {
    c_je_stats_prefix: "c_je_stats_prefix", "jemalloc", Api::Jemalloc;
    c_je_stats_static: "c_je_stats_static", "jemalloc", Api::Jemalloc;
    c_je_stats_dynamic: "c_je_stats_dynamic", "jemalloc", Api::Jemalloc;
    c_tc_stats_static: "c_tc_stats_static", "tcmalloc", Api::Tcmalloc;
    c_tc_stats_dynamic: "c_tc_stats_dynamic", "tcmalloc", Api::Tcmalloc;
    jectl: "jectl", "jemalloc", Api::RustCtl;
    mistats: "mistats", "mimalloc", Api::Mimalloc;
}
