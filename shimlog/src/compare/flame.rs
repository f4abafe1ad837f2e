//! `compare ... --flamegraph FILE.svg [--flame-by WHAT] [--flame-normalize auto|always|never]`:
//! the two sides' call sites as one differential flame graph (flamegraph/diff.rs draws it),
//! from the stacks each log's section folded in the analysis' one pass (side.rs keeps the
//! measure asked for); no second read of any log.
use super::side::Side;
use crate::analysis::By;
use crate::flamegraph::diff::{self, DiffSide, Normalize};
use std::path::Path;

/// The measures a section folds in the one pass (`analysis::Folded`): `--flame-by` takes
/// these (`shimlog flamegraph --by` also takes alloc-calls, from a pass of its own).
pub fn by_parser() -> impl clap::builder::TypedValueParser<Value = By> {
    use clap::{builder::TypedValueParser, ValueEnum};
    clap::builder::PossibleValuesParser::new(["alloc-bytes", "live-at-peak", "leaked", "slow"])
        .map(|s| By::from_str(&s, false).expect("a By"))
}

/// Creates `path` before the analysis (an unwritable destination is refused first).
pub fn create(path: &Path) -> Result<std::fs::File, String> {
    std::fs::File::create(path)
        .map_err(|e| format!("compare: --flamegraph: cannot create {}: {e}", path.display()))
}

fn side<'a>(s: &'a Side, name: &str) -> Result<DiffSide<'a>, String> {
    let with: Vec<_> = s.logs.iter().filter(|l| l.folded.is_some()).collect();
    if with.is_empty() {
        return Err(format!(
            "the {name} has no stacks (its logs were written with SHIM_STACKS=off, or before format 4); a differential flame graph needs SHIM_STACKS=sample or all on both sides"
        ));
    }
    let secs: Vec<f64> =
        with.iter().map(|l| l.slices.iter().map(|x| x.dur_ns).sum::<u64>() as f64 / 1e9).collect();
    Ok(DiffSide {
        logs: with.iter().map(|l| l.folded.as_deref().expect("kept")).collect(),
        secs: (secs.iter().all(|&x| x > 0.0)).then(|| secs.iter().sum::<f64>() / secs.len() as f64),
    })
}

/// The differential flame graph of `cand` against `base`; Err: the refusal's line.
pub fn svg(base: &Side, cand: &Side, by: By, n: Normalize) -> Result<String, String> {
    let (b, c) = sides(base, cand).map_err(|e| format!("--flamegraph: {e}"))?;
    diff::draw(&b, &c, by, n, base.sites_estimated || cand.sites_estimated)
        .map_err(|e| format!("--flamegraph --flame-by {}: {e}", flag(by)))
}

/// [`svg`] for a page (`report --vs`): Err says why there is none in words, without the
/// flags' names.
pub fn svg_plain(base: &Side, cand: &Side, by: By, n: Normalize) -> Result<String, String> {
    let (b, c) = sides(base, cand)?;
    diff::draw(&b, &c, by, n, base.sites_estimated || cand.sites_estimated)
}

fn sides<'a>(base: &'a Side, cand: &'a Side) -> Result<(DiffSide<'a>, DiffSide<'a>), String> {
    Ok((side(base, "base")?, side(cand, "candidate")?))
}

fn flag(by: By) -> String {
    use clap::ValueEnum;
    by.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()
}
