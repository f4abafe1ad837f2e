//! The document `compare` makes (printed as a table by text.rs, or as JSON), in a module
//! of its own so that the parts that fill and print it import it from below.
use super::boot;
use super::gate;
use super::metrics::Group;
use super::side::Kind;
use serde::Serialize;

#[derive(Serialize)]
pub struct SideInfo {
    pub logs: Vec<String>,
    pub programs: Vec<String>,
    pub backends: Vec<String>,
    pub kinds: Vec<Kind>,
    /// Time slices the bootstrap draws from (all logs).
    pub slices: usize,
}

#[derive(Serialize)]
pub struct Verdict {
    pub group: Group,
    pub differs: bool,
    pub text: String,
}

#[derive(Serialize)]
pub struct SiteMove {
    pub site: String,
    pub base: f64,
    pub candidate: f64,
    pub change: f64,
}

#[derive(Serialize)]
pub struct SitesDiff {
    /// Per-site numbers are estimates (a log in sample mode).
    pub estimated: bool,
    pub alloc_bytes: Vec<SiteMove>,
    pub live_at_peak_bytes: Vec<SiteMove>,
    pub timed_ns: Vec<SiteMove>,
}

#[derive(Serialize)]
pub struct Method {
    pub resampling: &'static str,
    pub resamples: usize,
    pub seed: u64,
    pub confidence: f64,
}

#[derive(Serialize)]
pub struct Document {
    pub base: SideInfo,
    pub candidate: SideInfo,
    pub method: Method,
    pub metrics: Vec<boot::Row>,
    pub verdicts: Vec<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sites: Option<SitesDiff>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fail_if: Vec<gate::Outcome>,
}
