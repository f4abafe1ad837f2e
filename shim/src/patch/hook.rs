//! Redirecting an entry point (x86-64): its first instructions become a 5-byte `jmp` to an
//! island near it that jumps on to the wrapper; the instructions it replaced are relocated
//! (with iced-x86's block encoder, which rewrites RIP-relative operands and branches) into a
//! trampoline that runs them and jumps back, so the wrapper can still call the original.
//!
//! Everything is checked before anything is written ([`prepare`]); [`apply`] then writes all
//! the hooks or none, each page back to its original protection.
use iced_x86::{
    BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions, FlowControl, Instruction,
    InstructionBlock,
};

const JMP_LEN: usize = 5;
/// Room for one trampoline (relocated prologue, jump back) and its island.
const SLOT_LEN: usize = 96;
const REGION_LEN: usize = 64 * 1024;

/// One entry point, ready to patch.
pub struct Hook {
    /// Where the jump is written (after an `endbr64`, which stays).
    pub at: usize,
    /// The bytes written there: the jump, then `int3` up to the replaced instructions' end.
    pub patch: Vec<u8>,
    /// Calls the original function.
    pub original: usize,
}

/// Executable memory near the patched code, for trampolines and islands.
struct Region {
    base: usize,
    used: usize,
}

/// Where trampolines go: regions within a 32-bit displacement of what they serve.
#[derive(Default)]
pub struct Trampolines {
    regions: Vec<Region>,
}

const REACH: usize = (1 << 31) - REGION_LEN;

impl Trampolines {
    /// SLOT_LEN bytes, writable for now, within reach of `near`.
    fn slot(&mut self, near: usize) -> Result<usize, String> {
        let fits = |r: &Region| r.used + SLOT_LEN <= REGION_LEN && r.base.abs_diff(near) < REACH;
        if !self.regions.iter().any(fits) {
            let base = map_near(near).ok_or("no free address space within 2 GiB of it for a trampoline")?;
            self.regions.push(Region { base, used: 0 });
        }
        let r = self.regions.iter_mut().find(|r| fits(r)).ok_or("no trampoline space")?;
        let at = r.base + r.used;
        r.used += SLOT_LEN;
        Ok(at)
    }

    /// Makes every region read-and-execute; false if the system refuses.
    fn seal(&self) -> bool {
        self.regions.iter().all(|r| unsafe {
            libc::mprotect(r.base as *mut libc::c_void, REGION_LEN, libc::PROT_READ | libc::PROT_EXEC) == 0
        })
    }

    /// Gives the regions back (nothing was patched).
    pub fn release(&mut self) {
        for r in self.regions.drain(..) {
            unsafe { libc::munmap(r.base as *mut libc::c_void, REGION_LEN) };
        }
    }
}

