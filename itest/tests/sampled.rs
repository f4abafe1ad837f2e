//! SHIM_RECORD=sample end to end, every backend: real programs whose functions allocate
//! known amounts run with only the sampled allocations, their frees and the slow calls
//! recorded; `shimlog stats --json` must estimate the sites within the sampling's error,
//! match every recorded free (cross-thread, and in fork children) to its sampled block,
//! list a slow call on an unsampled block with its stack, and `replay` must refuse the log.
use itest::sites::*;
use itest::*;
use serde_json::Value;
use std::path::Path;

fn sampled(backend: &str, prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Traced {
    let t = run_traced(backend, || {
        let mut c = command(prog);
        c.args(args).env("SHIM_RECORD", "sample");
        for (k, v) in env {
            c.env(k, v);
        }
        c
    });
    t.out.assert_success(&format!("{} under the shim, SHIM_RECORD=sample, {backend}", prog.display()));
    assert!(!t.out.stderr.contains("shim:"), "the shim complained: {}", t.out.stderr);
    t
}

fn all_stats(logs: &[std::path::PathBuf]) -> Value {
    let mut c = command(shimlog_bin());
    c.arg("stats").args(logs).arg("--json");
    let out = run(c);
    out.assert_success("shimlog stats --json");
    out.json()
}

fn frees(s: &Value) -> u64 {
    s["ops"]["free"].as_u64().unwrap() + s["ops"]["free_sized"].as_u64().unwrap()
}

/// Mean 64 KiB over sites.c: b's and c's estimates within 4.5 standard errors for each
/// seed and backend; b's blocks all freed, c's never; the log holds nothing else.
#[test]
fn sites_estimated_from_a_sampled_only_log() {
    let prog = c_sites(false);
    let mean = 64 * 1024u64;
    for backend in BACKENDS {
        for seed in ["3", "11"] {
            let t = sampled(backend, &prog, &[], &[("SHIM_SAMPLE_BYTES", "64k"), ("SHIM_SAMPLE_SEED", seed)]);
            let log = t.only_log();
            let s = stats(&log);
            let ctx = format!("{backend}, seed {seed}");
            assert_eq!(s["process"]["sampled_only"], mean, "{ctx}");
            assert_eq!(s["sites"]["estimated"], true, "{ctx}");
            for (name, truth, size) in [("b", B_BYTES, 4096u64), ("c", C_BYTES, 10000)] {
                let w = 1.0 / (1.0 - (-(size as f64) / mean as f64).exp());
                let se = truth as f64 / (truth as f64 / (size as f64 * w)).sqrt();
                let e = val(&s, "by_bytes", name, "alloc_bytes") as f64;
                assert!(
                    (e - truth as f64).abs() < 4.5 * se,
                    "{ctx}: {name} estimated {e}, truth {truth} (se {se:.0})"
                );
            }
            assert!(row(&s, "leaked", "b").is_none(), "{ctx}: b's sampled blocks were all freed");
            let leaked = val(&s, "leaked", "c", "leaked_bytes");
            assert!(leaked > 0, "{ctx}: c never frees");
            // Only the samples: every allocation recorded is a sampled one (a few of the C
            // runtime's own besides b's and c's), and each free is one of a sampled block.
            let allocs: u64 =
                ["malloc", "calloc", "realloc"].iter().map(|o| s["ops"][o].as_u64().unwrap()).sum();
            let samples: u64 = s["sites"]["by_calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["samples"].as_u64().unwrap())
                .sum();
            assert_eq!(allocs, samples, "{ctx}: allocations in the log vs sampled ones");
            assert!(allocs < 300, "{ctx}: {allocs} allocations recorded of about 1,500");
            assert_eq!(s["unknown_frees"], 0, "{ctx}");
            assert!(std::fs::metadata(&log).unwrap().len() < 64 << 10, "{ctx}: the sampled log is small");
        }
    }
}

/// xthread: 8 threads, every block freed by the next thread. Mean 4 KiB samples about
/// half the blocks; every recorded free finds its block, and the estimate of the bytes
/// allocated is within 3% of what the program asked.
#[test]
fn cross_thread_frees_of_sampled_blocks() {
    let (rounds, per) = (200u64, 64u64);
    let truth: u64 =
        (0..8u64).flat_map(|t| (0..per).map(move |j| 3000 + t * 16 + j % 5)).sum::<u64>() * rounds;
    for backend in BACKENDS {
        let t = sampled(
            backend,
            &cprog("xthread"),
            &[&rounds.to_string(), &per.to_string()],
            &[("SHIM_SAMPLE_BYTES", "4k")],
        );
        let s = stats(&t.only_log());
        assert_eq!(s["unknown_frees"], 0, "{backend}");
        let allocs = s["ops"]["malloc"].as_u64().unwrap();
        assert!(allocs > rounds * per * 8 / 3, "{backend}: {allocs} sampled of {}", rounds * per * 8);
        let live = s["live_at_end"]["blocks"].as_u64().unwrap();
        assert!(
            frees(&s) + live >= allocs,
            "{backend}: {} frees, {live} live at end, {allocs} allocations",
            frees(&s)
        );
        assert!(
            s["cross_thread_frees"]["count"].as_u64().unwrap() * 10 >= frees(&s) * 9,
            "{backend}: frees are cross-thread"
        );
        let est = s["sites"]["total_alloc_bytes"].as_f64().unwrap();
        assert!(
            (est - truth as f64).abs() < 0.03 * truth as f64,
            "{backend}: estimated {est} bytes, truth {truth}"
        );
    }
}

/// A slow free of a block not sampled (mean 1 TiB: nothing is) is a stall record with
/// its stack: stats lists it under the slow calls, at slow_free. glibc only, as in
/// stacks.rs: its free of a 256 MiB block unmaps the touched pages at once (milliseconds),
/// where jemalloc and mimalloc keep the memory for later and return at once.
#[test]
fn slow_call_on_an_unsampled_block_has_its_stack() {
    // glibc only: see above.
    {
        let backend = "glibc";
        let t = sampled(backend, &c_sites(false), &["slow"], &[("SHIM_SAMPLE_BYTES", "1T")]);
        let s = stats(&t.only_log());
        assert_eq!(s["ops"]["malloc"], 0, "{backend}: nothing sampled at a 1 TiB mean");
        assert!(val(&s, "slow", "slow_free", "slow_calls") >= 1, "{backend}");
        assert!(val(&s, "slow", "slow_free", "slow_ns") >= 1_000_000, "{backend}");
    }
}

/// bash with subshells: each fork child's log starts empty, its frees of the parent's
/// sampled blocks are matched when the logs are read together; replay refuses.
#[test]
fn fork_children_and_replay() {
    let script =
        "for i in 1 2 3; do (echo $i | cat >/dev/null); done; x=$(echo a; echo b); echo \"$x\" >/dev/null";
    for backend in BACKENDS {
        let t = sampled(backend, Path::new("/bin/bash"), &["-c", script], &[("SHIM_SAMPLE_BYTES", "512")]);
        let logs = t.logs();
        assert!(logs.len() >= 5, "{backend}: bash and its children: {logs:?}");
        let s = all_stats(&logs);
        assert_eq!(s["unknown_frees"], 0, "{backend}: every free matched, inherited ones too");
        assert!(s["ops"]["malloc"].as_u64().unwrap() > 0, "{backend}");
        let mut c = command(shimlog_bin());
        c.arg("replay").arg(&logs[0]);
        let out = run(c);
        assert!(!out.status.success(), "{backend}: replay of a sampled-only log must fail");
        let err = out.stderr.trim();
        assert!(err.contains("sampled-only") && err.lines().count() == 1, "{backend}: {err}");
    }
}

/// A bad SHIM_RECORD: one line, and every call recorded (the default).
#[test]
fn unknown_value_records_everything() {
    let t = run_traced("glibc", || {
        let mut c = command(c_sites(false));
        c.env("SHIM_RECORD", "most");
        c
    });
    t.out.assert_success("sites under SHIM_RECORD=most");
    let lines: Vec<&str> = t.out.stderr.lines().filter(|l| l.contains("SHIM_RECORD")).collect();
    assert_eq!(lines.len(), 1, "{}", t.out.stderr);
    assert!(lines[0].contains("all, sample"), "{}", lines[0]);
    let s = stats(&t.only_log());
    assert!(s["process"].get("sampled_only").is_none());
    assert!(s["ops"]["malloc"].as_u64().unwrap() >= 1500);
}
