//! Writing the synthetic table: Parquet with the input's column names, order and types, written to a
//! temporary file beside the target and renamed into place only when complete (docs/design.md), so a failed
//! run leaves nothing behind.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::io::domain::{decode_codes, with_nulls, Coding};
use crate::io::integer_cells::IntegerCells;
use crate::io::source::column::build_array;
use crate::io::source::{ColumnKind, NumericColumn};
use crate::io::staging::StagedFile;

/// Synthetic floats are uniform noise in their low bits and do not compress; measured on 10^7 rows,
/// Snappy made `synth` about 30% slower for a few percent of size.
pub const OUTPUT_COMPRESSION: Compression = Compression::UNCOMPRESSED;

/// Rows per output row group.
pub const OUTPUT_ROW_GROUP_ROWS: usize = 1 << 20;

/// The schema of a synthetic table of `columns`: the input's names and types, nullable where the column's
/// domain has null (or "other", which comes back as null).
pub fn output_schema(columns: &[NumericColumn]) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|column| {
                let other = matches!(&column.coding, Coding::Categories(categories) if categories.other);
                Field::new(column.name.clone(), column.data_type.clone(), column.nulls.is_some() || other)
            })
            .collect::<Vec<_>>(),
    ))
}

/// Values in normalised units [0,1] mapped back to `column`'s axis `bounds` and type: an integer column with
/// `integers` (its released cells) to integers inside each value's cell, otherwise rounded to nearest; a
/// coded column's codes to its values, and a value in the null band to null.
pub fn denormalised(
    column: &NumericColumn,
    bounds: &ColumnBounds,
    integers: Option<&IntegerCells>,
    unit: &[f64],
) -> ArrayRef {
    let on_axis = |unit: f64| match integers {
        Some(integers) => integers.integer(unit),
        None => bounds.denormalise(unit),
    };
    if column.is_plain_number() {
        return build_array(&column.data_type, unit, on_axis);
    }
    let values: Vec<f64> = unit.iter().map(|&unit| on_axis(unit)).collect();
    match (&column.coding, column.nulls) {
        (Coding::Number, Some(slot)) => {
            with_nulls(build_array(&column.data_type, &values, |value| value), slot, &values)
        }
        (Coding::Number, None) => build_array(&column.data_type, &values, |value| value),
        (coding, _) => decode_codes(coding, &column.data_type, &values),
    }
}

/// Per column, the [`IntegerCells`] of an integer column whose released values are spread over
/// `value_cells` equal cells of its bounds; `None` for floats and where the cells are not known.
pub fn integer_cells(
    columns: &[NumericColumn],
    bounds: &[ColumnBounds],
    value_cells: &[Option<u64>],
) -> Vec<Option<IntegerCells>> {
    columns
        .iter()
        .zip(bounds)
        .zip(value_cells)
        .map(|((column, bounds), &cells)| match (column.kind, cells) {
            (ColumnKind::Integer, Some(cells)) => IntegerCells::new(bounds, cells),
            _ => None,
        })
        .collect()
}

/// The table being written. Whole row groups of normalised rows are encoded by a [`RowGroupEncoder`], on
/// any thread, and appended by a [`RowGroupFile`] in order ([`ParquetSink::split`] gives both at once);
/// batches of a caller's own arrays ([`ParquetSink::write_batch`]) fill the open row group's encoders. The
/// bytes do not depend on the thread count.
pub struct ParquetSink {
    staged: StagedFile,
    encoder: RowGroupEncoder,
    file: RowGroupFile,
    /// The encoders of the row group that `write_batch` is filling, one per column.
    open: Option<Vec<ArrowColumnWriter>>,
    rows_in_group: usize,
}

/// Encodes whole row groups of normalised rows: [`RowGroupEncoder::encode`] takes `&self`, so row
/// groups can be encoded in parallel.
pub struct RowGroupEncoder {
    target: PathBuf,
    row_groups: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    columns: Vec<NumericColumn>,
    bounds: Vec<ColumnBounds>,
    integers: Vec<Option<IntegerCells>>,
}

