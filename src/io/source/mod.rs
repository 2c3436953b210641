//! Reading the input: a Parquet file, or a dataset of them (a directory or a glob, [`dataset`]), read
//! with positioned reads, projected to the asked columns, decoded row group by row group
//! (docs/design.md); or Arrow batches already in memory (the Python package's data frames). The row
//! groups of all files, in file order (or slices of the batches), are the unit of work.
//!
//! Why not a memory map: a file truncated by another process while mapped kills the reader with SIGBUS,
//! which no error path can catch. `pread` into buffers reports the short read as an error instead, at the
//! cost of one copy of each page (small next to decoding it). Pages carrying a CRC are verified.

pub mod column;
pub mod dataset;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

pub use column::{ColumnKind, NumericColumn};

use crate::error::{Error, Result};

/// Rows per decoded batch: large enough to amortise per-batch overhead, small enough that a batch's
/// columns and codes stay in L2.
pub const BATCH_ROWS: usize = 1 << 16;

/// The input: the files of a dataset (one for a plain file), each opened once, and the row groups of
/// all of them in order; or a table already in memory ([`Source::from_batches`], the Python package's
/// data frames), cut into row groups of at most [`BATCH_ROWS`] rows without copying a value.
pub struct Source {
    /// The input as given (a file, a directory or a glob), or the in-memory table's name.
    input: PathBuf,
    /// The first file's fields, then the partition columns; or the in-memory table's fields.
    schema: SchemaRef,
    data: SourceData,
}

enum SourceData {
    Files {
        files: Vec<ParquetFile>,
        /// (file, row group within it) of every row group of the dataset, in order.
        row_groups: Vec<(usize, usize)>,
        partitions: Vec<PartitionColumn>,
    },
    /// Slices of the caller's batches, each a row group.
    Memory(Vec<RecordBatch>),
}

/// A column read from the Hive-style `key=value` folders of a directory input: one value per file,
/// Int64 when every value is an integer, Float64 when every one is a number, else Utf8 (not usable).
struct PartitionColumn {
    field: FieldRef,
    values: Vec<String>,
}

impl Source {
    /// Opens `input`: a Parquet file, a directory (its `*.parquet` files, recursively, in path order) or a
    /// glob ([`dataset::expand_input`]).
    pub fn open(input: &Path) -> Result<Self> {
        Self::open_with(input, false)
    }

    /// [`Source::open`], and with `hive_columns` the `key=value` folders of a directory input
    /// become columns after the files' own (every file must sit under the same keys).
    pub fn open_with(input: &Path, hive_columns: bool) -> Result<Self> {
        let paths = dataset::expand_input(input)?;
        let files = paths.iter().map(|path| ParquetFile::open(path)).collect::<Result<Vec<_>>>()?;
        let row_groups = files
            .iter()
            .enumerate()
            .flat_map(|(file, opened)| (0..opened.row_group_count()).map(move |group| (file, group)))
            .collect();
        let partitions = if hive_columns { partition_columns(input, &paths, files[0].schema())? } else { Vec::new() };
        let fields: Vec<FieldRef> = files[0]
            .schema()
            .fields()
            .iter()
            .cloned()
            .chain(partitions.iter().map(|column| column.field.clone()))
            .collect();
        Ok(Source {
            input: input.to_path_buf(),
            schema: Arc::new(Schema::new(fields)),
            data: SourceData::Files { files, row_groups, partitions },
        })
    }

    /// A table in memory, called `name` in messages and reports: `batches` of `schema` (an Arrow
    /// stream's), sliced into row groups of at most [`BATCH_ROWS`] rows; the values are shared, not copied.
    pub fn from_batches(name: &str, schema: SchemaRef, batches: Vec<RecordBatch>) -> Result<Self> {
        let input = PathBuf::from(name);
        let mut row_groups = Vec::new();
        for batch in batches {
            if batch.schema().fields() != schema.fields() {
                return Err(Error::in_file(
                    &input,
                    "a batch's columns differ from the table's schema (every batch of a stream needs the same columns and types)",
                ));
            }
            let mut start = 0;
            while start < batch.num_rows() {
                let rows = BATCH_ROWS.min(batch.num_rows() - start);
                row_groups.push(batch.slice(start, rows));
                start += rows;
            }
        }
        Ok(Source { input, schema, data: SourceData::Memory(row_groups) })
    }

