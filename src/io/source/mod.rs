//! Reading the input: a memory-mapped Parquet file, projected to the asked columns, decoded row
//! group by row group (docs/design.md).

pub mod column;

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::datatypes::{DataType, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;

pub use column::{ColumnKind, NumericColumn};

use crate::error::{Error, Result};

/// Rows per decoded batch: large enough to amortise per-batch overhead, small enough that a batch's
/// columns and codes stay in L2.
pub const BATCH_ROWS: usize = 1 << 16;

/// An open Parquet file whose footer has been read once.
pub struct ParquetSource {
    path: PathBuf,
    data: Bytes,
    metadata: ArrowReaderMetadata,
}

impl ParquetSource {
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path)
            .map_err(|error| Error::in_file(path, format!("cannot open: {error}")))?;
        if file.metadata().map(|meta| meta.is_dir()).unwrap_or(false) {
            return Err(Error::in_file(path, "is a directory, not a Parquet file"));
        }
        // SAFETY: the map is read-only; the file must not be truncated while we read it, as with any reader.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|error| Error::in_file(path, format!("cannot map: {error}")))?;
        let data = Bytes::from_owner(map);
        let metadata =
            ArrowReaderMetadata::load(&data, ArrowReaderOptions::new()).map_err(|error| {
                Error::in_file(path, format!("not a readable Parquet file: {error}"))
            })?;
        Ok(ParquetSource {
            path: path.to_path_buf(),
            data,
            metadata,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn schema(&self) -> &SchemaRef {
        self.metadata.schema()
    }

    pub fn parquet_metadata(&self) -> &parquet::file::metadata::ParquetMetaData {
        self.metadata.metadata()
    }

    /// Rows in the file according to its footer.
    pub fn row_count(&self) -> u64 {
        self.parquet_metadata().file_metadata().num_rows().max(0) as u64
    }

    pub fn row_group_count(&self) -> usize {
        self.parquet_metadata().num_row_groups()
    }

    pub fn row_group_rows(&self, row_group: usize) -> u64 {
        self.parquet_metadata()
            .row_group(row_group)
            .num_rows()
            .max(0) as u64
    }

    /// Finds the named columns and checks that each is a supported numeric type. The result is in the
    /// order of the file's schema, which is the order the output keeps.
    pub fn numeric_columns(&self, names: &[String]) -> Result<Vec<NumericColumn>> {
        let schema = self.schema();
        let mut columns = Vec::with_capacity(names.len());
        for name in names {
            let index = schema.index_of(name).map_err(|_| {
                let available: Vec<&str> = schema
                    .fields()
                    .iter()
                    .map(|field| field.name().as_str())
                    .collect();
                Error::in_column(
                    &self.path,
                    name,
                    format!("no such column (the file has: {})", available.join(", ")),
                )
            })?;
            if columns
                .iter()
                .any(|column: &NumericColumn| column.schema_index == index)
            {
                return Err(Error::in_column(&self.path, name, "named twice"));
            }
            let field = schema.field(index);
            let kind = ColumnKind::of(field.data_type()).ok_or_else(|| {
                Error::in_column(
                    &self.path,
                    name,
                    format!("type {} is not numeric", field.data_type()),
                )
            })?;
            columns.push(NumericColumn {
                name: name.clone(),
                schema_index: index,
                kind,
                data_type: field.data_type().clone(),
            });
        }
        columns.sort_by_key(|column| column.schema_index);
        Ok(columns)
    }

    /// A reader of one row group, projected to `columns` (whose batch columns come in schema order).
    pub fn row_group_reader(
        &self,
        row_group: usize,
        columns: &[NumericColumn],
    ) -> Result<ParquetRecordBatchReader> {
        self.row_group_reader_of(row_group, columns.iter().map(|column| column.schema_index))
    }

    /// A reader of one row group, projected to the columns at `schema_indices` (of any type; the batch
    /// columns come in schema order).
    pub fn row_group_reader_of(
        &self,
        row_group: usize,
        schema_indices: impl IntoIterator<Item = usize>,
    ) -> Result<ParquetRecordBatchReader> {
        let mask = ProjectionMask::roots(
            self.metadata.parquet_schema(),
            schema_indices.into_iter().map(|index| self.root_index(index)),
        );
        ParquetRecordBatchReaderBuilder::new_with_metadata(self.data.clone(), self.metadata.clone())
            .with_projection(mask)
            .with_row_groups(vec![row_group])
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|error| Error::in_file(&self.path, format!("row group {row_group}: {error}")))
    }

    /// Arrow top-level fields map one-to-one onto Parquet root columns for the flat tables we accept.
    fn root_index(&self, schema_index: usize) -> usize {
        schema_index
    }
}

/// Whether an Arrow type is one dpsynth reads as a number.
pub fn is_numeric(data_type: &DataType) -> bool {
    ColumnKind::of(data_type).is_some()
}
