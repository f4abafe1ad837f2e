//! Call stacks (SHIM_STACKS) end to end: real programs whose functions allocate known
//! amounts run under the shim, and `shimlog stats --json` must name those functions with
//! the exact bytes (every allocation taken) or within the sampling's error (sampled); `go
//! tool pprof` must read `shimlog pprof`'s file and agree with stats; a slow call made on
//! purpose must have its stack; python3's frames must resolve to function names.
use itest::sites::*;
use itest::*;
use std::path::Path;
use std::process::Command;

/// Every allocation taken: b and c with their exact bytes, live at the peak, never freed.
fn check_all(prog: &Path, env: &[(&str, &str)]) {
    let mut env = env.to_vec();
    env.push(("SHIM_STACKS", "all"));
    let t = traced(prog, &[], &env);
    let s = stats(&t.only_log());
    assert_eq!(s["sites"]["mode"], "all");
    assert_eq!(val(&s, "by_bytes", "b", "alloc_bytes"), B_BYTES);
    assert_eq!(val(&s, "by_calls", "b", "alloc_calls"), 1000);
    assert_eq!(val(&s, "by_bytes", "c", "alloc_bytes"), C_BYTES);
    assert_eq!(val(&s, "live_at_peak", "b", "live_at_peak_bytes"), B_BYTES);
    assert_eq!(val(&s, "live_at_peak", "c", "live_at_peak_bytes"), C_BYTES);
    assert_eq!(val(&s, "leaked", "c", "leaked_bytes"), C_BYTES);
    assert!(row(&s, "leaked", "b").is_none(), "b's blocks were all freed");
    // b is called from a: its stack says so.
    let stack = row(&s, "by_bytes", "b").unwrap()["stack"].to_string();
    assert!(stack.contains("a ") || stack.contains("::a "), "b's stack has no a: {stack}");
}

#[test]
fn c_program_sites_exact_with_every_allocation() {
    check_all(&c_sites(false), &[]);
}

#[test]
fn c_program_sites_exact_with_frame_pointers() {
    check_all(&c_sites(true), &[("SHIM_UNWIND", "fp")]);
}

#[test]
fn rust_program_sites_exact() {
    check_all(&rust_sites(false), &[]);
}

#[test]
fn rust_program_sites_exact_with_frame_pointers() {
    check_all(&rust_sites(true), &[("SHIM_UNWIND", "fp")]);
}

/// Sampled by bytes (mean 64 KiB: about 60 samples at b and 75 at c): each seed's
/// estimate within 4.5 standard errors of the truth, and their mean over 6 seeds within 2
/// of one run's (about 5 of the mean's own).
#[test]
fn sampled_estimates_are_unbiased() {
    let prog = c_sites(false);
    let mean = 64 * 1024u64;
    let (mut eb, mut ec) = (Vec::new(), Vec::new());
    for seed in 1..=6 {
        let seed = seed.to_string();
        let t = traced(
            &prog,
            &[],
            &[("SHIM_STACKS", "sample"), ("SHIM_SAMPLE_BYTES", "64k"), ("SHIM_SAMPLE_SEED", &seed)],
        );
        let s = stats(&t.only_log());
        assert_eq!(s["sites"]["estimated"], true);
        assert_eq!(s["sites"]["sample_bytes"], mean);
        eb.push(val(&s, "by_bytes", "b", "alloc_bytes") as f64);
        ec.push(val(&s, "by_bytes", "c", "alloc_bytes") as f64);
    }
    for (name, est, truth, size) in [("b", &eb, B_BYTES, 4096u64), ("c", &ec, C_BYTES, 10000)] {
        // Each sample stands for w bytes' worth of calls; the count of samples is about
        // Poisson with mean truth / (size * w): relative error 1 / sqrt(that).
        let w = 1.0 / (1.0 - (-(size as f64) / mean as f64).exp());
        let n = truth as f64 / (size as f64 * w);
        let se = truth as f64 / n.sqrt();
        for e in est.iter() {
            assert!(
                (e - truth as f64).abs() < 4.5 * se,
                "{name}: estimate {e} vs truth {truth} (se {se:.0}); all {est:?}"
            );
        }
        let m = est.iter().sum::<f64>() / est.len() as f64;
        assert!(
            (m - truth as f64).abs() < 2.0 * se,
            "{name}: mean estimate {m} vs truth {truth} (se of the mean {:.0}); all {est:?}",
            se / (est.len() as f64).sqrt()
        );
    }
}

/// The default (SHIM_STACKS unset = slow): the free of a 256 MiB block whose pages were
/// touched takes milliseconds, and its stack names slow_free.
#[test]
fn slow_call_has_its_stack() {
    let t = traced(&c_sites(false), &["slow"], &[]);
    let log = t.only_log();
    let s = stats(&log);
    assert_eq!(s["sites"]["mode"], "slow");
    assert!(val(&s, "slow", "slow_free", "slow_calls") >= 1);
    assert!(val(&s, "slow", "slow_free", "slow_ns") >= 1_000_000);
    // Only slow calls have stacks: no allocation totals.
    assert_eq!(s["sites"]["total_alloc_calls"], 0);
    let text = {
        let mut c = command(shimlog_bin());
        c.arg("stats").arg(&log);
        let o = run(c);
        o.assert_success("shimlog stats");
        o.stdout_str()
    };
    assert!(text.contains("slow calls") && text.contains("slow_free (sites.c:"), "{text}");
}

