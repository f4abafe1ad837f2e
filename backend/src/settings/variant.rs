//! Settings as shimlog names a column: `NAME` or `NAME:KEY=VALUE,...`, parsed from
//! `--backend` values (a `KEY=VALUE` after a comma continues the backend before it).
use super::*;

/// A backend with settings, as `NAME` or `NAME:KEY=VALUE,...`; for shimlog.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Variant {
    pub backend: Backend,
    /// `KEY=VALUE` pairs in the order given.
    pub settings: Vec<(String, String)>,
}

impl Variant {
    /// The label: `jemalloc` or `jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0`.
    pub fn label(&self) -> String {
        if self.settings.is_empty() {
            self.backend.name().to_string()
        } else {
            format!("{}:{}", self.backend.name(), self.settings_str())
        }
    }
    /// `KEY=VALUE,...`.
    pub fn settings_str(&self) -> String {
        self.settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
    /// As [`Variant::settings_str`], a key given without a value kept so (for [`check`]).
    fn given_str(&self) -> String {
        self.settings
            .iter()
            .map(|(k, v)| if v.is_empty() && !k.ends_with('=') { k.clone() } else { format!("{k}={v}") })
            .collect::<Vec<_>>()
            .join(",")
    }
    /// The keys given that are time-driven (decay, purge delays), with their values.
    pub fn timed(&self) -> Vec<(&str, &str)> {
        self.settings
            .iter()
            .filter(|(k, _)| find(self.backend, k.as_bytes()).is_some_and(|k| k.timed))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

/// Refused `--backend` values.
#[derive(Clone, Debug, PartialEq)]
pub enum ParseError {
    /// Not a backend name (or not in this build): the message.
    Backend(String),
    /// A setting the backend refuses: the one-line message.
    Setting(String),
    /// `KEY=VALUE` with no backend before it.
    Orphan(String),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            ParseError::Backend(s) | ParseError::Setting(s) => f.write_str(s),
            ParseError::Orphan(s) => write!(f, "setting '{s}' comes before any backend (write NAME:{s})"),
        }
    }
}

/// Parses `--backend` values: each a comma-separated list of `NAME` or `NAME:KEY=VALUE`,
/// where an item `KEY=VALUE` (no colon) continues the settings of the backend before it.
pub fn parse_variants<S: AsRef<str>>(values: &[S]) -> Result<Vec<Variant>, ParseError> {
    let mut out: Vec<Variant> = Vec::new();
    for val in values {
        let mut open = false; // the last item had settings: KEY=VALUE continues them
        for item in val.as_ref().split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, set) = match item.split_once(':') {
                Some((n, s)) => (n, Some(s)),
                None if item.contains('=') => match out.last_mut() {
                    Some(last) if open => {
                        let (k, v) = item.split_once('=').unwrap_or((item, ""));
                        last.settings.push((k.to_string(), v.to_string()));
                        continue;
                    }
                    _ => return Err(ParseError::Orphan(item.to_string())),
                },
                None => (item, None),
            };
            let backend: Backend = name.parse().map_err(ParseError::Backend)?;
            let mut v = Variant { backend, settings: Vec::new() };
            open = set.is_some();
            if let Some(s) = set {
                for (k, val) in pairs(s.as_bytes()) {
                    v.settings.push((
                        String::from_utf8_lossy(k).into_owned(),
                        String::from_utf8_lossy(val).into_owned(),
                    ));
                }
            }
            out.push(v);
        }
    }
    for v in &out {
        let s = v.given_str();
        check(v.backend, s.as_bytes(), Context::Child).map_err(|e| ParseError::Setting(e.to_string()))?;
    }
    Ok(out)
}
