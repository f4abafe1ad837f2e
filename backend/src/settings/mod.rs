//! Allocator settings: `NAME:KEY=VALUE,...` (`jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0`),
//! checked against each allocator's own keys and applied before its first allocation.
//!
//! Everything here allocates nothing, so that the shim can call it while it starts (the
//! settings are slices of the environment; messages are written with `core::fmt` into the
//! caller's buffer). How each allocator takes them:
//! - jemalloc: its `malloc_conf` string (`_rjem_malloc_conf`, read once at its init), built
//!   here from `MALLOC_CONF` (if any) followed by the settings (a later pair wins).
//! - mimalloc: `mi_option_set`.
//! - tcmalloc (gperftools): its numeric properties (MallocExtension) and its release-rate
//!   flag, set right after its static initialiser (which makes its first allocation).
//! - glibc: `mallopt`; the tcache tunables only through `GLIBC_TUNABLES`, which the C
//!   library reads when the process starts ([`glibc_tunables`], for a replay's child).
use crate::Backend;
use core::fmt;

mod keys;
mod variant;
pub use keys::*;
pub use variant::*;

/// The keys backend `b` accepts.
pub fn keys(b: Backend) -> &'static [Key] {
    match b {
        Backend::Jemalloc => JEMALLOC,
        Backend::Mimalloc => MIMALLOC,
        Backend::Tcmalloc => TCMALLOC,
        Backend::Glibc => GLIBC,
        Backend::Snmalloc | Backend::Rpmalloc | Backend::Own => &[],
    }
}

/// The `KEY=VALUE` pairs of a settings string, split at commas (empty items skipped).
pub fn pairs(s: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    s.split(|&c| c == b',').filter(|p| !p.is_empty()).map(|p| match p.iter().position(|&c| c == b'=') {
        Some(i) => (&p[..i], &p[i + 1..]),
        None => (p, &p[p.len()..]),
    })
}

/// Splits `NAME:SETTINGS` (the settings may be empty) at its first colon.
pub fn split_label(s: &[u8]) -> (&[u8], Option<&[u8]>) {
    match s.iter().position(|&c| c == b':') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    }
}

/// Why a settings string was refused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Why {
    /// The allocator has no such key.
    Unknown,
    /// `KEY` without `=VALUE`.
    NoValue,
    /// The value is not of the key's kind or out of its range.
    Value,
    /// Only at process start (GLIBC_TUNABLES), which the shim comes after.
    StartOnly,
    /// A key given twice.
    Twice,
    /// Everything together does not fit the allocator's configuration buffer.
    TooLong,
}

/// A refused setting: which backend, which key, why. `Display` gives the one-line message
/// (no allocation: it can be written into a stack buffer).
#[derive(Clone, Copy, Debug)]
pub struct Bad<'a> {
    pub backend: Backend,
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub why: Why,
}

struct Lossy<'a>(&'a [u8]);
impl fmt::Display for Lossy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for &c in self.0 {
            if c.is_ascii_graphic() || c == b' ' {
                f.write_fmt(format_args!("{}", c as char))?;
            } else {
                f.write_fmt(format_args!("\\x{c:02x}"))?;
            }
        }
        Ok(())
    }
}

/// The accepted form of a kind, for messages.
struct Form(Kind);
impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.0 {
            Kind::Bool => f.write_str("true or false"),
            Kind::Int { min, max } if max == i64::MAX => write!(f, "a whole number from {min}"),
            Kind::Int { min, max } => write!(f, "a whole number from {min} to {max}"),
            Kind::Float { min, max } => write!(f, "a number from {min} to {max}"),
            Kind::Choice(c) => {
                for (i, w) in c.iter().enumerate() {
                    f.write_str(if i == 0 {
                        ""
                    } else if i + 1 == c.len() {
                        " or "
                    } else {
                        ", "
                    })?;
                    f.write_str(w)?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Bad<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let name = self.backend.name();
        let key = Lossy(self.key);
        let found = find(self.backend, self.key);
        match (self.why, found) {
            (Why::Unknown, _) => {
                write!(f, "{name} has no setting '{key}'")?;
                let ks = keys(self.backend);
                if ks.is_empty() {
                    return write!(f, " ({name} takes no settings)");
                }
                f.write_str(" (it knows: ")?;
                for (i, k) in ks.iter().enumerate() {
                    write!(f, "{}{}", if i == 0 { "" } else { ", " }, k.name)?;
                }
                f.write_str(")")
            }
            (Why::NoValue, Some(k)) => write!(f, "{name} setting '{key}' needs a value: {key}=VALUE, VALUE {}", Form(k.kind)),
            (Why::Value, Some(k)) => {
                write!(f, "{name} setting {key}={} is not valid (accepted: {})", Lossy(self.value), Form(k.kind))
            }
            (Why::StartOnly, _) => write!(
                f,
                "{name} setting '{key}' is read only when the process starts: set GLIBC_TUNABLES=glibc.malloc.{key}={} in the program's environment instead",
                Lossy(self.value)
            ),
            (Why::Twice, _) => write!(f, "{name} setting '{key}' is given twice"),
            (Why::TooLong, _) => write!(f, "{name} settings are too long (at most {} bytes together with MALLOC_CONF)", CONF_LEN - 1),
            (_, None) => write!(f, "{name} has no setting '{key}'"),
        }
    }
}

fn find(b: Backend, key: &[u8]) -> Option<&'static Key> {
    keys(b).iter().find(|k| k.name.as_bytes() == key)
}