    /// The input as given, or the in-memory table's name.
    pub fn path(&self) -> &Path {
        &self.input
    }

    /// The dataset's files, in order (one for a plain file; none for a table in memory).
    pub fn files(&self) -> &[ParquetFile] {
        match &self.data {
            SourceData::Files { files, .. } => files,
            SourceData::Memory(_) => &[],
        }
    }

    /// The first file's schema, then the partition columns: the used columns have the same names and
    /// types in every file ([`Source::numeric_columns`] checks).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Rows in all files according to their footers (in the table, for one in memory; in the row groups
    /// kept, for a share of the input).
    pub fn row_count(&self) -> u64 {
        match &self.data {
            SourceData::Files { files, row_groups, .. } => {
                if row_groups.len() == files.iter().map(ParquetFile::row_group_count).sum::<usize>() {
                    files.iter().map(ParquetFile::row_count).sum()
                } else {
                    (0..row_groups.len()).map(|row_group| self.row_group_rows(row_group)).sum()
                }
            }
            SourceData::Memory(groups) => groups.iter().map(|group| group.num_rows() as u64).sum(),
        }
    }

    /// Row groups of all files.
    pub fn row_group_count(&self) -> usize {
        match &self.data {
            SourceData::Files { row_groups, .. } => row_groups.len(),
            SourceData::Memory(groups) => groups.len(),
        }
    }

    pub fn row_group_rows(&self, row_group: usize) -> u64 {
        match &self.data {
            SourceData::Files { files, row_groups, .. } => {
                let (file, group) = row_groups[row_group];
                files[file].row_group_rows(group)
            }
            SourceData::Memory(groups) => groups[row_group].num_rows() as u64,
        }
    }

    /// Where row `row` of row group `row_group` is, in a message's words: its file and "row group G, row R
    /// of the group"; for a table in memory, its name and "row N" (counted from the table's first row).
    pub fn row_place(&self, row_group: usize, row: u64) -> (&Path, String) {
        match &self.data {
            SourceData::Files { .. } => {
                let (file, group) = self.row_group_place(row_group);
                (file, format!("row group {group}, row {row} of the group"))
            }
            SourceData::Memory(groups) => {
                let before: u64 = groups[..row_group].iter().map(|group| group.num_rows() as u64).sum();
                (&self.input, format!("row {}", before + row))
            }
        }
    }

    /// What row group `row_group` weighs as work: its compressed bytes (its rows, for a table in memory).
    pub fn row_group_bytes(&self, row_group: usize) -> u64 {
        match &self.data {
            SourceData::Files { files, row_groups, .. } => {
                let (file, group) = row_groups[row_group];
                files[file].parquet_metadata().row_group(group).compressed_size().max(0) as u64
            }
            SourceData::Memory(groups) => groups[row_group].num_rows() as u64,
        }
    }

    /// Only the row groups `range` of this input (one rank's share of the work); files, schema and
    /// partition columns stay the whole input's, and the row count becomes the share's.
    pub fn keep_row_groups(mut self, range: std::ops::Range<usize>) -> Self {
        match &mut self.data {
            SourceData::Files { row_groups, .. } => *row_groups = row_groups[range].to_vec(),
            SourceData::Memory(groups) => *groups = groups[range].to_vec(),
        }
        self
    }

    /// Where row group `row_group` of the dataset is: its file and its number in that file (what a
    /// message about it names).
    pub fn row_group_place(&self, row_group: usize) -> (&Path, usize) {
        match &self.data {
            SourceData::Files { files, row_groups, .. } => {
                let (file, group) = row_groups[row_group];
                (files[file].path(), group)
            }
            SourceData::Memory(_) => (&self.input, row_group),
        }
    }

    /// Finds the named columns and checks that each is a supported numeric type, of the same type in
    /// every file. The result is in the order of the first file's schema, which is the order the output
    /// keeps.
    pub fn numeric_columns(&self, names: &[String]) -> Result<Vec<NumericColumn>> {
        self.columns_of(names, ColumnTypes::Numeric)
    }

    /// [`Source::numeric_columns`] of any type: a column that is not a number comes back as a number column
    /// of integer kind, for the caller to give its coding ([`crate::io::domain`]) or to refuse.
    pub fn any_columns(&self, names: &[String]) -> Result<Vec<NumericColumn>> {
        self.columns_of(names, ColumnTypes::Any)
    }

