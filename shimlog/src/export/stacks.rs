//! The stacks table, and the stack ids of the events and blocks tables: for a log recorded
//! with stacks (SHIM_STACKS), each `site` record names the stack of the call just before it
//! in its stream (as the analysis joins them, analysis/sites/collect.rs); the stack and
//! mapping records are kept as the pass goes, and at the end every stack is written once,
//! its frames symbolised as `stats` does (analysis/sites/symbols.rs), with its site: the
//! first frame past the allocation wrappers, the function `stats`' call-site lists name; the
//! frames, as `stats`, from the caller of the program's own wrappers on (`--alloc-fn`).
use crate::analysis::sites::{profile_of, site_frame, AllocFns, Collector};
use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use recorder::event::site_flags;
use recorder::{Event, LogReader, Op};
use std::sync::Arc;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("pid", DataType::Int32, false),
        Field::new("stack_id", DataType::Int64, false),
        Field::new("site", DataType::Utf8, false),
        Field::new("frames", DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))), false),
    ]))
}

/// The last call of a stream, waiting for its site record.
#[derive(Clone, Copy)]
pub struct Call {
    pub seq: u64,
    pub ptr: u64,
    /// An allocation that made a block (its stack goes on the block too).
    pub made: bool,
}

/// What a site record says: the call's row gets stack `id`; `block`: the block it made too.
pub struct Joined {
    pub call: Call,
    pub id: u32,
    pub block: bool,
}

pub struct Stacks {
    col: Collector,
    last: Vec<Option<Call>>,
}

impl Stacks {
    pub fn new(r: &LogReader) -> Stacks {
        // Light: only the stack and mapping records are given to it, no calls.
        Stacks { col: Collector::new(&r.header, true), last: Vec::new() }
    }

    /// The oldest call (its seq) from `since` on still waiting for a site record.
    pub fn oldest_waiting(&self, since: u64) -> Option<u64> {
        self.last.iter().flatten().map(|c| c.seq).filter(|&q| q >= since).min()
    }

    #[inline]
    pub fn take(&mut self, seq: u64, e: &Event) -> Option<Joined> {
        let s = e.stream as usize;
        if s >= self.last.len() {
            self.last.resize(s + 1, None);
        }
        if e.op.is_alloc_family() || (e.op == Op::Stall && e.stream != 0) {
            let made = e.op.is_alloc_family() && e.op.allocates() && e.ptr != 0;
            self.last[s] = Some(Call { seq, ptr: e.ptr, made });
            return None;
        }
        match e.op {
            Op::Site => {
                let call = self.last[s].take()?;
                let flags = e.arg;
                let block = call.made && flags & (site_flags::SAMPLED | site_flags::ALL) != 0;
                Some(Joined { call, id: e.size as u32, block })
            }
            Op::Stack
            | Op::StackPc
            | Op::Mapping
            | Op::MappingBias
            | Op::MappingPath
            | Op::MappingBuildId => {
                self.col.record(e);
                None
            }
            _ => None,
        }
    }

    /// Every stack of the log, one row each (by id), its frames resolved.
    pub fn batch(self, r: &LogReader, pid: u32, wrappers: &AllocFns) -> Result<RecordBatch, String> {
        let p = profile_of(self.col.finish(None), r, None, wrappers);
        let mut ids: Vec<u32> = p.c.stacks.keys().copied().collect();
        ids.sort_unstable();
        let mut site = Vec::with_capacity(ids.len());
        let mut frames = ListBuilder::new(StringBuilder::new());
        for &id in &ids {
            site.push(site_frame(&p, id).map_or(String::new(), |f| f.function.clone()));
            for f in p.frames.get(&id).into_iter().flatten() {
                frames.values().append_value(&f.function);
            }
            frames.append(true);
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![pid as i32; ids.len()])),
            Arc::new(Int64Array::from_iter_values(ids.iter().map(|&i| i as i64))),
            Arc::new(StringArray::from(site)),
            Arc::new(frames.finish()),
        ];
        RecordBatch::try_new(schema(), cols).map_err(|e| e.to_string())
    }
}