/// One row group's encoded column chunks, ready to append.
pub struct EncodedRowGroup(Vec<ArrowColumnChunk>);

/// The file that encoded row groups are appended to, in the order they come.
pub struct RowGroupFile {
    target: PathBuf,
    writer: SerializedFileWriter<File>,
    groups_written: usize,
}

impl ParquetSink {
    /// Opens a temporary file beside `target`. `columns`, `bounds` and `value_cells` (the equal cells
    /// each column's values were spread over, [`crate::mechanism::ReleasedMeasure::value_cells`]) are in
    /// output order.
    pub fn create(
        target: &Path,
        columns: &[NumericColumn],
        bounds: &[ColumnBounds],
        value_cells: &[Option<u64>],
    ) -> Result<Self> {
        let integers = integer_cells(columns, bounds, value_cells);
        Self::open(target, output_schema(columns), columns.to_vec(), bounds.to_vec(), integers)
    }

    /// Opens a temporary file beside `target` for batches of `schema` written whole by the caller
    /// ([`ParquetSink::write_batch`]): the encoded mechanisms' Boolean, categorical and binned columns.
    pub fn create_with_schema(target: &Path, schema: SchemaRef) -> Result<Self> {
        Self::open(target, schema, Vec::new(), Vec::new(), Vec::new())
    }

    fn open(
        target: &Path,
        schema: SchemaRef,
        columns: Vec<NumericColumn>,
        bounds: Vec<ColumnBounds>,
        integers: Vec<Option<IntegerCells>>,
    ) -> Result<Self> {
        let staged = StagedFile::new(target)?;
        let file = File::create(staged.temporary())
            .map_err(|error| Error::in_file(target, format!("cannot create the output: {error}")))?;
        // ArrowWriter stores the Arrow schema in the footer; its lower-level parts encode in parallel.
        let (writer, row_groups) = ArrowWriter::try_new(file, schema.clone(), Some(output_properties()))
            .and_then(ArrowWriter::into_serialized_writer)
            .map_err(|error| Error::in_file(target, format!("cannot start the Parquet writer: {error}")))?;
        Ok(ParquetSink {
            staged,
            encoder: RowGroupEncoder { target: target.to_path_buf(), row_groups, schema, columns, bounds, integers },
            file: RowGroupFile { target: target.to_path_buf(), writer, groups_written: 0 },
            open: None,
            rows_in_group: 0,
        })
    }

    /// The encoder and the file, to encode row groups while earlier ones are appended. Not for a sink
    /// that [`write_batch`](Self::write_batch) fills: its open row group would be left behind.
    pub fn split(&mut self) -> (&RowGroupEncoder, &mut RowGroupFile) {
        debug_assert_eq!(self.rows_in_group, 0, "a row group is open");
        (&self.encoder, &mut self.file)
    }