    fn columns_of(&self, names: &[String], types: ColumnTypes) -> Result<Vec<NumericColumn>> {
        let SourceData::Files { files, partitions, .. } = &self.data else {
            return numeric_columns_of(&self.input, &self.schema, names, types);
        };
        let (first, others) = files.split_first().expect("a dataset has a file");
        let is_partition = |name: &String| partitions.iter().any(|column| column.field.name() == name);
        let in_files: Vec<String> = names.iter().filter(|name| !is_partition(name)).cloned().collect();
        let mut columns = numeric_columns_of(first.path(), first.schema(), &in_files, types)?;
        for file in others {
            for column in &columns {
                let field = file.schema().field_with_name(&column.name).map_err(|_| {
                    Error::in_column(
                        file.path(),
                        &column.name,
                        format!("no such column in this file of the dataset ({} has it)", first.path().display()),
                    )
                })?;
                if field.data_type() != &column.data_type {
                    return Err(Error::in_column(
                        file.path(),
                        &column.name,
                        format!(
                            "type {} here but {} in {}: every file of a dataset needs the same types",
                            field.data_type(),
                            column.data_type,
                            first.path().display()
                        ),
                    ));
                }
            }
        }
        let file_fields = first.schema().fields().len();
        for (position, partition) in partitions.iter().enumerate() {
            if !names.contains(partition.field.name()) {
                continue;
            }
            let data_type = partition.field.data_type();
            let kind = types.kind(data_type).ok_or_else(|| {
                Error::in_column(
                    &self.input,
                    partition.field.name(),
                    "a key=value folder whose values are not all numbers; dpsynth reads numeric columns",
                )
            })?;
            columns.push(NumericColumn::number(
                partition.field.name().clone(),
                file_fields + position,
                kind,
                data_type.clone(),
            ));
        }
        Ok(columns)
    }

    /// Whether every file's pages carry CRC checksums (verified as they are read); a table in memory
    /// has none.
    pub fn has_page_checksums(&self) -> bool {
        match &self.data {
            SourceData::Files { files, .. } => files.iter().all(ParquetFile::has_page_checksums),
            SourceData::Memory(_) => false,
        }
    }

    /// The decoded batches of one row group of the dataset, projected to `columns` (whose batch columns
    /// come in the first file's schema order).
    pub fn row_group_reader(&self, row_group: usize, columns: &[NumericColumn]) -> Result<RowGroupBatches> {
        self.row_group_reader_of(row_group, columns.iter().map(|column| column.schema_index))
    }

    /// A reader of one row group, projected to the columns at `schema_indices` of the first file's
    /// schema (of any type); the batch columns come in that schema's order, whatever the order of the
    /// columns in the row group's own file (they are found there by name).
    pub fn row_group_reader_of(
        &self,
        row_group: usize,
        schema_indices: impl IntoIterator<Item = usize>,
    ) -> Result<RowGroupBatches> {
        let mut wanted: Vec<usize> = schema_indices.into_iter().collect();
        wanted.sort_unstable();
        let (files, row_groups, partitions) = match &self.data {
            SourceData::Files { files, row_groups, partitions } => (files, row_groups, partitions),
            SourceData::Memory(groups) => {
                let projected = groups[row_group]
                    .project(&wanted)
                    .map_err(|error| Error::internal(format!("projecting a batch in memory: {error}")))?;
                return Ok(RowGroupBatches::in_memory(projected));
            }
        };
        let (file, group) = row_groups[row_group];
        let file_fields = files[0].schema().fields().len();
        let partition_values: Vec<(FieldRef, String)> = wanted
            .iter()
            .filter(|&&index| index >= file_fields)
            .map(|&index| {
                let column = &partitions[index - file_fields];
                (column.field.clone(), column.values[file].clone())
            })
            .collect();
        wanted.retain(|&index| index < file_fields);
        let mut batches = self.file_row_group_reader(files, file, group, wanted)?;
        batches.partitions = partition_values;
        Ok(batches)
    }

