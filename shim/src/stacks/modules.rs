//! The loaded objects stacks run in, for offline symbols: each object's executable range,
//! load bias, path and GNU build id, found with `dl_iterate_phdr` (the program headers and
//! the build-id note are in memory: no file is opened) and written into the log the first
//! time a new stack has a frame in it. A fixed list behind a spinlock, taken only when a new
//! stack is written (and never waited on for long).
use core::sync::atomic::{AtomicBool, Ordering::*};
use recorder::Op;

const MAX: usize = 1024;
const PATH: usize = 256;
const BUILD_ID: usize = 32;

#[derive(Clone, Copy)]
struct Module {
    start: u64,
    end: u64,
    bias: u64,
    path: [u8; PATH],
    path_len: usize,
    id: [u8; BUILD_ID],
    id_len: usize,
    written: bool,
}

const EMPTY: Module = Module {
    start: 0,
    end: 0,
    bias: 0,
    path: [0; PATH],
    path_len: 0,
    id: [0; BUILD_ID],
    id_len: 0,
    written: false,
};

struct List {
    m: [Module; MAX],
    n: usize,
}

static LOCK: AtomicBool = AtomicBool::new(false);
static mut LIST: List = List { m: [EMPTY; MAX], n: 0 };

/// The list (its callers take it one at a time: under the stack table's lock, or in a fork
/// child's only thread).
fn list() -> &'static mut List {
    let p = &raw mut LIST;
    unsafe { &mut *p }
}

/// Takes the lock, or gives up after a while: the holder may be waiting for the dynamic
/// linker's lock (in `dl_iterate_phdr`) that this thread holds, if it allocates from a
/// `dl_iterate_phdr` callback. Giving up only defers writing the objects to a later stack.
fn lock() -> bool {
    for i in 0..1u32 << 20 {
        if LOCK.compare_exchange_weak(false, true, Acquire, Relaxed).is_ok() {
            return true;
        }
        if i > 1 << 10 {
            unsafe { libc::sched_yield() };
        } else {
            core::hint::spin_loop();
        }
    }
    false
}
fn unlock() {
    LOCK.store(false, Release);
}

/// Writes (through `emit`: op, size, value) the objects that `pcs` run in and the log does
/// not have yet, looking the loaded objects up again when a pc is in none it knows.
pub fn ensure(pcs: &[u64], emit: &mut dyn FnMut(Op, u64, u64)) {
    if !lock() {
        return;
    }
    let list = list();
    let covered = |l: &List, pc: u64| l.m[..l.n].iter().position(|m| m.start <= pc && pc < m.end);
    if pcs.iter().any(|&pc| covered(list, pc).is_none()) {
        unsafe { libc::dl_iterate_phdr(Some(add_object), list as *mut List as *mut libc::c_void) };
    }
    for &pc in pcs {
        if let Some(i) = covered(list, pc) {
            let m = &mut list.m[i];
            if !m.written {
                m.written = true;
                write(m, emit);
            }
        }
    }
    unlock();
}

fn write(m: &Module, emit: &mut dyn FnMut(Op, u64, u64)) {
    emit(Op::Mapping, m.start, m.end);
    emit(Op::MappingBias, 0, m.bias);
    for chunk in m.path[..m.path_len].chunks(8) {
        emit(Op::MappingPath, m.path_len as u64, le(chunk));
    }
    for chunk in m.id[..m.id_len].chunks(8) {
        emit(Op::MappingBuildId, m.id_len as u64, le(chunk));
    }
}

fn le(chunk: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..chunk.len()].copy_from_slice(chunk);
    u64::from_le_bytes(b)
}

unsafe extern "C" fn add_object(
    info: *mut libc::dl_phdr_info,
    _: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    let list = unsafe { &mut *(data as *mut List) };
    let info = unsafe { &*info };
    if list.n == MAX || info.dlpi_phdr.is_null() {
        return 0;
    }
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let bias = info.dlpi_addr;
    let (mut start, mut end) = (u64::MAX, 0u64);
    for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0) {
        start = start.min(bias + p.p_vaddr);
        end = end.max(bias + p.p_vaddr + p.p_memsz);
    }
    if start >= end || list.m[..list.n].iter().any(|m| m.start == start && m.bias == bias) {
        return 0;
    }
    let mut m = EMPTY;
    m.start = start;
    m.end = end;
    m.bias = bias;
    let name = if info.dlpi_name.is_null() {
        &[][..]
    } else {
        unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    if name.is_empty() {
        // The executable (the first object) has no name here.
        let n = unsafe {
            libc::readlink(c"/proc/self/exe".as_ptr(), m.path.as_mut_ptr() as *mut libc::c_char, PATH)
        };
        m.path_len = if n > 0 { n as usize } else { 0 };
    } else {
        m.path_len = name.len().min(PATH);
        m.path[..m.path_len].copy_from_slice(&name[..m.path_len]);
    }
    for p in phdrs.iter().filter(|p| p.p_type == libc::PT_NOTE) {
        let notes =
            unsafe { core::slice::from_raw_parts((bias + p.p_vaddr) as *const u8, p.p_memsz as usize) };
        if let Some(id) = build_id(notes) {
            m.id_len = id.len().min(BUILD_ID);
            m.id[..m.id_len].copy_from_slice(&id[..m.id_len]);
            break;
        }
    }
    list.m[list.n] = m;
    list.n += 1;
    0
}

/// The NT_GNU_BUILD_ID note's bytes in a PT_NOTE segment.
fn build_id(mut b: &[u8]) -> Option<&[u8]> {
    let u32at = |b: &[u8], i: usize| b.get(i..i + 4).map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]));
    while b.len() >= 12 {
        let (namesz, descsz, kind) = (u32at(b, 0)? as usize, u32at(b, 4)? as usize, u32at(b, 8)?);
        let name_end = 12 + namesz.next_multiple_of(4);
        let desc_end = name_end + descsz.next_multiple_of(4);
        if desc_end > b.len() {
            return None;
        }
        if kind == 3 && namesz == 4 && &b[12..16] == b"GNU\0" {
            return Some(&b[name_end..name_end + descsz]);
        }
        b = &b[desc_end..];
    }
    None
}

/// In a fork child: the objects are loaded still, but its log has none of them.
pub fn reset() {
    let list = list();
    for m in &mut list.m[..list.n] {
        m.written = false;
    }
    LOCK.store(false, Release);
}
