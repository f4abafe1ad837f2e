//! One Parquet file being written: Arrow batches in, zstd-compressed row groups out.
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Rows of one row group: a reader skips whole groups by their statistics (ts_ns ranges).
pub const ROW_GROUP: usize = 1 << 20;
/// Rows of a batch handed to the writer: the most any table holds in memory unencoded.
pub const BATCH: usize = 1 << 16;

pub struct Sink {
    w: ArrowWriter<File>,
    path: PathBuf,
}

impl Sink {
    /// A file of `schema`'s columns: those in `dict` dictionary-encoded (few distinct values:
    /// threads, operations, sizes), those in `delta` delta-encoded (times, sequence numbers,
    /// addresses: close to their neighbours), the others plain; min and max kept per column
    /// chunk. (Dictionary attempts on every column and zstd over plain 8-byte times took
    /// 4 times as long for a larger file.)
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
        let props = props.build();
        let w = ArrowWriter::try_new(f, schema, Some(props)).map_err(|e| format!("export: {}: {e}", path.display()))?;
        Ok(Sink { w, path: path.to_path_buf() })
    }

    pub fn write(&mut self, b: &RecordBatch) -> Result<(), String> {
        self.w.write(b).map_err(|e| format!("export: writing {}: {e}", self.path.display()))
    }

    pub fn close(self) -> Result<(), String> {
        let p = self.path;
        self.w.close().map(|_| ()).map_err(|e| format!("export: closing {}: {e}", p.display()))
    }
}
