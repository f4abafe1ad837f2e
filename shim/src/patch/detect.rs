//! Finding the allocators a program brings: the symbol tables (`.symtab` and `.dynsym`) of
//! the executable and of the libraries loaded with it, read with the `object` crate from
//! the files as mapped, before the executable's own constructors run.
use super::entries::{self, Kind, CXX, JEMALLOC, MIMALLOC, MOZJEMALLOC, STANDARD, TCMALLOC};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::collections::HashMap;

/// One entry point to patch (aliases, several names at one address, are one entry).
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub addr: usize,
    /// The function's size from its symbol (0: unknown).
    pub size: usize,
    pub kind: Kind,
}

/// An allocator linked into one file.
#[derive(Clone, Debug)]
pub struct Family {
    /// "jemalloc", "mozjemalloc", "mimalloc", "tcmalloc", or "malloc" (a malloc family of
    /// unknown make).
    pub name: &'static str,
    pub prefix: String,
    pub file: String,
    pub entries: Vec<Entry>,
    /// Functions of the family that hand out or take back blocks and have no wrapper.
    pub unhandled: Vec<String>,
    /// Why it cannot be patched at all, if it cannot.
    pub problem: Option<String>,
}

/// What a scan of the loaded files found.
#[derive(Default, Debug)]
pub struct Scan {
    pub families: Vec<Family>,
    /// Files with no `.symtab` whose data names an allocator (`<jemalloc>`...): one may be
    /// linked in, unseen.
    pub stripped: Vec<(String, &'static str)>,
}

/// Runtime libraries that are not a program's allocator (libc's malloc is what LD_PRELOAD
/// replaces; libstdc++'s operator new calls malloc).
const SYSTEM: &[&str] = &[
    "linux-vdso",
    "ld-linux",
    "/libc.so",
    "/libm.so",
    "/libpthread.so",
    "/libdl.so",
    "/librt.so",
    "/libgcc_s.so",
    "/libstdc++.so",
    "/libutil.so",
    "/libresolv.so",
];

/// The loaded objects: (path, load bias). The executable first.
fn loaded_objects() -> Vec<(String, usize)> {
    unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, _: usize, data: *mut libc::c_void) -> i32 {
        let v = unsafe { &mut *(data as *mut Vec<(String, usize)>) };
        let info = unsafe { &*info };
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
        };
        v.push((name, info.dlpi_addr as usize));
        0
    }
    let mut v: Vec<(String, usize)> = Vec::new();
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut v as *mut _ as *mut libc::c_void) };
    let exe =
        std::fs::read_link("/proc/self/exe").map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let own = own_path();
    let mut out = Vec::new();
    for (i, (name, bias)) in v.into_iter().enumerate() {
        if i == 0 && name.is_empty() {
            out.push((exe.clone(), bias));
        } else if !name.is_empty() && name != own && !SYSTEM.iter().any(|s| name.contains(s)) {
            out.push((name, bias));
        }
    }
    out
}

/// This library's own path.
fn own_path() -> String {
    let mut info: libc::Dl_info = unsafe { core::mem::zeroed() };
    let here = own_path as *const libc::c_void;
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return String::new();
    }
    unsafe { core::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned()
}

