//! The shim's settings as `shimlog record` flags: one per row of the settings table
//! (`shim_config::SETTINGS`, which docs/configuration.md is made from) that has a flag, named
//! after its variable (`SHIM_LOG_LIMIT` is `--log-limit`). A new variable is one new row
//! there. Each value is checked here, by the row's kind, before the program starts, so that
//! a typo is one error line and no run; the shim reads it again at start-up
//! (shim/src/config.rs).
//!
//! Rows without a flag: `SHIM_LOG` (the run's directory, `-o`), `SHIM_TRACE` (on for
//! `record`, off for `run`), and the allocators' own variables.
use clap::builder::{PossibleValuesParser, ValueParser};
use clap::{Arg, ArgMatches, Command};
use shim_config::{parse_duration, parse_size, Kind, Setting, BACKENDS, SETTINGS};

/// The rows `record` makes a flag of, in the table's order.
fn flagged() -> impl Iterator<Item = &'static Setting> {
    SETTINGS.iter().filter(|st| !st.flag.is_empty())
}

/// `NAME` or `NAME:KEY=VALUE,...`: the name `own` or one of [`BACKENDS`], the settings ones the
/// allocator knows (the shim's own check, so that a bad value fails here, not in the program).
pub fn backend_value(v: &str) -> Result<String, String> {
    check_backend(v)
}

fn check_backend(v: &str) -> Result<String, String> {
    use shim_backend::settings;
    let (name, set) = settings::split_label(v.as_bytes());
    let name = std::str::from_utf8(name).unwrap_or("");
    if name != "own" && !BACKENDS.contains(&name) {
        return Err(format!(
            "a backend: own, {}, optionally with settings (jemalloc:dirty_decay_ms=0)",
            shim_config::BACKENDS_LIST
        ));
    }
    let Some(set) = set.filter(|s| !s.is_empty()) else { return Ok(v.to_string()) };
    let Some(b) = shim_backend::Backend::parse(name.as_bytes()) else {
        return Err(format!("{name} takes no settings (the program's own allocator is used as it is)"));
    };
    settings::check(b, set, settings::Context::Shim).map_err(|e| e.to_string())?;
    Ok(v.to_string())
}

fn check(kind: Kind, v: &str) -> Result<String, String> {
    let ok = match kind {
        Kind::Words(_) | Kind::Text | Kind::Foreign => true,
        Kind::Backend => return check_backend(v),
        // As the shim reads them (an overflow included).
        Kind::Duration => parse_duration(v.as_bytes()).is_some(),
        Kind::Size => parse_size(v.as_bytes()).is_some_and(|n| n > 0),
        Kind::SizeOrOff => v == "off" || parse_size(v.as_bytes()).is_some(),
        Kind::AbsPath => v.starts_with('/'),
        Kind::Int(ranges) => {
            v.parse::<i64>().is_ok_and(|n| ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&n)))
        }
        Kind::Timing => v == "all" || v == "none" || v.parse::<u32>().is_ok_and(|n| n > 0),
    };
    if ok {
        return Ok(v.to_string());
    }
    Err(match kind {
        Kind::Words(_) | Kind::Backend | Kind::Text | Kind::Foreign => {
            unreachable!("checked above, or by clap")
        }
        Kind::Duration => {
            "a duration: a number and ns, us, ms, s, m, h or d (500ms, 60s, 2m; a bare number is seconds)"
                .into()
        }
        Kind::Size => "a size over 0: a number and k, M, G or T (512k, 500M, 20G)".into(),
        Kind::Int(r) => {
            let r: Vec<String> = r
                .iter()
                .map(
                    |(lo, hi)| {
                        if *hi == i64::MAX {
                            format!("{lo} or more")
                        } else {
                            format!("{lo} to {hi}")
                        }
                    },
                )
                .collect();
            format!("an integer, {}", r.join(" or "))
        }
        Kind::Timing => "all, none, or N over 0 (time one call in N)".into(),
        Kind::SizeOrOff => "a size: a number and k, M, G or T (64M, 512k, 0), or off".into(),
        Kind::AbsPath => "an absolute path".into(),
    })
}

