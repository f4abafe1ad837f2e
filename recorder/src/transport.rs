//! How buffers travel between the threads that fill them and the recorder thread: two
//! bounded lock-free queues (crossbeam `ArrayQueue`, which never allocates after it is made),
//! one of full buffers in the order they were filled, one of empty buffers ready for reuse.
//! Buffers come from the in-flight file's slots when there is one ([`crate::inflight`]),
//! from the heap otherwise (and past its last slot).
use crate::buffer::Buf;
use crate::inflight::Inflight;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
use crossbeam_queue::ArrayQueue;

pub struct Pool {
    full: ArrayQueue<usize>,
    empty: ArrayQueue<usize>,
    /// Buffers made so far; never more than the queues' capacity.
    made: AtomicUsize,
    /// Of those, the ones made on the heap (no in-flight slot for them).
    on_heap: AtomicUsize,
    /// Hard limit (the queues' capacity).
    cap: usize,
    /// Buffers beyond this are made only for new threads and before the recorder runs.
    soft_cap: usize,
    /// Where buffers are made: the in-flight file's slots, in order, then the heap.
    slots: Option<Inflight>,
    /// The log the buffers taken now are for (0: the main log, N: window N's).
    pub log: AtomicU32,
}

impl Pool {
    /// A pool that makes up to `cap` buffers (normally at most `soft_cap`), `prealloc` now.
    /// Buffers come from `slots` (an in-flight file) while it has any.
    pub fn new(cap: usize, soft_cap: usize, prealloc: usize, slots: Option<Inflight>) -> Pool {
        let p = Pool {
            full: ArrayQueue::new(cap),
            empty: ArrayQueue::new(cap),
            made: AtomicUsize::new(0),
            on_heap: AtomicUsize::new(0),
            cap,
            soft_cap,
            slots,
            log: AtomicU32::new(0),
        };
        for _ in 0..prealloc.min(cap) {
            let i = p.made.fetch_add(1, Relaxed);
            let _ = p.empty.push(p.make(i) as usize);
        }
        p
    }

    /// Buffer number `i`: its slot in the in-flight file (zeroes), or a new one on the heap.
    /// Whoever takes it resets it ([`Pool::reuse`]).
    fn make(&self, i: usize) -> *mut Buf {
        match self.slots.as_ref().and_then(|s| s.slot(i)) {
            Some(b) => b,
            None => {
                self.on_heap.fetch_add(1, Relaxed);
                Box::into_raw(Buf::new_boxed(0))
            }
        }
    }

    /// Empties `b` for `stream`, for the log the pool's buffers go to now.
    #[allow(
        clippy::not_unsafe_ptr_arg_deref,
        reason = "b is one of this pool's buffers, which live as long as the pool"
    )]
    pub fn reuse(&self, b: *mut Buf, stream: u32) {
        unsafe {
            (*b).reset(stream);
            (*b).log = self.log.load(Relaxed);
        }
    }

    /// The in-flight file the buffers live in, if any.
    pub fn inflight(&self) -> Option<&Inflight> {
        self.slots.as_ref()
    }

    /// An empty buffer for `stream`: a recycled one, or a new one while under the soft cap
    /// (under the hard cap with `grow`). None when every buffer is in use (the caller blocks
    /// or drops).
    pub fn take_empty(&self, stream: u32, grow: bool) -> Option<*mut Buf> {
        let p = match self.empty.pop() {
            Some(p) => p as *mut Buf,
            None => {
                let limit = if grow { self.cap } else { self.soft_cap };
                let i = self.made.fetch_add(1, Relaxed);
                if i >= limit {
                    self.made.fetch_sub(1, Relaxed);
                    return None;
                }
                self.make(i)
            }
        };
        self.reuse(p, stream);
        Some(p)
    }

    /// Hands a filled buffer to the recorder. Never fails: the queue holds every buffer.
    pub fn send_full(&self, b: *mut Buf) {
        let _ = self.full.push(b as usize);
    }

    /// Returns a buffer nobody needs any more: written to its log, or discarded. Its
    /// in-flight slot says so (no records), so recovery never writes it again.
    #[allow(
        clippy::not_unsafe_ptr_arg_deref,
        reason = "b is one of this pool's buffers, which live as long as the pool"
    )]
    pub fn give_back(&self, b: *mut Buf) {
        unsafe { core::ptr::write_volatile(&raw mut (*b).n, 0) };
        let _ = self.empty.push(b as usize);
    }

    /// The recorder's side: the oldest full buffer.
    pub fn next_full(&self) -> Option<*mut Buf> {
        self.full.pop().map(|p| p as *mut Buf)
    }

    pub fn pending(&self) -> usize {
        self.full.len()
    }

    pub fn made(&self) -> usize {
        self.made.load(Relaxed)
    }

    /// The memory the buffers hold now: the in-flight file's resident pages and the heap's
    /// buffers. The shim takes it off its RSS samples, which are the program's (the
    /// recorder falling behind grows the buffers, not the program).
    pub fn own_bytes(&self) -> u64 {
        let heap = self.on_heap.load(Relaxed);
        let slots = self.made.load(Relaxed).saturating_sub(heap);
        let file = self.slots.as_ref().map_or(0, |f| f.resident_bytes(slots));
        file + (heap * core::mem::size_of::<Buf>()) as u64
    }
}

unsafe impl Sync for Pool {}
unsafe impl Send for Pool {}