/// An anonymous mapping within reach of `near`, searched outward in 1 MiB steps.
fn map_near(near: usize) -> Option<usize> {
    const STEP: usize = 1 << 20;
    let origin = near & !(STEP - 1);
    for i in 1..1024usize {
        for cand in [origin.checked_sub(i * STEP), origin.checked_add(i * STEP)].into_iter().flatten() {
            if cand < 0x10000 {
                continue;
            }
            let p = unsafe {
                libc::mmap(
                    cand as *mut libc::c_void,
                    REGION_LEN,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                continue;
            }
            if p as usize == cand {
                return Some(cand);
            }
            unsafe { libc::munmap(p, REGION_LEN) };
        }
    }
    None
}

/// Plans the hook of the function at `addr` (`size` bytes, from its symbol) so that calls
/// to it reach `wrapper`. Errors say why it cannot be patched safely.
pub fn prepare(addr: usize, size: usize, wrapper: usize, tr: &mut Trampolines) -> Result<Hook, String> {
    if size < JMP_LEN {
        return Err(format!("{size} bytes long, too short for a jump"));
    }
    let code = unsafe { core::slice::from_raw_parts(addr as *const u8, size) };
    let mut dec = Decoder::with_ip(64, code, addr as u64, DecoderOptions::NONE);
    let mut first = dec.decode();
    let at = if first.code() == Code::Endbr64 {
        first = dec.decode();
        addr + 4
    } else {
        addr
    };
    // The instructions the jump replaces.
    let mut moved: Vec<Instruction> = Vec::new();
    let mut ins = first;
    loop {
        if ins.is_invalid() {
            return Err("its first bytes do not decode as instructions".into());
        }
        let end = ins.next_ip() as usize;
        moved.push(ins);
        if end >= at + JMP_LEN {
            break;
        }
        match ins.flow_control() {
            FlowControl::Next | FlowControl::Call | FlowControl::ConditionalBranch => {}
            _ => return Err("it ends or jumps away within its first 5 bytes".into()),
        }
        if !dec.can_decode() {
            return Err("too short for a jump".into());
        }
        ins = dec.decode();
    }
    let len = moved.last().map_or(0, |i| i.next_ip() as usize) - at;
    check_no_jump_into(code, addr, at, len)?;
    // Trampoline: the moved instructions, then a jump back past them; then the island.
    let slot = tr.slot(at)?;
    let mut block = moved.clone();
    block.push(Instruction::with_branch(Code::Jmp_rel32_64, (at + len) as u64).map_err(|e| e.to_string())?);
    let enc = BlockEncoder::encode(64, InstructionBlock::new(&block, slot as u64), BlockEncoderOptions::NONE)
        .map_err(|e| format!("its first instructions cannot be relocated ({e})"))?;
    let island = slot + enc.code_buffer.len();
    if island + 14 > slot + SLOT_LEN {
        return Err("its first instructions relocate to more than a trampoline holds".into());
    }
    unsafe {
        core::ptr::copy_nonoverlapping(enc.code_buffer.as_ptr(), slot as *mut u8, enc.code_buffer.len());
        // jmp qword [rip+0]; dq wrapper
        let isl = island as *mut u8;
        core::ptr::copy_nonoverlapping([0xFFu8, 0x25, 0, 0, 0, 0].as_ptr(), isl, 6);
        core::ptr::write_unaligned(isl.add(6) as *mut u64, wrapper as u64);
    }
    let rel = island as i64 - (at + JMP_LEN) as i64;
    let rel = i32::try_from(rel).map_err(|_| "its trampoline is out of reach".to_string())?;
    let mut patch = vec![0xE9u8];
    patch.extend_from_slice(&rel.to_le_bytes());
    patch.resize(len, 0xCC);
    Ok(Hook { at, patch, original: slot })
}

/// No branch of the function (and no RIP-relative address in it) may land inside the bytes
/// the jump replaces, past their first: it would land in the middle of the jump.
fn check_no_jump_into(code: &[u8], addr: usize, at: usize, len: usize) -> Result<(), String> {
    let inside = |t: u64| (t as usize) > at && (t as usize) < at + len;
    let mut dec = Decoder::with_ip(64, code, addr as u64, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        if ins.is_invalid() {
            continue;
        }
        let branch = matches!(
            ins.flow_control(),
            FlowControl::UnconditionalBranch | FlowControl::ConditionalBranch | FlowControl::Call
        );
        if branch && ins.near_branch_target() != 0 && inside(ins.near_branch_target()) {
            return Err(format!("a jump at {:#x} lands inside its first {len} bytes", ins.ip()));
        }
        if ins.is_ip_rel_memory_operand() && inside(ins.ip_rel_memory_address()) {
            return Err(format!("an address taken at {:#x} points inside its first {len} bytes", ins.ip()));
        }
    }
    Ok(())
}

/// The protection of the mapping holding each of `addrs`, from one read of /proc/self/maps
/// (None for an address in no mapping).
fn protections(addrs: &[usize]) -> Vec<Option<i32>> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut out = vec![None; addrs.len()];
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else { continue };
        let perms = perms.as_bytes();
        let Some((a, b)) = range.split_once('-') else { continue };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else { continue };
        let mut p = 0;
        if perms.first() == Some(&b'r') {
            p |= libc::PROT_READ;
        }
        if perms.get(1) == Some(&b'w') {
            p |= libc::PROT_WRITE;
        }
        if perms.get(2) == Some(&b'x') {
            p |= libc::PROT_EXEC;
        }
        for (o, &addr) in out.iter_mut().zip(addrs) {
            if addr >= a && addr < b {
                *o = Some(p);
            }
        }
    }
    out
}

/// Writes every hook, or none: the trampolines are sealed first, then each page to patch is
/// made writable (all of them before any write), written, and given back its protection.
pub fn apply(hooks: &[Hook], tr: &mut Trampolines) -> Result<(), String> {
    if !tr.seal() {
        return Err("the system refuses to make new code executable (W^X policy or SELinux execmem)".into());
    }
    let page = crate::shared::page_size();
    let mut pages: Vec<usize> = Vec::new();
    for h in hooks {
        let first = h.at & !(page - 1);
        let last = (h.at + h.patch.len() - 1) & !(page - 1);
        pages.push(first);
        if last != first {
            pages.push(last);
        }
    }
    pages.sort_unstable();
    pages.dedup();
    // Everything that allocates or reads happens before the first page changes: a page made
    // writable may hold code that runs meanwhile (the allocator behind this very Vec, when
    // the patched allocator lives in the same object as the shim, as in its unit tests).
    let prots = protections(&pages);
    if let Some(i) = prots.iter().position(Option::is_none) {
        return Err(format!("the page at {:#x} is not in /proc/self/maps", pages[i]));
    }
    let mut opened: Vec<(usize, i32)> = Vec::with_capacity(pages.len());
    let restore = |opened: &[(usize, i32)]| {
        for &(p, prot) in opened {
            unsafe { libc::mprotect(p as *mut libc::c_void, page, prot) };
        }
    };
    let mut refused = None;
    // By reference: `prots` is freed when the function returns, not while pages are open.
    for (&p, prot) in pages.iter().zip(&prots) {
        let prot = prot.expect("checked above");
        // Writable and still executable where the system allows it, so that code on the page
        // keeps running while it is written; else writable only.
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let ok = unsafe {
            (prot & libc::PROT_EXEC != 0
                && libc::mprotect(p as *mut libc::c_void, page, rw | libc::PROT_EXEC) == 0)
                || libc::mprotect(p as *mut libc::c_void, page, rw) == 0
        };
        if !ok {
            refused = Some((p, std::io::Error::last_os_error().raw_os_error()));
            break;
        }
        opened.push((p, prot));
    }
    if let Some((_, errno)) = refused {
        restore(&opened);
        let e = std::io::Error::from_raw_os_error(errno.unwrap_or(0));
        return Err(format!("its code cannot be made writable ({e})"));
    }
    for h in hooks {
        unsafe { core::ptr::copy_nonoverlapping(h.patch.as_ptr(), h.at as *mut u8, h.patch.len()) };
    }
    restore(&opened);
    Ok(())
}