fn arg(st: &'static Setting) -> Arg {
    let parser = match st.kind {
        // The words' first spellings (the shim takes the others too: `on` for `1`).
        Kind::Words(w) => ValueParser::new(PossibleValuesParser::new(w.iter().map(|s| s[0]))),
        k => ValueParser::new(move |v: &str| check(k, v)),
    };
    Arg::new(st.flag)
        .long(st.flag)
        .value_name(st.value_name)
        .value_parser(parser)
        .allow_negative_numbers(true)
        .help(format!("{} [{}]", st.help, st.var))
        .help_heading("Settings of the shim (the SHIM_* variables: docs/configuration.md)")
}

/// The settings given on the command line, as (variable, value).
pub struct Settings(pub Vec<(&'static str, String)>);

impl clap::FromArgMatches for Settings {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(Settings(
            flagged().filter_map(|st| m.get_one::<String>(st.flag).map(|v| (st.var, v.clone()))).collect(),
        ))
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for Settings {
    fn augment_args(cmd: Command) -> Command {
        flagged().fold(cmd, |c, st| c.arg(arg(st)))
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_the_shim_reads_them() {
        for v in ["500ms", "60s", "2m", "1h", "1d", "30", "10us"] {
            assert!(check(Kind::Duration, v).is_ok(), "{v}");
        }
        for v in ["", "s", "1.5s", "forever", "1y", "-1s"] {
            assert!(check(Kind::Duration, v).is_err(), "{v}");
        }
        for v in ["512k", "4M", "20G", "1", "3MiB", "7KB"] {
            assert!(check(Kind::Size, v).is_ok(), "{v}");
        }
        for v in ["0", "0k", "M", "1.5G", "12X"] {
            assert!(check(Kind::Size, v).is_err(), "{v}");
        }
        let level = Kind::Int(&[(1, 19), (-7, -1)]);
        assert!(check(level, "-3").is_ok() && check(level, "19").is_ok());
        assert!(check(level, "0").is_err() && check(level, "20").is_err() && check(level, "-8").is_err());
        assert!(check(Kind::SizeOrOff, "0").is_ok() && check(Kind::SizeOrOff, "off").is_ok());
        assert!(check(Kind::SizeOrOff, "on").is_err() && check(Kind::AbsPath, "rel/dir").is_err());
        assert!(check(Kind::Timing, "64").is_ok() && check(Kind::Timing, "all").is_ok());
        assert!(check(Kind::Timing, "0").is_err() && check(Kind::Timing, "some").is_err());
    }

    #[test]
    fn backends_with_settings_are_checked_as_the_shim_checks_them() {
        for v in
            ["own", "glibc", "mimalloc", "jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0", "glibc:arena_max=2"]
        {
            assert!(check(Kind::Backend, v).is_ok(), "{v}");
        }
        for (v, says) in [
            ("nosuch", "mimalloc"),
            ("jemalloc:no_such_key=1", "no_such_key"),
            ("jemalloc:dirty_decay_ms", "dirty_decay_ms"),
            ("own:x=1", "own takes no settings"),
        ] {
            let e = check(Kind::Backend, v).unwrap_err();
            assert!(e.contains(says) && !e.contains('\n'), "{v}: {e}");
        }
    }

    #[test]
    fn flags_are_named_after_their_variable() {
        let flag = |var| SETTINGS.iter().find(|st| st.var == var).unwrap().flag;
        assert_eq!(flag("SHIM_LOG_LIMIT"), "log-limit");
        assert_eq!(flag("SHIM_BACKEND"), "backend");
        let mut seen = std::collections::HashSet::new();
        assert!(flagged().all(|st| seen.insert(st.flag)), "two rows name one flag");
        // Every SHIM_* variable but SHIM_LOG (-o) and SHIM_TRACE (on) is a flag.
        let vars: Vec<_> = flagged().map(|st| st.var).collect();
        for st in SETTINGS.iter().filter(|st| st.var.starts_with("SHIM_")) {
            assert_eq!(vars.contains(&st.var), !["SHIM_LOG", "SHIM_TRACE"].contains(&st.var), "{}", st.var);
        }
        assert_eq!(vars.len(), 23);
    }
}
