//! Access to the initial-exec TLS block defined in tls.c.
use crate::thread::ThreadState;

#[repr(C)]
pub struct Tls {
    /// This thread's recording state: null until it registers, [`EXITED`] after its exit.
    pub state: *mut ThreadState,
    /// Non-zero while inside the shim: nested calls pass straight through.
    pub busy: u32,
}

#[allow(improper_ctypes)]
unsafe extern "C" {
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn shim_tls() -> *mut Tls;
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    static mut shim_tls_block: Tls;
}

/// The calling thread's block. Never null.
#[inline(always)]
pub fn get() -> &'static mut Tls {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        // Initial-exec: the block's offset from the thread pointer comes from the GOT.
        let p: *mut Tls;
        core::arch::asm!(
            "mov {p}, qword ptr [rip + {v}@GOTTPOFF]",
            "add {p}, qword ptr fs:[0]",
            p = out(reg) p,
            v = sym shim_tls_block,
            options(pure, readonly, nostack),
        );
        &mut *p
    }
    #[cfg(not(target_arch = "x86_64"))]
    unsafe {
        &mut *shim_tls()
    }
}

/// `state` after the thread's exit destructor ran: calls pass through, counted.
pub const EXITED: *mut ThreadState = 1 as *mut ThreadState;
