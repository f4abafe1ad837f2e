//! The shim's settings as `shimlog record` flags: one row of [`SETTINGS`] per SHIM_*
//! variable of the table of docs/configuration.md, the flag named after it
//! (`SHIM_LOG_LIMIT` is `--log-limit`). A new variable is one new row. Each value is checked
//! here, before the program starts, so that a typo is one error line and no run; the shim
//! reads it again at start-up (shim/src/config.rs).
//!
//! Left out: `SHIM_LOG` (the run's directory, `-o`) and `SHIM_TRACE` (on for `record`, off
//! for `run`).
use clap::builder::{PossibleValuesParser, ValueParser};
use clap::{Arg, ArgMatches, Command};

/// Every backend SHIM_BACKEND names (`own`: the program's own allocator, where it has one).
pub const BACKENDS: &[&str] = &["own", "glibc", "jemalloc", "mimalloc", "tcmalloc", "snmalloc", "rpmalloc"];

/// What a setting's value may be.
#[derive(Clone, Copy)]
enum Kind {
    Choice(&'static [&'static str]),
    /// A backend of [`BACKENDS`], with its settings if any (`jemalloc:dirty_decay_ms=0,...`),
    /// checked against the allocator's own keys as the shim checks them.
    Backend,
    /// A number with a unit `ns`, `us`, `ms`, `s`, `m`, `h`, `d` (none: seconds).
    Duration,
    /// A number with a unit `k`, `M`, `G`, `T` (powers of 1024), over 0.
    Size,
    /// An integer in one of these inclusive ranges.
    Int(&'static [(i64, i64)]),
    /// `all`, `none`, or N (time one call in N).
    Timing,
    /// A size (0 too) or `off`.
    SizeOrOff,
    /// An absolute path.
    AbsPath,
}

struct Setting {
    var: &'static str,
    value_name: &'static str,
    kind: Kind,
    help: &'static str,
}

const fn s(var: &'static str, value_name: &'static str, kind: Kind, help: &'static str) -> Setting {
    Setting { var, value_name, kind, help }
}

const ON_OFF: Kind = Kind::Choice(&["1", "0"]);

/// The table of docs/configuration.md, in its order (less SHIM_TRACE and SHIM_LOG).
const SETTINGS: &[Setting] = &[
    s("SHIM_BACKEND", "NAME[:KEY=VALUE,...]", Kind::Backend, "The allocator that serves every call, with its settings if any (docs/settings.md; default: own where the program brings one, else glibc)"),
    s("SHIM_TIMING", "all|none|N", Kind::Timing, "Which calls carry their time inside the allocator (default: one in 64)"),
    s("SHIM_ON_FULL", "WHAT", Kind::Choice(&["block", "drop"]), "When the recorder falls behind: wait for a buffer, or drop the thread's events"),
    s("SHIM_CLOCK", "CLOCK", Kind::Choice(&["tsc", "monotonic"]), "The event clock"),
    s("SHIM_ZSTD_LEVEL", "LEVEL", Kind::Int(&[(1, 19), (-7, -1)]), "zstd level of the log (default 1)"),
    s("SHIM_WINDOW", "DURATION", Kind::Duration, "Record for this long, then watch (turns capture windows on)"),
    s("SHIM_START", "DURATION", Kind::Duration, "Watch this long before the first window"),
    s("SHIM_EVERY", "DURATION", Kind::Duration, "Open a window this often"),
    s("SHIM_STALL", "DURATION", Kind::Duration, "A call inside the allocator for longer is a stall (default 1ms)"),
    s("SHIM_LOG_LIMIT", "SIZE", Kind::Size, "The most bytes all of a process's logs may take (500M, 20G)"),
    s("SHIM_LOG_FULL", "WHAT", Kind::Choice(&["stop", "rotate"]), "At the limit: stop recording, or delete the oldest window's log"),
    s("SHIM_CONTROL", "1|0", ON_OFF, "1: a control socket for `shimlog ctl PID`"),
    s("SHIM_SIGNAL", "SIGNAL", Kind::Choice(&["USR2", "USR1"]), "Each delivery of this signal opens or closes a window"),
    s("SHIM_STACKS", "WHICH", Kind::Choice(&["off", "slow", "sample", "all"]), "Which calls record their call stack (default slow)"),
    s("SHIM_RECORD", "WHAT", Kind::Choice(&["all", "sample"]), "sample: only the sampled allocations and the slow calls (the always-on heap profile)"),
    s("SHIM_SAMPLE_BYTES", "SIZE", Kind::Size, "Mean distance in requested bytes between sampled allocations (default 512k)"),
    s("SHIM_STACK_DEPTH", "N", Kind::Int(&[(1, 256)]), "Frames kept per stack (default 64)"),
    s("SHIM_UNWIND", "HOW", Kind::Choice(&["tables", "fp"]), "Unwind with the .eh_frame tables or frame pointers"),
    s("SHIM_SAMPLE_SEED", "N", Kind::Int(&[(0, i64::MAX)]), "Seeds the sampler, for repeatable runs"),
    s("SHIM_PACK", "HOW", Kind::Choice(&["auto", "columns", "rows"]), "How the recorder packs a buffer before zstd"),
    s("SHIM_CRASH_SAFE", "1|0", ON_OFF, "1: the threads' buffers in an in-flight file, recoverable after a crash (default)"),
    s("SHIM_INFLIGHT_MAX", "SIZE|off", Kind::SizeOrOff, "The most bytes dead processes' in-flight files may take before the oldest are recovered (default 64M)"),
    s("SHIM_INFLIGHT_DIR", "DIR", Kind::AbsPath, "Where the user's in-flight directory shim-UID is made (default /dev/shm)"),
];

