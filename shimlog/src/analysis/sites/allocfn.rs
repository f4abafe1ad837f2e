//! A program's own allocation wrappers (`--alloc-fn REGEX`): Redis' `zmalloc`, git's
//! `xmalloc`, GLib's `g_malloc`, CPython's `PyMem_Malloc`... A stack's frames from the
//! allocator's entry up to and including its outermost wrapper are folded into the wrapper's
//! caller, the site that matters (pprof's `drop_frames`, massif's `--alloc-fn`), the way
//! pprof prunes them: scanning from the stack's root, past any leading frames that match,
//! the first return address with a matching frame is cut, with everything inside it; a
//! stack whose every return address matches is left whole (and said once). A regular
//! expression matches a function's whole name, or its name with the argument list left out
//! (`operator new(unsigned long)`: `operator new`), as pprof matches it.
//!
//! The matching is done once per return address (profile.rs keeps it beside each address'
//! frames), the cut once per distinct stack: never per event.
use regex::Regex;

/// The wrappers of common programs, as their symbols name them (`nm -D` of Debian's
/// redis-server, libglib-2.0.so.0 and libpython3.11.so; git's wrapper.c).
pub const DEFAULTS: &[&str] = &[
    // Redis, Valkey, KeyDB (zmalloc.c); zlib's zcalloc too.
    "z(try)?(malloc|calloc|realloc)(_usable|_num)?(_internal)?",
    "zmalloc_no_tcache",
    "zstrdup",
    // git (wrapper.c), libiberty.
    "x(malloc|mallocz|mallocz_gently|calloc|realloc|strdup|strndup|memdupz)",
    "do_xmalloc",
    // GLib.
    "g_(try_)?(malloc0?|realloc)(_n)?",
    "g_slice_(alloc0?|copy)",
    "g_aligned_alloc0?",
    "g_memdup2?",
    "g_strn?dup",
    // CPython.
    "_?PyMem_(Raw)?(Malloc|Calloc|Realloc)",
    "_PyMem_Debug(Raw)?(Malloc|Calloc|Realloc|Alloc)",
    "_?PyObject_(Malloc|Calloc|Realloc)",
    "pymalloc_(alloc|realloc)",
    // OpenSSL, nginx, SQLite.
    "CRYPTO_(malloc|zalloc|realloc|clear_realloc|strdup|strndup|memdup)",
    "ngx_(alloc|calloc|memalign)",
    "sqlite3(Malloc|MallocZero|MemMalloc|Realloc|_malloc|_malloc64|_realloc|_realloc64)",
    // The C library's string copies, libstdc++'s allocators.
    "(__)?strn?dup",
    "std::__new_allocator<.*>::allocate",
    "__gnu_cxx::new_allocator<.*>::allocate",
    "std::allocator_traits<.*>::allocate",
];

/// `--alloc-fn`, on every verb that shows call sites.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct AllocFnArgs {
    /// A function of the program's that only passes allocations on (a regular expression
    /// matching its whole name; repeatable): the call site is its caller. Added to a default
    /// list for common programs (Redis' zmalloc, git's xmalloc, GLib's g_malloc, CPython's
    /// PyMem_Malloc...); `none` drops the defaults.
    #[arg(long = "alloc-fn", value_name = "REGEX")]
    pub alloc_fn: Vec<String>,
}

/// The wrappers in force, compiled.
#[derive(Clone, Debug)]
pub struct AllocFns {
    patterns: Vec<String>,
    /// `^(?:p1|p2|...)$`; None: no wrapper.
    any: Option<Regex>,
}

impl Default for AllocFns {
    /// The default list.
    fn default() -> AllocFns {
        AllocFns::parse(&[]).expect("the default wrappers compile")
    }
}

impl AllocFns {
    /// No wrapper at all (`--alloc-fn none`).
    pub fn none() -> AllocFns {
        AllocFns { patterns: Vec::new(), any: None }
    }

