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
        #[test]
        fn get_never_panics(bytes: Vec<u8>) {
            let mut pos = 0;
            while get(&bytes, &mut pos).is_some() {}
        }
    }
}
