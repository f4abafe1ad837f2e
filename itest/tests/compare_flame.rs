//! `shimlog compare --flamegraph`: two real captures under the real shim with stacks, of
//! itest/programs/c/flame_sites.c (grow and shrink allocate what the arguments say, steady
//! 1 MiB every run), drawn as one differential flame graph: grow's frame red, shrink's blue,
//! steady's white; per-log means for a side of two logs; the base scaled to the candidate's
//! total when the runs' lengths differ; and what it refuses.
use itest::*;
use std::path::{Path, PathBuf};

/// flame_sites GROW_KIB SHRINK_KIB [SLEEP_MS] under the shim with `stacks`, its log dir/NAME.shimlog.
fn capture(dir: &Path, name: &str, args: &[u32], stacks: &[(&str, &str)]) -> PathBuf {
    let log = dir.join(format!("{name}.shimlog"));
    let mut c = command(cprog("flame_sites"));
    c.args(args.iter().map(|a| a.to_string()))
        .env("LD_PRELOAD", shim_lib())
        .env("SHIM_LOG", &log)
        .envs(stacks.iter().copied());
    run(c).assert_success(&format!("flame_sites {name}"));
    assert!(log.is_file(), "{} not written", log.display());
    log
}

const ALL: &[(&str, &str)] = &[("SHIM_STACKS", "all")];

/// `shimlog compare BASE... --vs CAND... --flamegraph SVG EXTRA...`.
fn compare(base: &[&Path], cand: &[&Path], svg: &Path, extra: &[&str]) -> Output {
    let mut c = command(shimlog_bin());
    c.arg("compare").args(base).arg("--vs").args(cand).arg("--flamegraph").arg(svg).args(extra);
    run(c)
}

/// The SVG at `p`, which must be one well-nested XML document with an <svg> root.
fn svg_doc(p: &Path) -> String {
    let s = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(s.starts_with("<?xml"), "no XML declaration: {}", &s[..s.len().min(200)]);
    let mut open: Vec<String> = Vec::new();
    let mut rest = s.as_str();
    let mut root = None;
    while let Some(i) = rest.find('<') {
        rest = &rest[i..];
        if let Some(r) = rest.strip_prefix("<![CDATA[") {
            rest = &r[r.find("]]>").expect("CDATA ends") + 3..];
            continue;
        }
        let end = rest.find('>').expect("a tag ends");
        let tag = &rest[1..end];
        rest = &rest[end + 1..];
        if tag.starts_with('?') || tag.starts_with('!') || tag.ends_with('/') {
            continue;
        }
        let name = tag.trim_start_matches('/').split_whitespace().next().expect("a name").to_string();
        if tag.starts_with('/') {
            assert_eq!(open.pop().as_deref(), Some(name.as_str()), "</{name}> closes the wrong element");
        } else {
            root.get_or_insert_with(|| name.clone());
            open.push(name);
        }
    }
    assert!(open.is_empty(), "unclosed: {open:?}");
    assert_eq!(root.as_deref(), Some("svg"));
    s
}

/// The fill colour (r, g, b) of the frame whose title starts with `name (`.
fn fill(svg: &str, name: &str) -> (u8, u8, u8) {
    let want = format!("<title>{name} (");
    let at = svg.find(&want).unwrap_or_else(|| panic!("no frame {name} in the flame graph"));
    let rest = &svg[at..];
    let f = &rest[rest.find("fill=\"rgb(").expect("a fill") + 10..];
    let v: Vec<u8> =
        f[..f.find(')').expect(")")].split(',').map(|x| x.trim().parse().expect("0-255")).collect();
    (v[0], v[1], v[2])
}

fn red(c: (u8, u8, u8)) -> bool {
    c.0 == 255 && c.1 == c.2 && c.1 < 250
}

fn blue(c: (u8, u8, u8)) -> bool {
    c.2 == 255 && c.0 == c.1 && c.0 < 250
}

const WHITE: (u8, u8, u8) = (250, 250, 250);

