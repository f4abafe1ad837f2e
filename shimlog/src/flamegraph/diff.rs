//! Differential flame graphs (Brendan Gregg's): two sides' stacks folded by one measure
//! ([`By`]), each side's logs averaged per log, combined by `inferno::differential` and
//! drawn by inferno's flame graph with its differential colouring: the frames' widths are
//! the candidate's, a frame is red where its own (leaf) figure grew from the base, blue
//! where it shrank, the redder or bluer the larger the change. `shimlog compare --flamegraph`
//! and `shimlog flamegraph BASE --vs CANDIDATE` both draw with [`draw`].
use crate::analysis::By;
use std::collections::BTreeMap;

/// Whether the base is scaled to the candidate's total before the two are compared
/// (inferno's `normalize`): the colours then show where the shares moved, not the totals.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Normalize {
    /// For measures that add up over a run (bytes allocated, allocations, slow calls'
    /// time), when the sides' logs differ in mean length by over 10% and over 0.1 s.
    Auto,
    /// Always scale the base to the candidate's total.
    Always,
    /// Compare the totals as they are.
    Never,
}

/// The relative difference of the sides' mean log lengths beyond which `auto` normalises
/// (the numbers `Normalize::Auto`'s help gives),
/// and the least absolute one (two short runs of one program differ by more than 10% alone).
pub const LENGTHS_DIFFER: f64 = 0.10;
pub const LENGTHS_DIFFER_SECS: f64 = 0.1;

/// One side: each log's folded lines ("outer;...;inner value"), for the logs with stacks.
pub struct DiffSide<'a> {
    pub logs: Vec<&'a [String]>,
    /// The mean length of the side's logs, in seconds (None: not known).
    pub secs: Option<f64>,
}

/// The per-log mean of `logs`' folded lines (stack -> value), stacks whose mean rounds to
/// 0 left out.
pub fn mean(logs: &[&[String]]) -> BTreeMap<String, u64> {
    let mut sum: BTreeMap<&str, u128> = BTreeMap::new();
    for lines in logs {
        for l in lines.iter() {
            let Some((stack, v)) = l.rsplit_once(' ') else { continue };
            let Ok(v) = v.parse::<u64>() else { continue };
            *sum.entry(stack).or_default() += v as u128;
        }
    }
    let n = logs.len().max(1) as u128;
    sum.into_iter().map(|(s, v)| (s.to_string(), ((v + n / 2) / n) as u64)).filter(|(_, v)| *v > 0).collect()
}

fn text(m: &BTreeMap<String, u64>) -> String {
    let mut s = String::new();
    for (k, v) in m {
        s.push_str(k);
        s.push(' ');
        s.push_str(&v.to_string());
        s.push('\n');
    }
    s
}

/// Whether `by` adds up over a run (a longer run has more of it).
fn accumulates(by: By) -> bool {
    matches!(by, By::AllocBytes | By::AllocCalls | By::Slow)
}

/// Whether the base is scaled to the candidate's total, and why (for the subtitle).
fn normalised(base: &DiffSide, cand: &DiffSide, by: By, n: Normalize) -> (bool, Option<String>) {
    match n {
        Normalize::Never => (false, None),
        Normalize::Always => (true, None),
        Normalize::Auto => match (base.secs, cand.secs) {
            (Some(b), Some(c))
                if accumulates(by)
                    && b > 0.0
                    && (c / b - 1.0).abs() > LENGTHS_DIFFER
                    && (c - b).abs() > LENGTHS_DIFFER_SECS =>
            {
                (true, Some(format!("the logs ran {b:.3} s and {c:.3} s on average")))
            }
            _ => (false, None),
        },
    }
}

