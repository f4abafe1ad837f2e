//! Unwinding the calling thread's stack, bounded, in place.
//!
//! Unwind tables (`SHIM_UNWIND=tables`, the default): libgcc's `_Unwind_Backtrace`, the
//! unwinder C++ exceptions and Rust panics use, which reads each object's `.eh_frame`
//! through `.eh_frame_hdr` (found by `dl_iterate_phdr`) and does not allocate. A frame with
//! no unwind entry (JIT code) ends the stack.
//!
//! Frame pointers (`SHIM_UNWIND=fp`): the shim's own frames (which have none) are stepped
//! over with the tables, then the caller's chain of saved frame pointers is followed, each
//! one checked to lie in this thread's stack mapping, 8-aligned and above the last, so a
//! frame without a frame pointer ends the stack rather than fault.
use core::ffi::{c_int, c_void};

#[allow(non_camel_case_types)]
type _Unwind_Context = c_void;
const URC_NO_REASON: c_int = 0;
const URC_END_OF_STACK: c_int = 5;
/// DWARF register number of rbp on x86-64.
const RBP: c_int = 6;

unsafe extern "C" {
    fn _Unwind_Backtrace(
        cb: extern "C" fn(*mut _Unwind_Context, *mut c_void) -> c_int,
        arg: *mut c_void,
    ) -> c_int;
    fn _Unwind_GetIP(ctx: *mut _Unwind_Context) -> usize;
    fn _Unwind_GetGR(ctx: *mut _Unwind_Context, reg: c_int) -> usize;
}

struct Walk<'a> {
    pcs: &'a mut [u64],
    n: usize,
    /// Still inside the shim's own frames.
    inside: bool,
    /// Stop at the first frame outside the shim and note its frame pointer.
    fp: bool,
    rbp: u64,
}

/// The shim's own code, whose frames are left out.
fn own_text() -> (u64, u64) {
    static RANGE: [core::sync::atomic::AtomicU64; 2] =
        [core::sync::atomic::AtomicU64::new(0), core::sync::atomic::AtomicU64::new(0)];
    use core::sync::atomic::Ordering::Relaxed;
    if RANGE[1].load(Relaxed) == 0 {
        let mut r = (capture as fn(&mut [u64], bool) -> usize as usize as u64, 0u64, 0u64);
        unsafe { libc::dl_iterate_phdr(Some(find_own), &mut r as *mut (u64, u64, u64) as *mut c_void) };
        RANGE[0].store(r.1, Relaxed);
        RANGE[1].store(r.2.max(1), Relaxed);
    }
    (RANGE[0].load(Relaxed), RANGE[1].load(Relaxed))
}

unsafe extern "C" fn find_own(info: *mut libc::dl_phdr_info, _: libc::size_t, data: *mut c_void) -> c_int {
    let r = unsafe { &mut *(data as *mut (u64, u64, u64)) };
    let info = unsafe { &*info };
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_X != 0) {
        let (s, e) = (info.dlpi_addr + p.p_vaddr, info.dlpi_addr + p.p_vaddr + p.p_memsz);
        if s <= r.0 && r.0 < e {
            *r = (r.0, s, e);
            return 1;
        }
    }
    0
}

extern "C" fn step(ctx: *mut _Unwind_Context, arg: *mut c_void) -> c_int {
    let w = unsafe { &mut *(arg as *mut Walk) };
    let ip = unsafe { _Unwind_GetIP(ctx) } as u64;
    if ip == 0 {
        return URC_END_OF_STACK;
    }
    if w.inside {
        let (s, e) = own_text();
        if s <= ip && ip < e {
            return URC_NO_REASON;
        }
        w.inside = false;
    }
    if w.n == w.pcs.len() {
        return URC_END_OF_STACK;
    }
    w.pcs[w.n] = ip;
    w.n += 1;
    if w.fp {
        w.rbp = unsafe { _Unwind_GetGR(ctx, RBP) } as u64;
        return URC_END_OF_STACK;
    }
    URC_NO_REASON
}

/// Fills `pcs` with the return addresses of the calling code, innermost first, the shim's
/// own frames left out. Returns how many.
#[inline(never)]
pub fn capture(pcs: &mut [u64], fp: bool) -> usize {
    if pcs.is_empty() {
        return 0;
    }
    let mut w = Walk { pcs, n: 0, inside: true, fp, rbp: 0 };
    unsafe { _Unwind_Backtrace(step, &mut w as *mut Walk as *mut c_void) };
    let n = w.n;
    if !fp || n == 0 {
        return n;
    }
    let rbp = w.rbp;
    n + frame_pointers(rbp, &mut w.pcs[n..])
}

/// Follows saved frame pointers from `rbp`; returns the return addresses written.
fn frame_pointers(mut rbp: u64, out: &mut [u64]) -> usize {
    let here = &rbp as *const u64 as u64;
    let Some((lo, hi)) = stack_bounds(here) else { return 0 };
    let lo = lo.max(here);
    let mut n = 0;
    while n < out.len() {
        if rbp < lo || rbp & 7 != 0 || rbp.saturating_add(16) > hi {
            break;
        }
        let next = unsafe { *(rbp as *const u64) };
        let ret = unsafe { *((rbp + 8) as *const u64) };
        if ret < 4096 {
            break;
        }
        out[n] = ret;
        n += 1;
        if next <= rbp {
            break;
        }
        rbp = next;
    }
    n
}

/// The readable mapping holding `sp` (this thread's stack), looked up once per thread in
/// /proc/self/maps with plain reads.
fn stack_bounds(sp: u64) -> Option<(u64, u64)> {
    let t = super::sampler::tls();
    if t.stack_hi != 0 && t.stack_lo <= sp && sp < t.stack_hi {
        return Some((t.stack_lo, t.stack_hi));
    }
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut buf = [0u8; 4096];
    let mut line = [0u8; 64];
    let (mut len, mut skip, mut found) = (0usize, false, None);
    'read: loop {
        let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut c_void, buf.len()) };
        if r <= 0 {
            break;
        }
        for &c in &buf[..r as usize] {
            if c == b'\n' {
                if let Some((s, e)) = parse_range(&line[..len]) {
                    if s <= sp && sp < e {
                        found = Some((s, e));
                        break 'read;
                    }
                }
                len = 0;
                skip = false;
            } else if !skip {
                if len == line.len() {
                    skip = true;
                } else {
                    line[len] = c;
                    len += 1;
                }
            }
        }
    }
    unsafe { libc::close(fd) };
    if let Some((s, e)) = found {
        t.stack_lo = s;
        t.stack_hi = e;
    }
    found
}

/// "start-end perms ..." with a readable mapping, as numbers.
fn parse_range(l: &[u8]) -> Option<(u64, u64)> {
    let hex = |s: &[u8]| -> Option<u64> {
        if s.is_empty() || s.len() > 16 {
            return None;
        }
        s.iter().try_fold(0u64, |v, &c| Some(v << 4 | (c as char).to_digit(16)? as u64))
    };
    let dash = l.iter().position(|&c| c == b'-')?;
    let sp = l.iter().position(|&c| c == b' ')?;
    if sp < dash || l.get(sp + 1) != Some(&b'r') {
        return None;
    }
    Some((hex(&l[..dash])?, hex(&l[dash + 1..sp])?))
}
