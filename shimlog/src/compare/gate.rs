//! `--fail-if EXPR`: terms like `live_peak>+10%`, `alloc_p99>+5ms`, `calls_per_s<-20%`,
//! `rss_peak>2GiB`, comma-separated; any failing term makes `compare` exit 1. A signed
//! threshold is a change (`%`: relative to the base; with a unit or none: absolute), and
//! fails when the change is past it and beyond the noise (its interval excludes 0 on that
//! side); an unsigned one is the candidate's own value. docs/compare.md.
use super::boot::Row;
use super::metrics::{self, Dim};
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct Term {
    pub text: String,
    pub metric: String,
    /// `>` (true) or `<`.
    pub above: bool,
    pub value: f64,
    pub kind: Kind,
    /// The unit the threshold was written in (checked against the metric's).
    unit: Option<Dim>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    Relative,
    Change,
    Level,
}

#[derive(Serialize, Debug)]
pub struct Outcome {
    pub term: String,
    pub failed: bool,
    /// What the term was held against, in words.
    pub observed: String,
}

fn accepted() -> String {
    format!(
        "{}; FUNCTION_p50, FUNCTION_p99, FUNCTION_p999 for a C function both sides timed (malloc_p99); stat_NAME for an allocator statistic both sides report",
        metrics::names().join(", ")
    )
}

/// Parses every `--fail-if` argument (each a comma-separated list of terms).
pub fn parse(args: &[String]) -> Result<Vec<Term>, String> {
    let mut out = Vec::new();
    for t in args.iter().flat_map(|a| a.split(',')).map(str::trim).filter(|t| !t.is_empty()) {
        out.push(term(t)?);
    }
    Ok(out)
}

fn term(t: &str) -> Result<Term, String> {
    let bad = || {
        format!("--fail-if: cannot read `{t}` (write e.g. live_peak>+10%, alloc_p99>+5ms, rss_peak>+64MiB, calls_per_s<-20%, rss_peak>2GiB)")
    };
    let at = t.find(['>', '<']).ok_or_else(bad)?;
    let metric = t[..at].trim().to_string();
    let above = &t[at..at + 1] == ">";
    let mut rest = t[at + 1..].trim_start_matches('=').trim();
    if metrics::fixed(&metric).is_none()
        && !metric.starts_with("stat_")
        && metrics::op_quantile(&metric).is_none()
    {
        return Err(format!("--fail-if: unknown metric `{metric}`; accepted: {}", accepted()));
    }
    let signed = rest.starts_with(['+', '-']);
    let neg = rest.starts_with('-');
    if signed {
        rest = &rest[1..];
    }
    let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let mut value: f64 = rest[..num_end].parse().map_err(|_| bad())?;
    let suffix = rest[num_end..].trim();
    let (kind, unit, scale) = match suffix {
        "%" if signed => (Kind::Relative, None, 0.01),
        "%" => {
            return Err(format!(
                "--fail-if: `{t}`: a percentage is a change from the base: give its sign (+10% or -10%)"
            ))
        }
        s => {
            let (unit, scale) = unit_of(s).ok_or_else(bad)?;
            (if signed { Kind::Change } else { Kind::Level }, unit, scale)
        }
    };
    value *= scale;
    if neg {
        value = -value;
    }
    let term = Term { text: t.to_string(), metric, above, value, kind, unit };
    if let Some(d) = metrics::fixed(&term.metric) {
        check_unit(&term, d.dim)?;
    }
    Ok(term)
}

/// A unit suffix: its dimension (None: a plain number) and its scale.
fn unit_of(s: &str) -> Option<(Option<Dim>, f64)> {
    const K: f64 = 1024.0;
    Some(match s {
        "" => (None, 1.0),
        "ns" => (Some(Dim::Ns), 1.0),
        "us" | "µs" => (Some(Dim::Ns), 1e3),
        "ms" => (Some(Dim::Ns), 1e6),
        "s" => (Some(Dim::Ns), 1e9),
        "B" => (Some(Dim::Bytes), 1.0),
        "K" | "KiB" | "k" => (Some(Dim::Bytes), K),
        "M" | "MiB" => (Some(Dim::Bytes), K * K),
        "G" | "GiB" => (Some(Dim::Bytes), K * K * K),
        "T" | "TiB" => (Some(Dim::Bytes), K * K * K * K),
        _ => return None,
    })
}

