//! Frames decompressed and decoded ahead of the merge on a pool of threads: each frame is
//! an independent zstd frame, so a worker turns a whole frame into its events (and their
//! keys, the slot left out) with the same decoding code as the merge's own
//! ([`Src::refill`]), and the merge, on its one thread, takes them in order. What a frame
//! found (its issues, calls after the cut, the End record) is counted when the merge takes
//! it, so that what a reading reports does not depend on the threads.
//!
//! Frames are decoded in the order the merge will want them (by their first tick), at most
//! `limit` of them decoded and not yet taken; a frame the merge wants that no worker has
//! started (its stream ran far behind the others) is decoded on the merge's thread at once,
//! so the merge never waits on a frame nobody is decoding. Memory: `limit` decoded frames
//! (a frame's events at 56 bytes each; `limit` is 2 a worker and 2 more: enough to keep
//! the workers busy, measured no slower than 4 a worker and 4 more, 3 MiB less) beside the reader's own.
//!
//! What a worker runs ([`Worker`]) and what it hands over ([`Decoded`]) are stream.rs's; the
//! merge reaches the pool through stream.rs's [`Ahead`], so that the two import one way.
use super::stream::*;
use super::*;
use std::sync::{Condvar, Mutex};

enum Slot {
    Free,
    Busy,
    Ready(Box<Decoded>),
    Gone,
}

struct State {
    /// Frame indices in the order the merge will want them, and the next one to start.
    need: Vec<usize>,
    next: usize,
    slots: Vec<Slot>,
    /// Frames decoded or being decoded and not yet taken.
    ahead: usize,
    /// Buffers the merge is done with, for the workers to fill again. Boxed: a `Decoded` is
    /// large, and moves between the slots, the spare list and the merge's cursor by pointer.
    #[allow(clippy::vec_box)]
    spare: Vec<Box<Decoded>>,
    stop: bool,
}

/// The pool's shared state; [`Pool::work`] is each worker thread's body.
pub struct Pool<'a> {
    r: &'a LogReader,
    st: Mutex<State>,
    ready: Condvar,
    room: Condvar,
    limit: usize,
}

impl<'a> Pool<'a> {
    /// A pool for `r`'s frames, for `workers` threads (each to run [`Pool::work`]).
    pub fn new(r: &'a LogReader, workers: usize) -> Pool<'a> {
        let mut need: Vec<usize> = (0..r.frames.len()).collect();
        need.sort_by_key(|&i| (r.frames[i].h.first_ticks, i));
        Pool {
            r,
            st: Mutex::new(State {
                need,
                next: 0,
                slots: (0..r.frames.len()).map(|_| Slot::Free).collect(),
                ahead: 0,
                spare: Vec::new(),
                stop: false,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
            limit: 2 * workers.max(1) + 2,
        }
    }

    /// A worker: decodes frames until every frame is started or the pool is stopped.
    pub fn work(&self) {
        let mut w = Worker::new(self.r);
        loop {
            let (fi, buf) = {
                let mut st = self.st.lock().expect("pool lock");
                loop {
                    if st.stop {
                        return;
                    }
                    while st.next < st.need.len() && !matches!(st.slots[st.need[st.next]], Slot::Free) {
                        st.next += 1;
                    }
                    if st.next == st.need.len() {
                        return;
                    }
                    if st.ahead < self.limit {
                        break;
                    }
                    st = self.room.wait(st).expect("pool lock");
                }
                let fi = st.need[st.next];
                st.next += 1;
                st.slots[fi] = Slot::Busy;
                st.ahead += 1;
                (fi, st.spare.pop().unwrap_or_default())
            };
            let d = w.decode(fi, buf);
            let mut st = self.st.lock().expect("pool lock");
            st.slots[fi] = Slot::Ready(d);
            drop(st);
            self.ready.notify_all();
        }
    }

    /// Stops the workers (at the end of the reading, or when it is given up).
    pub fn stop(&self) {
        self.st.lock().expect("pool lock").stop = true;
        self.room.notify_all();
    }
}

impl<'a> Ahead<'a> for Pool<'a> {
    /// Frame `fi`, decoded: by a worker (waiting for it if one is at it), or here, with
    /// `w`, when none has started it.
    fn take(&self, fi: usize, w: &mut Option<Box<Worker<'a>>>) -> Box<Decoded> {
        let mut st = self.st.lock().expect("pool lock");
        loop {
            match std::mem::replace(&mut st.slots[fi], Slot::Gone) {
                Slot::Ready(d) => {
                    st.ahead -= 1;
                    drop(st);
                    self.room.notify_one();
                    return d;
                }
                Slot::Busy => {
                    st.slots[fi] = Slot::Busy;
                    st = self.ready.wait(st).expect("pool lock");
                }
                Slot::Free => {
                    let buf = st.spare.pop().unwrap_or_default();
                    drop(st);
                    return w.get_or_insert_with(|| Box::new(Worker::new(self.r))).decode(fi, buf);
                }
                Slot::Gone => unreachable!("frame {fi} taken twice"),
            }
        }
    }

    /// A frame's buffers, done with.
    fn give_back(&self, d: Box<Decoded>) {
        let mut st = self.st.lock().expect("pool lock");
        if st.spare.len() < self.limit {
            st.spare.push(d);
        }
    }
}