    /// The batches of row group `group` of file `file`, projected to `wanted` (ascending indices of the
    /// first file's schema), in that order.
    fn file_row_group_reader(
        &self,
        files: &[ParquetFile],
        file: usize,
        group: usize,
        wanted: Vec<usize>,
    ) -> Result<RowGroupBatches> {
        if file == 0 {
            return files[0].row_group_reader_of(group, wanted);
        }
        let first = self.schema();
        let opened = &files[file];
        let local = wanted
            .iter()
            .map(|&index| {
                let name = first.field(index).name();
                opened
                    .schema()
                    .index_of(name)
                    .map_err(|_| Error::in_column(opened.path(), name, "no such column in this file of the dataset"))
            })
            .collect::<Result<Vec<usize>>>()?;
        // The batch comes in this file's order; position k of the wanted order is the rank of local[k].
        let mut sorted = local.clone();
        sorted.sort_unstable();
        let order: Vec<usize> =
            local.iter().map(|index| sorted.binary_search(index).expect("a projected column")).collect();
        let mut batches = opened.row_group_reader_of(group, local)?;
        if order.iter().enumerate().any(|(position, &at)| position != at) {
            batches.order = Some(order);
        }
        Ok(batches)
    }
}

/// One Parquet file whose footer has been read once.
pub struct ParquetFile {
    path: PathBuf,
    data: PositionedFile,
    metadata: ArrowReaderMetadata,
}

impl ParquetFile {
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|error| Error::in_file(path, format!("cannot open: {error}")))?;
        let opened_length = match file.metadata() {
            Ok(meta) if meta.is_dir() => return Err(Error::in_file(path, "is a directory, not a Parquet file")),
            Ok(meta) => meta.len(),
            Err(error) => return Err(Error::in_file(path, format!("cannot open: {error}"))),
        };
        let data = PositionedFile { file: Arc::new(file), opened_length };
        // The footer decoder is guarded like the pages' (see RowGroupBatches).
        let load = || ArrowReaderMetadata::load(&data, ArrowReaderOptions::new());
        DECODING.with(|decoding| decoding.set(true));
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(load));
        DECODING.with(|decoding| decoding.set(false));
        let metadata = loaded
            .map_err(|_| Error::in_file(path, "not a readable Parquet file: its footer is corrupt"))?
            .map_err(|error| Error::in_file(path, format!("not a readable Parquet file: {error}")))?;
        Ok(ParquetFile { path: path.to_path_buf(), data, metadata })
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
        self.parquet_metadata().row_group(row_group).num_rows().max(0) as u64
    }

    /// Finds the named columns and checks that each is a supported numeric type. The result is in the
    /// order of the file's schema, which is the order the output keeps.
    pub fn numeric_columns(&self, names: &[String]) -> Result<Vec<NumericColumn>> {
        numeric_columns_of(&self.path, self.schema(), names, ColumnTypes::Numeric)
    }

    /// Whether the file's pages carry CRC checksums (judged by the first page of the first column;
    /// writers set them for every page or none). Pages with one are verified as they are read.
    pub fn has_page_checksums(&self) -> bool {
        let metadata = self.parquet_metadata();
        let Some(chunk) = metadata.row_groups().first().and_then(|group| group.columns().first()) else {
            return false;
        };
        let start = chunk.dictionary_page_offset().unwrap_or_else(|| chunk.data_page_offset()).max(0) as u64;
        let mut header = [0u8; 64];
        let read = self.data.get_read(start).and_then(|mut reader| Ok(reader.read(&mut header)?)).unwrap_or(0);
        page_header_has_crc(&header[..read])
    }

    /// A reader of one row group, projected to the columns at `schema_indices` (of any type; the batch
    /// columns come in schema order).
    pub fn row_group_reader_of(
        &self,
        row_group: usize,
        schema_indices: impl IntoIterator<Item = usize>,
    ) -> Result<RowGroupBatches> {
        let mask = ProjectionMask::roots(
            self.metadata.parquet_schema(),
            schema_indices.into_iter().map(|index| self.root_index(index)),
        );
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(self.data.clone(), self.metadata.clone())
            .with_projection(mask)
            .with_row_groups(vec![row_group])
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|error| Error::in_file(&self.path, format!("row group {row_group}: {error}")))?;
        Ok(RowGroupBatches { reader: Some(reader), order: None, partitions: Vec::new(), in_memory: None })
    }

    /// Arrow top-level fields map one-to-one onto Parquet root columns for the flat tables we accept.
    fn root_index(&self, schema_index: usize) -> usize {
        schema_index
    }
}

