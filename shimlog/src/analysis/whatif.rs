//! The size-class what-if of `stats --classes SPEC` (repeatable): the run's requests
//! rounded up to each configuration's size classes, and what that rounding ("slop") costs,
//! each configuration against the first. docs/stats.md, "Size-class what-if".
//!
//! A configuration is a backend's own classes (`jemalloc`: every size asked of the backend
//! built into shimlog, as the slop section does: jemalloc's `nallocx`, mimalloc's
//! `mi_good_size`, tcmalloc's `nallocx`, snmalloc's `malloc_good_size`, glibc's chunk
//! rounding), or classes written out: a spacing rule (`every 256 B from 512 B to 4 KiB`,
//! `4 per doubling from 128 B to 16 KiB`) or a list (`16,32,48,64`), several joined with
//! `;`. Written classes lie over a backend's (`... on jemalloc`; by default the first
//! configuration's backend, `on none` for none): they replace that backend's classes from
//! their smallest to their largest, and the backend's classes serve the rest. Alone, a
//! request above the largest class is not rounded (and counted as such).
//!
//! Computed at the end from the per-size counts the engine keeps anyway ([`SizeCount`],
//! one per distinct size): no pass of its own over the log.
use super::classes::{backend_class, SizeTable};
use super::sizes::Sizes;
use serde::Serialize;
use shim_backend::Backend;
use std::collections::BTreeMap;

/// One distinct request size of a run: blocks made of it, and live at the heap's peak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeCount {
    pub size: u64,
    pub made: u64,
    pub at_peak: u64,
}

/// The run's sizes (`made`: blocks made per size; `peak`: blocks live per size at the peak).
pub fn mix(t: &SizeTable, made: &Sizes, peak: &Sizes) -> Vec<SizeCount> {
    let n = made.stats.len().max(peak.stats.len());
    let mut v: Vec<SizeCount> = (0..n)
        .filter_map(|i| {
            let m = made.stats.get(i).map_or(0, |s| s.made);
            let p = peak.stats.get(i).map_or(0, |s| s.at_peak);
            (m > 0 || p > 0).then(|| SizeCount { size: t.size(i as u32), made: m, at_peak: p })
        })
        .collect();
    v.sort_by_key(|s| s.size);
    v
}

/// Most classes a written configuration may have.
const MAX_CLASSES: usize = 1 << 20;

/// What `--classes` accepts, for its one-line error.
pub fn accepted() -> String {
    format!(
        "a backend ({}), a spacing rule (`every 256 B from 512 B to 4 KiB`, `4 per doubling from 128 B to 16 KiB`), \
         or a list of class sizes (`16,32,48,64`); several joined with `;`, optionally followed by `on BACKEND` or `on none`",
        Backend::AVAILABLE
    )
}

#[derive(Clone, Debug)]
pub struct Spec {
    /// As given.
    pub text: String,
    /// Written classes, sorted, distinct (none: the base backend's own).
    written: Option<Vec<u64>>,
    /// The backend serving the sizes the written classes do not cover (or all sizes).
    base: Option<Backend>,
    /// The written classes came with no `on`: the first configuration's backend is theirs.
    default_base: bool,
}

impl Spec {
    pub fn parse(text: &str) -> Result<Spec, String> {
        let bad = |why: String| format!("--classes `{text}`: {why}; accepted: {}", accepted());
        let t = text.trim();
        if t.is_empty() {
            return Err(bad("empty".into()));
        }
        let (body, on) = match t.rfind(" on ") {
            Some(i) => (t[..i].trim(), Some(t[i + 4..].trim())),
            None => (t, None),
        };
        let base_of = |name: &str| -> Result<Option<Backend>, String> {
            if name.eq_ignore_ascii_case("none") {
                return Ok(None);
            }
            match Backend::parse(name.as_bytes()) {
                Some(b) if b.available() => Ok(Some(b)),
                Some(b) => Err(bad(format!("{} is not built into this shimlog", b.name()))),
                None => Err(bad(format!("`{name}` is not a backend"))),
            }
        };
        if on.is_none() {
            if let Some(b) = Backend::parse(t.as_bytes()) {
                let b = base_of(b.name())?.expect("a backend");
                return Ok(Spec {
                    text: text.to_string(),
                    written: None,
                    base: Some(b),
                    default_base: false,
                });
            }
        }
        let mut classes = Vec::new();
        for part in body.split(';').map(str::trim) {
            if part.is_empty() {
                return Err(bad("an empty part between `;`".into()));
            }
            written(part, &mut classes).map_err(bad)?;
            if classes.len() > MAX_CLASSES {
                return Err(bad(format!("more than {MAX_CLASSES} classes")));
            }
        }
        classes.sort_unstable();
        classes.dedup();
        let (base, default_base) = match on {
            Some(name) => (base_of(name)?, false),
            None => (None, true),
        };
        Ok(Spec { text: text.to_string(), written: Some(classes), base, default_base })
    }

