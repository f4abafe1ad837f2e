//! The streams merged in time order: a loser tree over the started streams.
use super::stream::*;
use super::*;

/// What [`Events::drive`] hands each event to, in merged order.
pub trait Sink {
    fn take(&mut self, e: &Event);
}

/// [`Events::fill`]'s sink.
pub(super) struct Fill<'o> {
    pub(super) out: &'o mut [Event],
    pub(super) n: usize,
}

impl Sink for Fill<'_> {
    #[inline(always)]
    fn take(&mut self, e: &Event) {
        self.out[self.n] = *e;
        self.n += 1;
    }
}

/// The merged iterator returned by [`LogReader::events`]: a loser tree over the started
/// streams, each decoded a batch at a time.
pub struct Events<'a> {
    pub(super) src: Src<'a>,
    /// Streams not started yet: (first ticks, stream).
    pub(super) pending: BinaryHeap<Reverse<(u64, u32)>>,
    pub(super) waiting: HashMap<u32, Vec<usize>>,
    pub(super) cursors: Vec<Cursor>,
    /// The tournament: `tree[0]` is the smallest key of all slots, `tree[n]` for n in
    /// 1..cap the loser of the match at node n (its children are 2n and 2n + 1); slot s is
    /// leaf cap + s. Replaying a slot's new key after it won costs about log2(cap)
    /// comparisons and no unpredictable branch.
    pub(super) tree: Vec<Key>,
    /// The current key of each slot (EMPTY for an unused one).
    pub(super) leaves: Vec<Key>,
    /// The key of each slot's record after its current one, or REFILL: read when the slot
    /// wins, so that the next key is one load from the slot number (through the cursor, it
    /// was three in a row, on the chain from one winner to the next).
    pub(super) ahead: Vec<Key>,
    /// Slots of finished cursors, reused (with their buffers) by later streams.
    pub(super) free_slots: Vec<u32>,
    /// Merged events handed out one at a time by `next`: `chunk[chunk_pos..chunk_len]`.
    pub(super) chunk: Vec<Event>,
    pub(super) chunk_pos: usize,
    pub(super) chunk_len: usize,
    /// Problems met while decoding frames.
    pub issues: Vec<ReadIssue>,
    /// Compressed bytes of the frames decoded so far (for progress).
    pub bytes_read: u64,
    /// True once the process stream's End record was read.
    pub clean_end: bool,
    pub decoded: u64,
    /// Calls left out because they were stamped after the final flush's cut.
    pub after_cut: u64,
}