/// The batches of one row group. A panic of the decoder (arrow and parquet assert on some corrupt
/// inputs: the fuzzing harness found one flipped byte of a zstd file that did) becomes an error for that
/// row group, so corrupt input is bad input, never a crash.
pub struct RowGroupBatches {
    /// `None` once the decoder has failed.
    reader: Option<ParquetRecordBatchReader>,
    /// For a file whose columns come in another order than the first file's: batch column k is the
    /// decoded column order[k].
    order: Option<Vec<usize>>,
    /// Partition columns appended to every batch: their field and this file's value.
    partitions: Vec<(FieldRef, String)>,
    /// A row group in memory: its one (projected) batch, until it is taken.
    in_memory: Option<RecordBatch>,
}

impl RowGroupBatches {
    fn in_memory(batch: RecordBatch) -> Self {
        RowGroupBatches { reader: None, order: None, partitions: Vec::new(), in_memory: Some(batch) }
    }

    /// A decoded batch in the first file's column order, with the partition columns after its own.
    fn arrange(&self, batch: RecordBatch) -> std::result::Result<RecordBatch, ArrowError> {
        let batch = match &self.order {
            Some(order) => batch.project(order)?,
            None => batch,
        };
        if self.partitions.is_empty() {
            return Ok(batch);
        }
        let rows = batch.num_rows();
        let mut fields: Vec<FieldRef> = batch.schema().fields().iter().cloned().collect();
        let mut columns = batch.columns().to_vec();
        for (field, value) in &self.partitions {
            fields.push(field.clone());
            columns.push(constant_column(field.data_type(), value, rows));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
    }
}

impl Iterator for RowGroupBatches {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(batch) = self.in_memory.take() {
            return Some(Ok(batch));
        }
        let reader = self.reader.as_mut()?;
        DECODING.with(|decoding| decoding.set(true));
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.next()));
        DECODING.with(|decoding| decoding.set(false));
        match decoded {
            Ok(Some(Ok(batch))) => Some(self.arrange(batch)),
            Ok(batch) => batch,
            Err(_) => {
                self.reader = None;
                Some(Err(ArrowError::ParquetError("corrupt data made the Parquet decoder fail".to_string())))
            }
        }
    }
}

thread_local! {
    /// Set while this thread runs the page decoder, whose panics become errors.
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs a panic hook that stays silent for the decoder panics [`RowGroupBatches`] turns into
/// errors (the CLI's: a user should see the error, not a backtrace), and reports every other panic as
/// the previous hook did.
pub fn silence_decoder_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !DECODING.with(|decoding| decoding.get()) {
            previous(info);
        }
    }));
}

