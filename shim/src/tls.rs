//! Access to the initial-exec TLS block defined in tls.c.
use crate::thread::ThreadState;

#[repr(C)]
pub struct Tls {
    /// Opaque to C.
    pub state: *mut ThreadState,
    pub busy: u32,
}

#[allow(improper_ctypes)]
unsafe extern "C" {
    fn shim_tls() -> *mut Tls;
}

/// The calling thread's block. Never null.
#[inline(always)]
pub fn get() -> &'static mut Tls {
    unsafe { &mut *shim_tls() }
}

/// `state` after the thread's exit destructor ran: calls pass through, counted.
pub const EXITED: *mut ThreadState = 1 as *mut ThreadState;