impl<'a> Events<'a> {
    pub(super) fn new(r: &'a LogReader) -> Self {
        let mut waiting: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, f) in r.frames.iter().enumerate() {
            waiting.entry(f.h.stream).or_default().push(i);
        }
        let pending = waiting.iter().map(|(s, v)| Reverse((r.frames[v[0]].h.first_ticks, *s))).collect();
        Events {
            src: Src::new(r, Order::of(r)),
            pending,
            waiting,
            cursors: Vec::new(),
            tree: vec![EMPTY; 1],
            leaves: vec![EMPTY; 1],
            ahead: vec![REFILL; 1],
            free_slots: Vec::new(),
            chunk: Vec::new(),
            chunk_pos: 0,
            chunk_len: 0,
            issues: Vec::new(),
            bytes_read: 0,
            clean_end: false,
            decoded: 0,
            after_cut: 0,
        }
    }

    /// Rebuilds the tournament from `leaves` (when a stream starts).
    pub(super) fn rebuild(&mut self) {
        let cap = self.leaves.len();
        // winners[n]: the winner of the subtree at node n (leaves at cap..2cap).
        let mut win = vec![EMPTY; 2 * cap];
        win[cap..].copy_from_slice(&self.leaves);
        self.tree.clear();
        self.tree.resize(cap, EMPTY);
        for n in (1..cap).rev() {
            let (a, b) = (win[2 * n], win[2 * n + 1]);
            win[n] = a.min(b);
            self.tree[n] = a.max(b);
        }
        self.tree[0] = win[1];
    }

    /// Starts a stream: a slot (growing the tree when all are taken), its first batch,
    /// and the tournament rebuilt with it.
    pub(super) fn activate(&mut self, stream: u32) {
        let frames = self.waiting.remove(&stream).unwrap_or_default();
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.cursors.push(Cursor::new(stream));
                let s = self.cursors.len() - 1;
                // As many leaves as slots, a power of two or not: node n's children are
                // 2n and 2n + 1 for any width, and 9 streams (8 threads and the
                // process's) take 3 or 4 matches to replay rather than 4 in 16 leaves.
                if s >= self.leaves.len() {
                    self.leaves.resize(s + 1, EMPTY);
                    self.ahead.resize(s + 1, REFILL);
                }
                s as u32
            }
        };
        let c = &mut self.cursors[slot as usize];
        if let (Some(d), Some(p)) = (c.pre.take(), self.src.pool) {
            p.give_back(d);
        }
        c.reset(stream, frames);
        if self.src.refill(c, slot) {
            self.leaves[slot as usize] = c.keys[0];
            self.ahead[slot as usize] = c.after();
        } else {
            self.leaves[slot as usize] = EMPTY;
            self.free_slots.push(slot);
        }
        self.rebuild();
    }

    /// Fills `out` with the next events in merged order; returns how many it wrote (fewer
    /// than `out.len()` only at the end of the log). Cheaper than calling `next` for each.
    pub fn fill(&mut self, out: &mut [Event]) -> usize {
        let max = out.len();
        self.drive(max, &mut Fill { out, n: 0 })
    }

    /// Hands the next `max` events in merged order to `f`, one at a time; returns how many
    /// it handed (fewer than `max` only at the end of the log). `f` runs inside the merge
    /// loop, event by event, rather than after it a chunk at a time as with
    /// [`Events::fill`], so that the out-of-order core can overlap a consumer's work per
    /// event (the analysis) with the merge's chain of dependent loads from one winner to
    /// the next. On x86-64 CPUs with the x86-64-v3 features, the loop and `f` with it (an
    /// `#[inline(always)]` [`Sink::take`]) are compiled for them.
    #[inline]
    pub fn drive<F: Sink>(&mut self, max: usize, f: &mut F) -> usize {
        #[cfg(target_arch = "x86_64")]
        if self.src.v3 {
            // SAFETY: the CPU has every feature drive_v3 is compiled for (cpu::has_v3).
            return unsafe { self.drive_v3(max, f) };
        }
        self.drive_with(max, f)
    }

    /// [`Events::drive`] compiled for x86-64-v3 (see [`crate::cpu`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt,fma,movbe")]
    unsafe fn drive_v3<F: Sink>(&mut self, max: usize, f: &mut F) -> usize {
        self.drive_with(max, f)
    }

    #[inline(always)]
    pub(super) fn drive_with<F: Sink>(&mut self, max: usize, f: &mut F) -> usize {
        let mut n = 0;
        let order = self.src.order;
        loop {
            let next_start = self.pending.peek().map_or(u64::MAX, |Reverse((t, _))| *t);
            // Every key from `start` up is EMPTY or comes after a stream still to start, so
            // one comparison tells the common case (a record to hand out) from the others.
            let start = order.start_key(next_start);
            n = self.merge(max, n, start, f);
            if n == max || next_start == u64::MAX {
                break;
            }
            // Bring in every stream that starts no later than the earliest record in hand.
            let Reverse((_, s)) = self.pending.pop().expect("pending stream");
            self.activate(s);
        }
        self.decoded += n as u64;
        self.sync();
        n
    }

    /// Hands records to `f` while the earliest key in hand is below `start`, until `max`
    /// have been handed (counting the `n` before); returns the count. The tournament's
    /// arrays are held as pointers for the loop: through `self`, every store by `f` made the
    /// compiler load each array's address again.
    #[inline(always)]
    pub(super) fn merge<F: Sink>(&mut self, max: usize, mut n: usize, start: Key, f: &mut F) -> usize {
        let order = self.src.order;
        let cap = self.leaves.len();
        // activate keeps these in step: one slot per cursor, the tree as wide as the leaves.
        assert!(self.tree.len() == cap && self.ahead.len() == cap && self.cursors.len() <= cap);
        let tree = self.tree.as_mut_ptr();
        let leaves = self.leaves.as_mut_ptr();
        let ahead = self.ahead.as_mut_ptr();
        let cursors = self.cursors.as_mut_ptr();
        // SAFETY (every access below): a slot comes from a key in the tree below `start`,
        // which is not EMPTY, so it is the slot of a live cursor: < cursors.len() <= cap;
        // tree nodes are 0 < node < cap. Nothing in the loop resizes these vectors (only
        // activate does, outside it).
        let replay = |slot: usize, k: Key| -> Key {
            unsafe {
                *leaves.add(slot) = k;
                let mut cur = k;
                let mut node = (cap + slot) >> 1;
                while node >= 1 {
                    let l = *tree.add(node);
                    // Which stream wins is data, not a pattern: min and max, not a branch.
                    *tree.add(node) = l.max(cur);
                    cur = l.min(cur);
                    node >>= 1;
                }
                *tree = cur;
                cur
            }
        };
        let mut top = unsafe { *tree };
        while n < max && top < start {
            let slot = order.slot(top) as usize;
            let c = unsafe { &mut *cursors.add(slot) };
            // pos < len <= BATCH, a power of two: the mask only spares a bounds check.
            f.take(&c.batch[c.pos & (BATCH - 1)]);
            n += 1;
            c.pos += 1;
            let mut k = unsafe { *ahead.add(slot) };
            if k == REFILL {
                k = next_key(&mut self.src, c, &mut self.free_slots, slot as u32);
            }
            unsafe { *ahead.add(slot) = c.after() };
            top = replay(slot, k);
            // Still the winner: its run goes out together, up to the next key of any other
            // stream and of any stream still to start, with one more replay at its end.
            if top == k && k < start && n < max {
                let mut second = EMPTY;
                let mut node = (cap + slot) >> 1;
                while node >= 1 {
                    second = second.min(unsafe { *tree.add(node) });
                    node >>= 1;
                }
                let bound = second.min(start);
                let lim = c.len.min(c.pos + (max - n));
                let mut end = c.pos;
                while end < lim && c.keys[end] < bound {
                    end += 1;
                }
                if end > c.pos {
                    for e in &c.batch[c.pos..end] {
                        f.take(e);
                    }
                    n += end - c.pos;
                    c.pos = end;
                    let k = next_key(&mut self.src, c, &mut self.free_slots, slot as u32);
                    unsafe { *ahead.add(slot) = c.after() };
                    top = replay(slot, k);
                }
            }
        }
        n
    }

    /// Lets go of the buffers (decompressed frames, batches, the decompressor) of a reading
    /// that has handed out its last event; what it found (issues, counts) stays.
    pub fn release(&mut self) {
        self.cursors = Vec::new();
        self.chunk = Vec::new();
        self.src.comp = Vec::new();
        self.src.dctx = None;
        self.src.cols = None;
        self.src.inline = None;
    }

    /// Copies the decoder's counters to the public fields.
    pub(super) fn sync(&mut self) {
        if self.src.issues.len() > self.issues.len() {
            let new = self.src.issues[self.issues.len()..].to_vec();
            self.issues.extend(new);
        }
        self.bytes_read = self.src.bytes_read;
        self.clean_end = self.src.clean_end;
        self.after_cut = self.src.after_cut;
    }
}

/// Events `next` merges at a time.
pub(super) const CHUNK: usize = 256;

impl Iterator for Events<'_> {
    type Item = Event;

    #[inline]
    fn next(&mut self) -> Option<Event> {
        if self.chunk_pos == self.chunk_len {
            let mut chunk = std::mem::take(&mut self.chunk);
            chunk.resize(CHUNK, Event::default());
            self.chunk_len = self.fill(&mut chunk);
            self.chunk = chunk;
            self.chunk_pos = 0;
            if self.chunk_len == 0 {
                return None;
            }
        }
        let e = self.chunk[self.chunk_pos];
        self.chunk_pos += 1;
        Some(e)
    }
}
