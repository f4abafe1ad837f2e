//! `shimlog report BASE --vs CANDIDATE`: the comparison page holds the differential flame
//! graph of the two sides' call sites, inline, when both have stacks, and one line saying
//! why not when a side has none. Real captures of itest/programs/c/flame_sites.c under the
//! real shim (grow 1 MiB -> 4 MiB, shrink 4 MiB -> 1 MiB), the page opened in real headless
//! chromium (tools/test-deps.sh installs it; without it the test fails, naming it) and its
//! DOM, after the page's script ran, read back.
use itest::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// flame_sites GROW_KIB SHRINK_KIB under the shim with SHIM_STACKS=`stacks`, its log dir/NAME.shimlog.
fn capture(dir: &Path, name: &str, args: &[u32], stacks: &str) -> PathBuf {
    let log = dir.join(format!("{name}.shimlog"));
    let mut c = command(cprog("flame_sites"));
    c.args(args.iter().map(|a| a.to_string()))
        .env("LD_PRELOAD", shim_lib())
        .env("SHIM_LOG", &log)
        .env("SHIM_STACKS", stacks);
    run(c).assert_success(&format!("flame_sites {name}"));
    assert!(log.is_file(), "{} not written", log.display());
    log
}

fn chromium() -> &'static str {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
        .unwrap_or_else(|| {
            panic!(
                "cannot run: chromium is missing (apt-get install chromium; tools/test-deps.sh installs it)"
            )
        })
}

/// `report BASE --vs CAND -o dir/NAME.html`, opened in chromium: the DOM after the page's
/// script ran (which must have finished, loaded nothing from elsewhere and logged nothing).
fn page_dom(dir: &Path, name: &str, base: &Path, cand: &Path) -> String {
    let page = dir.join(format!("{name}.html"));
    let mut c = command(shimlog_bin());
    c.arg("report").arg(base).arg("--vs").arg(cand).arg("-o").arg(&page);
    let out = run(c);
    out.assert_success("report --vs");
    assert!(out.stderr.trim().is_empty(), "report --vs said: {}", out.stderr);
    let o = Command::new(chromium())
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", dir.join(format!("profile-{name}")).display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(o.status.success(), "chromium failed: {}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let console: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Content Security Policy") || l.contains("net::ERR"))
        .collect();
    assert!(console.is_empty(), "console or network messages: {console:#?}");
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(dom.contains("data-rendered=\"ok\""), "the page's script did not finish");
    assert!(dom.contains("data-resources=\"0\""), "the page loaded resources from elsewhere");
    dom
}

/// The drawn section `id` (from its opening tag to its end).
fn section<'a>(dom: &'a str, id: &str) -> &'a str {
    let at = dom.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no section {id}"));
    let s = &dom[at..];
    &s[..s.find("</section>").expect("</section>")]
}

/// The fill colour (r, g, b) of the frame whose title starts with `name (`, in `svg`.
fn fill(svg: &str, name: &str) -> (u8, u8, u8) {
    let at = svg.find(&format!("<title>{name} (")).unwrap_or_else(|| panic!("no frame {name}"));
    let rest = &svg[at..];
    let rect = &rest[..rest.find("</g>").expect("the frame's </g>")];
    let f = &rect[rect.find("fill=\"rgb(").unwrap_or_else(|| panic!("{name}: no fill in {rect}")) + 10..];
    let v: Vec<u8> =
        f[..f.find(')').expect(")")].split(',').map(|x| x.trim().parse().expect("0-255")).collect();
    (v[0], v[1], v[2])
}

#[test]
fn the_pair_with_stacks_shows_its_differential_flame_graph() {
    let dir = TempDir::new().expect("tempdir");
    let a = capture(dir.path(), "a", &[1024, 4096], "all");
    let b = capture(dir.path(), "b", &[4096, 1024], "all");
    let dom = page_dom(dir.path(), "ab", &a, &b);
    let sec = section(&dom, "sec-diffflame");
    assert!(!sec.contains("id=\"no-diff-flame\""), "the section says there is none: {sec}");
    assert!(sec.contains("red where") && sec.contains("blue where"), "the heading's note on colours");
    let svg = &sec[sec.find("<svg").expect("an inline <svg> in the section")..];
    let svg = &svg[..svg.find("</svg>").expect("</svg>")];
    assert!(svg.contains("Differential flame graph: bytes allocated, candidate against base"));
    // inferno's script and style sheet are not carried into the page.
    assert!(!svg.contains("<script") && !svg.contains("<style") && !svg.contains("onload"), "{svg}");
    // Nothing in it binds a number of compare's document: shimlog/tests/report.rs's check that
    // every number shown is compare's (data-field/data-raw) reads none of the graph's text.
    assert!(!svg.contains("data-field") && !svg.contains("data-raw"));
    let (g, s, st) = (fill(svg, "grow"), fill(svg, "shrink"), fill(svg, "steady"));
    assert!(g.0 == 255 && g.1 == g.2 && g.1 < 250, "grow grew 1 to 4 MiB and is {g:?}, not red");
    assert!(s.2 == 255 && s.0 == s.1 && s.0 < 250, "shrink shrank 4 to 1 MiB and is {s:?}, not blue");
    assert_eq!(st, (250, 250, 250), "steady made 1 MiB in both runs");
    assert!(svg.contains("<title>grow (4,194,304 bytes"), "grow's width is not the candidate's 4 MiB");
    // The rest of the page is still there.
    for s in ["sec-verdict", "sec-compare", "sec-sites"] {
        assert!(dom.contains(&format!("<section id=\"{s}\"")), "section {s} missing");
    }
}

#[test]
fn a_side_without_stacks_gets_one_line() {
    let dir = TempDir::new().expect("tempdir");
    let a = capture(dir.path(), "a", &[1024, 4096], "all");
    let off = capture(dir.path(), "off", &[4096, 1024], "off");
    for (name, base, cand, who) in [("offa", &off, &a, "base"), ("aoff", &a, &off, "candidate")] {
        let dom = page_dom(dir.path(), name, base, cand);
        let sec = section(&dom, "sec-diffflame");
        assert!(!sec.contains("<svg"), "{name}: a flame graph from a side without stacks");
        let at = sec.find("id=\"no-diff-flame\"").unwrap_or_else(|| panic!("{name}: no note: {sec}"));
        let note = &sec[at..sec[at..].find("</p>").unwrap() + at];
        assert!(
            note.contains(&format!("the {who} has no stacks")) && note.contains("SHIM_STACKS=off"),
            "{name}: {note}"
        );
        assert!(!note.contains('\n'), "one line: {note}");
        assert!(dom.contains("<section id=\"sec-compare\""), "{name}: the page still draws the comparison");
    }
}