/// The partition columns of `paths` under the directory `input`, checked: a directory input, the same keys
/// in the same order for every file, no key that is also a column of the files.
fn partition_columns(input: &Path, paths: &[PathBuf], schema: &SchemaRef) -> Result<Vec<PartitionColumn>> {
    if !input.is_dir() {
        return Err(Error::in_file(
            input,
            "--hive-columns reads the key=value folders of a directory input; this input is not a directory",
        ));
    }
    let per_file: Vec<Vec<(String, String)>> = paths.iter().map(|path| dataset::hive_partitions(input, path)).collect();
    let keys: Vec<&String> = per_file[0].iter().map(|(key, _)| key).collect();
    for (path, partitions) in paths.iter().zip(&per_file) {
        let these: Vec<&String> = partitions.iter().map(|(key, _)| key).collect();
        if these != keys {
            return Err(Error::in_file(
                path,
                format!(
                    "its folders give the partition keys [{}] but {} has [{}]: every file needs the same keys",
                    these.iter().map(|key| key.as_str()).collect::<Vec<_>>().join(", "),
                    paths[0].display(),
                    keys.iter().map(|key| key.as_str()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    let mut columns = Vec::with_capacity(keys.len());
    for (position, key) in keys.iter().enumerate() {
        if schema.field_with_name(key).is_ok() {
            return Err(Error::in_column(
                &paths[0],
                key.as_str(),
                "is both a column of the files and a key=value folder; rename one",
            ));
        }
        let values: Vec<String> = per_file.iter().map(|partitions| partitions[position].1.clone()).collect();
        let data_type = if values.iter().all(|value| value.parse::<i64>().is_ok()) {
            DataType::Int64
        } else if values.iter().all(|value| value.parse::<f64>().is_ok_and(f64::is_finite)) {
            DataType::Float64
        } else {
            DataType::Utf8
        };
        columns.push(PartitionColumn { field: Arc::new(Field::new(key.as_str(), data_type, false)), values });
    }
    Ok(columns)
}

/// Which column types a caller reads.
#[derive(Clone, Copy)]
enum ColumnTypes {
    Numeric,
    /// Any type; the ones that are not numbers as integer codes.
    Any,
}

impl ColumnTypes {
    fn kind(self, data_type: &DataType) -> Option<ColumnKind> {
        match self {
            ColumnTypes::Numeric => ColumnKind::of(data_type),
            ColumnTypes::Any => Some(ColumnKind::of(data_type).unwrap_or(ColumnKind::Integer)),
        }
    }
}

/// `rows` copies of a partition value, as an array of its column's type.
fn constant_column(data_type: &DataType, value: &str, rows: usize) -> ArrayRef {
    match data_type {
        DataType::Int64 => Arc::new(Int64Array::from_value(value.parse().expect("checked integer"), rows)),
        DataType::Float64 => Arc::new(Float64Array::from_value(value.parse().expect("checked number"), rows)),
        _ => Arc::new(StringArray::from_iter_values(std::iter::repeat_n(value, rows))),
    }
}

/// The named columns of `schema` (of the input called `place` in messages), each checked to be a supported
/// numeric type, in schema order (the order the output keeps).
fn numeric_columns_of(
    place: &Path,
    schema: &SchemaRef,
    names: &[String],
    types: ColumnTypes,
) -> Result<Vec<NumericColumn>> {
    let mut columns = Vec::with_capacity(names.len());
    for name in names {
        let index = schema
            .index_of(name)
            .map_err(|_| Error::in_column(place, name, no_such_column(name, &field_names(schema), "")))?;
        if columns.iter().any(|column: &NumericColumn| column.schema_index == index) {
            return Err(Error::in_column(place, name, "named twice"));
        }
        let namesakes = schema.fields().iter().filter(|field| field.name() == name).count();
        if namesakes > 1 {
            return Err(Error::in_column(
                place,
                name,
                format!("the input has {namesakes} columns of this name; rename them apart first"),
            ));
        }
        let field = schema.field(index);
        let kind = types
            .kind(field.data_type())
            .ok_or_else(|| Error::in_column(place, name, unsupported_type(field.data_type())))?;
        columns.push(NumericColumn::number(name.clone(), index, kind, field.data_type().clone()));
    }
    columns.sort_by_key(|column| column.schema_index);
    Ok(columns)
}

/// Whether an Arrow type is one dpsynth reads as a number.
pub fn is_numeric(data_type: &DataType) -> bool {
    ColumnKind::of(data_type).is_some()
}

/// The names of `schema`'s columns, in order.
pub fn field_names(schema: &SchemaRef) -> Vec<&str> {
    schema.fields().iter().map(|field| field.name().as_str()).collect()
}

/// "no such column" for `name` (with `why` it was named), the input's closest names first (a likely typo),
/// then the input's columns (the first 20).
pub fn no_such_column(name: &str, columns: &[impl AsRef<str>], why: &str) -> String {
    const LISTED: usize = 20;
    let names: Vec<&str> = columns.iter().map(AsRef::as_ref).collect();
    let typo_distance = (name.chars().count() / 3).max(1);
    let mut closest: Vec<(usize, &str)> = names
        .iter()
        .map(|&candidate| (strsim::damerau_levenshtein(&name.to_lowercase(), &candidate.to_lowercase()), candidate))
        .filter(|&(distance, _)| distance <= typo_distance)
        .collect();
    closest.sort();
    let mut message = format!("no such column{why}");
    if !closest.is_empty() {
        let quoted: Vec<String> = closest.iter().take(3).map(|(_, candidate)| format!("'{candidate}'")).collect();
        message += &format!("; did you mean {}?", quoted.join(" or "));
    }
    let more = names.len().saturating_sub(LISTED);
    message += &format!(
        " (the input has: {}{})",
        names[..names.len().min(LISTED)].join(", "),
        if more > 0 { format!(" and {more} more") } else { String::new() }
    );
    message
}

/// Why a column's type cannot be read as a number, naming what it is.
pub fn unsupported_type(data_type: &DataType) -> String {
    match data_type {
        DataType::Dictionary(_, values) if is_numeric(values) => format!(
            "type {data_type} is dictionary-encoded {values}; dpsynth reads plain numeric columns: write it \
             without dictionary encoding (or cast it to {values}) first"
        ),
        DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..) => {
            format!(
                "type {data_type} is a decimal; dpsynth reads integer, float, date, timestamp, time and duration \
             columns: cast it to float64 (or a scaled integer) first"
            )
        }
        DataType::Float16 => format!(
            "type {data_type} is a half-precision float; dpsynth reads float32 and float64: cast it to float32 first"
        ),
        _ => format!("type {data_type} is not numeric"),
    }
}

/// Whether a Thrift-compact PageHeader starts with its three required i32 fields (type, uncompressed and
/// compressed size) followed by field 4, the optional i32 `crc`.
fn page_header_has_crc(bytes: &[u8]) -> bool {
    const I32_NEXT_FIELD: u8 = 0x15; // field-id delta 1, compact type i32
    let mut position = 0;
    for _ in 0..3 {
        if bytes.get(position) != Some(&I32_NEXT_FIELD) {
            return false;
        }
        position += 1;
        // A varint: continuation bit set on every byte but the last.
        while bytes.get(position).is_some_and(|byte| byte & 0x80 != 0) {
            position += 1;
        }
        position += 1;
    }
    bytes.get(position) == Some(&I32_NEXT_FIELD)
}

/// The input file, read with positioned reads (`pread`): many readers share it without seeking, and a
/// file that shrank since it was opened gives an error naming the change (never a SIGBUS).
#[derive(Clone)]
struct PositionedFile {
    file: Arc<File>,
    opened_length: u64,
}

impl PositionedFile {
    fn read_exact_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
        #[cfg(unix)]
        {
            std::os::unix::fs::FileExt::read_exact_at(&*self.file, buffer, offset)
        }
        #[cfg(windows)]
        {
            let mut done = 0;
            while done < buffer.len() {
                let read =
                    std::os::windows::fs::FileExt::seek_read(&*self.file, &mut buffer[done..], offset + done as u64)?;
                if read == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                done += read;
            }
            Ok(())
        }
    }

    /// The error of a read that came back short: the file changed under us, or its footer lies.
    fn short_read(&self, offset: u64, length: usize) -> ParquetError {
        let now = self.file.metadata().map(|meta| meta.len()).unwrap_or(0);
        if now != self.opened_length {
            ParquetError::EOF(format!(
                "the file changed while being read: it was {} bytes when opened and is now {now}",
                self.opened_length
            ))
        } else {
            ParquetError::EOF(format!("{length} bytes at offset {offset} lie past the end of the file ({now} bytes)"))
        }
    }
}

impl Length for PositionedFile {
    fn len(&self) -> u64 {
        self.opened_length
    }
}

impl ChunkReader for PositionedFile {
    // Buffered: the Thrift decoder of page headers reads a few bytes at a time.
    type T = std::io::BufReader<PositionedReader>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(std::io::BufReader::new(PositionedReader { file: self.clone(), position: start }))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        // A corrupt page header can claim gigabytes: refuse before allocating what the file cannot hold.
        if start.saturating_add(length as u64) > self.opened_length {
            return Err(self.short_read(start, length));
        }
        let mut buffer = vec![0u8; length];
        self.read_exact_at(&mut buffer, start).map_err(|_| self.short_read(start, length))?;
        Ok(Bytes::from(buffer))
    }
}

/// A reader from an offset of a [`PositionedFile`] (for page headers, whose length is not known ahead).
struct PositionedReader {
    file: PositionedFile,
    position: u64,
}

impl Read for PositionedReader {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let end = self.file.opened_length;
        let wanted = (buffer.len() as u64).min(end.saturating_sub(self.position)) as usize;
        if wanted == 0 {
            return Ok(0);
        }
        self.file
            .read_exact_at(&mut buffer[..wanted], self.position)
            .map_err(|_| std::io::Error::other(self.file.short_read(self.position, wanted)))?;
        self.position += wanted as u64;
        Ok(wanted)
    }
}