fn go() -> Command {
    let ok = Command::new("go").arg("version").output().is_ok_and(|o| o.status.success());
    assert!(ok, "cannot run: go is missing (apt-get install golang-go; tools/test-deps.sh installs it)");
    let mut c = command("go");
    c.env("HOME", std::env::temp_dir())
        .env("GOCACHE", build_dir().join("gocache"))
        .env("GOFLAGS", "-mod=mod");
    c
}

/// `go tool pprof -raw`: the sum of each sample type over every sample.
fn pprof_totals(file: &Path) -> Vec<(String, i64)> {
    let mut c = go();
    c.args(["tool", "pprof", "-raw"]).arg(file);
    let o = run(c);
    o.assert_success("go tool pprof -raw");
    let text = o.stdout_str();
    let mut lines = text.lines().skip_while(|l| !l.starts_with("Samples:")).skip(1);
    let names: Vec<String> = lines
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(|s| s.split('/').next().unwrap().to_string())
        .collect();
    let mut sums = vec![0i64; names.len()];
    for l in lines.take_while(|l| l.contains(':') && !l.starts_with("Locations")) {
        let vals = l.split(':').next().unwrap();
        for (i, v) in vals.split_whitespace().enumerate() {
            if i < sums.len() {
                sums[i] += v.parse::<i64>().unwrap_or_else(|_| panic!("{l}"));
            }
        }
    }
    assert!(sums.iter().any(|&s| s != 0), "no samples in go tool pprof -raw:\n{text}");
    names.into_iter().zip(sums).collect()
}

#[test]
fn go_tool_pprof_reads_the_profile_and_agrees_with_stats() {
    for (mode, env) in [
        ("all", vec![("SHIM_STACKS", "all")]),
        ("sample", vec![("SHIM_STACKS", "sample"), ("SHIM_SAMPLE_BYTES", "64k")]),
    ] {
        let t = traced(&c_sites(false), &[], &env);
        let log = t.only_log();
        let s = stats(&log);
        for at in ["peak", "end"] {
            let pb = t.dir.path().join(format!("heap-{at}.pb.gz"));
            let mut c = command(shimlog_bin());
            c.arg("pprof").arg(&log).arg("-o").arg(&pb).args(["--at", at]);
            run(c).assert_success("shimlog pprof");
            let tot: std::collections::HashMap<String, i64> = pprof_totals(&pb).into_iter().collect();
            let inuse = if at == "peak" { "total_live_at_peak_bytes" } else { "total_leaked_bytes" };
            // Rounding: stats rounds each site's sum, pprof each stack's.
            let near = |a: i64, b: u64| (a - b as i64).abs() <= 2 + b as i64 / 10_000;
            assert!(
                near(tot["alloc_space"], s["sites"]["total_alloc_bytes"].as_u64().unwrap()),
                "{mode} {at}: {tot:?} vs {}",
                s["sites"]
            );
            assert!(
                near(tot["alloc_objects"], s["sites"]["total_alloc_calls"].as_u64().unwrap()),
                "{mode} {at}: {tot:?}"
            );
            assert!(
                near(tot["inuse_space"], s["sites"][inuse].as_u64().unwrap()),
                "{mode} {at}: {tot:?} vs {}",
                s["sites"]
            );
            let mut c = go();
            c.args(["tool", "pprof", "-top"]).arg(&pb);
            let o = run(c);
            o.assert_success("go tool pprof -top");
            let top = o.stdout_str();
            if at == "peak" {
                assert!(
                    top.lines().any(|l| l.trim_end().ends_with(" b"))
                        && top.lines().any(|l| l.trim_end().ends_with(" c")),
                    "{top}"
                );
            }
        }
    }
}

#[test]
fn flamegraph_draws_the_sites() {
    let t = traced(&c_sites(false), &[], &[("SHIM_STACKS", "all")]);
    let svg = t.dir.path().join("peak.svg");
    let mut c = command(shimlog_bin());
    c.arg("flamegraph").arg(t.only_log()).args(["--by", "live-at-peak", "-o"]).arg(&svg);
    run(c).assert_success("shimlog flamegraph");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<?xml") && s.contains("<svg"), "not an SVG");
    for f in ["<title>b (", "<title>c (", "<title>a (", "<title>main ("] {
        assert!(s.contains(f), "{f} not in the flame graph");
    }
}

/// python3 making bytearrays of 100,000 bytes in functions of its own: the stacks run
/// through the interpreter, whose frames must resolve to names.
#[test]
fn python_sites_resolve_to_function_names() {
    let py = python3();
    let script =
        "def make():\n    return [bytearray(100000) for _ in range(200)]\nkeep = make()\nprint('done')\n";
    let t = traced(&py, &["-c", script], &[("SHIM_STACKS", "all")]);
    let s = stats(&t.only_log());
    let rows = s["sites"]["by_bytes"].as_array().unwrap();
    assert!(!rows.is_empty());
    let exe = std::fs::canonicalize(&py).unwrap();
    let exe_name = exe.file_name().unwrap().to_string_lossy().into_owned();
    // The heaviest site (the bytearrays, 20 MB) is in the interpreter and has a name.
    let top = &rows[0];
    assert!(top["alloc_bytes"].as_u64().unwrap() >= 200 * 100000, "{top}");
    let f = top["function"].as_str().unwrap();
    assert!(!f.contains("+0x") && !f.starts_with("0x"), "unresolved: {top}");
    let frames: Vec<&str> = top["stack"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
    let named = frames
        .iter()
        .filter(|f| f.contains(&format!("({exe_name})")) || f.contains(".c:"))
        .filter(|f| !f.contains("+0x"))
        .count();
    assert!(named >= 3, "python3's frames not resolved to names: {frames:?}");
    assert!(frames.iter().any(|f| f.contains("Py")), "no Py* function in {frames:?}");
}