    /// The defaults and `given` (without the defaults when one of them is `none`). Err: one
    /// line naming the expression that does not compile.
    pub fn parse(given: &[String]) -> Result<AllocFns, String> {
        let mut patterns: Vec<String> = Vec::new();
        if !given.iter().any(|g| g == "none") {
            patterns.extend(DEFAULTS.iter().map(|s| s.to_string()));
        }
        for g in given.iter().filter(|g| *g != "none") {
            if let Err(e) = Regex::new(&format!("^(?:{g})$")) {
                // regex's message spans lines (the expression, a caret); its last says why.
                let why = e.to_string();
                let why = why.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
                return Err(format!(
                    "--alloc-fn {g:?}: not a regular expression ({})",
                    why.trim_start_matches("error: ")
                ));
            }
            patterns.push(g.clone());
        }
        if patterns.is_empty() {
            return Ok(AllocFns::none());
        }
        let all = format!("^(?:{})$", patterns.join("|"));
        let any = Regex::new(&all).map_err(|e| format!("--alloc-fn: the expressions together: {e}"))?;
        Ok(AllocFns { patterns, any: Some(any) })
    }

    /// For a pprof profile's `drop_frames` (pprof anchors it itself): empty for none.
    pub fn drop_frames(&self) -> String {
        self.patterns.join("|")
    }

    /// Whether function `name` is a wrapper.
    pub fn matches(&self, name: &str) -> bool {
        let Some(re) = &self.any else { return false };
        re.is_match(name) || {
            let s = simplified(name);
            s.len() != name.len() && re.is_match(s)
        }
    }

    /// Which expressions match `name` (for the one line about one matching every frame).
    pub fn which(&self, name: &str) -> Vec<&str> {
        self.patterns
            .iter()
            .filter(|p| {
                let one = AllocFns { patterns: Vec::new(), any: Regex::new(&format!("^(?:{p})$")).ok() };
                one.matches(name)
            })
            .map(String::as_str)
            .collect()
    }
}

/// `name` without its argument list, as pprof simplifies it: cut at the first `(` that is
/// not in `(anonymous namespace)` or `operator()`.
pub fn simplified(name: &str) -> &str {
    let mut from = 0;
    while let Some(i) = name[from..].find('(').map(|i| i + from) {
        if name[i..].starts_with("(anonymous namespace)") {
            from = i + "(anonymous namespace)".len();
        } else if name[..i].ends_with("operator") && name[i..].starts_with("()") {
            from = i + 2;
        } else {
            return &name[..i];
        }
    }
    name
}

/// What one return address' frames say: the index (innermost first) of its outermost frame
/// that is a wrapper, and how many frames it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcMatch {
    pub outermost: Option<usize>,
    pub frames: usize,
}

impl PcMatch {
    pub fn of<'a>(w: &AllocFns, names: impl ExactSizeIterator<Item = &'a str>) -> PcMatch {
        let frames = names.len();
        let mut outermost = None;
        for (i, n) in names.enumerate() {
            if w.matches(n) {
                outermost = Some(i);
            }
        }
        PcMatch { outermost, frames }
    }
}

/// Where a stack is cut: its `pcs` innermost return addresses dropped, then the `frames`
/// innermost (inlined) frames of the next one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    pub pcs: usize,
    pub frames: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Folding {
    /// No wrapper in the stack (or only at its root).
    Whole,
    Cut(Cut),
    /// Every return address has a wrapper frame: left whole.
    AllWrappers,
}

