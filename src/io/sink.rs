//! Writing the synthetic table: Parquet with the input's column names, order and types, written to a
//! temporary file beside the target and renamed into place only when complete (docs/design.md), so a failed
//! run leaves nothing behind.

use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnWriter, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::io::source::column::build_array;
use crate::io::source::NumericColumn;
use crate::io::staging::StagedFile;

/// Synthetic floats are uniform noise in their low bits and do not compress; measured on 10^7 rows,
/// Snappy made `synth` about 30% slower for a few percent of size.
pub const OUTPUT_COMPRESSION: Compression = Compression::UNCOMPRESSED;

/// Rows per output row group.
pub const OUTPUT_ROW_GROUP_ROWS: usize = 1 << 20;

/// The schema of a synthetic table of `columns`: the input's names and types, no nulls.
pub fn output_schema(columns: &[NumericColumn]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|column| Field::new(column.name.clone(), column.data_type.clone(), false))
            .collect::<Vec<_>>(),
    ))
}

/// Values in normalised units [0,1] mapped back to `column`'s bounds and type (integers rounded).
pub fn denormalised(column: &NumericColumn, bounds: &ColumnBounds, unit: &[f64]) -> ArrayRef {
    build_array(&column.data_type, unit, |unit| bounds.denormalise(unit))
}