#[test]
fn grown_site_red_shrunk_site_blue() {
    let dir = TempDir::new().expect("tempdir");
    let a = capture(dir.path(), "a", &[1024, 4096], ALL);
    let b = capture(dir.path(), "b", &[4096, 1024], ALL);
    for (by, what) in [("alloc-bytes", "bytes allocated"), ("live-at-peak", "bytes live at the peak")] {
        let svg = dir.path().join(format!("{by}.svg"));
        let out = compare(&[&a], &[&b], &svg, &["--flame-by", by]);
        out.assert_success("compare --flamegraph");
        assert!(out.stdout_str().contains("call sites that moved most"), "the report is printed as before");
        let s = svg_doc(&svg);
        assert!(
            s.contains(&format!("Differential flame graph: {what}, candidate against base")),
            "title: {by}"
        );
        assert!(s.contains("(1 log)"), "{by}: the subtitle names the logs");
        let (g, sh, st) = (fill(&s, "grow"), fill(&s, "shrink"), fill(&s, "steady"));
        assert!(red(g), "{by}: grow grew 1 to 4 MiB and is {g:?}, not red");
        assert!(blue(sh), "{by}: shrink shrank 4 to 1 MiB and is {sh:?}, not blue");
        assert_eq!(st, WHITE, "{by}: steady made 1 MiB in both runs");
        // The widths are the candidate's: grow's 4 MiB.
        assert!(
            s.contains("<title>grow (4,194,304 bytes"),
            "{by}: grow's width is not the candidate's 4 MiB"
        );
    }
    // The other way round the colours swap.
    let svg = dir.path().join("back.svg");
    compare(&[&b], &[&a], &svg, &[]).assert_success("compare b --vs a");
    let s = svg_doc(&svg);
    assert!(blue(fill(&s, "grow")) && red(fill(&s, "shrink")), "swapped sides, swapped colours");
}

#[test]
fn several_logs_a_side_are_averaged() {
    let dir = TempDir::new().expect("tempdir");
    // The base's two runs: 1 + 3 MiB at grow (mean 2), 4 + 4 at shrink (mean 4).
    let a1 = capture(dir.path(), "a1", &[1024, 4096], ALL);
    let a2 = capture(dir.path(), "a2", &[3072, 4096], ALL);
    let b = capture(dir.path(), "b", &[2048, 4096], ALL);
    let svg = dir.path().join("mean.svg");
    compare(&[&a1, &a2], &[&b], &svg, &["--flame-by", "live-at-peak"]).assert_success("compare 2 vs 1");
    let s = svg_doc(&svg);
    assert!(s.contains("change from the base (mean of 2 logs)"), "the subtitle says the mean");
    // Summed, the base would have 4 MiB at grow and 8 at shrink: both blue. Averaged, unchanged.
    assert_eq!(fill(&s, "grow"), WHITE, "grow: 2 MiB mean in the base, 2 in the candidate");
    assert_eq!(fill(&s, "shrink"), WHITE);
    assert!(s.contains("<title>grow (2,097,152 bytes, ") && s.contains("; 0.00%)"), "grow unchanged");
}

#[test]
fn runs_of_different_lengths_are_normalised_and_said() {
    let dir = TempDir::new().expect("tempdir");
    // The candidate makes twice the bytes at grow and shrink and runs 600 ms longer; steady
    // makes 1 MiB in both.
    let a = capture(dir.path(), "a", &[1024, 1024, 0], ALL);
    let b = capture(dir.path(), "b", &[2048, 2048, 600], ALL);
    let svg = dir.path().join("never.svg");
    compare(&[&a], &[&b], &svg, &["--flame-normalize", "never"]).assert_success("never");
    let s = svg_doc(&svg);
    assert!(s.contains("not normalised"));
    assert!(red(fill(&s, "grow")) && red(fill(&s, "shrink")), "twice the bytes: red");
    assert_eq!(fill(&s, "steady"), WHITE);
    // auto: the base's 3 MiB scaled to the candidate's 5: steady's share fell, grow's rose.
    let svg = dir.path().join("auto.svg");
    compare(&[&a], &[&b], &svg, &[]).assert_success("auto");
    let s = svg_doc(&svg);
    let said =
        ["the base scaled to the candidate&apos;s total (", ", as the logs ran ", "colours show shares"];
    assert!(said.iter().all(|w| s.contains(w)), "normalising not said");
    assert!(red(fill(&s, "grow")) && blue(fill(&s, "steady")), "shares: grow up, steady down");
    // live-at-peak does not add up over a run: auto leaves it.
    let svg = dir.path().join("peak.svg");
    compare(&[&a], &[&b], &svg, &["--flame-by", "live-at-peak"]).assert_success("peak");
    assert!(svg_doc(&svg).contains("not normalised"));
}

