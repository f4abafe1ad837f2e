//! One Parquet file being written: Arrow batches in, zstd-compressed row groups out. The
//! encoding (most of export's time) runs on a thread of the file's own, so that the events
//! and blocks files encode at once, beside the reading and the batches' making.
use arrow_array::types::ArrowPrimitiveType;
use arrow_array::{PrimitiveArray, RecordBatch};
use arrow_buffer::{ArrowNativeType, NullBuffer, ScalarBuffer};
use arrow_schema::{DataType, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

/// Rows of one row group: a reader skips whole groups by their statistics (ts_ns ranges).
pub const ROW_GROUP: usize = 1 << 20;
/// Rows of a batch handed to the writer: the most any table holds in memory unencoded.
pub const BATCH: usize = 1 << 16;

/// Batches a file's thread may be behind by.
const QUEUE: usize = 4;

pub struct Sink {
    tx: Option<SyncSender<RecordBatch>>,
    /// The writer thread; it ends with its CPU time (ns).
    thread: Option<JoinHandle<Result<u64, String>>>,
    path: PathBuf,
}

impl Sink {
    /// A file of `schema`'s columns: those in `dict` dictionary-encoded (the operation
    /// names, the sizes), those in `delta` delta-encoded (times, sequence numbers, addresses:
    /// close to their neighbours), the others plain (zstd finds their repeats); min and max
    /// kept per column chunk. Measured on a 10 M-event synthetic log: dictionaries on every
    /// column (parquet's default) and no delta encoding took 4 times the CPU. The sizes
    /// dictionary-encoded: 5 to 10% less CPU than plain and zstd, files 2 to 4% smaller, on
    /// the 20 M-event loop log and a 10 M-event genlog log alike (parquet 60); the thread ids
    /// too: no clear gain. zstd level 1 is a sixth of the CPU; leaving the addresses and
    /// times uncompressed saved 3% of the CPU for files 6% larger, and zstd's fast level -1
    /// 5 to 7% for files 6 to 12% larger (-3, -5: no faster, larger still): not taken.
    pub fn create(path: &Path, schema: SchemaRef, dict: &[&str], delta: &[&str]) -> Result<Sink, String> {
        let f = File::create(path).map_err(|e| format!("export: cannot create {}: {e}", path.display()))?;
        let mut props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("zstd level 1")))
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_created_by(format!("shimlog {}", env!("CARGO_PKG_VERSION")));
        for c in dict {
            props = props.set_column_dictionary_enabled(ColumnPath::from(*c), true);
        }
        for c in delta {
            props = props.set_column_encoding(ColumnPath::from(*c), Encoding::DELTA_BINARY_PACKED);
        }
        // A column already a dictionary in Arrow (the events' op names) keeps no min and max:
        // parquet finds them by comparing its strings row by row (a twelfth of the events
        // file's encoding), and as every row group holds every operation they would never
        // let a reader skip one.
        for f in schema.fields() {
            if matches!(f.data_type(), DataType::Dictionary(..)) {
                props = props.set_column_statistics_enabled(
                    ColumnPath::from(f.name().as_str()),
                    EnabledStatistics::None,
                );
            }
        }
        let props = props.build();
        let mut w = ArrowWriter::try_new(f, schema, Some(props))
            .map_err(|e| format!("export: {}: {e}", path.display()))?;
        let (tx, rx) = sync_channel::<RecordBatch>(QUEUE);
        let p = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("export-writer".into())
            .spawn(move || {
                for b in rx {
                    w.write(&b).map_err(|e| format!("export: writing {}: {e}", p.display()))?;
                }
                w.close().map_err(|e| format!("export: closing {}: {e}", p.display()))?;
                Ok(crate::analysis::thread_cpu_ns())
            })
            .map_err(|e| format!("export: cannot start a writer thread: {e}"))?;
        Ok(Sink { tx: Some(tx), thread: Some(thread), path: path.to_path_buf() })
    }

    pub fn write(&mut self, b: &RecordBatch) -> Result<(), String> {
        // A batch's columns are shared, not copied. A send fails only once the thread has
        // stopped on an error: that error is the answer.
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(b.clone()).is_ok());
        if sent {
            Ok(())
        } else {
            self.finish().map(|_| ())
        }
    }

    /// Writes the rest and the footer; the CPU time (ns) the file's encoding took.
    pub fn close(mut self) -> Result<u64, String> {
        self.finish()
    }

    fn finish(&mut self) -> Result<u64, String> {
        self.tx = None;
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(format!("export: the writer of {} failed", self.path.display()))),
            None => Err(format!("export: {} was already closed", self.path.display())),
        }
    }
}

/// A nullable column being filled, row by row: its values (0 where NULL) and which rows
/// hold one; made into an Arrow array without a per-row pass over `Option`s.
pub struct Nullable<T> {
    v: Vec<T>,
    ok: Vec<bool>,
}

impl<T: Copy + Default + ArrowNativeType> Nullable<T> {
    pub fn new() -> Self {
        Nullable { v: Vec::with_capacity(BATCH), ok: Vec::with_capacity(BATCH) }
    }

    #[inline(always)]
    pub fn push(&mut self, x: Option<T>) {
        self.v.push(x.unwrap_or_default());
        self.ok.push(x.is_some());
    }

    /// Row `i` holds `x` from now on (if there is such a row).
    #[inline]
    pub fn set(&mut self, i: usize, x: T) {
        if let (Some(v), Some(ok)) = (self.v.get_mut(i), self.ok.get_mut(i)) {
            *v = x;
            *ok = true;
        }
    }

    /// The first `n` rows as an array of `P`, the others kept (in new buffers of BATCH rows).
    pub fn cut<P: ArrowPrimitiveType<Native = T>>(&mut self, n: usize) -> PrimitiveArray<P> {
        let (v, ok) = if n == self.v.len() {
            (
                std::mem::replace(&mut self.v, Vec::with_capacity(BATCH)),
                std::mem::replace(&mut self.ok, Vec::with_capacity(BATCH)),
            )
        } else {
            (cut(&mut self.v, n), cut(&mut self.ok, n))
        };
        // Columns all filled or all NULL (most, in a batch) need no bitmap packed bool by bool.
        let nulls = if ok.iter().all(|&b| b) {
            None
        } else if !ok.iter().any(|&b| b) {
            Some(NullBuffer::new_null(ok.len()))
        } else {
            Some(NullBuffer::from(ok))
        };
        PrimitiveArray::new(ScalarBuffer::from(v), nulls)
    }
}

/// The first `n` items of `c`, the rest left in `c` (a new buffer of BATCH items).
pub fn cut<T>(c: &mut Vec<T>, n: usize) -> Vec<T> {
    let mut rest = Vec::with_capacity(BATCH);
    rest.extend(c.drain(n..));
    std::mem::replace(c, rest)
}
