//! Writing the synthetic table: Parquet with the input's column names, order and types, written to a
//! temporary file beside the target and renamed into place only when complete (docs/design.md), so a failed
//! run leaves nothing behind.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use crate::geometry::bounds::ColumnBounds;
use crate::error::{Error, Result};
use crate::io::source::column::build_array;
use crate::io::source::NumericColumn;

/// Synthetic floats are uniform noise in their low bits and do not compress; measured on 10^7 rows,
/// Snappy made `synth` about 30% slower for a few percent of size.
pub const OUTPUT_COMPRESSION: Compression = Compression::UNCOMPRESSED;

/// Rows per output row group.
pub const OUTPUT_ROW_GROUP_ROWS: usize = 1 << 20;

pub struct ParquetSink {
    target: PathBuf,
    temporary: PathBuf,
    writer: Option<ArrowWriter<File>>,
    schema: SchemaRef,
    columns: Vec<NumericColumn>,
    bounds: Vec<ColumnBounds>,
}

impl ParquetSink {
    /// Opens a temporary file beside `target`. `columns` and `bounds` are in output order.
    pub fn create(
        target: &Path,
        columns: &[NumericColumn],
        bounds: &[ColumnBounds],
    ) -> Result<Self> {
        let schema: SchemaRef = Arc::new(Schema::new(
            columns
                .iter()
                .map(|column| Field::new(column.name.clone(), column.data_type.clone(), false))
                .collect::<Vec<_>>(),
        ));
        Self::open(target, schema, columns.to_vec(), bounds.to_vec())
    }

    fn open(
        target: &Path,
        schema: SchemaRef,
        columns: Vec<NumericColumn>,
        bounds: Vec<ColumnBounds>,
    ) -> Result<Self> {
        let temporary = temporary_path(target)?;
        let file = File::create(&temporary).map_err(|error| {
            Error::in_file(target, format!("cannot create the output: {error}"))
        })?;
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(output_properties()));
        let mut sink = ParquetSink {
            target: target.to_path_buf(),
            temporary,
            writer: None,
            schema,
            columns,
            bounds,
        };
        sink.writer = Some(writer.map_err(|error| {
            Error::in_file(target, format!("cannot start the Parquet writer: {error}"))
        })?);
        Ok(sink)
    }

    /// Opens a temporary file beside `target` for batches of `schema` written whole by the caller
    /// ([`ParquetSink::write_batch`]): the encoded mechanisms' Boolean, categorical and binned columns.
    pub fn create_with_schema(target: &Path, schema: SchemaRef) -> Result<Self> {
        Self::open(target, schema, Vec::new(), Vec::new())
    }

    /// Appends one batch of the sink's schema (made by [`ParquetSink::create_with_schema`]).
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let target = &self.target;
        self.writer
            .as_mut()
            .expect("the writer lives until commit")
            .write(batch)
            .map_err(|error| Error::in_file(target, format!("cannot write the output: {error}")))
    }

    /// Appends rows given per column in normalised units [0,1]; they are mapped back to each column's
    /// bounds and type (integers rounded).
    pub fn write_normalised(&mut self, unit_columns: &[Vec<f64>]) -> Result<()> {
        let mut arrays = Vec::with_capacity(unit_columns.len());
        for ((units, column), bounds) in unit_columns.iter().zip(&self.columns).zip(&self.bounds) {
            arrays.push(build_array(&column.data_type, units, |unit| {
                bounds.denormalise(unit)
            }));
        }
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|error| Error::internal(format!("building an output batch: {error}")))?;
        self.write_batch(&batch)
    }

    /// Finishes the file and moves it into place.
    pub fn commit(mut self) -> Result<()> {
        let writer = self.writer.take().expect("the writer lives until commit");
        writer.close().map_err(|error| {
            Error::in_file(&self.target, format!("cannot finish the output: {error}"))
        })?;
        std::fs::rename(&self.temporary, &self.target).map_err(|error| {
            Error::in_file(
                &self.target,
                format!("cannot move the finished output into place: {error}"),
            )
        })
    }
}

impl Drop for ParquetSink {
    /// An uncommitted sink removes its temporary file: nothing half-written survives a failed run.
    fn drop(&mut self) {
        if self.writer.is_some() {
            self.writer = None;
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

fn output_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(OUTPUT_COMPRESSION)
        .set_dictionary_enabled(false)
        // Min/max statistics of synthetic columns cost more to compute than they save readers.
        .set_statistics_enabled(EnabledStatistics::None)
        .set_max_row_group_row_count(Some(OUTPUT_ROW_GROUP_ROWS))
        .build()
}

/// Writes `bytes` to `path` through a temporary file and a rename (for reports).
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let temporary = temporary_path(path)?;
    std::fs::write(&temporary, bytes)
        .map_err(|error| Error::in_file(path, format!("cannot write: {error}")))?;
    std::fs::rename(&temporary, path).map_err(|error| {
        let _ = std::fs::remove_file(&temporary);
        Error::in_file(path, format!("cannot move into place: {error}"))
    })
}

/// A hidden file beside `target`, unique to this process, renamed onto `target` once complete. Being in
/// the same directory keeps the rename atomic (same file system).
fn temporary_path(target: &Path) -> Result<PathBuf> {
    let file_name = target
        .file_name()
        .ok_or_else(|| Error::in_file(target, "needs a file name"))?;
    Ok(target.with_file_name(format!(
        ".{}.{}.tmp",
        file_name.to_string_lossy(),
        std::process::id()
    )))
}