/// A file mapped read-only for as long as it is parsed.
struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapped {
    fn open(path: &str) -> Option<Mapped> {
        let c = std::ffi::CString::new(path).ok()?;
        unsafe {
            let fd = libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return None;
            }
            let mut st: libc::stat = core::mem::zeroed();
            let len = if libc::fstat(fd, &mut st) == 0 { st.st_size as usize } else { 0 };
            let ptr = if len > 0 {
                libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, fd, 0)
            } else {
                libc::MAP_FAILED
            };
            libc::close(fd);
            (ptr != libc::MAP_FAILED).then_some(Mapped { ptr, len })
        }
    }
    fn bytes(&self) -> &[u8] {
        unsafe { core::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A defined function: address (load bias added) and size.
#[derive(Clone, Copy)]
struct Sym {
    addr: usize,
    size: usize,
}

/// Reads every loaded file's symbols and finds the allocators they define.
pub fn scan() -> Scan {
    let mut out = Scan::default();
    for (i, (path, bias)) in loaded_objects().into_iter().enumerate() {
        scan_file(&mut out, &path, bias, i == 0);
    }
    out
}

/// The paths of the loaded objects (the executable first), for telling later which are new.
pub fn loaded_paths() -> Vec<String> {
    loaded_objects().into_iter().map(|(p, _)| p).collect()
}

/// Scans the loaded library at `path` (one loaded after start-up).
pub fn scan_library(path: &str) -> Scan {
    let mut out = Scan::default();
    if let Some((_, bias)) = loaded_objects().into_iter().find(|(p, _)| p == path) {
        scan_file(&mut out, path, bias, false);
    }
    out
}

/// Adds what one loaded file defines to `out`.
fn scan_file(out: &mut Scan, path: &str, bias: usize, is_exe: bool) {
    let path = path.to_string();
    {
        let Some(m) = Mapped::open(&path) else { return };
        let Ok(file) = object::File::parse(m.bytes()) else { return };
        let mut syms: HashMap<String, Sym> = HashMap::new();
        let has_symtab = file.section_by_name(".symtab").is_some();
        // Where each function of the executable starts (for the extent of code reached
        // through a jump stub, which no symbol names).
        let mut starts: Vec<usize> = Vec::new();
        for s in file.symbols().chain(file.dynamic_symbols()) {
            if is_exe && s.kind() == SymbolKind::Text && s.is_definition() {
                starts.push(bias + s.address() as usize);
            }
            // Static functions (an allocator's internals, e.g. mimalloc's mi_arena_*) are no
            // entry points.
            if s.kind() != SymbolKind::Text || !s.is_definition() || s.is_local() || is_ifunc(&s) {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            // Versioned .dynsym names ("malloc@@VER") are not what programs define; and
            // only names an allocator's entry point can have are kept (a large program has
            // a hundred thousand others, which cost start-up time to copy and hash).
            if !maybe_entry(name) || name.contains('@') {
                continue;
            }
            syms.entry(name.to_string())
                .or_insert(Sym { addr: bias + s.address() as usize, size: s.size() as usize });
        }
        let mut found = families(&syms, &path, is_exe);
        starts.sort_unstable();
        starts.dedup();
        let text_end = file
            .sections()
            .filter(|s| s.kind() == object::SectionKind::Text)
            .map(|s| bias + (s.address() + s.size()) as usize)
            .max()
            .unwrap_or(0);
        for f in found.iter_mut().filter(|f| f.name == "mozjemalloc") {
            follow_stubs(f, &starts, text_end);
        }
        // A library's exported functions are all the program can reach of it (its .dynsym,
        // which stripping never removes, lists them), so every unhandled one counts; in the
        // executable, only those its own code calls (mozjemalloc's are exported for the
        // libraries: every one counts).
        for f in found.iter_mut().filter(|f| is_exe && !f.unhandled.is_empty() && f.name != "mozjemalloc") {
            let targets: Vec<(usize, String)> =
                f.unhandled.iter().filter_map(|n| syms.get(n).map(|s| (s.addr, n.clone()))).collect();
            f.unhandled = called_from_outside(&file, bias, &targets, "mi_");
        }
        if !has_symtab && is_exe && found.len() == 1 && found[0].name == "mozjemalloc" {
            // mozjemalloc's whole API is exported (libxul and the other libraries call it
            // there), and the executable's own helpers (mozalloc's moz_x*, operator new,
            // strdup) reach it only through those entry points or the code behind their jump
            // stubs, which is what is patched: its .dynsym is enough.
            out.families.extend(found);
            return;
        }
        if !has_symtab && is_exe {
            // A stripped executable: .dynsym shows only what it exports, and an allocator's
            // other entry points (jemalloc's sdallocx in a Rust program) may be called unseen.
            // Patching part of it is unsafe: it is left alone, and said so.
            if let Some(name) = found.first().map(|f| f.name).or_else(|| marker(&file)) {
                out.stripped.push((path.clone(), name));
            }
            return;
        }
        out.families.extend(found);
    }
}

/// Moves each entry point that is only a jump stub (mozjemalloc's `malloc` is `jmp` to code
/// that strdup and posix_memalign call directly) to the code it jumps to, so that direct
/// callers of that code are caught too. Its extent runs to the next function's start (at most
/// 64 KiB, never past the code section). Two entries that end at one address keep one hook when
/// they mean the same, else the family cannot be patched.
fn follow_stubs(f: &mut Family, starts: &[usize], text_end: usize) {
    use iced_x86::{Code, Decoder, DecoderOptions};
    let mut seen: HashMap<usize, Kind> = HashMap::new();
    let mut kept = Vec::new();
    for mut e in f.entries.drain(..) {
        for _ in 0..4 {
            if e.size < 2 || e.addr >= text_end {
                break;
            }
            let len = e.size.min(16).min(text_end - e.addr);
            let code = unsafe { core::slice::from_raw_parts(e.addr as *const u8, len) };
            let mut dec = Decoder::with_ip(64, code, e.addr as u64, DecoderOptions::NONE);
            let mut ins = dec.decode();
            if ins.code() == Code::Endbr64 && dec.can_decode() {
                ins = dec.decode();
            }
            if !matches!(ins.code(), Code::Jmp_rel32_64 | Code::Jmp_rel8_64) {
                break;
            }
            let to = ins.near_branch_target() as usize;
            let next = starts.get(starts.partition_point(|&s| s <= to)).copied().unwrap_or(text_end);
            if to >= text_end || to < 0x1000 {
                break;
            }
            e.addr = to;
            e.size = next.min(text_end).min(to + 64 * 1024) - to;
        }
        match seen.get(&e.addr) {
            Some(&k) if entries::same_meaning(k, e.kind) => {}
            Some(_) => {
                f.problem = Some(format!(
                    "{} jumps to code that another entry point with another meaning also reaches",
                    e.name
                ));
            }
            None => {
                seen.insert(e.addr, e.kind);
                kept.push(e);
            }
        }
    }
    f.entries = kept;
}

/// Whether `name` can be one of the entry points of entries.rs's tables under any prefix
/// (or one of mimalloc's unhandled ones): a superset, cheap to test.
fn maybe_entry(name: &str) -> bool {
    let b = name.as_bytes();
    b.starts_with(b"mi_")
        || b.starts_with(b"tc_")
        || b.starts_with(b"_Zn")
        || b.starts_with(b"_Zd")
        || b.starts_with(b"MallocExtension_")
        || b.starts_with(b"moz_arena_")
        || name.contains("alloc")
        || name.contains("free")
        || name.contains("memalign")
        || name.contains("mallctl")
        || name.ends_with("get_defrag_hint")
}

fn is_ifunc(s: &object::Symbol<'_, '_>) -> bool {
    match s.flags() {
        object::SymbolFlags::Elf { st_info, .. } => st_info & 0xf == object::elf::STT_GNU_IFUNC,
        _ => false,
    }
}

/// An allocator's own words in a file's read-only data.
fn marker(file: &object::File<'_>) -> Option<&'static str> {
    let data = file.section_by_name(".rodata")?.data().ok()?;
    let find = |needle: &[u8]| memchr::memmem::find(data, needle).is_some();
    if find(b"<jemalloc>") {
        Some("jemalloc")
    } else if find(b"mimalloc: ") {
        Some("mimalloc")
    } else if find(b"tcmalloc: ") {
        Some("tcmalloc")
    } else {
        None
    }
}

/// The allocator families one file defines.
fn families(syms: &HashMap<String, Sym>, path: &str, is_exe: bool) -> Vec<Family> {
    let has = |n: &str| syms.contains_key(n);
    let mut fams = Vec::new();
    // jemalloc under any prefix: <P>mallocx beside <P>sdallocx or <P>dallocx.
    let mut je_prefixes: Vec<String> = syms
        .keys()
        .filter_map(|n| n.strip_suffix("mallocx"))
        .filter(|p| has(&format!("{p}sdallocx")) || has(&format!("{p}dallocx")))
        .map(str::to_string)
        .collect();
    je_prefixes.sort();
    let standard_here = has("malloc") && has("free");
    let mut standard_claimed = false;
    for p in &je_prefixes {
        let mut tables: Vec<(&[(&str, Kind)], &str)> = vec![(STANDARD, p), (JEMALLOC, p)];
        if p.is_empty() {
            standard_claimed = true;
            tables.push((CXX, ""));
        }
        fams.push(family("jemalloc", p, &tables, syms, path, is_exe));
    }
    // mozjemalloc (Firefox's executable, or a libmozglue): the standard names beside its own.
    if standard_here && !standard_claimed && (has("moz_arena_malloc") || has("jemalloc_ptr_info")) {
        standard_claimed = true;
        let mut f = family("mozjemalloc", "", &[(STANDARD, ""), (MOZJEMALLOC, "")], syms, path, is_exe);
        f.unhandled = syms.keys().filter(|n| entries::mozjemalloc_unhandled(n)).cloned().collect();
        f.unhandled.sort();
        fams.push(f);
    }
    if has("tc_malloc") || has("tc_new") {
        let mut tables: Vec<(&[(&str, Kind)], &str)> = vec![(TCMALLOC, "")];
        if standard_here && !standard_claimed {
            standard_claimed = true;
            tables.push((STANDARD, ""));
            tables.push((CXX, ""));
        }
        fams.push(family("tcmalloc", "tc_", &tables, syms, path, is_exe));
    }
    if has("mi_malloc") || has("mi_free") || has("mi_malloc_aligned") {
        let mut tables: Vec<(&[(&str, Kind)], &str)> = vec![(MIMALLOC, "")];
        if standard_here && !standard_claimed {
            standard_claimed = true;
            tables.push((STANDARD, ""));
            tables.push((CXX, ""));
        }
        let mut f = family("mimalloc", "mi_", &tables, syms, path, is_exe);
        f.unhandled = syms.keys().filter(|n| entries::mimalloc_unhandled(n)).cloned().collect();
        f.unhandled.sort();
        fams.push(f);
    }
    if standard_here && !standard_claimed && is_exe {
        fams.push(family("malloc", "", &[(STANDARD, ""), (CXX, "")], syms, path, is_exe));
    }
    fams.retain(|f| !f.entries.is_empty());
    fams
}

/// The entries of `tables` that the file defines, one per address. In a library, the
/// standard C names are left out: the shim's own exports come before them in the lookup order
/// (and forward to them in `own` mode). Its C++ operators stay: the shim defines none.
fn family(
    name: &'static str,
    prefix: &str,
    tables: &[(&[(&str, Kind)], &str)],
    syms: &HashMap<String, Sym>,
    path: &str,
    is_exe: bool,
) -> Family {
    let mut by_addr: HashMap<usize, Entry> = HashMap::new();
    let mut problem = None;
    for &(table, p) in tables {
        let preloadable = p.is_empty() && core::ptr::eq(table, STANDARD);
        if preloadable && !is_exe {
            continue;
        }
        for &(n, kind) in table {
            let full = format!("{p}{n}");
            let Some(s) = syms.get(&full) else { continue };
            match by_addr.get(&s.addr) {
                Some(e) if !entries::same_meaning(e.kind, kind) => {
                    problem = Some(format!("{} and {full} share an address but differ in meaning", e.name));
                }
                Some(_) => {}
                None => {
                    by_addr.insert(s.addr, Entry { name: full, addr: s.addr, size: s.size, kind });
                }
            }
        }
    }
    let mut entries: Vec<Entry> = by_addr.into_values().collect();
    entries.sort_by_key(|e| e.addr);
    Family {
        name,
        prefix: prefix.to_string(),
        file: path.to_string(),
        entries,
        unhandled: Vec::new(),
        problem,
    }
}

/// Which of `targets` (address, name) code outside the allocator calls or jumps to directly
/// (a `call`/`jmp rel32` from a function whose name does not start with `own` or `_own`):
/// those the program itself may call. The scan is of the bytes, so it can see a call where
/// there is none (never the reverse): at worst a switch is refused that was safe.
fn called_from_outside(
    file: &object::File<'_>,
    bias: usize,
    targets: &[(usize, String)],
    own: &str,
) -> Vec<String> {
    // Every function of the file, by address, to tell whose code a call site is in.
    let mut funcs: Vec<(usize, usize, bool)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
        .map(|s| {
            let name = s.name().unwrap_or("");
            let inside = name.starts_with(own) || name.strip_prefix('_').is_some_and(|n| n.starts_with(own));
            (bias + s.address() as usize, s.size() as usize, inside)
        })
        .collect();
    funcs.sort_unstable_by_key(|f| f.0);
    let inside_allocator = |at: usize| {
        let i = funcs.partition_point(|f| f.0 <= at);
        i > 0 && at < funcs[i - 1].0 + funcs[i - 1].1.max(1) && funcs[i - 1].2
    };
    let mut called = vec![false; targets.len()];
    for sec in file.sections().filter(|s| s.kind() == object::SectionKind::Text) {
        let Ok(data) = sec.data() else { continue };
        let base = bias + sec.address() as usize;
        for i in 0..data.len().saturating_sub(4) {
            if data[i] != 0xE8 && data[i] != 0xE9 {
                continue;
            }
            let rel = i32::from_le_bytes([data[i + 1], data[i + 2], data[i + 3], data[i + 4]]);
            let to = (base + i + 5).wrapping_add(rel as isize as usize);
            if let Some(k) = targets.iter().position(|t| t.0 == to) {
                if !called[k] && !inside_allocator(base + i) {
                    called[k] = true;
                }
            }
        }
    }
    targets.iter().zip(called).filter(|(_, c)| *c).map(|(t, _)| t.1.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_name_passes_the_filter() {
        // jemalloc's names come under any prefix (families()); the others unprefixed.
        let any = ["", "je_", "_rjem_", "mylib_"];
        for (table, prefixes) in
            [(STANDARD, &any[..]), (JEMALLOC, &any[..]), (TCMALLOC, &[""]), (MIMALLOC, &[""]), (CXX, &[""])]
        {
            for &(name, _) in table {
                for p in prefixes {
                    let full = format!("{p}{name}");
                    assert!(maybe_entry(&full), "{full} is filtered out");
                }
            }
        }
        assert!(maybe_entry("mi_heap_malloc") && maybe_entry("mi_strdup"));
        assert!(!maybe_entry("ht_lookup_with_hash") && !maybe_entry("main"));
    }
}
