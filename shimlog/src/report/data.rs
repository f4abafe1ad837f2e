//! The page's data: the `stats --json` document (so that every number on the page is one
//! `stats` gives), with each process's memory samples thinned to what a chart can show, plus
//! what the JSON does not carry: each operation's latency distribution as a CDF, every
//! (maker, freer) thread pair for the cross-thread matrix, and the replays.
use crate::analysis::{Analysed, Latency, Section, Threads};
use serde_json::{json, Map, Value};

/// Most points a memory or CDF line keeps: a chart is at most ~1000 pixels wide.
const MAX_POINTS: usize = 1200;

pub fn build(logs: &[String], an: &Analysed, replay_asked: bool, replays: Vec<Value>) -> Value {
    let mut stats = serde_json::to_value(&an.total).unwrap_or(Value::Null);
    if !an.sections.is_empty() {
        stats["logs"] = serde_json::to_value(&an.sections).unwrap_or(Value::Null);
    }
    // The memory series, thinned, beside the stats document (whose samples are left out).
    let mut memory = Vec::new();
    let sections: Vec<&Section> =
        if an.sections.is_empty() { vec![&an.total] } else { an.sections.iter().collect() };
    for (i, s) in sections.iter().enumerate() {
        let pts: Vec<[Value; 3]> = s
            .memory
            .samples
            .iter()
            .map(|m| {
                [
                    json!(m.ts_ns + an.offsets[i]),
                    json!(m.rss_bytes),
                    json!(m.max_live_bytes.max(m.live_bytes)),
                ]
            })
            .collect();
        memory.push(json!({
            "pid": s.process.as_ref().map(|p| p.pid),
            "exe": s.process.as_ref().map(|p| p.program.clone()),
            "offset_ns": an.offsets[i],
            "samples_from": s.memory.samples_from,
            "points": thin(pts),
        }));
    }
    strip_samples(&mut stats);
    let mut lat = Latency::new(0);
    let mut threads = Threads::new(0, 1);
    for (i, a) in an.analyses.iter().enumerate() {
        lat.merge(&a.lat, an.offsets[i]);
        threads.merge(&a.threads, an.offsets[i]);
    }
    let mut cdf = Map::new();
    for (op, h) in lat.histograms() {
        let n = h.len().max(1) as f64;
        let mut pts = Vec::new();
        let mut seen = 0u64;
        for v in h.iter_recorded() {
            seen += v.count_since_last_iteration();
            pts.push([json!(h.highest_equivalent(v.value_iterated_to())), json!(seen as f64 / n)]);
        }
        cdf.insert(op.to_string(), Value::Array(thin(pts).into_iter().map(|p| json!(p)).collect()));
    }
    let title = match an.sections.len() {
        0 => format!("shimlog report: {}", short_exe(&an.total)),
        n => format!("shimlog report: {} processes ({})", n, short_exe(&an.sections[0])),
    };
    json!({
        "title": title,
        "shimlog_version": env!("CARGO_PKG_VERSION"),
        "logs": logs,
        "stats": stats,
        "memory": memory,
        "latency_cdf": cdf,
        "thread_pairs": threads.pairs(),
        // Each process's flame graphs (SVG documents, shown as images), when its log has stacks.
        "flames": flames(&sections),
        "replay_asked": replay_asked,
        "replays": replays,
    })
}

fn flames(sections: &[&Section]) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        let Some(f) = &s.folded else { continue };
        for (by, lines) in &f.graphs {
            let title = format!(
                "{} (pid {}) by {}",
                short_exe(s),
                s.process.as_ref().map_or(0, |p| p.pid),
                by.title()
            );
            match crate::flamegraph::svg(lines, &title, *by) {
                Ok(svg) => out.push(json!({"section": i, "by": by.title(), "svg": svg})),
                Err(e) => {
                    eprintln!("shimlog: note: the flame graph by {} could not be drawn: {e}", by.title())
                }
            }
        }
    }
    out
}

fn short_exe(s: &Section) -> String {
    s.process.as_ref().map(|p| crate::name::shown(&p.exe, &p.cmdline)).unwrap_or_default()
}

/// At most MAX_POINTS of `pts`, evenly spaced, the last kept (a chart's end is its end).
fn thin<T: Clone>(pts: Vec<T>) -> Vec<T> {
    if pts.len() <= MAX_POINTS {
        return pts;
    }
    let step = pts.len() as f64 / MAX_POINTS as f64;
    let mut out: Vec<T> = (0..MAX_POINTS - 1).map(|i| pts[(i as f64 * step) as usize].clone()).collect();
    out.push(pts[pts.len() - 1].clone());
    out
}

/// The memory samples are in `memory` (thinned); the document keeps their count.
fn strip_samples(v: &mut Value) {
    if let Some(m) = v.get_mut("memory").and_then(|m| m.as_object_mut()) {
        let n = m.get("samples").and_then(|s| s.as_array()).map_or(0, |s| s.len());
        m.remove("samples");
        m.insert("sample_count".into(), json!(n));
    }
    if let Some(logs) = v.get_mut("logs").and_then(|l| l.as_array_mut()) {
        for l in logs {
            strip_samples(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::thin;

    #[test]
    fn thin_keeps_ends_and_bounds() {
        let v: Vec<u32> = (0..10_000).collect();
        let t = thin(v);
        assert_eq!(t.len(), super::MAX_POINTS);
        assert_eq!((t[0], *t.last().unwrap()), (0, 9_999));
        assert_eq!(thin(vec![1, 2, 3]), vec![1, 2, 3]);
    }
}