fn parse_int(v: &[u8]) -> Option<i64> {
    let (neg, d) = match v.first() {
        Some(b'-') => (true, &v[1..]),
        Some(b'+') => (false, &v[1..]),
        _ => (false, v),
    };
    if d.is_empty() || d.len() > 18 {
        return None;
    }
    let mut n: i64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (c - b'0') as i64;
    }
    Some(if neg { -n } else { n })
}

fn parse_bool(v: &[u8]) -> Option<bool> {
    match v {
        b"true" | b"1" => Some(true),
        b"false" | b"0" => Some(false),
        _ => None,
    }
}

fn parse_float(v: &[u8]) -> Option<f64> {
    core::str::from_utf8(v).ok()?.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// A checked value.
#[derive(Clone, Copy)]
enum Val {
    Bool(bool),
    Int(i64),
    Float(f64),
    Word,
}

fn value(k: &Key, v: &[u8]) -> Option<Val> {
    match k.kind {
        Kind::Bool => parse_bool(v).map(Val::Bool),
        Kind::Int { min, max } => parse_int(v).filter(|n| (min..=max).contains(n)).map(Val::Int),
        Kind::Float { min, max } => parse_float(v).filter(|x| *x >= min && *x <= max).map(Val::Float),
        Kind::Choice(c) => c.iter().any(|w| w.as_bytes() == v).then_some(Val::Word),
    }
}

/// Where the settings are applied: the shim cannot use start-up-only keys.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Context {
    Shim,
    /// A fresh process made for them (a replay's child), whose environment was set up
    /// with [`glibc_tunables`].
    Child,
}

/// Checks every pair of `s` against backend `b`'s keys.
pub fn check<'a>(b: Backend, s: &'a [u8], cx: Context) -> Result<(), Bad<'a>> {
    for (i, item) in s.split(|&c| c == b',').filter(|p| !p.is_empty()).enumerate() {
        let (key, v, has_eq) = match item.iter().position(|&c| c == b'=') {
            Some(j) => (&item[..j], &item[j + 1..], true),
            None => (item, &item[item.len()..], false),
        };
        let bad = |why| Bad { backend: b, key, value: v, why };
        let Some(k) = find(b, key) else { return Err(bad(Why::Unknown)) };
        if !has_eq {
            return Err(bad(Why::NoValue));
        }
        if value(k, v).is_none() {
            return Err(bad(Why::Value));
        }
        if k.start_only && cx == Context::Shim {
            return Err(bad(Why::StartOnly));
        }
        if pairs(s).take(i).any(|(k2, _)| k2 == key) {
            return Err(bad(Why::Twice));
        }
    }
    Ok(())
}

static APPLIED_PTR: core::sync::atomic::AtomicPtr<u8> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());
static APPLIED_LEN: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Remembers the settings in force in this process (the shim's, for its log header).
pub fn set_applied(s: &'static [u8]) {
    use core::sync::atomic::Ordering::*;
    APPLIED_LEN.store(s.len(), Relaxed);
    APPLIED_PTR.store(s.as_ptr() as *mut u8, Release);
}

/// The settings [`set_applied`] remembered.
pub fn applied() -> Option<&'static [u8]> {
    use core::sync::atomic::Ordering::*;
    let p = APPLIED_PTR.load(Acquire);
    (!p.is_null()).then(|| unsafe { core::slice::from_raw_parts(p as *const u8, APPLIED_LEN.load(Relaxed)) })
}