    /// The configuration's name in the table: what was given, and what it lies over.
    pub fn label(&self) -> String {
        match (&self.written, self.base) {
            (None, Some(b)) => format!("{} {}", b.name(), b.version()),
            (Some(_), Some(b)) if self.default_base => {
                format!("{} (on {}'s other classes)", self.text.trim(), b.name())
            }
            (Some(_), None) if self.default_base => format!("{} (alone)", self.text.trim()),
            _ => self.text.trim().to_string(),
        }
    }
}

/// Written classes lacking an `on` take the first configuration's backend, if it has one.
pub fn resolve(specs: &mut [Spec]) {
    let first = specs.first().and_then(|s| s.base);
    for s in specs.iter_mut().filter(|s| s.default_base) {
        s.base = first;
    }
}

/// A size: `256`, `256 B`, `4 KiB`, `4KiB`, `4k`, `1 MiB`.
fn size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let n: u64 = s[..end].parse().map_err(|_| format!("`{s}` is not a size"))?;
    let mult = match s[end..].trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        u => return Err(format!("`{u}` is not a unit of size (B, KiB, MiB, GiB)")),
    };
    n.checked_mul(mult).filter(|&v| v > 0).ok_or_else(|| format!("`{s}`: a size from 1 B"))
}

/// One part of written classes, appended to `out`.
fn written(part: &str, out: &mut Vec<u64>) -> Result<(), String> {
    let lower = part.to_ascii_lowercase();
    let range = |rest: &str| -> Result<(u64, u64), String> {
        let rest = rest.trim();
        let rest = rest.strip_prefix("from ").ok_or_else(|| format!("`{part}`: `from LO to HI` expected"))?;
        let (lo, hi) =
            rest.split_once(" to ").ok_or_else(|| format!("`{part}`: `from LO to HI` expected"))?;
        let (lo, hi) = (size(lo)?, size(hi)?);
        if lo > hi {
            return Err(format!("`{part}`: {lo} B is above {hi} B"));
        }
        Ok((lo, hi))
    };
    if let Some(rest) = lower.strip_prefix("every ") {
        let at =
            rest.find(" from ").ok_or_else(|| format!("`{part}`: `every STEP from LO to HI` expected"))?;
        let step = size(&rest[..at])?;
        let (lo, hi) = range(&rest[at..])?;
        if (hi - lo) / step >= MAX_CLASSES as u64 {
            return Err(format!("more than {MAX_CLASSES} classes"));
        }
        out.extend((0..=(hi - lo) / step).map(|k| lo + k * step));
        return Ok(());
    }
    if let Some(at) = lower.find(" per doubling") {
        let n: u64 = lower[..at].trim().parse().ok().filter(|n| (1..=1024).contains(n)).ok_or_else(|| {
            format!("`{part}`: `N per doubling from LO to HI` with N from 1 to 1024 expected")
        })?;
        let (lo, hi) = range(&lower[at + " per doubling".len()..])?;
        // Within [2^k, 2^(k+1)]: steps of 2^k / N (jemalloc's spacing with N = 4).
        let mut c = lo;
        while c <= hi {
            out.push(c);
            if out.len() > MAX_CLASSES {
                return Err(format!("more than {MAX_CLASSES} classes"));
            }
            let g = 1u64 << (63 - c.leading_zeros());
            c += (g / n).max(1);
        }
        return Ok(());
    }
    if lower.starts_with(|c: char| c.is_ascii_digit()) {
        for x in part.split(',') {
            out.push(size(x)?);
        }
        return Ok(());
    }
    Err(format!("`{part}` is neither a backend, a spacing rule nor a list"))
}

/// A configuration ready to round sizes.
struct Rounder<'a> {
    spec: &'a Spec,
    /// The base backend's smallest class above the written ones (cached).
    above: Option<u64>,
}