/// A threshold with a unit must be of the metric's kind (a plain number is taken in the
/// metric's own unit: ns, bytes, per second...).
pub fn check_unit(t: &Term, dim: Dim) -> Result<(), String> {
    match t.unit {
        Some(u) if u != dim => {
            Err(format!("--fail-if: `{}`: {} is {}, not {}", t.text, t.metric, dim_words(dim), dim_words(u)))
        }
        _ => Ok(()),
    }
}

fn dim_words(d: Dim) -> &'static str {
    match d {
        Dim::Ns => "a time (ns, us, ms, s)",
        Dim::Bytes => "a size (B, KiB, MiB, GiB)",
        Dim::PerSecond => "a rate per second (a plain number)",
        Dim::PerHour => "a rate per hour (a plain number)",
        Dim::Ratio => "a ratio (a plain number)",
        Dim::Count => "a count (a plain number)",
    }
}

/// Holds each term against its row. Err: a term names a metric these logs cannot give.
pub fn judge(terms: &[Term], rows: &[Row]) -> Result<Vec<Outcome>, String> {
    let mut out = Vec::new();
    for t in terms {
        let Some(r) = rows.iter().find(|r| r.name == t.metric) else {
            return Err(format!("--fail-if: `{}`: {} is not measured on both sides (FUNCTION_pNN needs that function timed, stat_NAME watch logs reporting it, on both sides)", t.text, t.metric));
        };
        check_unit(t, r.unit)?;
        if let Some(why) = &r.not_compared {
            return Err(format!("--fail-if: `{}`: {} is not compared here: {why}", t.text, t.metric));
        }
        let past = |x: f64| if t.above { x > t.value } else { x < t.value };
        let noise_clear = r.interval.is_some_and(|[lo, hi]| if t.above { lo > 0.0 } else { hi < 0.0 });
        let (failed, observed) = match t.kind {
            Kind::Level => {
                let c = r.candidate.unwrap_or(0.0);
                (past(c), format!("candidate {c:.6}"))
            }
            Kind::Change => {
                let d = r.change.unwrap_or(0.0);
                (past(d) && noise_clear, format!("change {d:+.6}, interval {}", show(r.interval, 1.0)))
            }
            Kind::Relative => match r.relative {
                Some(x) => (
                    past(x) && noise_clear,
                    format!("change {:+.1}%, interval {}", x * 100.0, show(r.relative_interval, 100.0)),
                ),
                None => {
                    let c = r.candidate.unwrap_or(0.0);
                    let inf = if c > 0.0 {
                        f64::INFINITY
                    } else if c < 0.0 {
                        f64::NEG_INFINITY
                    } else {
                        0.0
                    };
                    (past(inf) && noise_clear, format!("base 0, candidate {c:.6}"))
                }
            },
        };
        out.push(Outcome { term: t.text.clone(), failed, observed });
    }
    Ok(out)
}

fn show(i: Option<[f64; 2]>, scale: f64) -> String {
    match i {
        Some([lo, hi]) => format!("{:+.6} .. {:+.6}", lo * scale, hi * scale),
        None => "none".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_read() {
        let t = parse(&["live_peak>+10%, alloc_p99>+5ms".into(), "rss_peak<=-64MiB,rss_peak>2GiB".into()])
            .unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!((t[0].kind, t[0].above, t[0].value), (Kind::Relative, true, 0.10));
        assert_eq!((t[1].kind, t[1].value), (Kind::Change, 5e6));
        assert_eq!((t[2].kind, t[2].above, t[2].value), (Kind::Change, false, -64.0 * 1024.0 * 1024.0));
        assert_eq!((t[3].kind, t[3].value), (Kind::Level, 2.0 * 1024.0 * 1024.0 * 1024.0));
        assert!(parse(&["malloc_p99>+20%".into()]).is_ok(), "a C function's quantile");
    }

    #[test]
    fn bad_terms_say_why() {
        let e = parse(&["live_peek>+10%".into()]).unwrap_err();
        assert!(
            e.contains("unknown metric `live_peek`")
                && e.contains("alloc_p999")
                && e.contains("stalls_per_hour"),
            "{e}"
        );
        let e = parse(&["alloc_p99>+5MiB".into()]).unwrap_err();
        assert!(e.contains("a time"), "{e}");
        assert!(parse(&["live_peak>10%".into()]).unwrap_err().contains("sign"));
        assert!(parse(&["live_peak".into()]).unwrap_err().contains("cannot read"));
    }
}
