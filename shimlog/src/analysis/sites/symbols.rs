//! Offline symbols: a log's return addresses to functions (inlined ones too), files and
//! lines, with addr2line (DWARF, then the symbol tables), names demangled (Rust, C++).
//! Each object is opened once, from `--binaries DIR` (by its file name) or where the log
//! says it was; each address is resolved once (a cache), so a large log's stacks cost one
//! lookup per distinct frame.
use super::collect::Mapping;
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};

/// One frame of source: a function, and where in it.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq, Hash)]
pub struct Frame {
    pub function: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Inlined into the frame after it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
    /// The object's file name (libc.so.6, the executable...).
    pub object: String,
}

pub struct Symbols<'a> {
    mappings: &'a [Mapping],
    binaries: Option<PathBuf>,
    loaders: FxHashMap<usize, Option<addr2line::Loader>>,
    cache: FxHashMap<u64, Vec<Frame>>,
    /// One line per object that could not be read.
    pub issues: Vec<String>,
}

fn base_name(p: &str) -> String {
    Path::new(p).file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| p.to_string())
}

/// The GNU build id of the ELF file `data`, in hex.
fn build_id_of(path: &Path) -> Option<String> {
    use object::Object;
    let data = std::fs::read(path).ok()?;
    let f = object::File::parse(&*data).ok()?;
    let id = f.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

impl<'a> Symbols<'a> {
    pub fn new(mappings: &'a [Mapping], binaries: Option<&Path>) -> Symbols<'a> {
        Symbols {
            mappings,
            binaries: binaries.map(Path::to_path_buf),
            loaders: FxHashMap::default(),
            cache: FxHashMap::default(),
            issues: Vec::new(),
        }
    }

    fn mapping_of(&self, pc: u64) -> Option<usize> {
        self.mappings.iter().position(|m| m.start <= pc && pc < m.end)
    }

    /// The file to read for mapping `m`: in --binaries (by file name, or by its path under
    /// it), else where it was loaded from. Its build id must be the log's.
    fn open(&mut self, i: usize) -> Option<addr2line::Loader> {
        let m = &self.mappings[i];
        if m.path.is_empty() || m.path.starts_with("linux-vdso") || m.path.starts_with('[') {
            return None;
        }
        let mut candidates = Vec::new();
        if let Some(dir) = &self.binaries {
            candidates.push(dir.join(base_name(&m.path)));
            candidates.push(dir.join(m.path.trim_start_matches('/')));
        }
        candidates.push(PathBuf::from(&m.path));
        let mut mismatch = None;
        for c in candidates.iter().filter(|c| c.is_file()) {
            if !m.build_id.is_empty() {
                match build_id_of(c) {
                    Some(id) if id != m.build_id => {
                        mismatch = Some(format!(
                            "{} has build id {id}, the log's {} is {}",
                            c.display(),
                            m.path,
                            m.build_id
                        ));
                        continue;
                    }
                    _ => {}
                }
            }
            match addr2line::Loader::new(c) {
                Ok(l) => return Some(l),
                Err(e) => {
                    self.issues.push(format!(
                        "cannot read symbols of {}: {e}; its frames are shown as addresses",
                        c.display()
                    ));
                    return None;
                }
            }
        }
        let id = if m.build_id.is_empty() { String::new() } else { format!(" (build id {})", m.build_id) };
        self.issues.push(match mismatch {
            Some(why) => format!("{why}: not used, its frames are shown as addresses (give the matching binary with --binaries DIR)"),
            None => format!("no binary for {}{id}: its frames are shown as addresses (give it with --binaries DIR)", m.path),
        });
        None
    }

    /// The frames of return address `pc`, innermost (most inlined) first.
    pub fn resolve(&mut self, pc: u64) -> &[Frame] {
        if !self.cache.contains_key(&pc) {
            let f = self.lookup(pc);
            self.cache.insert(pc, f);
        }
        &self.cache[&pc]
    }

    fn lookup(&mut self, pc: u64) -> Vec<Frame> {
        let Some(i) = self.mapping_of(pc) else {
            return vec![Frame {
                function: format!("{pc:#x}"),
                file: None,
                line: None,
                inlined: false,
                object: "?".into(),
            }];
        };
        if !self.loaders.contains_key(&i) {
            let l = self.open(i);
            self.loaders.insert(i, l);
        }
        let m = &self.mappings[i];
        let object = base_name(&m.path);
        // A return address: the call is the byte before it.
        let probe = pc.wrapping_sub(m.bias).wrapping_sub(1);
        let unknown = || {
            vec![Frame {
                function: format!("{object}+{probe:#x}"),
                file: None,
                line: None,
                inlined: false,
                object: object.clone(),
            }]
        };
        let Some(Some(l)) = self.loaders.get(&i) else { return unknown() };
        let mut out = Vec::new();
        if let Ok(mut it) = l.find_frames(probe) {
            while let Ok(Some(f)) = it.next() {
                let Some(name) = f.function.as_ref().and_then(|n| n.demangle().ok().map(|s| s.into_owned()))
                else {
                    continue;
                };
                let (file, line) = match &f.location {
                    Some(loc) => (loc.file.map(str::to_string), loc.line),
                    None => (None, None),
                };
                out.push(Frame { function: name, file, line, inlined: true, object: object.clone() });
            }
        }
        if let Some(last) = out.last_mut() {
            last.inlined = false;
            return out;
        }
        match l.find_symbol(probe) {
            Some(name) => vec![Frame {
                function: addr2line::demangle_auto(name.into(), None).into_owned(),
                file: None,
                line: None,
                inlined: false,
                object,
            }],
            None => unknown(),
        }
    }
}