/// `SHIM_LOG_LIMIT` -> `log-limit`.
fn flag(var: &str) -> String {
    var.trim_start_matches("SHIM_").to_ascii_lowercase().replace('_', "-")
}

/// `NAME` or `NAME:KEY=VALUE,...`: the name one of [`BACKENDS`], the settings ones the
/// allocator knows (the shim's own check, so that a bad value fails here, not in the program).
pub fn backend_value(v: &str) -> Result<String, String> {
    check_backend(v)
}

fn check_backend(v: &str) -> Result<String, String> {
    use shim_backend::settings;
    let (name, set) = settings::split_label(v.as_bytes());
    let name = std::str::from_utf8(name).unwrap_or("");
    if !BACKENDS.contains(&name) {
        return Err(format!(
            "a backend: {}, optionally with settings (jemalloc:dirty_decay_ms=0)",
            BACKENDS.join(", ")
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
        Kind::Choice(_) => true,
        Kind::Backend => return check_backend(v),
        Kind::Duration => {
            let d = v.len() - v.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            (1..=9).contains(&d) && ["", "ns", "us", "ms", "s", "m", "min", "h", "d"].contains(&&v[d..])
        }
        Kind::Size => size(v) && v.bytes().take_while(u8::is_ascii_digit).any(|c| c != b'0'),
        Kind::SizeOrOff => v == "off" || size(v),
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
        Kind::Choice(_) | Kind::Backend => unreachable!("checked above, or by clap"),
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

/// A number with a unit `k`, `M`, `G`, `T` (an optional `B` or `iB` after it), as the shim's
/// parse_size reads it.
fn size(v: &str) -> bool {
    let d = v.len() - v.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let unit = v[d..].strip_suffix("iB").or_else(|| v[d..].strip_suffix('B')).unwrap_or(&v[d..]);
    (1..=15).contains(&d) && ["", "k", "K", "m", "M", "g", "G", "t", "T"].contains(&unit)
}

fn arg(st: &'static Setting) -> Arg {
    let parser = match st.kind {
        Kind::Choice(c) => ValueParser::new(PossibleValuesParser::new(c)),
        k => ValueParser::new(move |v: &str| check(k, v)),
    };
    // The ids live as long as the program: clap takes &'static str.
    let id: &'static str = Box::leak(flag(st.var).into_boxed_str());
    Arg::new(id)
        .long(id)
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
            SETTINGS
                .iter()
                .filter_map(|st| m.get_one::<String>(&flag(st.var)).map(|v| (st.var, v.clone())))
                .collect(),
        ))
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for Settings {
    fn augment_args(cmd: Command) -> Command {
        SETTINGS.iter().fold(cmd, |c, st| c.arg(arg(st)))
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
        assert_eq!(flag("SHIM_LOG_LIMIT"), "log-limit");
        assert_eq!(flag("SHIM_BACKEND"), "backend");
        let mut seen = std::collections::HashSet::new();
        assert!(SETTINGS.iter().all(|st| seen.insert(flag(st.var))), "two rows name one flag");
    }
}
