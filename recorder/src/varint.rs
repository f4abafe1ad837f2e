//! LEB128 varints and zigzag, the only integer encoding in a frame's payload.

/// Longest encoding of a u64.
pub const MAX_LEN: usize = 10;

#[inline(always)]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline(always)]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Writes `v` at `out[0..]`, returns the bytes written. `out` must hold [`MAX_LEN`] bytes.
#[inline(always)]
pub fn put(out: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        out[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    out[i] = v as u8;
    i + 1
}

/// Writes `v` at `dst` without bounds checks and returns the byte after it. One and two
/// byte values (most time deltas, sizes and pointer deltas) take no loop.
///
/// # Safety
/// `dst` must be valid for [`MAX_LEN`] bytes of writes.
#[inline(always)]
pub unsafe fn put_raw(dst: *mut u8, v: u64) -> *mut u8 {
    unsafe {
        if v < 0x80 {
            *dst = v as u8;
            return dst.add(1);
        }
        if v < 0x4000 {
            *dst = (v as u8) | 0x80;
            *dst.add(1) = (v >> 7) as u8;
            return dst.add(2);
        }
        put_long(dst, v)
    }
}

#[inline(never)]
unsafe fn put_long(mut dst: *mut u8, mut v: u64) -> *mut u8 {
    unsafe {
        while v >= 0x80 {
            *dst = (v as u8) | 0x80;
            dst = dst.add(1);
            v >>= 7;
        }
        *dst = v as u8;
        dst.add(1)
    }
}

/// Reads a varint from `inp[*pos..]`, advancing `pos`. None when cut off or over-long.
#[inline(always)]
pub fn get(inp: &[u8], pos: &mut usize) -> Option<u64> {
    let p = *pos;
    // Encodings of up to 8 bytes (all but the largest values) without a loop: load 8
    // bytes, find the first byte without the continuation bit, keep the bytes up to it and
    // pack their 7-bit groups together.
    if let Some(b) = inp.get(p..p + 8) {
        let x = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        let stop = !x & 0x8080_8080_8080_8080;
        if stop != 0 {
            let end = stop.trailing_zeros(); // the terminating byte's top bit
            let keep = if end == 63 { u64::MAX } else { (1u64 << (end + 1)) - 1 };
            let x = x & keep & 0x7f7f_7f7f_7f7f_7f7f;
            let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
            let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
            let x = (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4);
            *pos = p + (end as usize + 1) / 8;
            return Some(x);
        }
    }
    // Away from the end of the input, one bounds check for the longest encoding.
    if let Some(b) = inp.get(p..p + MAX_LEN) {
        let mut v: u64 = 0;
        for (i, &x) in b.iter().enumerate() {
            if i == MAX_LEN - 1 && x > 1 {
                return None;
            }
            v |= ((x & 0x7f) as u64) << (7 * i);
            if x < 0x80 {
                *pos = p + i + 1;
                return Some(v);
            }
        }
        return None;
    }
    get_tail(inp, pos)
}

#[inline(never)]
fn get_tail(inp: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *inp.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    proptest! {
        #[test]
        fn roundtrip(v: u64) {
            let mut b = [0u8; MAX_LEN];
            let n = put(&mut b, v);
            let mut pos = 0;
            prop_assert_eq!(get(&b[..n], &mut pos), Some(v));
            prop_assert_eq!(pos, n);
        }
        #[test]
        fn zigzag_roundtrip(v: i64) {
            prop_assert_eq!(unzigzag(zigzag(v)), v);
        }
        /// The fast path reads exactly what a plain byte loop reads, at any offset of any
        /// bytes (canonical or not, cut off or over-long).
        #[test]
        fn get_matches_a_byte_loop(bytes: Vec<u8>, start: usize) {
            fn plain(inp: &[u8], pos: &mut usize) -> Option<u64> {
                let mut v = 0u64;
                for i in 0..MAX_LEN {
                    let b = *inp.get(*pos + i)?;
                    if i == MAX_LEN - 1 && b > 1 {
                        return None;
                    }
                    v |= ((b & 0x7f) as u64) << (7 * i);
                    if b < 0x80 {
                        *pos += i + 1;
                        return Some(v);
                    }
                }
                None
            }
            let s = if bytes.is_empty() { 0 } else { start % bytes.len() };
            let (mut a, mut b) = (s, s);
            let got = get(&bytes, &mut a);
            prop_assert_eq!(got, plain(&bytes, &mut b));
            if got.is_some() {
                prop_assert_eq!(a, b);
            }
        }

        #[test]
        fn get_never_panics(bytes: Vec<u8>) {
            let mut pos = 0;
            while get(&bytes, &mut pos).is_some() {}
        }
    }
}
