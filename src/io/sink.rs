//! Writing the synthetic table: Parquet with the input's column names, order and types, written to a
//! temporary file beside the target and renamed into place only when complete (docs/design.md), so a failed
//! run leaves nothing behind.

use std::fs::File;
use std::path::Path;
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
use crate::io::staging::StagedFile;

/// Synthetic floats are uniform noise in their low bits and do not compress; measured on 10^7 rows,
/// Snappy made `synth` about 30% slower for a few percent of size.
pub const OUTPUT_COMPRESSION: Compression = Compression::UNCOMPRESSED;

/// Rows per output row group.
pub const OUTPUT_ROW_GROUP_ROWS: usize = 1 << 20;

pub struct ParquetSink {
    staged: StagedFile,
    writer: ArrowWriter<File>,
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
        let staged = StagedFile::new(target)?;
        let file = File::create(staged.temporary()).map_err(|error| {
            Error::in_file(target, format!("cannot create the output: {error}"))
        })?;
        let schema: SchemaRef = Arc::new(Schema::new(
            columns
                .iter()
                .map(|column| Field::new(column.name.clone(), column.data_type.clone(), false))
                .collect::<Vec<_>>(),
        ));
        let properties = WriterProperties::builder()
            .set_compression(OUTPUT_COMPRESSION)
            .set_dictionary_enabled(false)
            // Min/max statistics of synthetic columns cost more to compute than they save readers.
            .set_statistics_enabled(EnabledStatistics::None)
            .set_max_row_group_row_count(Some(OUTPUT_ROW_GROUP_ROWS))
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(properties)).map_err(|error| {
            Error::in_file(target, format!("cannot start the Parquet writer: {error}"))
        })?;
        Ok(ParquetSink {
            staged,
            writer,
            schema,
            columns: columns.to_vec(),
            bounds: bounds.to_vec(),
        })
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
        let target = self.staged.target();
        self.writer
            .write(&batch)
            .map_err(|error| Error::in_file(target, format!("cannot write the output: {error}")))
    }

    /// Finishes the file; it is moved into place with the run's other outputs by
    /// [`crate::io::staging::commit_all`]. On error (and if the result is dropped) the temporary goes.
    pub fn finish(self) -> Result<StagedFile> {
        let ParquetSink { staged, writer, .. } = self;
        writer.close().map_err(|error| {
            Error::in_file(staged.target(), format!("cannot finish the output: {error}"))
        })?;
        Ok(staged)
    }
}