const CONF_LEN: usize = 1024;
/// jemalloc's malloc_conf, built by [`apply`]: `MALLOC_CONF,key:value,...`, NUL-terminated.
static mut JE_CONF: [u8; CONF_LEN] = [0; CONF_LEN];

unsafe extern "C" {
    #[link_name = "_rjem_malloc_conf"]
    static mut RJEM_MALLOC_CONF: *const core::ffi::c_char;
    fn mallopt(param: i32, value: i32) -> i32;
}

/// Hands `malloc_conf` (the user's MALLOC_CONF, jemalloc's syntax `key:value,...`) to the
/// built-in jemalloc, before its first allocation. What [`apply`] does for jemalloc when no
/// settings are given.
pub fn set_malloc_conf(malloc_conf: &'static [u8]) {
    // Needs a NUL at its end: a slice of the environment has one right after it.
    unsafe { RJEM_MALLOC_CONF = malloc_conf.as_ptr() as *const core::ffi::c_char };
}

/// Checks `s` (see [`check`]) and applies it to backend `b`, which must not have served an
/// allocation yet: call before [`crate::select`]. `malloc_conf` (the user's MALLOC_CONF, or
/// None) comes first in jemalloc's configuration, the settings after it. Nothing is applied
/// when something is refused.
pub fn apply<'a>(b: Backend, s: &'a [u8], malloc_conf: Option<&[u8]>, cx: Context) -> Result<(), Bad<'a>> {
    check(b, s, cx)?;
    match b {
        Backend::Jemalloc => {
            let buf = unsafe { &mut *core::ptr::addr_of_mut!(JE_CONF) };
            let mut n = 0;
            fn put(buf: &mut [u8], n: &mut usize, bytes: &[u8]) -> bool {
                if *n + bytes.len() >= buf.len() {
                    return false;
                }
                buf[*n..*n + bytes.len()].copy_from_slice(bytes);
                *n += bytes.len();
                true
            }
            let mut ok = true;
            if let Some(mc) = malloc_conf.filter(|m| !m.is_empty()) {
                ok &= put(buf, &mut n, mc);
            }
            for (key, v) in pairs(s) {
                let k = find(b, key).expect("checked");
                let v: &[u8] = match (k.kind, parse_bool(v)) {
                    (Kind::Bool, Some(true)) => b"true",
                    (Kind::Bool, Some(false)) => b"false",
                    _ => v,
                };
                if n > 0 {
                    ok &= put(buf, &mut n, b",");
                }
                ok &= put(buf, &mut n, key) && put(buf, &mut n, b":") && put(buf, &mut n, v);
            }
            if !ok {
                return Err(Bad { backend: b, key: s, value: b"", why: Why::TooLong });
            }
            buf[n] = 0;
            unsafe { RJEM_MALLOC_CONF = buf.as_ptr() as *const core::ffi::c_char };
        }
        Backend::Mimalloc => {
            for (key, v) in pairs(s) {
                let k = find(b, key).expect("checked");
                let n = match value(k, v) {
                    Some(Val::Bool(x)) => x as i64,
                    Some(Val::Int(x)) => x,
                    _ => continue,
                };
                unsafe { libmimalloc_sys::mi_option_set(k.id, n as core::ffi::c_long) };
            }
        }
        Backend::Glibc => {
            for (key, v) in pairs(s) {
                let k = find(b, key).expect("checked");
                if k.start_only {
                    continue; // GLIBC_TUNABLES, set by the parent (Context::Child).
                }
                if let Some(Val::Int(x)) = value(k, v) {
                    unsafe { mallopt(k.id, x as i32) };
                }
            }
        }
        Backend::Tcmalloc if pairs(s).next().is_some() => tc_apply(s),
        _ => {}
    }
    Ok(())
}

#[cfg(shim_tcmalloc)]
fn tc_apply(s: &[u8]) {
    crate::tcmalloc::init();
    for (key, v) in pairs(s) {
        let Some(k) = find(Backend::Tcmalloc, key) else { continue };
        match (k.id, value(k, v)) {
            (TC_RELEASE_RATE, Some(Val::Float(x))) => crate::tcmalloc::set_release_rate(x),
            (TC_THREAD_CACHE, Some(Val::Int(x))) => {
                crate::stats::tc_set_property(c"tcmalloc.max_total_thread_cache_bytes", x as usize);
            }
            (TC_DECOMMIT, Some(Val::Bool(x))) => {
                crate::stats::tc_set_property(c"tcmalloc.aggressive_memory_decommit", x as usize);
            }
            _ => {}
        }
    }
}
#[cfg(not(shim_tcmalloc))]
fn tc_apply(_: &[u8]) {}

