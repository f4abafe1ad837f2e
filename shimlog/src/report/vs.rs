//! `report BASE... --vs CANDIDATE...`: `compare` drawn. The page's data is `compare --json`'s
//! document as it is (so that every number on the page is one `compare` gives: its table,
//! intervals and verdicts), beside what the document does not carry, for the overlay: each
//! log's memory over time (RSS and live bytes, from the log's start), and each side's
//! latency distribution as a CDF, of every timed call and per C function, pooled over the
//! side's logs from the same time slices the bootstrap draws.
use crate::analysis::{bucket_value, BUCKETS, OPS};
use crate::compare::{Document, Side};
use recorder::Op;
use serde_json::{json, Map, Value};

/// Most points a CDF line keeps.
const CDF_POINTS: usize = 600;

/// `flame`: the differential flame graph (an SVG document) or why there is none (one line).
pub fn build(
    doc: &Document,
    base: &Side,
    cand: &Side,
    flame: Result<String, String>,
) -> Result<Value, String> {
    let compare = serde_json::to_value(doc).map_err(|e| e.to_string())?;
    let mut memory = Vec::new();
    for (name, side, info) in [("base", base, &doc.base), ("candidate", cand, &doc.candidate)] {
        for (i, l) in side.logs.iter().enumerate() {
            memory.push(json!({
                "side": name,
                "log": info.logs.get(i),
                "exe": l.name,
                "backend": l.backend,
                "kind": l.kind,
                "points": l.memory.iter().map(|&(t, rss, live)| json!([t, rss, live])).collect::<Vec<_>>(),
            }));
        }
    }
    let title = format!(
        "shimlog report: {} on {} against {} on {}",
        doc.base.programs.join(", "),
        doc.base.backends.join(", "),
        doc.candidate.programs.join(", "),
        doc.candidate.backends.join(", ")
    );
    let logs: Vec<&String> = doc.base.logs.iter().chain(&doc.candidate.logs).collect();
    Ok(json!({
        "title": title,
        "shimlog_version": env!("CARGO_PKG_VERSION"),
        "logs": logs,
        "compare": compare,
        "overlay": {
            "memory": memory,
            "latency_cdf": { "base": cdfs(base), "candidate": cdfs(cand) },
        },
        "diff_flame": match flame {
            Ok(svg) => json!({ "svg": inline(&svg)? }),
            Err(why) => json!({ "none": why }),
        },
    }))
}

/// inferno's SVG document as an element the page can hold inline: from `<svg` on (no XML
/// declaration, no DOCTYPE), without its script and the `onload` that calls it (a page's
/// innerHTML runs no script, and the handler would fail for want of it), and without its
/// style sheet, which would apply to the whole page (page.css has its rules, scoped to the
/// section). What is left is the frames, each with its title (name, value, change) as a
/// tooltip; `compare --flamegraph` writes the interactive file.
fn inline(svg: &str) -> Result<String, String> {
    let bad = |what: &str| format!("the differential flame graph: {what} not where inferno puts it");
    let mut s = svg[svg.find("<svg").ok_or_else(|| bad("<svg"))?..].to_string();
    for (open, close) in [("<script", "</script>"), ("<style", "</style>")] {
        while let Some(a) = s.find(open) {
            let b = a + s[a..].find(close).ok_or_else(|| bad(close))? + close.len();
            s.replace_range(a..b, "");
        }
    }
    Ok(s.replacen(" onload=\"init(evt)\"", "", 1))
}

/// The side's timed calls as CDFs: `all`, and each C function it timed: [[ns, share], ...].
fn cdfs(s: &Side) -> Value {
    let mut per_op = vec![vec![0u64; BUCKETS]; OPS];
    for &i in &s.call_logs() {
        for sl in &s.logs[i].slices {
            for &(b, c) in &sl.timed {
                per_op[b as usize / BUCKETS][b as usize % BUCKETS] += c;
            }
        }
    }
    let mut all = vec![0u64; BUCKETS];
    for h in &per_op {
        for (a, &c) in all.iter_mut().zip(h) {
            *a += c;
        }
    }
    let mut out = Map::new();
    if let Some(c) = cdf(&all) {
        out.insert("all".into(), c);
    }
    for (o, h) in per_op.iter().enumerate() {
        if let Some(c) = cdf(h) {
            out.insert(Op::ALLOC_OPS[o].name().to_string(), c);
        }
    }
    Value::Object(out)
}

fn cdf(h: &[u64]) -> Option<Value> {
    let n: u64 = h.iter().sum();
    if n == 0 {
        return None;
    }
    let mut pts = Vec::new();
    let mut seen = 0u64;
    for (i, &c) in h.iter().enumerate().filter(|x| *x.1 > 0) {
        seen += c;
        pts.push((bucket_value(i as u32), seen as f64 / n as f64));
    }
    if pts.len() > CDF_POINTS {
        let step = pts.len() as f64 / CDF_POINTS as f64;
        let last = pts[pts.len() - 1];
        pts = (0..CDF_POINTS - 1).map(|i| pts[(i as f64 * step) as usize]).chain([last]).collect();
    }
    Some(Value::Array(pts.into_iter().map(|(v, q)| json!([v, q])).collect()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn inline_keeps_the_frames_and_drops_script_style_and_onload() {
        let doc = concat!(
            "<?xml version=\"1.0\" standalone=\"no\"?><!DOCTYPE svg PUBLIC \"x\" \"y\">",
            "<svg version=\"1.1\" onload=\"init(evt)\"><style type=\"text/css\">text { x }</style>",
            "<script type=\"text/ecmascript\"><![CDATA[var a;]]><![CDATA[function init(evt) {}]]></script>",
            "<g><title>grow (1 bytes)</title><rect fill=\"rgb(255,100,100)\"/></g></svg>"
        );
        let s = super::inline(doc).unwrap();
        assert_eq!(s, "<svg version=\"1.1\"><g><title>grow (1 bytes)</title><rect fill=\"rgb(255,100,100)\"/></g></svg>");
        assert!(super::inline("<svg><script>x").is_err(), "an unclosed script is refused");
    }
}
