//! The byte sampler of SHIM_STACKS=sample, as tcmalloc and jemalloc sample heap profiles:
//! each thread counts down an exponentially distributed number of bytes (mean
//! SHIM_SAMPLE_BYTES) and the allocation that crosses zero is taken. The countdown being
//! memoryless, an allocation of `s` bytes is taken with probability 1 - exp(-s / mean),
//! which is what a reader divides by. An allocation at least as large as the mean is
//! always taken and leaves the countdown alone (its weight is then 1).
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// SHIM_SAMPLE_SEED (0: none, each thread seeds from the clock).
static SEED: AtomicU64 = AtomicU64::new(0);

/// A fixed seed for every thread's countdown (tests), from SHIM_SAMPLE_SEED.
pub fn set_seed(seed: u64) {
    SEED.store(seed, Relaxed);
}

#[repr(C)]
pub struct StkTls {
    pub remaining: i64,
    pub rng: u64,
    pub stack_lo: u64,
    pub stack_hi: u64,
}

unsafe extern "C" {
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    fn shim_stk_tls() -> *mut StkTls;
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    static mut shim_stk_block: StkTls;
}

/// The calling thread's block (initial-exec TLS, see tls.c).
#[inline(always)]
pub fn tls() -> &'static mut StkTls {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        let p: *mut StkTls;
        core::arch::asm!(
            "mov {p}, qword ptr [rip + {v}@GOTTPOFF]",
            "add {p}, qword ptr fs:[0]",
            p = out(reg) p,
            v = sym shim_stk_block,
            options(pure, readonly, nostack),
        );
        &mut *p
    }
    #[cfg(not(target_arch = "x86_64"))]
    unsafe {
        &mut *shim_stk_tls()
    }
}

/// Whether this allocation of `bytes` is sampled.
#[inline(always)]
pub fn take(bytes: u64, mean: u64) -> bool {
    if bytes >= mean {
        return true;
    }
    let t = tls();
    t.remaining -= bytes as i64;
    if t.remaining > 0 {
        return false;
    }
    let first = t.rng == 0;
    t.remaining = next_countdown(t, mean);
    // A thread's very first countdown starts now: the bytes before it were not counted.
    !first
}

/// A fresh countdown: -ln(U) * mean bytes, U uniform in (0, 1].
#[cold]
fn next_countdown(t: &mut StkTls, mean: u64) -> i64 {
    if t.rng == 0 {
        let seed = SEED.load(Relaxed);
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u64;
        t.rng = if seed != 0 {
            seed ^ tid.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        } else {
            recorder::clock::now() ^ tid << 32
        };
        t.rng |= 1;
    }
    // xorshift64*
    let mut x = t.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t.rng = x;
    let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
    let u = ((r >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    ((-u.ln() * mean as f64) as i64).max(1)
}