/// jemalloc's configuration string for settings `s` after the user's `malloc_conf`
/// (`key:value,...`; a later pair wins): for the parent of a process that will run on
/// jemalloc with them, as its `_RJEM_MALLOC_CONF` (read by jemalloc's constructor).
pub fn jemalloc_conf(s: &str, malloc_conf: Option<&str>) -> String {
    let mut t: Vec<String> =
        malloc_conf.filter(|m| !m.is_empty()).map(|m| vec![m.to_string()]).unwrap_or_default();
    for (key, v) in pairs(s.as_bytes()) {
        let v = match (find(Backend::Jemalloc, key).map(|k| k.kind), parse_bool(v)) {
            (Some(Kind::Bool), Some(b)) => b.to_string(),
            _ => String::from_utf8_lossy(v).into_owned(),
        };
        t.push(format!("{}:{v}", String::from_utf8_lossy(key)));
    }
    t.join(",")
}

/// jemalloc sets itself up in a constructor of the object it is linked into (libshim.so,
/// shimlog), before the shim's first call: its configuration must be in place before that.
/// This runs first (a constructor of higher priority in the same object): with
/// `SHIM_BACKEND=jemalloc:SETTINGS` it hands jemalloc `MALLOC_CONF` and the settings (when
/// they pass [`check`]; the shim reports them otherwise), and with plain `jemalloc` the
/// user's `MALLOC_CONF`. Reads the environment with getenv, allocates nothing.
extern "C" fn early_jemalloc_conf() {
    let get = |name: &core::ffi::CStr| -> Option<&'static [u8]> {
        let p = unsafe { libc::getenv(name.as_ptr()) };
        (!p.is_null()).then(|| unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes())
    };
    let Some(v) = get(c"SHIM_BACKEND") else { return };
    let (name, set) = split_label(v);
    if Backend::parse(name) != Some(Backend::Jemalloc) {
        return;
    }
    let mc = get(c"MALLOC_CONF").filter(|m| !m.is_empty());
    match set {
        Some(s) if check(Backend::Jemalloc, s, Context::Shim).is_ok() => {
            let _ = apply(Backend::Jemalloc, s, mc, Context::Shim);
        }
        _ => {
            if let Some(m) = mc {
                set_malloc_conf(m);
            }
        }
    }
}

#[used]
#[unsafe(link_section = ".init_array.00101")]
static EARLY_JEMALLOC_CONF: extern "C" fn() = early_jemalloc_conf;

/// The `GLIBC_TUNABLES` value for the start-up-only glibc keys of `s` (`glibc.malloc.KEY=V`
/// joined by colons), appended to `existing`; None when `s` has none. For the parent of a
/// process that will run on glibc with these settings.
pub fn glibc_tunables(s: &str, existing: Option<&str>) -> Option<String> {
    let mut t: Vec<String> = Vec::new();
    for (key, v) in pairs(s.as_bytes()) {
        if find(Backend::Glibc, key).is_some_and(|k| k.start_only) {
            t.push(format!("glibc.malloc.{}={}", String::from_utf8_lossy(key), String::from_utf8_lossy(v)));
        }
    }
    if t.is_empty() {
        return None;
    }
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        t.insert(0, e.to_string());
    }
    Some(t.join(":"))
}

/// What the allocator says a setting is now, in its own terms, where it can be asked:
/// jemalloc's `opt.KEY` mallctl, mimalloc's `mi_option_get`, tcmalloc's properties. None
/// where it cannot (glibc has no getter for mallopt's parameters).
pub fn read_back(b: Backend, key: &str) -> Option<String> {
    let k = find(b, key.as_bytes())?;
    match b {
        Backend::Jemalloc => jemalloc_opt(k),
        Backend::Mimalloc => Some(unsafe { libmimalloc_sys::mi_option_get(k.id) }.to_string()),
        Backend::Tcmalloc => match k.id {
            TC_THREAD_CACHE => {
                crate::stats::tc_property(c"tcmalloc.max_total_thread_cache_bytes").map(|v| v.to_string())
            }
            TC_DECOMMIT => {
                crate::stats::tc_property(c"tcmalloc.aggressive_memory_decommit").map(|v| v.to_string())
            }
            #[cfg(shim_tcmalloc)]
            TC_RELEASE_RATE => Some(crate::tcmalloc::release_rate().to_string()),
            _ => None,
        },
        _ => None,
    }
}

