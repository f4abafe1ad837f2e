//! The events table: every record of the log in the reader's merged time order, one row
//! each (seq is that order), the fields of the C call as columns.
use super::sink::{cut, Nullable, Sink, BATCH};

fn v<T>() -> Vec<T> {
    Vec::with_capacity(BATCH)
}
use arrow_array::types::{Int64Type, Int8Type};
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, Int64Array, Int8Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use recorder::{Event, Op};
use std::sync::Arc;

/// Dictionary-encoded columns, and delta-encoded ones (see Sink::create).
pub const DICT: &[&str] = &["op", "size"];
pub const DELTA: &[&str] = &["seq", "ts_ns", "ptr", "old_ptr", "backend_ns", "value"];

pub fn schema() -> SchemaRef {
    let i64n = |n: &str, null: bool| Field::new(n, DataType::Int64, null);
    Arc::new(Schema::new(vec![
        i64n("seq", false),
        i64n("ts_ns", false),
        Field::new("pid", DataType::Int32, false),
        Field::new("tid", DataType::Int32, false),
        Field::new("op", DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)), false),
        i64n("ptr", true),
        i64n("size", true),
        i64n("count", true),
        i64n("align", true),
        i64n("old_ptr", true),
        i64n("backend_ns", true),
        i64n("value", true),
        i64n("stack_id", true),
    ]))
}

/// The name of every 6-bit op code (the dictionary of the `op` column).
fn op_names() -> ArrayRef {
    Arc::new(StringArray::from_iter_values((0..64u8).map(|c| Op::from_u8(c).map_or("unknown", |o| o.name()))))
}

pub struct Events {
    schema: SchemaRef,
    names: ArrayRef,
    pid: i32,
    seq: Vec<i64>,
    ts: Vec<i64>,
    tid: Vec<i32>,
    op: Vec<i8>,
    ptr: Nullable<i64>,
    size: Nullable<i64>,
    count: Nullable<i64>,
    align: Nullable<i64>,
    old: Nullable<i64>,
    backend: Nullable<i64>,
    value: Nullable<i64>,
    stack: Nullable<i64>,
}

impl Events {
    pub fn new(pid: u32) -> Events {
        Events {
            schema: schema(),
            names: op_names(),
            pid: pid as i32,
            seq: v(),
            ts: v(),
            tid: v(),
            op: v(),
            ptr: Nullable::new(),
            size: Nullable::new(),
            count: Nullable::new(),
            align: Nullable::new(),
            old: Nullable::new(),
            backend: Nullable::new(),
            value: Nullable::new(),
            stack: Nullable::new(),
        }
    }

    #[inline]
    pub fn push(&mut self, seq: u64, e: &Event) {
        let call = e.op.is_alloc_family();
        let opt = |c: bool, v: u64| c.then_some(v as i64);
        self.seq.push(seq as i64);
        self.ts.push(e.ts_ns as i64);
        self.tid.push(e.tid as i32);
        self.op.push(e.op as u8 as i8);
        self.ptr.push(opt(call, e.ptr));
        self.size.push(opt(call && !e.op.is_free() || e.op == Op::FreeSized, e.size));
        self.count.push(opt(matches!(e.op, Op::Calloc | Op::Reallocarray), e.count()));
        self.align.push(opt(matches!(e.op, Op::PosixMemalign | Op::AlignedAlloc | Op::Memalign), e.align()));
        self.old.push(opt(matches!(e.op, Op::Realloc | Op::Reallocarray), e.old));
        self.backend.push(e.backend_ns().map(|n| n as i64));
        self.value.push(opt(!call, e.value()));
        self.stack.push(None);
    }

    /// The rows waiting to be written.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.seq.len()
    }

    /// Row `seq` (if not written yet) was made from stack `id`.
    pub fn set_stack(&mut self, seq: u64, id: u32) {
        if let Some(&first) = self.seq.first() {
            if let Some(i) = seq.checked_sub(first as u64) {
                self.stack.set(i as usize, id as i64);
            }
        }
    }

    /// Writes the rows before the first of seq `keep` on (all of them: None), keeping the
    /// others for the next batch (calls whose site record is still to come).
    pub fn flush(&mut self, out: &mut Sink, keep: Option<u64>) -> Result<(), String> {
        let Some(&first) = self.seq.first() else { return Ok(()) };
        let n =
            keep.map_or(self.seq.len(), |k| (k.saturating_sub(first as u64) as usize).min(self.seq.len()));
        if n == 0 {
            return Ok(());
        }
        let op =
            DictionaryArray::<Int8Type>::try_new(Int8Array::from(cut(&mut self.op, n)), self.names.clone())
                .map_err(|e| e.to_string())?;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(cut(&mut self.seq, n))),
            Arc::new(Int64Array::from(cut(&mut self.ts, n))),
            Arc::new(Int32Array::from(vec![self.pid; n])),
            Arc::new(Int32Array::from(cut(&mut self.tid, n))),
            Arc::new(op),
            Arc::new(self.ptr.cut::<Int64Type>(n)),
            Arc::new(self.size.cut::<Int64Type>(n)),
            Arc::new(self.count.cut::<Int64Type>(n)),
            Arc::new(self.align.cut::<Int64Type>(n)),
            Arc::new(self.old.cut::<Int64Type>(n)),
            Arc::new(self.backend.cut::<Int64Type>(n)),
            Arc::new(self.value.cut::<Int64Type>(n)),
            Arc::new(self.stack.cut::<Int64Type>(n)),
        ];
        let b = RecordBatch::try_new(self.schema.clone(), cols).map_err(|e| e.to_string())?;
        out.write(&b)
    }
}
