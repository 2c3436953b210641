//! Loading the evaluated columns of a Parquet file as points of [0,1]^d, normalised by the public bounds.
//!
//! Row groups are decoded in parallel on the current rayon pool and concatenated in file order, so the
//! points (and every number computed from them) do not depend on the thread count.

use std::path::{Path, PathBuf};

use arrow::array::Array;
use rayon::prelude::*;

use crate::binner::NullPolicy;
use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::io::source::column::AsF64;
use crate::io::source::column::NumericValues;
use crate::io::source::Source;

/// The used columns of one file, row-major in normalised units.
#[derive(Clone, Debug)]
pub struct Table {
    pub file: PathBuf,
    /// Columns in the order of `points`' coordinates.
    pub bounds: Vec<ColumnBounds>,
    /// Row i is `points[i·d .. (i+1)·d]`, each coordinate in [0, 1] (clamped to the bounds).
    pub points: Vec<f64>,
    /// Values outside their column's bounds, clamped, per column (rows kept only).
    pub clamped_values: Vec<u64>,
    /// Rows left out for a null, NaN or infinite value (`NullPolicy::Drop`).
    pub dropped_rows: u64,
}

impl Table {
    pub fn dims(&self) -> usize {
        self.bounds.len()
    }

    pub fn rows(&self) -> usize {
        self.points.len() / self.dims()
    }
}

/// What loading one row group found.
struct PartStats {
    kept_rows: usize,
    clamped_values: Vec<u64>,
    dropped_rows: u64,
}

/// Reads the columns named by `bounds` (in that order) from `path`. Every column must exist and be numeric;
/// values outside the bounds are clamped and counted; a null, NaN or infinite value is an error naming the
/// file, column and row (or, with `NullPolicy::Drop`, its row is left out and counted).
/// With `hive_columns`, a directory input's key=value folders are columns too.
pub fn load_table(path: &Path, hive_columns: bool, bounds: &[ColumnBounds], nulls: NullPolicy) -> Result<Table> {
    if bounds.is_empty() {
        return Err(Error::bad_input(
            "no columns to evaluate: give --bounds COLUMN=LO:HI for each (or a config file with [bounds])",
        ));
    }
    load_source(&Source::open_with(path, hive_columns)?, bounds, nulls)
}

/// [`load_table`] from an opened input (a Parquet dataset, or a table in memory).
pub fn load_source(source: &Source, bounds: &[ColumnBounds], nulls: NullPolicy) -> Result<Table> {
    if bounds.is_empty() {
        return Err(Error::bad_input(
            "no columns to evaluate: give --bounds COLUMN=LO:HI for each (or a config file with [bounds])",
        ));
    }
    let path = source.path();
    let names: Vec<String> = bounds.iter().map(|b| b.column.clone()).collect();
    let columns = source.numeric_columns(&names)?;
    // `columns` is in schema order, the reader's batch order; axis k of the points is `bounds[k]`.
    let batch_position: Vec<usize> = names
        .iter()
        .map(|name| {
            columns
                .iter()
                .position(|column| &column.name == name)
                .ok_or_else(|| Error::internal(format!("column '{name}' was resolved but is missing")))
        })
        .collect::<Result<_>>()?;
    let dims = bounds.len();
    // Each row group decodes straight into its own slice of the table (sizes from the footer).
    let group_rows: Vec<usize> =
        (0..source.row_group_count()).map(|row_group| source.row_group_rows(row_group) as usize).collect();
    let mut points = vec![0.0; group_rows.iter().sum::<usize>() * dims];
    let mut slices = Vec::with_capacity(group_rows.len());
    let mut rest = points.as_mut_slice();
    for &rows in &group_rows {
        let (slice, tail) = rest.split_at_mut(rows * dims);
        slices.push(slice);
        rest = tail;
    }
    let parts: Vec<PartStats> = slices
        .into_par_iter()
        .enumerate()
        .map(|(row_group, out)| load_row_group(source, row_group, &columns, &batch_position, bounds, nulls, out))
        .collect::<Result<_>>()?;
    let mut table = Table {
        file: path.to_path_buf(),
        bounds: bounds.to_vec(),
        points: Vec::new(),
        clamped_values: vec![0; dims],
        dropped_rows: 0,
    };
    // Close the gaps that dropped rows left at the end of their row groups' slices.
    let (mut read, mut write) = (0, 0);
    for (part, rows) in parts.iter().zip(&group_rows) {
        let kept = part.kept_rows * dims;
        points.copy_within(read..read + kept, write);
        write += kept;
        read += rows * dims;
        for (total, clamped) in table.clamped_values.iter_mut().zip(&part.clamped_values) {
            *total += clamped;
        }
        table.dropped_rows += part.dropped_rows;
    }
    points.truncate(write);
    table.points = points;
    if table.points.is_empty() {
        return Err(Error::in_file(
            path,
            if table.dropped_rows > 0 {
                "every row has a null, NaN or infinite value in an evaluated column"
            } else {
                "has no rows"
            },
        ));
    }
    Ok(table)
}