/// The table being written: each column of the open row group has its own encoder, and the encoders of
/// a batch run in parallel; finished row groups are appended in column order, so the bytes do not
/// depend on the thread count.
pub struct ParquetSink {
    staged: StagedFile,
    file: SerializedFileWriter<File>,
    row_groups: ArrowRowGroupWriterFactory,
    /// One encoder per column of the open row group.
    encoders: Vec<ArrowColumnWriter>,
    rows_in_group: usize,
    groups_written: usize,
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
        Self::open(target, output_schema(columns), columns.to_vec(), bounds.to_vec())
    }

    /// Opens a temporary file beside `target` for batches of `schema` written whole by the caller
    /// ([`ParquetSink::write_batch`]): the encoded mechanisms' Boolean, categorical and binned columns.
    pub fn create_with_schema(target: &Path, schema: SchemaRef) -> Result<Self> {
        Self::open(target, schema, Vec::new(), Vec::new())
    }

    fn open(
        target: &Path,
        schema: SchemaRef,
        columns: Vec<NumericColumn>,
        bounds: Vec<ColumnBounds>,
    ) -> Result<Self> {
        let staged = StagedFile::new(target)?;
        let file = File::create(staged.temporary()).map_err(|error| {
            Error::in_file(target, format!("cannot create the output: {error}"))
        })?;
        let cannot_start =
            |error| Error::in_file(target, format!("cannot start the Parquet writer: {error}"));
        // ArrowWriter stores the Arrow schema in the footer; its lower-level parts encode in parallel.
        let (file, row_groups) = ArrowWriter::try_new(file, schema.clone(), Some(output_properties()))
            .and_then(ArrowWriter::into_serialized_writer)
            .map_err(cannot_start)?;
        let encoders = row_groups.create_column_writers(0).map_err(cannot_start)?;
        Ok(ParquetSink {
            staged,
            file,
            row_groups,
            encoders,
            rows_in_group: 0,
            groups_written: 0,
            schema,
            columns,
            bounds,
        })
    }

    /// Appends one batch of the sink's schema (made by [`ParquetSink::create_with_schema`]).
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        self.write_columns(batch.num_rows(), |column, rows| {
            batch.column(column).slice(rows.start, rows.len())
        })
    }

    /// Appends rows given per column in normalised units [0,1]; they are mapped back to each column's
    /// bounds and type (integers rounded). Columns are converted and encoded in parallel.
    pub fn write_normalised(&mut self, unit_columns: &[Vec<f64>]) -> Result<()> {
        let rows = unit_columns.first().map_or(0, Vec::len);
        let (columns, bounds) = (self.columns.clone(), self.bounds.clone());
        self.write_columns(rows, |column, rows| {
            denormalised(&columns[column], &bounds[column], &unit_columns[column][rows])
        })
    }

    /// Appends `rows` rows whose column c over a range of rows is `column(c, range)`: each piece that fits
    /// the open row group is made and encoded on the rayon pool, one task per column.
    fn write_columns(
        &mut self,
        rows: usize,
        column: impl Fn(usize, Range<usize>) -> ArrayRef + Sync,
    ) -> Result<()> {
        let mut start = 0;
        while start < rows {
            let end = rows.min(start + OUTPUT_ROW_GROUP_ROWS - self.rows_in_group);
            let fields = self.schema.fields();
            self.encoders
                .par_iter_mut()
                .zip(fields.par_iter())
                .enumerate()
                .try_for_each(|(index, (encoder, field))| {
                    for leaf in compute_leaves(field, &column(index, start..end))? {
                        encoder.write(&leaf)?;
                    }
                    Ok(())
                })
                .map_err(|error: parquet::errors::ParquetError| self.write_error(error))?;
            self.rows_in_group += end - start;
            start = end;
            if self.rows_in_group == OUTPUT_ROW_GROUP_ROWS {
                self.finish_row_group()?;
            }
        }
        Ok(())
    }

    /// Closes the open row group's encoders and appends their chunks to the file, in column order.
    fn finish_row_group(&mut self) -> Result<()> {
        self.groups_written += 1;
        let next = self
            .row_groups
            .create_column_writers(self.groups_written)
            .map_err(|error| self.write_error(error))?;
        let encoders = std::mem::replace(&mut self.encoders, next);
        let chunks = encoders
            .into_par_iter()
            .map(ArrowColumnWriter::close)
            .collect::<parquet::errors::Result<Vec<_>>>()
            .map_err(|error| self.write_error(error))?;
        let appended = self.file.next_row_group().and_then(|mut row_group| {
            for chunk in chunks {
                chunk.append_to_row_group(&mut row_group)?;
            }
            row_group.close().map(drop)
        });
        self.rows_in_group = 0;
        appended.map_err(|error| self.write_error(error))
    }

    fn write_error(&self, error: parquet::errors::ParquetError) -> Error {
        Error::in_file(self.staged.target(), format!("cannot write the output: {error}"))
    }

    /// Finishes the file; it is moved into place with the run's other outputs by
    /// [`crate::io::staging::commit_all`]. On error (and if the result is dropped) the temporary goes.
    pub fn finish(mut self) -> Result<StagedFile> {
        if self.rows_in_group > 0 {
            self.finish_row_group()?;
        }
        let ParquetSink { staged, file, .. } = self;
        file.close().map_err(|error| {
            Error::in_file(staged.target(), format!("cannot finish the output: {error}"))
        })?;
        Ok(staged)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::source::{ColumnKind, Source};
    use arrow::array::AsArray;
    use arrow::datatypes::{DataType, Float64Type, Int32Type};

    fn columns() -> (Vec<NumericColumn>, Vec<ColumnBounds>) {
        let column = |name: &str, schema_index, kind, data_type| NumericColumn {
            name: name.to_string(),
            schema_index,
            kind,
            data_type,
        };
        (
            vec![
                column("x", 0, ColumnKind::Float, DataType::Float64),
                column("k", 1, ColumnKind::Integer, DataType::Int32),
            ],
            vec![
                ColumnBounds::new("x", -1.0, 1.0).unwrap(),
                ColumnBounds::new("k", 0.0, 1000.0).unwrap(),
            ],
        )
    }

    /// Batches that straddle row-group boundaries, written on `threads` threads; returns the file.
    fn write(path: &Path, threads: usize, rows: usize) -> Vec<u8> {
        let (columns, bounds) = columns();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut sink = ParquetSink::create(path, &columns, &bounds).unwrap();
            let units: Vec<f64> = (0..rows).map(|row| (row % 1001) as f64 / 1000.0).collect();
            for batch in units.chunks(OUTPUT_ROW_GROUP_ROWS / 3 + 17) {
                sink.write_normalised(&[batch.to_vec(), batch.to_vec()])
                    .unwrap();
            }
            crate::io::staging::commit_all(vec![sink.finish().unwrap()]).unwrap();
        });
        std::fs::read(path).unwrap()
    }

    #[test]
    fn row_groups_hold_every_row_in_order_and_the_bytes_ignore_the_thread_count() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 2 * OUTPUT_ROW_GROUP_ROWS + 12_345;
        let path = dir.path().join("out.parquet");
        let one_thread = write(&path, 1, rows);
        assert_eq!(write(&path, 3, rows), one_thread);
        let source = Source::open(&path).unwrap();
        assert_eq!(source.row_group_count(), 3);
        let (columns, _) = columns();
        let mut row = 0usize;
        for group in 0..source.row_group_count() {
            for batch in source.row_group_reader(group, &columns).unwrap() {
                let batch = batch.unwrap();
                let x = batch.column(0).as_primitive::<Float64Type>();
                let k = batch.column(1).as_primitive::<Int32Type>();
                for (x, k) in x.values().iter().zip(k.values()) {
                    let unit = (row % 1001) as f64 / 1000.0;
                    assert_eq!(*x, -1.0 + 2.0 * unit, "row {row}");
                    assert_eq!(*k, (row % 1001) as i32, "row {row}");
                    row += 1;
                }
            }
        }
        assert_eq!(row, rows);
    }
}
