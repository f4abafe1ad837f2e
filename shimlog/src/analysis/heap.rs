//! The heap as the log shows it: the blocks live at each moment.
//!
//! Memory is proportional to the blocks live at once (33 bytes per block with its key and
//! control byte, in a table at most half full, tombstones included), never to the number of events.
use super::blocks::{Block, BlockTable};
use super::classes::SizeTable;

#[derive(Default)]
pub struct Heap {
    pub live: BlockTable,
    pub live_bytes: u64,
    /// Successful allocations so far (the next block's `alloc_index`).
    pub allocs: u64,
    pub peak_bytes: u64,
    pub peak_blocks: u64,
    pub peak_ts_ns: u64,
    /// Frees (and reallocs) of a pointer that was not live: the log lost its allocation
    /// (dropped events, or a block made before the shim was loaded).
    pub unknown_frees: u64,
    /// Allocations returning an address that was still live (only cross-thread reordering
    /// of a free and the reuse of its address can do this): the old block is taken as freed.
    pub address_reuse_conflicts: u64,
}

impl Heap {
    pub fn new() -> Heap {
        Heap::default()
    }

    /// Records a new block of `size` bytes. Returns the block it displaced (already taken
    /// off the live bytes), if the address was live.
    #[inline(always)]
    pub fn alloc(&mut self, ptr: u64, size: u64, b: Block, sizes: &SizeTable) -> Option<Block> {
        let old = self.live.insert(ptr, b);
        self.allocs += 1;
        self.live_bytes += size;
        if let Some(o) = &old {
            self.address_reuse_conflicts += 1;
            self.live_bytes -= sizes.size(o.size_id);
        }
        old
    }

    /// Call after [`Heap::alloc`]: true when this is a new peak of live bytes.
    #[inline(always)]
    pub fn check_peak(&mut self, ts_ns: u64) -> bool {
        if self.live_bytes > self.peak_bytes {
            self.peak_bytes = self.live_bytes;
            self.peak_blocks = self.live.len() as u64;
            self.peak_ts_ns = ts_ns;
            true
        } else {
            false
        }
    }

    /// Removes a block and takes its size off the live bytes; None (and counted) when the
    /// pointer was not live.
    #[inline(always)]
    pub fn free(&mut self, ptr: u64, sizes: &SizeTable) -> Option<Block> {
        match self.live.remove(ptr) {
            Some(b) => {
                self.live_bytes -= sizes.size(b.size_id);
                Some(b)
            }
            None => {
                self.unknown_frees += 1;
                None
            }
        }
    }

    /// The size of the block live at `ptr`, if any.
    pub fn size_at(&self, ptr: u64, sizes: &SizeTable) -> Option<u64> {
        self.live.get(ptr).map(|b| sizes.size(b.size_id))
    }

    /// Starts loading what an event on `ptr` will touch (see [`BlockTable::prefetch`]).
    #[inline(always)]
    pub fn prefetch(&self, ptr: u64) {
        self.live.prefetch(ptr);
    }

    #[inline(always)]
    pub fn blocks(&self) -> u64 {
        self.live.len() as u64
    }
}