/// The differential flame graph of `base` against `cand` by `by`, as an SVG document; Err:
/// why there is nothing to draw (one line).
pub fn draw(
    base: &DiffSide,
    cand: &DiffSide,
    by: By,
    n: Normalize,
    estimated: bool,
) -> Result<String, String> {
    let (b, c) = (mean(&base.logs), mean(&cand.logs));
    let total = |m: &BTreeMap<String, u64>| m.values().map(|&v| v as u128).sum::<u128>();
    let (tb, tc) = (total(&b), total(&c));
    if tc == 0 {
        return Err(if tb == 0 {
            let slow = if by == By::Slow {
                ""
            } else {
                " (with SHIM_STACKS=slow, the default, only slow calls have stacks: `slow` draws them)"
            };
            format!("nothing to draw: no stack on either side has any {}{slow}", by.title())
        } else {
            format!(
                "nothing to draw: the candidate's stacks have no {} (the base's have {tb} {}); the graph's widths are the candidate's",
                by.title(),
                by.unit()
            )
        });
    }
    let (norm, why) = normalised(base, cand, by, n);
    let mut combined = Vec::new();
    let opt = inferno::differential::Options { normalize: norm, strip_hex: false };
    inferno::differential::from_readers(opt, text(&b).as_bytes(), text(&c).as_bytes(), &mut combined)
        .map_err(|e| format!("combining the stacks: {e}"))?;
    let combined = String::from_utf8(combined).map_err(|e| e.to_string())?;
    let per_log = |s: &DiffSide| match s.logs.len() {
        1 => "1 log".to_string(),
        k => format!("mean of {k} logs"),
    };
    let mut sub = format!(
        "widths: the candidate's {} ({}); colours: change from the base ({}): red grew, blue shrank",
        by.title(),
        per_log(cand),
        per_log(base)
    );
    if norm {
        sub.push_str(&format!(
            "; the base scaled to the candidate's total ({tb} to {tc} {}){}: colours show shares, not totals",
            by.unit(),
            why.map(|w| format!(", as {w}")).unwrap_or_default()
        ));
    } else {
        sub.push_str(&format!("; totals: base {tb}, candidate {tc} {}, not normalised", by.unit()));
    }
    if estimated {
        sub.push_str("; sampled stacks: estimates");
    }
    let mut o = inferno::flamegraph::Options::default();
    o.title = format!("Differential flame graph: {}, candidate against base", by.title());
    o.subtitle = Some(sub);
    o.count_name = by.unit().to_string();
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut o, combined.lines(), &mut out)
        .map_err(|e| format!("drawing: {e}"))?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn mean_per_log_rounds_and_drops_zeros() {
        let (a, b) = (lines(&["main;f 3", "main;g 1"]), lines(&["main;f 4", "bad line"]));
        let m = mean(&[&a, &b]);
        assert_eq!(m.get("main;f"), Some(&4)); // 7 / 2 = 3.5, rounded up
        assert_eq!(m.get("main;g"), Some(&1)); // 0.5 rounded up
        let m = mean(&[&lines(&["main;g 1"]), &lines(&[]), &lines(&[])]);
        assert!(m.is_empty(), "1 / 3 rounds to 0: {m:?}");
    }

    /// The frame titled `name`'s fill colour.
    fn fill(svg: &str, name: &str) -> (u8, u8, u8) {
        let at = svg.find(&format!("<title>{name} (")).unwrap_or_else(|| panic!("no frame {name}"));
        let rest = &svg[at..];
        let f = &rest[rest.find("fill=\"rgb(").expect("fill") + 10..];
        let v: Vec<u8> = f[..f.find(')').unwrap()].split(',').map(|x| x.parse().unwrap()).collect();
        (v[0], v[1], v[2])
    }

    #[test]
    fn grown_red_shrunk_blue_and_normalising_said() {
        let base = lines(&["main;grow 100", "main;shrink 400", "main;same 200"]);
        let cand = lines(&["main;grow 400", "main;shrink 100", "main;same 200"]);
        let (b, c) = (
            DiffSide { logs: vec![&base], secs: Some(1.0) },
            DiffSide { logs: vec![&cand], secs: Some(1.0) },
        );
        let svg = draw(&b, &c, By::AllocBytes, Normalize::Auto, false).unwrap();
        let (r, g, bl) = fill(&svg, "grow");
        assert!(r == 255 && g < 250 && bl < 250, "grow not red: {r},{g},{bl}");
        let (r, g, bl) = fill(&svg, "shrink");
        assert!(bl == 255 && r < 250 && g < 250, "shrink not blue: {r},{g},{bl}");
        assert_eq!(fill(&svg, "same"), (250, 250, 250));
        assert!(svg.contains("bytes allocated, candidate against base"));
        assert!(svg.contains("not normalised"));
        // The candidate's logs twice as long: normalised under auto, and said.
        let c2 = DiffSide { logs: vec![&cand], secs: Some(2.0) };
        let svg = draw(&b, &c2, By::AllocBytes, Normalize::Auto, false).unwrap();
        assert!(svg.contains("the base scaled to the candidate&apos;s total"), "not said");
        // Two short runs 50% apart but by 5 ms: not normalised.
        let (b3, c3) = (
            DiffSide { logs: vec![&base], secs: Some(0.01) },
            DiffSide { logs: vec![&cand], secs: Some(0.015) },
        );
        assert!(draw(&b3, &c3, By::AllocBytes, Normalize::Auto, false).unwrap().contains("not normalised"));
        // Not for bytes live at the peak, which do not add up over a run.
        let svg = draw(&b, &c2, By::LiveAtPeak, Normalize::Auto, false).unwrap();
        assert!(svg.contains("not normalised"));
    }

    #[test]
    fn nothing_to_draw_is_refused() {
        let base = lines(&["main;f 1"]);
        let none: Vec<String> = Vec::new();
        let (b, c) = (DiffSide { logs: vec![&base], secs: None }, DiffSide { logs: vec![&none], secs: None });
        let e = draw(&b, &c, By::Leaked, Normalize::Auto, false).unwrap_err();
        assert!(e.contains("the candidate's stacks have no bytes never freed"), "{e}");
        let e = draw(&c, &c, By::Leaked, Normalize::Auto, false).unwrap_err();
        assert!(e.contains("no stack on either side"), "{e}");
    }
}