/// Refused: exit status 2, one line on stderr holding each of `words`, no report, no file.
fn assert_refused(o: &Output, svg: &Path, words: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "should be refused: {}", o.stderr);
    assert_eq!(o.stderr.trim().lines().count(), 1, "one line: {}", o.stderr);
    for w in words {
        assert!(o.stderr.contains(w), "`{w}` not said: {}", o.stderr);
    }
    assert!(o.stdout.is_empty(), "no report when refused: {}", o.stdout_str());
    assert!(!svg.exists(), "{} left behind", svg.display());
}

#[test]
fn refusals() {
    let dir = TempDir::new().expect("tempdir");
    let a = capture(dir.path(), "a", &[1024, 4096], ALL);
    let off = capture(dir.path(), "off", &[4096, 1024], &[("SHIM_STACKS", "off")]);
    let slow = capture(dir.path(), "slow", &[4096, 1024], &[]);
    let svg = dir.path().join("x.svg");
    let o = compare(&[&off], &[&a], &svg, &[]);
    assert_refused(&o, &svg, &["the base has no stacks", "SHIM_STACKS=off"]);
    let o = compare(&[&a], &[&off], &svg, &[]);
    assert_refused(&o, &svg, &["the candidate has no stacks", "SHIM_STACKS=off"]);
    // Every block freed: nothing never freed to draw.
    let o = compare(&[&a], &[&a], &svg, &["--flame-by", "leaked"]);
    assert_refused(&o, &svg, &["--flame-by leaked", "nothing to draw", "bytes never freed"]);
    // The default SHIM_STACKS=slow: stacks of slow calls only.
    let o = compare(&[&slow], &[&slow], &svg, &[]);
    assert_refused(&o, &svg, &["nothing to draw", "bytes allocated", "SHIM_STACKS=slow"]);
    // A measure the one pass does not fold: clap's error names the accepted ones.
    let o = compare(&[&a], &[&a], &svg, &["--flame-by", "alloc-calls"]);
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("alloc-bytes") && o.stderr.contains("live-at-peak"), "{}", o.stderr);
    assert!(!svg.exists());
    // --json: the same document with the flame graph as without, the graph written besides.
    let json = |extra: &[&str]| {
        let mut c = command(shimlog_bin());
        c.arg("compare").arg(&a).arg("--vs").arg(&a).arg("--json").args(extra);
        let out = run(c);
        out.assert_success("compare --json");
        out.json()
    };
    let svg_arg = svg.to_str().expect("utf-8");
    assert_eq!(json(&[]), json(&["--flamegraph", svg_arg]), "--json changed by --flamegraph");
    svg_doc(&svg);
}

/// `shimlog flamegraph BASE --vs CAND`: the same engine without the comparison, alloc-calls
/// too (grow made 256 calls in the base and 1024 in the candidate).
#[test]
fn flamegraph_vs_draws_the_same() {
    let dir = TempDir::new().expect("tempdir");
    let a = capture(dir.path(), "a", &[1024, 4096], ALL);
    let b = capture(dir.path(), "b", &[4096, 1024], ALL);
    let off = capture(dir.path(), "off", &[4096, 1024], &[("SHIM_STACKS", "off")]);
    let flame = |base: &Path, cand: &Path, svg: &Path, by: &str| {
        let mut c = command(shimlog_bin());
        c.arg("flamegraph").arg(base).arg("--vs").arg(cand).args(["--by", by, "-o"]).arg(svg);
        run(c)
    };
    let svg = dir.path().join("calls.svg");
    flame(&a, &b, &svg, "alloc-calls").assert_success("flamegraph --vs");
    let s = svg_doc(&svg);
    assert!(s.contains("Differential flame graph: allocations, candidate against base"));
    assert!(s.contains("<title>grow (1,024 calls"), "grow's width: the candidate's 1024 calls");
    assert!(red(fill(&s, "grow")) && blue(fill(&s, "shrink")));
    assert_eq!(fill(&s, "steady"), WHITE);
    let o = flame(&a, &off, &svg.with_extension("off.svg"), "alloc-bytes");
    assert_eq!(o.status.code(), Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("has no stacks") && o.stderr.contains("SHIM_STACKS=off"), "{}", o.stderr);
    assert!(!svg.with_extension("off.svg").exists());
}