/// The folding of a stack whose return addresses (innermost first) match as `pcs` say.
pub fn fold(pcs: &[PcMatch]) -> Folding {
    let mut user = false;
    for (k, m) in pcs.iter().enumerate().rev() {
        match m.outermost {
            None => user = true,
            Some(_) if !user => {}
            Some(i) if i + 1 >= m.frames => return Folding::Cut(Cut { pcs: k + 1, frames: 0 }),
            Some(i) => return Folding::Cut(Cut { pcs: k, frames: i + 1 }),
        }
    }
    if !user && !pcs.is_empty() {
        Folding::AllWrappers
    } else {
        Folding::Whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcs(w: &AllocFns, stack: &[&[&str]]) -> Vec<PcMatch> {
        stack.iter().map(|f| PcMatch::of(w, f.iter().copied())).collect()
    }

    fn kept<'a>(stack: &[&[&'a str]], f: Folding) -> Vec<&'a str> {
        let c = match f {
            Folding::Cut(c) => c,
            _ => Cut::default(),
        };
        let mut out = Vec::new();
        for (k, fr) in stack.iter().enumerate().skip(c.pcs) {
            let skip = if k == c.pcs { c.frames } else { 0 };
            out.extend(fr.iter().skip(skip));
        }
        out
    }

    #[test]
    fn redis_wrappers_fold_into_their_caller() {
        let w = AllocFns::default();
        let s: &[&[&str]] = &[
            &["malloc"],
            &["ztrymalloc_usable"],
            &["zmalloc"],
            &["createStringObject"],
            &["processCommand"],
            &["main"],
        ];
        let f = fold(&pcs(&w, s));
        assert_eq!(f, Folding::Cut(Cut { pcs: 3, frames: 0 }));
        assert_eq!(kept(s, f), ["createStringObject", "processCommand", "main"]);
        // Not a wrapper: zmalloc's own bookkeeping.
        assert!(!w.matches("zmalloc_get_rss") && !w.matches("zmalloc_used_memory"));
    }

    #[test]
    fn inlined_wrapper_is_cut_inside_its_return_address() {
        // do_xmalloc inlined into xmalloc inlined into the caller: one return address.
        let w = AllocFns::default();
        let s: &[&[&str]] = &[&["do_xmalloc", "xmalloc", "strbuf_grow"], &["cmd_add"]];
        let f = fold(&pcs(&w, s));
        assert_eq!(f, Folding::Cut(Cut { pcs: 0, frames: 2 }));
        assert_eq!(kept(s, f), ["strbuf_grow", "cmd_add"]);
    }

    #[test]
    fn outermost_wrapper_wins_and_root_wrappers_are_not_sites() {
        let w = AllocFns::parse(&["none".into(), "wrap".into(), "_start".into()]).unwrap();
        let s: &[&[&str]] = &[&["malloc"], &["wrap"], &["inner"], &["wrap"], &["caller"], &["_start"]];
        let f = fold(&pcs(&w, s));
        assert_eq!(kept(s, f), ["caller", "_start"]);
        // Every frame a wrapper: the stack is left whole, and said.
        let all = AllocFns::parse(&[".*".into()]).unwrap();
        assert_eq!(fold(&pcs(&all, s)), Folding::AllWrappers);
        assert_eq!(fold(&[]), Folding::Whole);
        // None: nothing folds.
        assert_eq!(fold(&pcs(&AllocFns::parse(&["none".into()]).unwrap(), s)), Folding::Whole);
    }

    #[test]
    fn names_match_whole_with_or_without_arguments() {
        let w = AllocFns::parse(&["none".into(), "operator new".into(), "my_alloc".into()]).unwrap();
        assert!(w.matches("operator new(unsigned long)"));
        assert!(w.matches("my_alloc"));
        assert!(!w.matches("my_alloc_stats") && !w.matches("xmy_alloc"));
        assert_eq!(simplified("(anonymous namespace)::f(int)"), "(anonymous namespace)::f");
        assert_eq!(simplified("Foo::operator()(int) const"), "Foo::operator()");
        assert_eq!(w.drop_frames(), "operator new|my_alloc");
        assert_eq!(AllocFns::parse(&["none".into()]).unwrap().drop_frames(), "");
    }

    #[test]
    fn defaults_name_the_real_wrappers() {
        let w = AllocFns::default();
        for f in [
            "zmalloc",
            "ztrymalloc_usable",
            "ztrymalloc_usable_internal",
            "zcalloc",
            "zcalloc_num",
            "zrealloc_usable",
            "zstrdup",
            "xmalloc",
            "xcalloc",
            "xrealloc",
            "xstrdup",
            "g_malloc",
            "g_malloc0_n",
            "g_try_realloc_n",
            "g_slice_alloc0",
            "PyMem_Malloc",
            "PyMem_RawRealloc",
            "_PyObject_Malloc",
            "PyObject_Calloc",
            "std::__new_allocator<int>::allocate(unsigned long, void const*)",
        ] {
            assert!(w.matches(f), "{f}");
        }
        for f in ["main", "zslFree", "zmalloc_used_memory", "g_free", "PyList_New", "malloc", "xmalloc_ok"] {
            assert!(!w.matches(f), "{f}");
        }
    }

    #[test]
    fn a_bad_expression_is_one_line_naming_it() {
        let e = AllocFns::parse(&["zmalloc(".into()]).unwrap_err();
        assert!(e.contains("\"zmalloc(\"") && !e.contains('\n'), "{e}");
    }
}
