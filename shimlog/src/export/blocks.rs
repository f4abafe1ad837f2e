//! The blocks table: one row per block, written when it is freed (in the order of the
//! frees) and, for the blocks never freed, at the end (their freed columns NULL). Blocks are
//! made and freed as `shimlog stats` counts them (analysis/process.rs): an allocating call
//! with a non-null result makes one of the requested size; free and a successful realloc
//! free the old one; an allocation returning a live address ends the old block there (its
//! freed_tid and lifetime NULL: the log lost its free, stats' address_reuse_conflicts).
//! The live blocks are in the analysis' own table (analysis/blocks.rs: memory per live block
//! as in stats, and prefetched a few events ahead).
use super::sink::{Nullable, Sink, BATCH};

fn v<T>() -> Vec<T> {
    Vec::with_capacity(BATCH)
}
use crate::analysis::{Analysis, Block, BlockTable, SizeTable};
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use recorder::Event;
use std::sync::Arc;

/// Dictionary-encoded columns, and delta-encoded ones (see Sink::create).
pub const DICT: &[&str] = &["size"];
pub const DELTA: &[&str] = &["ptr", "made_ts", "made_seq", "freed_ts", "freed_seq", "lifetime_ns"];

pub fn schema() -> SchemaRef {
    let f = |n: &str, t: DataType, null: bool| Field::new(n, t, null);
    Arc::new(Schema::new(vec![
        f("pid", DataType::Int32, false),
        f("ptr", DataType::Int64, false),
        f("size", DataType::Int64, false),
        f("made_ts", DataType::Int64, false),
        f("made_tid", DataType::Int32, false),
        f("made_seq", DataType::Int64, false),
        f("freed_ts", DataType::Int64, true),
        f("freed_tid", DataType::Int32, true),
        f("freed_seq", DataType::Int64, true),
        f("lifetime_ns", DataType::Int64, true),
        f("stack_id", DataType::Int64, true),
    ]))
}

pub struct Blocks {
    schema: SchemaRef,
    pid: i32,
    /// Each block's alloc_index is its made_seq, its thread the tid that made it.
    live: BlockTable,
    sizes: SizeTable,
    ptr: Vec<i64>,
    size: Vec<i64>,
    made_ts: Vec<i64>,
    made_tid: Vec<i32>,
    made_seq: Vec<i64>,
    freed_ts: Nullable<i64>,
    freed_tid: Nullable<i32>,
    freed_seq: Nullable<i64>,
    lifetime: Nullable<i64>,
    stack: Nullable<i64>,
    /// The stack of each live block that has one, by its made_seq.
    stack_of: rustc_hash::FxHashMap<u64, u32>,
}

impl Blocks {
    pub fn new(pid: u32) -> Blocks {
        Blocks {
            schema: schema(),
            pid: pid as i32,
            live: BlockTable::default(),
            sizes: SizeTable::default(),
            ptr: v(),
            size: v(),
            made_ts: v(),
            made_tid: v(),
            made_seq: v(),
            freed_ts: Nullable::new(),
            freed_tid: Nullable::new(),
            freed_seq: Nullable::new(),
            lifetime: Nullable::new(),
            stack: Nullable::new(),
            stack_of: Default::default(),
        }
    }

    /// A malloc-family call.
    #[inline]
    pub fn call(&mut self, seq: u64, e: &Event, out: &mut Sink) -> Result<(), String> {
        if e.op.is_free() {
            if e.ptr != 0 {
                self.free(e.ptr, seq, e, out)?;
            }
            return Ok(());
        }
        let req = e.requested();
        let ok = e.ptr != 0;
        if Analysis::frees_old(e, ok, req) {
            self.free(e.old, seq, e, out)?;
        }
        if ok {
            let b = Block { ts_ns: e.ts_ns, alloc_index: seq, size_id: self.sizes.id(req), thread: e.tid };
            if let Some(old) = self.live.insert(e.ptr, b) {
                self.row(e.ptr, old, Some(e.ts_ns), None, Some(seq), None);
                self.full(out)?;
            }
        }
        Ok(())
    }

    /// The block `ptr` made by row `seq`, if still live, was made from stack `id`.
    pub fn set_stack(&mut self, ptr: u64, seq: u64, id: u32) {
        if self.live.get(ptr).is_some_and(|b| b.alloc_index == seq) {
            self.stack_of.insert(seq, id);
        }
    }

    /// Starts loading the table slots `e` will touch.
    #[inline(always)]
    pub fn prefetch(&self, e: &Event) {
        self.live.prefetch(e.ptr);
        if e.old != 0 {
            self.live.prefetch(e.old);
        }
    }

    #[inline(always)]
    fn full(&mut self, out: &mut Sink) -> Result<(), String> {
        if self.ptr.len() == BATCH {
            self.flush(out)?;
        }
        Ok(())
    }

    /// `ptr` freed by `e`.
    #[inline]
    fn free(&mut self, ptr: u64, seq: u64, e: &Event, out: &mut Sink) -> Result<(), String> {
        let Some(b) = self.live.remove(ptr) else { return Ok(()) };
        self.row(ptr, b, Some(e.ts_ns), Some(e.tid), Some(seq), Some(e.ts_ns.saturating_sub(b.ts_ns)));
        self.full(out)
    }

    #[inline]
    fn row(
        &mut self,
        ptr: u64,
        b: Block,
        ts: Option<u64>,
        tid: Option<u32>,
        seq: Option<u64>,
        life: Option<u64>,
    ) {
        self.ptr.push(ptr as i64);
        self.size.push(self.sizes.size(b.size_id) as i64);
        self.made_ts.push(b.ts_ns as i64);
        self.made_tid.push(b.thread as i32);
        self.made_seq.push(b.alloc_index as i64);
        self.freed_ts.push(ts.map(|v| v as i64));
        self.freed_tid.push(tid.map(|v| v as i32));
        self.freed_seq.push(seq.map(|v| v as i64));
        self.lifetime.push(life.map(|v| v as i64));
        let st = if self.stack_of.is_empty() { None } else { self.stack_of.remove(&b.alloc_index) };
        self.stack.push(st.map(|i| i as i64));
    }

    /// The blocks never freed, in the order they were made, then the last rows.
    pub fn finish(&mut self, out: &mut Sink) -> Result<(), String> {
        let mut rest: Vec<(u64, Block)> = self.live.entries().map(|(p, b)| (p, *b)).collect();
        rest.sort_by_key(|(_, b)| b.alloc_index);
        for (ptr, b) in rest {
            self.row(ptr, b, None, None, None, None);
            self.full(out)?;
        }
        self.flush(out)
    }

    fn flush(&mut self, out: &mut Sink) -> Result<(), String> {
        let n = self.ptr.len();
        if n == 0 {
            return Ok(());
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![self.pid; n])),
            Arc::new(Int64Array::from(std::mem::take(&mut self.ptr))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.size))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.made_ts))),
            Arc::new(Int32Array::from(std::mem::take(&mut self.made_tid))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.made_seq))),
            Arc::new(self.freed_ts.cut::<Int64Type>(n)),
            Arc::new(self.freed_tid.cut::<Int32Type>(n)),
            Arc::new(self.freed_seq.cut::<Int64Type>(n)),
            Arc::new(self.lifetime.cut::<Int64Type>(n)),
            Arc::new(self.stack.cut::<Int64Type>(n)),
        ];
        out.write(&RecordBatch::try_new(self.schema.clone(), cols).map_err(|e| e.to_string())?)
    }
}
