//! `shimlog report` in a real browser: Debian's chromium, headless, opens the page from
//! file:// (tools/test-deps.sh installs it; without chromium these tests fail, naming it).
//! The page must draw itself with no console error and no request for
//! anything outside the file, show every section, not be blank, and every number it shows
//! from the stats document must be the one `shimlog stats --json` prints for the same logs.
mod sitelog;
mod synth;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use synth::random::workload;
use synth::{dir, shimlog, stats_json};

const SECTIONS: [&str; 7] =
    ["sec-program", "sec-memory", "sec-sizes", "sec-latency", "sec-threads", "sec-sites", "sec-replay"];

/// The browser; a machine without one fails the test, naming it (tools/test-deps.sh
/// installs Debian's chromium).
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

/// What headless chromium made of a page: the DOM after its scripts ran, and the lines its
/// log (--enable-logging=stderr) has about the page's console and network.
struct Opened {
    dom: String,
    console: Vec<String>,
}

fn open(browser: &str, page: &str, scratch: &str, extra: &[&str]) -> Opened {
    let profile = format!("{scratch}/profile-{}", extra.len());
    let url = format!("file://{}", std::fs::canonicalize(page).unwrap().display());
    let o = Command::new(browser)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={profile}"))
        .args(extra)
        .arg(&url)
        .output()
        .expect("run chromium");
    assert!(o.status.success(), "chromium failed: {}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    let console = err
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Content Security Policy") || l.contains("net::ERR"))
        .map(str::to_string)
        .collect();
    Opened { dom: String::from_utf8_lossy(&o.stdout).into_owned(), console }
}

fn report(args: &[&str]) -> String {
    let o = shimlog(args);
    assert!(o.status.success(), "shimlog {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The page's drawn content (the DOM also holds the script's own text).
fn drawn(dom: &str) -> &str {
    let a = dom.find("<main id=\"main\">").expect("the page's main element");
    &dom[a..a + dom[a..].find("</main>").expect("</main>")]
}

/// Every (data-field, data-raw) pair the page drew.
fn fields(dom: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for part in drawn(dom).split("data-field=\"").skip(1) {
        let field = &part[..part.find('"').unwrap()];
        let rest = &part[field.len()..];
        let raw = rest.split("data-raw=\"").nth(1).map(|r| &r[..r.find('"').unwrap()]).unwrap();
        out.push((unescape(field), unescape(raw)));
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| match v {
        Value::Array(a) => a.get(k.parse::<usize>().ok()?),
        _ => v.get(k),
    })
}

/// Each number the page shows from the stats document equals stats --json's; returns how
/// many were compared.
fn compare(dom: &str, stats: &Value) -> usize {
    let fs = fields(dom);
    for (f, raw) in &fs {
        let want = lookup(stats, f)
            .unwrap_or_else(|| panic!("the page shows {f}, which stats --json does not have"));
        match want {
            Value::Number(n) => {
                let got: f64 = raw.parse().unwrap_or_else(|_| panic!("{f}: '{raw}' is not a number"));
                let w = n.as_f64().unwrap();
                assert!(
                    (got - w).abs() <= 1e-9 * w.abs().max(1.0),
                    "{f}: the page has {raw}, stats --json {w}"
                );
            }
            Value::String(s) => assert_eq!(raw, s, "{f}"),
            Value::Null => assert_eq!(raw, "null", "{f}"),
            other => assert_eq!(raw, &other.to_string(), "{f}"),
        }
    }
    fs.len()
}

fn shown(dom: &str, field: &str) -> bool {
    drawn(dom).contains(&format!("data-field=\"{field}\""))
}

/// Fails unless the page drew itself, touched nothing outside its file and logged nothing.
fn clean(o: &Opened) {
    assert!(o.dom.contains("data-rendered=\"ok\""), "the page's script did not finish: {:?}", o.console);
    assert!(o.dom.contains("data-resources=\"0\""), "the page loaded resources from elsewhere");
    assert!(o.console.is_empty(), "console or network messages: {:#?}", o.console);
}

#[test]
fn one_log_in_chromium() {
    let browser = chromium();
    let d = dir("report-one");
    let log = workload(&format!("{d}/w.shimlog"), 300, 0, 4, 30_000, 7);
    let page = format!("{d}/report.html");
    assert_eq!(report(&["report", &log, "-o", &page]).trim(), page, "report prints the page's path");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.len() < 2 << 20, "the page is {} bytes", html.len());
    // Nothing refers to anything outside the file.
    for bad in ["src=\"http", "href=\"http", "src='http", "url(http", "@import"] {
        assert!(!html.contains(bad), "the page refers to something outside itself: {bad}");
    }
    let o = open(browser, &page, &d, &["--dump-dom"]);
    clean(&o);
    for s in SECTIONS {
        assert!(o.dom.contains(&format!("<section id=\"{s}\"")), "section {s} missing");
    }
    assert!(
        drawn(&o.dom).contains("id=\"no-stacks\""),
        "a log without stacks: the call-site section says so"
    );
    assert!(o.dom.contains("<svg"), "no chart");
    let stats = stats_json(&[&log]);
    let n = compare(&o.dom, &stats);
    for f in [
        "events",
        "duration_ns",
        "threads",
        "peak_live_bytes",
        "live_at_end.bytes",
        "ops.malloc",
        "ops.free",
        "bytes.malloc",
        "cross_thread_frees.count",
        "lifetimes.p50_ns",
        "lifetimes.p99_ns",
        "latency.per_op.malloc.p99_ns",
        "latency.per_op.free.p50_ns",
        "memory.peak_rss_bytes",
        "sizes.buckets.0.requests",
        "per_thread.0.allocs",
        "slop.jemalloc.slop_bytes",
    ] {
        assert!(shown(&o.dom, f), "the page does not show {f}");
    }
    assert!(n > 100, "only {n} numbers compared");
    // The screenshot: a page, not a blank.
    let shot = format!("{d}/shot.png");
    let _ = open(browser, &page, &d, &[&format!("--screenshot={shot}"), "--window-size=1200,1600"]);
    let img = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut r = img.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    let bg = pixels[0];
    let other = pixels.iter().filter(|p| *p != &bg).count();
    let mut colours: Vec<&[u8]> = pixels.clone();
    colours.sort();
    colours.dedup();
    assert!(
        other * 20 > pixels.len(),
        "the screenshot is nearly blank: {other} of {} pixels differ from the background",
        pixels.len()
    );
    assert!(colours.len() > 16, "the screenshot has {} colours", colours.len());
}

#[test]
fn several_logs_and_their_total() {
    let browser = chromium();
    let d = dir("report-many");
    let a = workload(&format!("{d}/a.shimlog"), 401, 0, 3, 8_000, 11);
    let b = workload(&format!("{d}/b.shimlog"), 402, 5_000_000, 2, 6_000, 12);
    let page = format!("{d}/report.html");
    report(&["report", &a, &b, "-o", &page]);
    let o = open(browser, &page, &d, &["--dump-dom"]);
    clean(&o);
    let stats = stats_json(&[&a, &b]);
    compare(&o.dom, &stats);
    for f in
        ["processes", "events", "logs.0.process.pid", "logs.1.process.pid", "logs.0.events", "logs.1.events"]
    {
        assert!(shown(&o.dom, f), "the page does not show {f}");
    }
    // One memory chart per process.
    assert!(o.dom.contains("(pid 401): memory over time") && o.dom.contains("(pid 402): memory over time"));
}

#[test]
fn replay_backends_side_by_side() {
    let browser = chromium();
    let d = dir("report-replay");
    let log = workload(&format!("{d}/w.shimlog"), 500, 0, 3, 5_000, 5);
    let page = format!("{d}/report.html");
    report(&["report", &log, "--replay", "-o", &page]);
    let o = open(browser, &page, &d, &["--dump-dom"]);
    clean(&o);
    let sec = &o.dom[o.dom.find("<section id=\"sec-replay\"").unwrap()..];
    let table = &sec[sec.find("replay-table").expect("the replay's table")..];
    let table = &table[..table.find("</table>").unwrap()];
    for b in ["glibc", "jemalloc", "mimalloc"] {
        assert!(table.contains(&format!(">{b}</td>")), "no {b} row in the replay table");
    }
    assert!(sec.contains("RSS over the replay") && sec.contains("latency CDF"), "overlaid charts missing");
}

/// A log with stacks (every allocation taken, in two functions' frames): the call-site
/// section lists the sites with stats' numbers and draws the flame graphs as images.
#[test]
fn call_sites_and_flame_graphs() {
    let browser = chromium();
    use recorder::event::site_flags::ALL;
    let d = dir("report-sites");
    let mut h = synth::header(600, 0);
    h.stacks = Some("all".into());
    h.unwind = Some("tables".into());
    h.stack_depth = Some(64);
    let mut l = synth::Log::create(&format!("{d}/s.shimlog"), &h);
    l.thread(1, 100);
    let (exe, main) = sitelog::shimlog_main();
    sitelog::mapping(&mut l, 1, 200, 0x1000, 1 << 40, 0, &exe, &[]);
    sitelog::stack(&mut l, 1, 200, 1, 1, &[main]);
    sitelog::stack(&mut l, 1, 200, 2, 2, &[main + 1, main]);
    for i in 0..40u64 {
        let ts = 1_000 + i * 10;
        l.malloc(1, ts, 100 + i, 0x10_000 + i * 0x1000);
        sitelog::site(&mut l, 1, ts, 1 + i % 2, ALL);
    }
    for i in 0..20u64 {
        l.free(1, 2_000 + i * 10, 0x10_000 + i * 0x1000);
    }
    let log = l.finish(true);
    let page = format!("{d}/report.html");
    report(&["report", &log, "-o", &page]);
    let o = open(browser, &page, &d, &["--dump-dom"]);
    clean(&o);
    assert!(!drawn(&o.dom).contains("id=\"no-stacks\""), "the page says there are no stacks");
    let stats = stats_json(&[&log]);
    compare(&o.dom, &stats);
    for f in [
        "sites.total_alloc_bytes",
        "sites.by_bytes.0.alloc_bytes",
        "sites.by_bytes.0.alloc_calls",
        "sites.leaked.0.leaked_bytes",
        "sites.live_at_peak.0.live_at_peak_bytes",
    ] {
        assert!(shown(&o.dom, f), "the page does not show {f}");
    }
    for by in ["bytes allocated", "bytes live at the peak", "bytes never freed"] {
        assert!(
            drawn(&o.dom).contains(&format!("alt=\"flame graph by {by}\" src=\"data:image/svg+xml")),
            "no flame graph by {by}"
        );
    }
}

/// The checks above can fail: the same page made to fetch an image from elsewhere is caught.
#[test]
fn a_page_reaching_out_is_caught() {
    let browser = chromium();
    let d = dir("report-reaching");
    let log = workload(&format!("{d}/w.shimlog"), 600, 0, 2, 2_000, 3);
    let page = format!("{d}/report.html");
    report(&["report", &log, "-o", &page]);
    let html = std::fs::read_to_string(&page)
        .unwrap()
        .replace("<body>", "<body><img src=\"http://127.0.0.1:9/x.png\">");
    let bad = format!("{d}/bad.html");
    std::fs::write(&bad, html).unwrap();
    let o = open(browser, &bad, &d, &["--dump-dom"]);
    assert!(!o.console.is_empty(), "an outside request went unnoticed");
}

#[test]
fn bad_input_is_one_line() {
    let d = dir("report-bad");
    let not_log = format!("{d}/not.shimlog");
    std::fs::write(&not_log, "hello").unwrap();
    let o = shimlog(&["report", &not_log, "-o", &format!("{d}/r.html")]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a shim log"), "{err}");
    let o = shimlog(&["report", &not_log, "-o", "/nonexistent-dir/r.html"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot create /nonexistent-dir/r.html"));
    assert!(!Path::new("/nonexistent-dir").exists());
}

/// `report BASE --vs CANDIDATE`: compare drawn. The page embeds both sides' memory series
/// and latency CDFs and draws them overlaid; every number it shows from compare's document
/// is the one `compare --json` prints for the same logs; the verdicts are there.
#[test]
fn a_pair_compared_and_overlaid() {
    let browser = chromium();
    let d = dir("report-vs");
    // The same program (synth's), the candidate with twice the calls and half as many
    // blocks live again.
    let a = paced(&format!("{d}/a.shimlog"), 700, 50, 2_000, 21);
    let b = paced(&format!("{d}/b.shimlog"), 701, 100, 3_000, 22);
    let page = format!("{d}/ab.html");
    assert_eq!(report(&["report", &a, "--vs", &b, "-o", &page]).trim(), page);
    let html = std::fs::read_to_string(&page).unwrap();
    // The embedded data: both sides' series.
    let data = &html[html.find("<script id=\"shimlog-data\" type=\"application/json\">").unwrap()..];
    let data = &data[data.find('>').unwrap() + 1..data.find("</script>").unwrap()];
    let doc: Value = serde_json::from_str(&data.replace("<\\/", "</")).unwrap();
    let mem = doc["overlay"]["memory"].as_array().unwrap();
    assert_eq!(mem.iter().map(|m| m["side"].as_str().unwrap()).collect::<Vec<_>>(), ["base", "candidate"]);
    for m in mem {
        let pts = m["points"].as_array().unwrap();
        assert!(
            pts.len() > 10 && pts.iter().any(|p| p[1].is_u64()),
            "{}: RSS points {}",
            m["side"],
            pts.len()
        );
    }
    for side in ["base", "candidate"] {
        let cdf =
            doc["overlay"]["latency_cdf"][side]["all"].as_array().unwrap_or_else(|| panic!("{side}: no CDF"));
        assert!(cdf.len() > 5, "{side}: {} CDF points", cdf.len());
        assert_eq!(cdf.last().unwrap()[1].as_f64(), Some(1.0), "{side}: a CDF ends at 1");
    }
    let cmp = {
        let o = shimlog(&["compare", &a, "--vs", &b, "--json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    assert_eq!(doc["compare"], cmp, "the page's compare document is compare --json's");

    let o = open(browser, &page, &d, &["--dump-dom"]);
    clean(&o);
    for s in ["sec-verdict", "sec-overlay", "sec-compare", "sec-sites", "sec-diffflame"] {
        assert!(o.dom.contains(&format!("<section id=\"{s}\"")), "section {s} missing");
    }
    // Neither side has stacks: no differential flame graph, one line saying why
    // (itest/tests/report_vs_flame.rs draws one from real captures with stacks).
    assert!(
        drawn(&o.dom).contains("id=\"no-diff-flame\">no differential flame graph: the base has no stacks"),
        "no note on the missing differential flame graph"
    );
    // Every number shown is compare's; the table and the verdicts are all there.
    let n = compare(&o.dom, &cmp);
    let metrics = cmp["metrics"].as_array().unwrap();
    for (i, m) in metrics.iter().enumerate() {
        if m["not_compared"].is_null() {
            for f in ["name", "base", "candidate"] {
                assert!(
                    shown(&o.dom, &format!("metrics.{i}.{f}")),
                    "metric {} ({f}) not on the page",
                    m["name"]
                );
            }
        }
    }
    for i in 0..cmp["verdicts"].as_array().unwrap().len() {
        assert!(shown(&o.dom, &format!("verdicts.{i}.text")), "verdict {i} not on the page");
    }
    assert!(n > 40, "only {n} numbers compared");
    // The overlays: a line of each side in each chart.
    let drawn_dom = drawn(&o.dom);
    for chart in ["overlay-rss", "overlay-live", "overlay-cdf-all", "overlay-cdf-malloc"] {
        let at = drawn_dom.find(&format!("id=\"{chart}\"")).unwrap_or_else(|| panic!("no {chart}"));
        let fig = &drawn_dom[at..at + drawn_dom[at..].find("</figure>").unwrap()];
        for (k, side) in [(0, "base"), (1, "candidate")] {
            assert!(fig.contains(&format!("<path class=\"line s{k}\" d=\"M")), "{chart}: no {side} line");
            assert!(fig.contains(&format!(">{side}</text>")), "{chart}: no {side} in the legend");
        }
    }
    // The candidate made twice the calls: the rates' verdict says so (as the largest change:
    // from one log a side no change of calls is called one, docs/compare.md).
    let rates = cmp["verdicts"].as_array().unwrap().iter().find(|v| v["group"] == "rates").unwrap();
    let text = rates["text"].as_str().unwrap();
    assert!(text.contains("the largest change: calls +") || rates["differs"] == true, "{rates}");
    assert!(
        drawn_dom.contains(&super_escape(rates["text"].as_str().unwrap())),
        "the rates' verdict is on the page"
    );
}

/// Text as the page writes it.
fn super_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

#[test]
fn a_pair_that_cannot_be_compared_is_refused() {
    let d = dir("report-vs-refused");
    let a = workload(&format!("{d}/a.shimlog"), 710, 0, 2, 2_000, 1);
    let page = format!("{d}/ab.html");
    let o = shimlog(&["report", &a, "--vs", &a, "--replay", "-o", &page]);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim().lines().count(), 1);
    assert!(!Path::new(&page).exists(), "no page left behind");
}

/// A paced service over 2 s: `live` blocks of 64 B to 4 KiB kept live, `per_ms` of them
/// replaced every millisecond (a free and a malloc, each with a backend time), RSS every
/// 10 ms (8 MiB and 1.25 bytes a live byte).
fn paced(path: &str, pid: u32, per_ms: u64, live: u64, seed: u64) -> String {
    use recorder::buffer::Args;
    use recorder::Op;
    let mut l = synth::Log::create(path, &synth::header(pid, 0));
    let tid = pid * 10;
    l.thread(tid, 1);
    let mut x = seed | 1;
    let mut next = |n: u64| {
        synth::xorshift(&mut x);
        x % n
    };
    let mut blocks: Vec<(u64, u64)> = Vec::new();
    let mut live_bytes = 0u64;
    let mut ptr = 0x10_0000u64;
    let mut ts = 10u64;
    for _ in 0..live {
        let size = 64 + next(4032);
        ptr += 0x1000;
        l.call(tid, ts, Op::Malloc, Args { size, ptr, ..Default::default() }, Some(40 + next(200)));
        blocks.push((ptr, size));
        live_bytes += size;
        ts += 100;
    }
    for ms in 1..=2000u64 {
        let t0 = ms * 1_000_000;
        for k in 0..per_ms {
            let ts = t0 + k * 1_000;
            let j = next(blocks.len() as u64) as usize;
            let (p, size) = blocks[j];
            l.call(tid, ts, Op::Free, Args { ptr: p, ..Default::default() }, Some(20 + next(100)));
            ptr += 0x1000;
            l.call(
                tid,
                ts + 500,
                Op::Malloc,
                Args { size, ptr, ..Default::default() },
                Some(40 + next(200) + if next(500) == 0 { 20_000 } else { 0 }),
            );
            blocks[j] = (ptr, size);
        }
        if ms % 10 == 0 {
            l.process(t0 + 999_000, Op::Rss, (8 << 20) + live_bytes * 5 / 4 + next(1 << 16));
        }
    }
    l.finish(true)
}
