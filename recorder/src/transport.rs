//! How buffers travel between the threads that fill them and the recorder thread: two
//! bounded lock-free queues (crossbeam `ArrayQueue`, which never allocates after it is made),
//! one of full buffers in the order they were filled, one of empty buffers ready for reuse.
use crate::buffer::Buf;
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use crossbeam_queue::ArrayQueue;

pub struct Pool {
    full: ArrayQueue<usize>,
    empty: ArrayQueue<usize>,
    /// Buffers made so far; never more than the queues' capacity.
    made: AtomicUsize,
    /// Hard limit (the queues' capacity).
    cap: usize,
    /// Buffers beyond this are made only for new threads and before the recorder runs.
    soft_cap: usize,
}

impl Pool {
    /// A pool that makes up to `cap` buffers (normally at most `soft_cap`), `prealloc` now.
    pub fn new(cap: usize, soft_cap: usize, prealloc: usize) -> Pool {
        let p = Pool {
            full: ArrayQueue::new(cap),
            empty: ArrayQueue::new(cap),
            made: AtomicUsize::new(0),
            cap,
            soft_cap,
        };
        for _ in 0..prealloc.min(cap) {
            p.made.fetch_add(1, Relaxed);
            let _ = p.empty.push(Box::into_raw(Buf::new_boxed(0)) as usize);
        }
        p
    }

    /// An empty buffer for `stream`: a recycled one, or a new one while under the soft cap
    /// (under the hard cap with `grow`). None when every buffer is in use (the caller blocks
    /// or drops).
    pub fn take_empty(&self, stream: u32, grow: bool) -> Option<*mut Buf> {
        let p = match self.empty.pop() {
            Some(p) => p as *mut Buf,
            None => {
                let limit = if grow { self.cap } else { self.soft_cap };
                if self.made.fetch_add(1, Relaxed) >= limit {
                    self.made.fetch_sub(1, Relaxed);
                    return None;
                }
                Box::into_raw(Buf::new_boxed(stream))
            }
        };
        unsafe { (*p).reset(stream) };
        Some(p)
    }

    /// Hands a filled buffer to the recorder. Never fails: the queue holds every buffer.
    pub fn send_full(&self, b: *mut Buf) {
        let _ = self.full.push(b as usize);
    }

    /// Returns a buffer nobody needs any more.
    pub fn give_back(&self, b: *mut Buf) {
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
}

unsafe impl Sync for Pool {}
unsafe impl Send for Pool {}
