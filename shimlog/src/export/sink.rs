//! One Parquet file being written: Arrow batches in, zstd-compressed row groups out.
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
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
    pub fn create(path: &Path, schema: SchemaRef) -> Result<Sink, String> {
        let f = File::create(path).map_err(|e| format!("export: cannot create {}: {e}", path.display()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("zstd level 1")))
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .set_created_by(format!("shimlog {}", env!("CARGO_PKG_VERSION")))
            .build();
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