fn jemalloc_opt(k: &Key) -> Option<String> {
    use core::ffi::c_void;
    let name = std::ffi::CString::new(format!("opt.{}", k.name)).ok()?;
    let get = |p: *mut c_void, len: usize| -> bool {
        let mut l = len;
        unsafe {
            tikv_jemalloc_sys::mallctl(name.as_ptr(), p, &mut l, core::ptr::null_mut(), 0) == 0 && l == len
        }
    };
    match k.kind {
        Kind::Choice(_) => {
            let mut p: *const core::ffi::c_char = core::ptr::null();
            (get(&mut p as *mut _ as *mut c_void, 8) && !p.is_null())
                .then(|| unsafe { core::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
        }
        Kind::Bool => {
            let mut v: u8 = 0;
            get(&mut v as *mut _ as *mut c_void, 1).then(|| (v != 0).to_string())
        }
        _ => {
            let mut v: i64 = 0;
            if get(&mut v as *mut _ as *mut c_void, 8) {
                return Some(v.to_string());
            }
            let mut w: u32 = 0;
            get(&mut w as *mut _ as *mut c_void, 4).then(|| w.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(b: Backend, s: &str, cx: Context) -> String {
        check(b, s.as_bytes(), cx).err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn every_example_is_accepted() {
        for b in [Backend::Jemalloc, Backend::Mimalloc, Backend::Tcmalloc, Backend::Glibc] {
            for k in keys(b) {
                let s = format!("{}={}", k.name, k.example);
                assert_eq!(msg(b, &s, Context::Child), "", "{} {s}", b.name());
            }
        }
    }

    #[test]
    fn refusals_are_one_line_naming_what_is_known() {
        let m = msg(Backend::Jemalloc, "dirty_decay_ms=0,bogus=1", Context::Child);
        assert!(
            m.starts_with(
                "jemalloc has no setting 'bogus' (it knows: dirty_decay_ms, muzzy_decay_ms, narenas"
            ),
            "{m}"
        );
        assert!(!m.contains('\n'));
        let m = msg(Backend::Jemalloc, "dirty_decay_ms=soon", Context::Child);
        assert_eq!(m, "jemalloc setting dirty_decay_ms=soon is not valid (accepted: a whole number from -1)");
        let m = msg(Backend::Jemalloc, "thp=maybe", Context::Child);
        assert_eq!(m, "jemalloc setting thp=maybe is not valid (accepted: default, always or never)");
        let m = msg(Backend::Snmalloc, "x=1", Context::Child);
        assert_eq!(m, "snmalloc has no setting 'x' (snmalloc takes no settings)");
        let m = msg(Backend::Glibc, "tcache_count=0", Context::Shim);
        assert!(m.contains("GLIBC_TUNABLES=glibc.malloc.tcache_count=0"), "{m}");
        assert_eq!(msg(Backend::Glibc, "tcache_count=0", Context::Child), "");
        assert_eq!(
            msg(Backend::Mimalloc, "purge_delay", Context::Child),
            "mimalloc setting 'purge_delay' needs a value: purge_delay=VALUE, VALUE a whole number from -1"
        );
        assert_eq!(
            msg(Backend::Glibc, "arena_max=2,arena_max=3", Context::Child),
            "glibc setting 'arena_max' is given twice"
        );
    }

    #[test]
    fn variants_continue_after_commas() {
        let v = parse_variants(&[
            "jemalloc,jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0,mimalloc",
            "glibc:arena_max=2",
        ])
        .unwrap();
        let labels: Vec<String> = v.iter().map(Variant::label).collect();
        assert_eq!(
            labels,
            ["jemalloc", "jemalloc:dirty_decay_ms=0,muzzy_decay_ms=0", "mimalloc", "glibc:arena_max=2"]
        );
        assert_eq!(v[1].timed(), [("dirty_decay_ms", "0"), ("muzzy_decay_ms", "0")]);
        assert!(matches!(parse_variants(&["jemalloc,narenas=1"]), Err(ParseError::Orphan(_))));
        assert!(matches!(parse_variants(&["jemalloc:bogus=1"]), Err(ParseError::Setting(_))));
        assert!(matches!(parse_variants(&["nosuch"]), Err(ParseError::Backend(_))));
    }

    #[test]
    fn glibc_tunables_for_the_child() {
        assert_eq!(
            glibc_tunables("arena_max=2,tcache_count=0", Some("glibc.malloc.check=0")).as_deref(),
            Some("glibc.malloc.check=0:glibc.malloc.tcache_count=0")
        );
        assert_eq!(glibc_tunables("arena_max=2", None), None);
    }
}
