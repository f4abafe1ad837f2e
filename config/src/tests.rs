extern crate std;
use super::*;
use std::format;
use std::string::String;

#[test]
fn flags_are_named_after_their_variable_and_unique() {
    for (i, st) in SETTINGS.iter().enumerate() {
        if st.flag.is_empty() {
            assert!(st.value_name.is_empty() && st.help.is_empty(), "{}: help without a flag", st.var);
        } else {
            let derived: String = st.var["SHIM_".len()..].to_ascii_lowercase().replace('_', "-");
            assert!(st.var.starts_with("SHIM_"), "{}", st.var);
            assert_eq!(st.flag, derived, "{}", st.var);
            assert!(!st.value_name.is_empty() && !st.help.is_empty(), "{}", st.var);
        }
        for other in &SETTINGS[i + 1..] {
            assert_ne!(st.var, other.var, "two rows");
            assert!(st.flag.is_empty() || st.flag != other.flag, "two rows name flag {}", st.flag);
        }
        assert!(!st.line.is_empty() && !st.details.is_empty() && !st.values.is_empty(), "{}", st.var);
        for cell in [st.line, st.values, st.default] {
            assert!(!cell.contains('|') && !cell.contains('\n'), "{}: {cell}", st.var);
        }
    }
}

/// A value the shim cannot read: one line naming the variable and the words it accepts,
/// which the docs give too.
#[test]
fn warnings_name_their_variable_and_words() {
    for st in SETTINGS {
        if let Kind::Words(words) = st.kind {
            for w in words {
                assert!(st.warning.contains(w[0]), "{}: {}", st.var, w[0]);
                assert!(st.values.contains(&format!("`{}`", w[0])), "{}: {}", st.var, w[0]);
                assert_eq!(st.word(w[w.len() - 1].as_bytes()), Some(w[0]));
            }
            assert_eq!(st.word(b"nonsense"), None);
        }
        if st.warning.is_empty() {
            continue;
        }
        assert!(st.warning.starts_with(&format!("shim: unknown {} (", st.var)), "{}", st.warning);
        assert!(!st.warning.contains('\n'), "{}", st.warning);
    }
}

#[test]
fn backends_are_named_in_messages_and_docs() {
    assert_eq!(BACKENDS_LIST, "glibc, jemalloc, mimalloc, tcmalloc, snmalloc, rpmalloc");
    assert_eq!(BACKENDS_LIST_NO_TCMALLOC, "glibc, jemalloc, mimalloc, snmalloc, rpmalloc");
    let row = setting("SHIM_BACKEND");
    assert_eq!(
        row.warning,
        "shim: unknown SHIM_BACKEND (accepted: own, glibc, jemalloc, mimalloc, tcmalloc, snmalloc, rpmalloc); using the default"
    );
    for b in BACKENDS {
        assert!(row.values.contains(&format!("`{b}`")), "{b}");
    }
}

#[test]
fn defaults_read_as_their_kind() {
    for st in SETTINGS {
        if !st.default.contains('`') {
            continue;
        }
        let v = st.default_value();
        let ok = match st.kind {
            Kind::Words(_) => st.word(v).is_some(),
            Kind::Duration => parse_duration(v).is_some(),
            Kind::Size | Kind::SizeOrOff => parse_size(v).is_some(),
            Kind::Int(r) => parse_int(v, r).is_some(),
            Kind::Timing => parse_u32(v).is_some(),
            Kind::AbsPath => v.starts_with(b"/"),
            Kind::Backend | Kind::Text | Kind::Foreign => true,
        };
        assert!(ok, "{}: default {}", st.var, st.default);
    }
}

#[test]
fn default_values() {
    assert_eq!(setting("SHIM_INFLIGHT_MAX").default_value(), b"64M");
    assert_eq!(setting("SHIM_LOG").default_value(), b"shim.%e.%p.shimlog");
    assert_eq!(setting("SHIM_STACK_DEPTH").max(), 256);
    assert_eq!(setting("SHIM_ZSTD_LEVEL").max(), 19);
}

#[test]
fn durations() {
    assert_eq!(parse_duration(b"60s"), Some(60_000_000_000));
    assert_eq!(parse_duration(b"2"), Some(2_000_000_000));
    assert_eq!(parse_duration(b"500ms"), Some(500_000_000));
    assert_eq!(parse_duration(b"1h"), Some(3_600_000_000_000));
    assert_eq!(parse_duration(b"250us"), Some(250_000));
    assert_eq!(parse_duration(b"2min"), Some(120_000_000_000));
    assert_eq!(parse_duration(b"s"), None);
    assert_eq!(parse_duration(b"5x"), None);
    assert_eq!(parse_duration(b""), None);
    assert_eq!(parse_duration(b"1234567890s"), None);
}

#[test]
fn sizes() {
    assert_eq!(parse_size(b"20G"), Some(20 << 30));
    assert_eq!(parse_size(b"500MiB"), Some(500 << 20));
    assert_eq!(parse_size(b"4096"), Some(4096));
    assert_eq!(parse_size(b"1kB"), Some(1024));
    assert_eq!(parse_size(b"0"), Some(0));
    assert_eq!(parse_size(b"G"), None);
    assert_eq!(parse_size(b"5X"), None);
    assert_eq!(parse_size(b"5iB"), Some(5));
    assert_eq!(parse_size(b"5MB "), None);
}

#[test]
fn integers() {
    let level = [(1, 19), (-7, -1)];
    assert_eq!(parse_int(b"-3", &level), Some(-3));
    assert_eq!(parse_int(b"19", &level), Some(19));
    for bad in ["0", "-0", "20", "-8", "", "-", "+3", "1.5", "3 "] {
        assert_eq!(parse_int(bad.as_bytes(), &level), None, "{bad}");
    }
    assert_eq!(parse_u32(b"123456789"), Some(123456789));
    assert_eq!(parse_u32(b"1234567890"), None);
    assert_eq!(parse_u64(b"18446744"), Some(18446744));
}