/// Decodes one row group into `out` (its rows × d slots); kept rows come first.
fn load_row_group(
    source: &Source,
    row_group: usize,
    columns: &[crate::io::source::NumericColumn],
    batch_position: &[usize],
    bounds: &[ColumnBounds],
    nulls: NullPolicy,
    out: &mut [f64],
) -> Result<PartStats> {
    let dims = bounds.len();
    let mut stats = PartStats { kept_rows: 0, clamped_values: vec![0; dims], dropped_rows: 0 };
    let mut first_row = 0usize;
    for batch in source.row_group_reader(row_group, columns)? {
        let batch = batch.map_err(|error| {
            let (file, group) = source.row_group_place(row_group);
            Error::in_file(file, format!("row group {group} cannot be decoded: {error}"))
        })?;
        let rows = batch.num_rows();
        let start = stats.kept_rows * dims;
        let units = out.get_mut(start..start + rows * dims).ok_or_else(|| {
            let (file, group) = source.row_group_place(row_group);
            Error::in_file(file, format!("row group {group} has more rows than its footer says"))
        })?;
        // Unclamped normalised values, NaN for a null: clamping and validity are decided below.
        for (axis, column_bounds) in bounds.iter().enumerate() {
            let array = batch.column(batch_position[axis]);
            let values = NumericValues::of(array.as_ref()).ok_or_else(|| {
                Error::internal(format!("column '{}' decoded as {}", column_bounds.column, array.data_type()))
            })?;
            normalise_values(&values, column_bounds, &mut units[axis..], dims);
            if let Some(validity) = array.logical_nulls() {
                for row in (0..rows).filter(|&row| validity.is_null(row)) {
                    units[row * dims + axis] = f64::NAN;
                }
            }
        }
        let mut kept = 0;
        let all_valid = units.iter().all(|unit| unit.is_finite());
        for row in 0..rows {
            let values = row * dims..(row + 1) * dims;
            if !all_valid {
                if let Some(axis) = units[values.clone()].iter().position(|unit| !unit.is_finite()) {
                    match nulls {
                        NullPolicy::Error | NullPolicy::Keep => {
                            return Err(invalid_value_error(
                                source,
                                row_group,
                                first_row + row,
                                &batch,
                                batch_position[axis],
                                &bounds[axis].column,
                                row,
                            ))
                        }
                        NullPolicy::Drop => {
                            stats.dropped_rows += 1;
                            continue;
                        }
                    }
                }
                units.copy_within(values.clone(), kept * dims);
            }
            for (unit, clamped) in units[kept * dims..(kept + 1) * dims].iter_mut().zip(&mut stats.clamped_values) {
                // Rounding is monotone, so lo ≤ v ≤ hi gives a unit in [0, 1]: only values outside count.
                *clamped += u64::from(!(0.0..=1.0).contains(unit));
                *unit = unit.clamp(0.0, 1.0);
            }
            kept += 1;
        }
        stats.kept_rows += kept;
        first_row += rows;
    }
    Ok(stats)
}

/// Names the bad value of `row` in the batch column `position` (file, column, row group, row).
fn invalid_value_error(
    source: &Source,
    row_group: usize,
    group_row: usize,
    batch: &arrow::record_batch::RecordBatch,
    position: usize,
    column: &str,
    row: usize,
) -> Error {
    let array = batch.column(position);
    let what = if array.is_null(row) {
        "a null"
    } else if crate::io::source::column::value_as_f64(array.as_ref(), row).is_nan() {
        "NaN"
    } else {
        "an infinite value"
    };
    let (file, place) = source.row_place(row_group, group_row as u64);
    Error::in_column(file, column, format!("{what} in {place}; pass --nulls drop to leave such rows out"))
}

/// Writes (v − lo)/(hi − lo) of every value to `out[row·stride]` (non-finite stays non-finite).
fn normalise_values(values: &NumericValues, bounds: &ColumnBounds, out: &mut [f64], stride: usize) {
    fn each<T: AsF64>(values: &[T], bounds: &ColumnBounds, out: &mut [f64], stride: usize) {
        let width = bounds.hi - bounds.lo;
        for (value, unit) in values.iter().zip(out.iter_mut().step_by(stride)) {
            *unit = (value.as_f64() - bounds.lo) / width;
        }
    }
    match values {
        NumericValues::F32(values) => each(values, bounds, out, stride),
        NumericValues::F64(values) => each(values, bounds, out, stride),
        NumericValues::I8(values) => each(values, bounds, out, stride),
        NumericValues::I16(values) => each(values, bounds, out, stride),
        NumericValues::I32(values) => each(values, bounds, out, stride),
        NumericValues::I64(values) => each(values, bounds, out, stride),
        NumericValues::U8(values) => each(values, bounds, out, stride),
        NumericValues::U16(values) => each(values, bounds, out, stride),
        NumericValues::U32(values) => each(values, bounds, out, stride),
        NumericValues::U64(values) => each(values, bounds, out, stride),
    }
}
