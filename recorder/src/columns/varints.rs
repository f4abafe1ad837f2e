//! A run of a column's varints read at once, for the decoder's batches: where each varint
//! ends comes from one look at 64 bytes (the bytes without the continuation bit, a bit mask),
//! so that a varint's start does not wait for the length of the one before it (reading them
//! one by one, each waited for the load of the one before).
use crate::varint;

/// Bit i set when byte i of the 64 ends a varint (has no continuation bit).
#[inline(always)]
fn ends(b: &[u8; 64]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_movemask_epi8};
        // SAFETY: SSE2 is part of x86_64; each load reads 16 of the 64 bytes of `b`.
        let m = |i: usize| unsafe {
            _mm_movemask_epi8(_mm_loadu_si128(b.as_ptr().add(16 * i) as *const __m128i)) as u16 as u64
        };
        !(m(0) | m(1) << 16 | m(2) << 32 | m(3) << 48)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        b.iter().enumerate().fold(0u64, |m, (i, &x)| m | (((x >> 7) as u64 ^ 1) << i))
    }
}

/// The value of a varint of `len` bytes (1 to 8) whose bytes start `x` (little-endian).
/// With `PEXT` (only inlined into code compiled for BMI2, see [`crate::cpu::has_fast_pext`])
/// the 7-bit groups are packed by one instruction.
#[inline(always)]
fn value<const PEXT: bool>(x: u64, len: usize) -> u64 {
    let keep = u64::MAX >> ((64 - 8 * len) & 63);
    #[cfg(target_arch = "x86_64")]
    if PEXT {
        // SAFETY: PEXT is only true in functions compiled with BMI2, called after
        // cpu::has_fast_pext() said the CPU has it.
        return unsafe { core::arch::x86_64::_pext_u64(x, keep & 0x7f7f_7f7f_7f7f_7f7f) };
    }
    let x = x & keep & 0x7f7f_7f7f_7f7f_7f7f;
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4)
}

/// Reads `out.len()` varints of `col` from `*pos` on: the values and the end position that
/// as many calls of [`varint::get`] give, and false where one of them would give None (the
/// column ends first, or a varint is over-long); `*pos` is then left as it was.
#[inline(always)]
pub(super) fn get_many<const PEXT: bool>(col: &[u8], pos: &mut usize, out: &mut [u64]) -> bool {
    let n = out.len();
    let (mut p, mut i) = (*pos, 0);
    // 72 bytes: the 64 looked at, and the 8 loaded for a varint starting at the last of them.
    while i < n {
        let Some(b) = col.get(p..p + 72) else {
            break;
        };
        let b: &[u8; 72] = b.try_into().expect("72 bytes");
        let mut e = ends(b[..64].try_into().expect("64 bytes"));
        let mut start = 0;
        while e != 0 && i < n {
            let last = e.trailing_zeros() as usize;
            let len = last + 1 - start;
            if len <= 8 {
                out[i] =
                    value::<PEXT>(u64::from_le_bytes(b[start..start + 8].try_into().expect("8 bytes")), len);
            } else {
                // 9 or 10 bytes (values of 2^56 and more), or over-long.
                let mut q = p + start;
                match varint::get(col, &mut q) {
                    Some(v) => out[i] = v,
                    None => return false,
                }
            }
            i += 1;
            start = last + 1;
            e &= e - 1;
        }
        if start == 0 {
            // No varint ends in 64 bytes.
            return false;
        }
        p += start;
    }
    while i < n {
        match varint::get(col, &mut p) {
            Some(v) => out[i] = v,
            None => return false,
        }
        i += 1;
    }
    *pos = p;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn both(col: &[u8], pos: usize, n: usize) -> Vec<Option<(Vec<u64>, usize)>> {
        let pext: &[bool] = if crate::cpu::has_fast_pext() { &[false, true] } else { &[false] };
        pext.iter()
            .map(|&x| {
                let mut out = vec![0; n];
                let mut p = pos;
                let ok = if x {
                    get_many::<true>(col, &mut p, &mut out)
                } else {
                    get_many::<false>(col, &mut p, &mut out)
                };
                ok.then_some((out, p))
            })
            .collect()
    }

    proptest! {
        /// The same values and end as varint::get one at a time, on the encoder's varints
        /// (of every length, across the 64-byte blocks) and on arbitrary bytes.
        #[test]
        fn reads_what_get_reads(vs in prop::collection::vec(prop_oneof![0u64..128, 0u64..1 << 14, 0u64..1 << 56, any::<u64>()], 0..300),
                                junk: Vec<u8>, skip in 0usize..3, extra in 0usize..3) {
            let mut col = Vec::new();
            for &v in &vs {
                super::super::encode::put(&mut col, v);
            }
            for (data, n) in [(&col, vs.len().saturating_sub(skip)), (&col, vs.len() + extra), (&junk, junk.len() / 2 + extra)] {
                let mut p = 0;
                let want: Option<Vec<u64>> = (0..n).map(|_| varint::get(data, &mut p)).collect();
                let want = want.map(|v| (v, p));
                for got in both(data, 0, n) {
                    prop_assert_eq!(&got, &want);
                }
            }
        }
    }
}