    /// Appends one batch of the sink's schema (made by [`ParquetSink::create_with_schema`]); the pieces
    /// that fit the open row group are encoded on the rayon pool, one task per column.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let rows = batch.num_rows();
        let mut start = 0;
        while start < rows {
            let end = rows.min(start + OUTPUT_ROW_GROUP_ROWS - self.rows_in_group);
            let encoders = match &mut self.open {
                Some(encoders) => encoders,
                None => self.open.insert(self.encoder.column_writers(self.file.groups_written)?),
            };
            let fields = self.encoder.schema.fields();
            encoders
                .par_iter_mut()
                .zip(fields.par_iter())
                .enumerate()
                .try_for_each(|(index, (encoder, field))| {
                    for leaf in compute_leaves(field, &batch.column(index).slice(start, end - start))? {
                        encoder.write(&leaf)?;
                    }
                    Ok(())
                })
                .map_err(|error| self.encoder.write_error(error))?;
            self.rows_in_group += end - start;
            start = end;
            if self.rows_in_group == OUTPUT_ROW_GROUP_ROWS {
                self.finish_open_row_group()?;
            }
        }
        Ok(())
    }

    /// Closes the open row group's encoders and appends their chunks.
    fn finish_open_row_group(&mut self) -> Result<()> {
        self.rows_in_group = 0;
        let Some(encoders) = self.open.take() else {
            return Ok(());
        };
        let chunks = encoders
            .into_par_iter()
            .map(ArrowColumnWriter::close)
            .collect::<parquet::errors::Result<Vec<_>>>()
            .map_err(|error| self.encoder.write_error(error))?;
        self.file.append(EncodedRowGroup(chunks))
    }

    /// Finishes the file with `metadata` in its footer (key-value pairs: what the table is and how it was
    /// made); it is moved into place with the run's other outputs by [`crate::io::staging::commit_all`].
    /// On error (and if the result is dropped) the temporary goes.
    pub fn finish(mut self, metadata: &[(String, String)]) -> Result<StagedFile> {
        if self.rows_in_group > 0 {
            self.finish_open_row_group()?;
        }
        let ParquetSink { staged, mut file, .. } = self;
        for (key, value) in metadata {
            file.writer.append_key_value_metadata(KeyValue::new(key.clone(), value.clone()));
        }
        file.writer
            .close()
            .map_err(|error| Error::in_file(staged.target(), format!("cannot finish the output: {error}")))?;
        Ok(staged)
    }
}

impl RowGroupEncoder {
    /// Row group `index` (its place in the file) holding `unit_columns`, values in normalised units [0,1]
    /// mapped back to each column's bounds and type ([`denormalised`]); columns are encoded in parallel.
    pub fn encode(&self, index: usize, unit_columns: &[Vec<f64>]) -> Result<EncodedRowGroup> {
        let fields = self.schema.fields();
        let chunks = self
            .column_writers(index)?
            .into_par_iter()
            .zip(fields.par_iter())
            .enumerate()
            .map(|(column, (mut encoder, field))| {
                let integers = self.integers[column].as_ref();
                let array = denormalised(&self.columns[column], &self.bounds[column], integers, &unit_columns[column]);
                for leaf in compute_leaves(field, &array)? {
                    encoder.write(&leaf)?;
                }
                encoder.close()
            })
            .collect::<parquet::errors::Result<Vec<_>>>()
            .map_err(|error| self.write_error(error))?;
        Ok(EncodedRowGroup(chunks))
    }

    /// Columns per row.
    pub fn dims(&self) -> usize {
        self.columns.len()
    }

    fn column_writers(&self, index: usize) -> Result<Vec<ArrowColumnWriter>> {
        self.row_groups.create_column_writers(index).map_err(|error| self.write_error(error))
    }

    fn write_error(&self, error: parquet::errors::ParquetError) -> Error {
        write_error(&self.target, error)
    }
}

impl RowGroupFile {
    /// Appends the next row group.
    pub fn append(&mut self, group: EncodedRowGroup) -> Result<()> {
        self.groups_written += 1;
        let appended = self.writer.next_row_group().and_then(|mut row_group| {
            for chunk in group.0 {
                chunk.append_to_row_group(&mut row_group)?;
            }
            row_group.close().map(drop)
        });
        appended.map_err(|error| write_error(&self.target, error))
    }
}

