//! What the attacher needs to know of the target before touching it: its mappings
//! (/proc/PID/maps), the C library it loaded and, from that file's `.dynsym` (read with the
//! `object` crate through /proc/PID/root, so a process in another mount namespace is read
//! at the path it sees), where `dlopen`, `dlerror` and the allocator's code are.
use object::{Object, ObjectSymbol};

/// One line of /proc/PID/maps.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub exec: bool,
    pub offset: u64,
    pub path: String,
}

pub fn maps(pid: u32) -> Result<Vec<Mapping>, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|e| format!("cannot read /proc/{pid}/maps: {e}"))?;
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms), Some(off)) = (f.next(), f.next(), f.next()) else { continue };
        let (_dev, _inode) = (f.next(), f.next());
        let path = f.collect::<Vec<_>>().join(" ");
        let Some((a, b)) = range.split_once('-') else { continue };
        let (Ok(start), Ok(end), Ok(offset)) =
            (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16), u64::from_str_radix(off, 16))
        else {
            continue;
        };
        out.push(Mapping { start, end, exec: perms.as_bytes().get(2) == Some(&b'x'), offset, path });
    }
    Ok(out)
}

/// A code range [start, end) in the target.
pub type Range = (u64, u64);

/// The C library as the target loaded it.
pub struct Libc {
    pub dlopen: u64,
    pub dlerror: u64,
    /// The allocator's code: from the first of malloc.c's exported functions to the last,
    /// widened to the neighbouring exported functions of other sources (the allocator's
    /// internal functions, `_int_malloc` and the rest, are static: not in `.dynsym`, but laid
    /// out among its exported ones by the linker, as one object file's text).
    pub allocator: Range,
}

/// The allocator's exported functions in glibc's malloc.c.
const MALLOC_C: &[&str] = &[
    "malloc",
    "__libc_malloc",
    "free",
    "__libc_free",
    "cfree",
    "calloc",
    "__libc_calloc",
    "realloc",
    "__libc_realloc",
    "reallocarray",
    "memalign",
    "__libc_memalign",
    "aligned_alloc",
    "posix_memalign",
    "valloc",
    "__libc_valloc",
    "pvalloc",
    "__libc_pvalloc",
    "malloc_usable_size",
    "malloc_trim",
    "mallinfo",
    "mallinfo2",
    "__libc_mallinfo",
    "malloc_stats",
    "mallopt",
    "__libc_mallopt",
    "malloc_info",
];

/// The loaded object whose file name starts with `stem` (`libc.so`, `ld-linux`): its path and
/// load bias (the start of its mapping at file offset 0).
pub fn loaded(maps: &[Mapping], stem: &str) -> Option<(String, u64)> {
    let m = maps
        .iter()
        .find(|m| m.offset == 0 && m.path.rsplit('/').next().is_some_and(|n| n.starts_with(stem)))?;
    Some((m.path.clone(), m.start))
}

/// The executable code of the object at `path` in the target.
pub fn text_of(maps: &[Mapping], path: &str) -> Vec<Range> {
    maps.iter().filter(|m| m.exec && m.path == path).map(|m| (m.start, m.end)).collect()
}

/// Reads the C library of `pid` (None: the process loaded none).
pub fn libc(pid: u32, maps: &[Mapping]) -> Result<Option<Libc>, String> {
    let Some((path, bias)) = loaded(maps, "libc.so").or_else(|| loaded(maps, "libc-")) else {
        return Ok(None);
    };
    let file = format!("/proc/{pid}/root{path}");
    let data = std::fs::read(&file).map_err(|e| format!("cannot read the target's C library {file}: {e}"))?;
    let obj = object::File::parse(&*data).map_err(|e| format!("{path}: {e}"))?;
    let mut funcs: Vec<(u64, u64, bool)> = Vec::new();
    let (mut dlopen, mut dlerror) = (0, 0);
    for s in obj.dynamic_symbols() {
        if !s.is_definition() || s.kind() != object::SymbolKind::Text {
            continue;
        }
        let name = s.name().unwrap_or("");
        let name = name.split('@').next().unwrap_or(name);
        match name {
            "dlopen" => dlopen = bias + s.address(),
            "dlerror" => dlerror = bias + s.address(),
            _ => {}
        }
        funcs.push((bias + s.address(), s.size(), MALLOC_C.contains(&name)));
    }
    if dlopen == 0 || dlerror == 0 {
        return Err(format!(
            "{path} exports no dlopen (a C library older than glibc 2.34, whose loader is in libdl only): not supported"
        ));
    }
    funcs.sort_unstable();
    let ours: Vec<&(u64, u64, bool)> = funcs.iter().filter(|f| f.2).collect();
    let (Some(first), Some(last)) = (ours.first(), ours.last()) else {
        return Err(format!("{path} exports no malloc"));
    };
    let lo =
        funcs.iter().filter(|f| !f.2 && f.0 + f.1 <= first.0).map(|f| f.0 + f.1).max().unwrap_or(first.0);
    let hi =
        funcs.iter().filter(|f| !f.2 && f.0 >= last.0 + last.1).map(|f| f.0).min().unwrap_or(last.0 + last.1);
    Ok(Some(Libc { dlopen, dlerror, allocator: (lo, hi) }))
}

/// The ELF machine of the target's executable against this build's.
pub fn arch_mismatch(pid: u32) -> Option<String> {
    let mut head = [0u8; 20];
    let f = std::fs::File::open(format!("/proc/{pid}/exe")).ok()?;
    use std::io::Read;
    (&f).read_exact(&mut head).ok()?;
    if &head[..4] != b"\x7fELF" {
        return None;
    }
    let class64 = head[4] == 2;
    let machine = u16::from_le_bytes([head[18], head[19]]);
    let want: u16 = if cfg!(target_arch = "x86_64") {
        62
    } else if cfg!(target_arch = "aarch64") {
        183
    } else {
        0
    };
    if class64 && machine == want {
        return None;
    }
    let what = match (class64, machine) {
        (false, 3) => "32-bit x86".to_string(),
        (_, 62) if !class64 => "x32".to_string(),
        (_, 183) => "aarch64".to_string(),
        (_, 62) => "x86-64".to_string(),
        (c, m) => format!("ELF machine {m}, {}-bit", if c { 64 } else { 32 }),
    };
    Some(format!(
        "it is a {what} program and this shimlog attaches to {} programs only",
        std::env::consts::ARCH
    ))
}
