//! The predictions both sides of the column codec keep, updated identically from the values
//! of each record once known, so that the decoder rebuilds exactly what the encoder saw.
//! Everything is per frame: a frame decodes on its own.

/// Size classes of the predictor: 16-byte steps up to 1 KiB (glibc's tcache bins, and the
/// small classes of jemalloc and mimalloc fall inside them), then 8 per doubling.
pub(crate) const CLASSES: usize = 64 + 8 * 54 + 8;

#[inline(always)]
pub(crate) fn class(size: u64) -> usize {
    if size <= 1024 {
        return (size as usize + 15) >> 4;
    }
    let s = size - 1;
    let b = 63 - s.leading_zeros(); // >= 10
    (64 + (b as usize - 10) * 8 + ((s >> (b - 3)) & 7) as usize).min(CLASSES - 1)
}

/// What was predicted so far in the frame.
pub(crate) struct Model {
    /// The last block seen of each size class: allocated, or freed (a freed block's class
    /// known from its allocation in this frame, or from a free_sized's size).
    pub(crate) class_last: Box<[u64; CLASSES]>,
    /// The last block allocated (the base for a class not seen yet).
    pub(crate) last_alloc: u64,
    /// The last pointer freed (the base for a freed pointer not allocated in this frame).
    pub(crate) last_free: u64,
    /// The frame's successful allocations in order: pointer and size. A freed pointer that
    /// is one of them is written as how many allocations ago it was made.
    pub(crate) allocs: Vec<(u64, u64)>,
    pub(crate) last_ticks: u64,
    pub(crate) last_dt: i64,
}

impl Model {
    pub(crate) fn new() -> Model {
        Model {
            class_last: Box::new([0; CLASSES]),
            last_alloc: 0,
            last_free: 0,
            allocs: Vec::with_capacity(16 << 10),
            last_ticks: 0,
            last_dt: 0,
        }
    }

    pub(crate) fn reset(&mut self, first_ticks: u64) {
        self.class_last.fill(0);
        self.last_alloc = 0;
        self.last_free = 0;
        self.allocs.clear();
        self.last_ticks = first_ticks;
        self.last_dt = 0;
    }

    /// The base an allocated pointer of `size` is written against.
    #[inline(always)]
    pub(crate) fn alloc_base(&self, size: u64) -> u64 {
        let c = self.class_last[class(size)];
        if c != 0 {
            c
        } else {
            self.last_alloc
        }
    }

    #[inline(always)]
    pub(crate) fn allocated(&mut self, ptr: u64, size: u64) {
        if ptr == 0 {
            return;
        }
        self.class_last[class(size)] = ptr;
        self.last_alloc = ptr;
        self.allocs.push((ptr, size));
    }

    /// A block was freed: `size` when known (from the allocation it matched, or free_sized).
    #[inline(always)]
    pub(crate) fn freed(&mut self, ptr: u64, size: Option<u64>) {
        if ptr == 0 {
            return;
        }
        if let Some(s) = size {
            self.class_last[class(s)] = ptr;
        }
        self.last_free = ptr;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn classes_are_monotonic_and_bounded() {
        let mut last = 0;
        for s in 0..200_000u64 {
            assert!(class(s) >= last, "{s}");
            last = class(s);
        }
        for b in 0..64 {
            assert!(class(1u64 << b) < CLASSES && class((1u64 << b) + 1) < CLASSES, "2^{b}");
        }
        assert!(class(u64::MAX) < CLASSES);
        assert_eq!(class(16), 1);
        assert_eq!(class(17), 2);
        assert_eq!(class(1024), 64);
        assert_ne!(class(1025), class(2048 + 1));
    }
}