impl Rounder<'_> {
    fn new(spec: &Spec) -> Rounder<'_> {
        let above = match (&spec.written, spec.base) {
            (Some(w), Some(b)) => w.last().map(|&hi| backend_class(b, hi + 1)),
            _ => None,
        };
        Rounder { spec, above }
    }

    /// The class a request of `size` bytes gets (None: above every class, not rounded).
    fn class(&self, size: u64) -> Option<u64> {
        let Some(w) = &self.spec.written else {
            return Some(backend_class(self.spec.base.expect("a backend"), size));
        };
        let (lo, hi) = (w[0], w[w.len() - 1]);
        let mine = w.get(w.partition_point(|&c| c < size)).copied();
        let Some(b) = self.spec.base else { return mine };
        // The base's classes from lo to hi are replaced by the written ones.
        let theirs = match backend_class(b, size) {
            c if c < lo || c > hi => c,
            _ => self.above.unwrap_or(size),
        };
        Some(mine.map_or(theirs, |m| m.min(theirs)))
    }
}

#[derive(Serialize, Clone, Debug, Default)]
pub struct ClassRow {
    /// The class's size.
    pub class_bytes: u64,
    /// The smallest and largest request size rounded to it in this run.
    pub smallest_request: u64,
    pub largest_request: u64,
    pub allocations: u64,
    pub requested_bytes: u64,
    /// Sum of (class - request) over its allocations.
    pub slop_bytes: u64,
    /// The same over the blocks live at the heap's peak.
    pub slop_at_peak_bytes: u64,
    /// The same requests' slop under the first configuration.
    pub first_slop_bytes: u64,
    /// slop_bytes - first_slop_bytes.
    pub change_bytes: i64,
}

#[derive(Serialize, Clone, Debug)]
pub struct AtPeak {
    pub live_bytes: u64,
    pub slop_bytes: u64,
    /// slop / live bytes at the peak.
    pub slop_share: f64,
}

#[derive(Serialize, Clone, Debug)]
pub struct Config {
    /// As given to --classes.
    pub spec: String,
    pub label: String,
    /// Classes the run's requests used.
    pub classes_used: u64,
    pub allocations: u64,
    /// Bytes requested by the blocks made (successful allocations).
    pub requested_bytes: u64,
    /// Sum over the run of (class - requested) of every allocation.
    pub slop_bytes: u64,
    /// slop / requested.
    pub slop_share: f64,
    pub at_peak: AtPeak,
    /// Written classes alone: allocations above the largest class, not rounded (0 slop).
    pub above_classes: u64,
    pub above_classes_bytes: u64,
    /// slop_bytes less the first configuration's (0 for the first).
    pub slop_change_bytes: i64,
    pub slop_at_peak_change_bytes: i64,
    /// The classes whose slop changed most against the first configuration (for the first:
    /// the classes with the most slop), largest first.
    pub most_changed: Vec<ClassRow>,
    /// Every class used, by size.
    pub classes: Vec<ClassRow>,
}

/// How many classes `most_changed` lists.
pub const MOST: usize = 10;