fn write_error(target: &Path, error: parquet::errors::ParquetError) -> Error {
    Error::in_file(target, format!("cannot write the output: {error}"))
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
    use arrow::array::{AsArray, Float64Array, Int32Array};
    use arrow::datatypes::{DataType, Float64Type, Int32Type};

    fn columns() -> (Vec<NumericColumn>, Vec<ColumnBounds>) {
        let column =
            |name: &str, schema_index, kind, data_type| NumericColumn::number(name, schema_index, kind, data_type);
        (
            vec![
                column("x", 0, ColumnKind::Float, DataType::Float64),
                column("k", 1, ColumnKind::Integer, DataType::Int32),
            ],
            vec![ColumnBounds::new("x", -1.0, 1.0).unwrap(), ColumnBounds::new("k", 0.0, 1000.0).unwrap()],
        )
    }

    fn unit(row: usize) -> f64 {
        (row % 1001) as f64 / 1000.0
    }

    /// Every value of the file at `path` is the one written for its row.
    fn assert_rows_in_order(path: &Path, rows: usize, row_groups: usize) {
        let source = Source::open(path).unwrap();
        assert_eq!(source.row_group_count(), row_groups);
        let (columns, _) = columns();
        let mut row = 0usize;
        for group in 0..source.row_group_count() {
            for batch in source.row_group_reader(group, &columns).unwrap() {
                let batch = batch.unwrap();
                let x = batch.column(0).as_primitive::<Float64Type>();
                let k = batch.column(1).as_primitive::<Int32Type>();
                for (x, k) in x.values().iter().zip(k.values()) {
                    assert_eq!(*x, -1.0 + 2.0 * unit(row), "row {row}");
                    assert_eq!(*k, (row % 1001) as i32, "row {row}");
                    row += 1;
                }
            }
        }
        assert_eq!(row, rows);
    }

    /// Row groups encoded in parallel on `threads` threads and appended in order; returns the file.
    fn write_row_groups(path: &Path, threads: usize, rows: usize) -> Vec<u8> {
        let (columns, bounds) = columns();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let mut sink = ParquetSink::create(path, &columns, &bounds, &[None; 2]).unwrap();
            let (encoder, file) = sink.split();
            let groups: Vec<EncodedRowGroup> = (0..rows.div_ceil(OUTPUT_ROW_GROUP_ROWS))
                .into_par_iter()
                .map(|group| {
                    let first = group * OUTPUT_ROW_GROUP_ROWS;
                    let units: Vec<f64> = (first..rows.min(first + OUTPUT_ROW_GROUP_ROWS)).map(unit).collect();
                    encoder.encode(group, &[units.clone(), units]).unwrap()
                })
                .collect();
            for group in groups {
                file.append(group).unwrap();
            }
            crate::io::staging::commit_all(vec![sink.finish(&[]).unwrap()]).unwrap();
        });
        std::fs::read(path).unwrap()
    }

    #[test]
    fn row_groups_encoded_in_parallel_keep_their_order_and_the_bytes_ignore_the_thread_count() {
        let dir = tempfile::tempdir().unwrap();
        let rows = 2 * OUTPUT_ROW_GROUP_ROWS + 12_345;
        let path = dir.path().join("out.parquet");
        let one_thread = write_row_groups(&path, 1, rows);
        assert_eq!(write_row_groups(&path, 3, rows), one_thread);
        assert_rows_in_order(&path, rows, 3);
    }

    #[test]
    fn batches_straddling_row_groups_fill_them_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let rows = OUTPUT_ROW_GROUP_ROWS + 12_345;
        let path = dir.path().join("out.parquet");
        let (columns, bounds) = columns();
        let schema = output_schema(&columns);
        let mut sink = ParquetSink::create_with_schema(&path, schema.clone()).unwrap();
        let rows_of = |range: std::ops::Range<usize>| {
            let x: Vec<f64> = range.clone().map(|row| bounds[0].denormalise(unit(row))).collect();
            let k: Vec<i32> = range.map(|row| (row % 1001) as i32).collect();
            let arrays: Vec<ArrayRef> = vec![Arc::new(Float64Array::from(x)), Arc::new(Int32Array::from(k))];
            RecordBatch::try_new(schema.clone(), arrays).unwrap()
        };
        let batch_rows = OUTPUT_ROW_GROUP_ROWS / 3 + 17;
        for start in (0..rows).step_by(batch_rows) {
            sink.write_batch(&rows_of(start..rows.min(start + batch_rows))).unwrap();
        }
        crate::io::staging::commit_all(vec![sink.finish(&[]).unwrap()]).unwrap();
        assert_rows_in_order(&path, rows, 2);
    }
}
