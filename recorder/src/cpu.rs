//! What the CPU offers beyond baseline x86-64, checked at run time. The reader's and the
//! analysis' hot loops have a second copy compiled for x86-64-v3 (Haswell, Zen 1 and later:
//! AVX2, BMI1, BMI2, LZCNT...), whose bit operations (trailing and leading zeros, shifts by a
//! register, and-not) are single instructions; the copy runs where the CPU has them all.

/// True when the CPU has every feature the x86-64-v3 copies are compiled with: their
/// attributes spell out the same list, `avx2,bmi1,bmi2,lzcnt,popcnt,fma,movbe`.
#[inline]
pub fn has_v3() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("bmi1")
            && std::is_x86_feature_detected!("bmi2")
            && std::is_x86_feature_detected!("lzcnt")
            && std::is_x86_feature_detected!("popcnt")
            && std::is_x86_feature_detected!("fma")
            && std::is_x86_feature_detected!("movbe")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// True when the CPU has BMI2 and its PEXT is fast: Intel (and any other vendor with BMI2),
/// and AMD from Zen 3 (family 0x19) on; earlier AMD CPUs and Hygon's run PEXT in microcode,
/// slower than the shifts it replaces.
pub fn has_fast_pext() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::__cpuid;
        if !std::is_x86_feature_detected!("bmi2") {
            return false;
        }
        let v = __cpuid(0);
        // "Auth" of "AuthenticAMD", "Hygo" of "HygonGenuine" (Hygon's cores are Zen 1).
        let amd = v.ebx == 0x6874_7541;
        let hygon = v.ebx == 0x6f67_7948;
        if hygon {
            return false;
        }
        if !amd {
            return true;
        }
        let f = __cpuid(1).eax;
        let family = ((f >> 8) & 0xf) + if (f >> 8) & 0xf == 0xf { (f >> 20) & 0xff } else { 0 };
        family >= 0x19
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Starts loading the cache line at `p` into every level of cache. Never faults: `p` may
/// point anywhere (past the end of a buffer, or at nothing).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and never faults.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