/// The configurations of `specs` (resolved) over the run's sizes.
pub fn tabulate(specs: &[Spec], mix: &[SizeCount], peak_live: u64) -> Vec<Config> {
    let rounders: Vec<Rounder> = specs.iter().map(Rounder::new).collect();
    // The first configuration's slop per size, for every row's comparison.
    let first: Vec<u64> = match rounders.first() {
        Some(r) => mix.iter().map(|s| r.class(s.size).map_or(0, |c| c.saturating_sub(s.size))).collect(),
        None => return Vec::new(),
    };
    let mut out: Vec<Config> = Vec::with_capacity(specs.len());
    for (k, r) in rounders.iter().enumerate() {
        let mut rows: BTreeMap<u64, ClassRow> = BTreeMap::new();
        let (mut requested, mut allocations, mut above, mut above_bytes) = (0u64, 0u64, 0u64, 0u64);
        for (i, s) in mix.iter().enumerate() {
            requested = requested.saturating_add(s.made.saturating_mul(s.size));
            allocations += s.made;
            let Some(c) = r.class(s.size) else {
                above += s.made;
                above_bytes = above_bytes.saturating_add(s.made.saturating_mul(s.size));
                continue;
            };
            let slop = c.saturating_sub(s.size);
            let row = rows.entry(c).or_insert_with(|| ClassRow {
                class_bytes: c,
                smallest_request: s.size,
                ..Default::default()
            });
            row.largest_request = s.size;
            row.allocations += s.made;
            row.requested_bytes = row.requested_bytes.saturating_add(s.made.saturating_mul(s.size));
            row.slop_bytes = row.slop_bytes.saturating_add(s.made.saturating_mul(slop));
            row.slop_at_peak_bytes = row.slop_at_peak_bytes.saturating_add(s.at_peak.saturating_mul(slop));
            row.first_slop_bytes = row.first_slop_bytes.saturating_add(s.made.saturating_mul(first[i]));
        }
        let mut classes: Vec<ClassRow> =
            rows.into_values().filter(|r| r.allocations > 0 || r.slop_at_peak_bytes > 0).collect();
        for c in &mut classes {
            c.change_bytes = c.slop_bytes as i64 - c.first_slop_bytes as i64;
        }
        let slop: u64 = classes.iter().map(|c| c.slop_bytes).sum();
        let at_peak: u64 = classes.iter().map(|c| c.slop_at_peak_bytes).sum();
        let mut most = classes.clone();
        if k == 0 {
            most.sort_by(|a, b| b.slop_bytes.cmp(&a.slop_bytes).then(a.class_bytes.cmp(&b.class_bytes)));
        } else {
            most.retain(|c| c.change_bytes != 0);
            most.sort_by(|a, b| {
                b.change_bytes
                    .unsigned_abs()
                    .cmp(&a.change_bytes.unsigned_abs())
                    .then(a.class_bytes.cmp(&b.class_bytes))
            });
        }
        most.truncate(MOST);
        let (first_slop, first_peak) =
            out.first().map_or((slop, at_peak), |f| (f.slop_bytes, f.at_peak.slop_bytes));
        out.push(Config {
            spec: specs[k].text.clone(),
            label: specs[k].label(),
            classes_used: classes.len() as u64,
            allocations,
            requested_bytes: requested,
            slop_bytes: slop,
            slop_share: super::slop::ratio(slop, requested),
            at_peak: AtPeak {
                live_bytes: peak_live,
                slop_bytes: at_peak,
                slop_share: super::slop::ratio(at_peak, peak_live),
            },
            above_classes: above,
            above_classes_bytes: above_bytes,
            slop_change_bytes: slop as i64 - first_slop as i64,
            slop_at_peak_change_bytes: at_peak as i64 - first_peak as i64,
            most_changed: most,
            classes,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes(s: &str) -> Vec<u64> {
        Spec::parse(s).unwrap().written.unwrap()
    }

    #[test]
    fn spacing_rules_and_lists() {
        assert_eq!(classes("every 256 B from 512 B to 4 KiB"), (2..=16).map(|k| k * 256).collect::<Vec<_>>());
        assert_eq!(classes("every 256B from 512B to 1KiB"), vec![512, 768, 1024]);
        assert_eq!(
            classes("4 per doubling from 128 B to 512 B"),
            vec![128, 160, 192, 224, 256, 320, 384, 448, 512]
        );
        assert_eq!(classes("48, 16,32 ,32"), vec![16, 32, 48]);
        assert_eq!(classes("16,32; every 64 B from 64 B to 256 B on none"), vec![16, 32, 64, 128, 192, 256]);
        assert_eq!(Spec::parse("jemalloc").unwrap().base, Some(Backend::Jemalloc));
        assert_eq!(Spec::parse("16,32 on mimalloc").unwrap().base, Some(Backend::Mimalloc));
        for bad in [
            "",
            "jemaloc",
            "every 0 B from 1 B to 2 B",
            "every 16 B from 64 B to 32 B",
            "16,,32",
            "16,32 on foo",
            "every 16 B",
            "0 per doubling from 16 B to 32 B",
            "16 XB",
            "every 1 B from 1 B to 1 GiB",
        ] {
            let e = Spec::parse(bad).unwrap_err();
            assert!(e.contains("accepted: a backend") && !e.contains('\n'), "{bad}: {e}");
        }
    }

    /// Written classes over a backend replace its classes from their smallest to their
    /// largest; alone, a request above the largest is not rounded.
    #[test]
    fn overlay_and_alone() {
        let mut s = vec![
            Spec::parse("jemalloc").unwrap(),
            Spec::parse("every 256 B from 512 B to 4 KiB").unwrap(),
            Spec::parse("64,128 on none").unwrap(),
        ];
        resolve(&mut s);
        let r = Rounder::new(&s[1]);
        // jemalloc: 100 -> 112, 600 -> 640, 2100 -> 2560, 5000 -> 5120.
        assert_eq!(
            [100, 600, 2100, 4096, 4097, 5000].map(|x| r.class(x)),
            [112, 768, 2304, 4096, 5120, 5120].map(Some)
        );
        let alone = Rounder::new(&s[2]);
        assert_eq!(
            [1, 64, 65, 128, 129].map(|x| alone.class(x)),
            [Some(64), Some(64), Some(128), Some(128), None]
        );
        let mix = [
            SizeCount { size: 100, made: 10, at_peak: 2 },
            SizeCount { size: 600, made: 5, at_peak: 5 },
            SizeCount { size: 129, made: 1, at_peak: 0 },
        ];
        let t = tabulate(&s, &mix, 10_000);
        // jemalloc: 10 * 12 + 5 * 40 + 1 * 31 (129 -> 160).
        assert_eq!(t[0].slop_bytes, 120 + 200 + 31);
        assert_eq!(t[0].at_peak.slop_bytes, 2 * 12 + 5 * 40);
        assert_eq!(t[1].slop_bytes, 120 + 5 * 168 + 31);
        assert_eq!(t[1].slop_change_bytes, 5 * 128);
        assert_eq!((t[1].most_changed[0].class_bytes, t[1].most_changed[0].change_bytes), (768, 640));
        assert_eq!(
            (t[2].slop_bytes, t[2].above_classes, t[2].above_classes_bytes),
            (10 * 28, 6, 5 * 600 + 129)
        );
    }

    /// The first size in 1..=max where the written rule and the real allocator differ.
    fn first_difference(rule: &str, b: Backend, max: u64) -> Option<(u64, Option<u64>, u64)> {
        let s = Spec::parse(rule).unwrap();
        let r = Rounder::new(&s);
        (1..=max).find_map(|n| {
            let (mine, real) = (r.class(n), backend_class(b, n));
            (mine != Some(real)).then_some((n, mine, real))
        })
    }

    /// Each allocator's classes as written from its sources (docs/stats.md), against the
    /// allocator itself (built into shimlog) for every size up to where the rule ends.
    #[test]
    fn written_rules_are_the_allocators_own() {
        let cases: [(&str, Backend, u64); 5] = [
            // jemalloc's sz.h groups: 4 classes a doubling; large classes are whole pages
            // (this build: every 4 KiB from 16 KiB on).
            ("8,16,32,48; 4 per doubling from 64 B to 16 KiB; every 4 KiB from 20 KiB to 64 MiB on none", Backend::Jemalloc, 4 << 20),
            // mimalloc's bins (_mi_bin: 4 a doubling from 8 words) up to its largest bin.
            ("8,16,32,48; 4 per doubling from 64 B to 256 KiB on none", Backend::Mimalloc, 256 << 10),
            // snmalloc's sizeclasses (a 2-bit mantissa) up to 64 KiB, powers of two above.
            ("16,32,48; 4 per doubling from 64 B to 64 KiB; 1 per doubling from 128 KiB to 1 GiB on none", Backend::Snmalloc, 4 << 20),
            // glibc's chunks: 16-byte steps, the 8-byte header subtracted, below the mmap threshold.
            ("every 16 B from 24 B to 131064 B on none", Backend::Glibc, 131_064),
            // gperftools' SizeMap table (kPageShift 13) up to 8 KiB, as its Init computes it.
            ("8,16,32,48,64,80,96,112,128,144,160,176,192,208,224,240,256,288,320,352,384,416,448,480,512,576,640,704,768,896,1024,\
              1152,1280,1408,1536,1792,2048,2304,2560,2816,3072,3328,4096,4608,5120,6144,6656,8192 on none", Backend::Tcmalloc, 8192),
        ];
        for (rule, b, max) in cases {
            if !b.available() {
                continue;
            }
            assert_eq!(
                first_difference(rule, b, max),
                None,
                "{} against `{rule}`: (size, the rule's class, {}'s)",
                b.name(),
                b.name()
            );
        }
    }
}
