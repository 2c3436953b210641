//! Loading the evaluated columns of a Parquet file as points of [0,1]^d, normalised by the public bounds.
//!
//! Row groups are decoded in parallel on the current rayon pool and concatenated in file order, so the
//! points (and every number computed from them) do not depend on the thread count.

use std::path::{Path, PathBuf};

use arrow::array::Array;
use rayon::prelude::*;

use crate::binner::{AsF64, NullPolicy};
use crate::bounds::ColumnBounds;
use crate::error::{Error, Result};
use crate::source::column::NumericValues;
use crate::source::ParquetSource;

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

/// One row group's share of a [`Table`].
struct Part {
    points: Vec<f64>,
    clamped_values: Vec<u64>,
    dropped_rows: u64,
}

/// Reads the columns named by `bounds` (in that order) from `path`. Every column must exist and be numeric;
/// values outside the bounds are clamped and counted; a null, NaN or infinite value is an error naming the
/// file, column and row (or, with `NullPolicy::Drop`, its row is left out and counted).
pub fn load_table(path: &Path, bounds: &[ColumnBounds], nulls: NullPolicy) -> Result<Table> {
    if bounds.is_empty() {
        return Err(Error::bad_input(
            "no columns to evaluate: give --bounds COLUMN=LO:HI for each (or a config file with [bounds])",
        ));
    }
    let source = ParquetSource::open(path)?;
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
    let parts: Vec<Part> = (0..source.row_group_count())
        .into_par_iter()
        .map(|row_group| {
            load_row_group(&source, row_group, &columns, &batch_position, bounds, nulls)
        })
        .collect::<Result<_>>()?;
    let dims = bounds.len();
    let mut table = Table {
        file: path.to_path_buf(),
        bounds: bounds.to_vec(),
        points: Vec::with_capacity(parts.iter().map(|part| part.points.len()).sum()),
        clamped_values: vec![0; dims],
        dropped_rows: 0,
    };
    for part in parts {
        table.points.extend_from_slice(&part.points);
        for (total, clamped) in table.clamped_values.iter_mut().zip(&part.clamped_values) {
            *total += clamped;
        }
        table.dropped_rows += part.dropped_rows;
    }
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

fn load_row_group(
    source: &ParquetSource,
    row_group: usize,
    columns: &[crate::source::NumericColumn],
    batch_position: &[usize],
    bounds: &[ColumnBounds],
    nulls: NullPolicy,
) -> Result<Part> {
    let dims = bounds.len();
    let mut part = Part {
        points: Vec::with_capacity(source.row_group_rows(row_group) as usize * dims),
        clamped_values: vec![0; dims],
        dropped_rows: 0,
    };
    let mut batch_units = Vec::new();
    let mut first_row = 0u64;
    for batch in source.row_group_reader(row_group, columns)? {
        let batch = batch.map_err(|error| {
            Error::in_file(
                source.path(),
                format!("row group {row_group} cannot be decoded: {error}"),
            )
        })?;
        let rows = batch.num_rows();
        batch_units.clear();
        batch_units.resize(rows * dims, 0.0);
        // Unclamped normalised values, NaN for a null: clamping and validity are decided per row below.
        for (axis, column_bounds) in bounds.iter().enumerate() {
            let array = batch.column(batch_position[axis]);
            let values = NumericValues::of(array.as_ref()).ok_or_else(|| {
                Error::internal(format!(
                    "column '{}' decoded as {}",
                    column_bounds.column,
                    array.data_type()
                ))
            })?;
            normalise_values(&values, column_bounds, &mut batch_units[axis..], dims);
            if let Some(validity) = array.logical_nulls() {
                for row in (0..rows).filter(|&row| validity.is_null(row)) {
                    batch_units[row * dims + axis] = f64::NAN;
                }
            }
        }
        for (row, units) in batch_units.chunks_exact_mut(dims).enumerate() {
            if let Some(axis) = units.iter().position(|unit| !unit.is_finite()) {
                match nulls {
                    NullPolicy::Error => {
                        let array = batch.column(batch_position[axis]);
                        let what = if array.is_null(row) {
                            "a null"
                        } else if crate::source::column::value_as_f64(array.as_ref(), row).is_nan() {
                            "NaN"
                        } else {
                            "an infinite value"
                        };
                        return Err(Error::in_column(
                            source.path(),
                            &bounds[axis].column,
                            format!(
                                "{what} in row group {row_group}, row {} of the group; pass --nulls drop to leave such rows out",
                                first_row + row as u64
                            ),
                        ));
                    }
                    NullPolicy::Drop => {
                        part.dropped_rows += 1;
                        continue;
                    }
                }
            }
            for (unit, clamped) in units.iter_mut().zip(&mut part.clamped_values) {
                // Rounding is monotone, so lo ≤ v ≤ hi gives a unit in [0, 1]: only values outside count.
                *clamped += u64::from(!(0.0..=1.0).contains(unit));
                *unit = unit.clamp(0.0, 1.0);
            }
            part.points.extend_from_slice(units);
        }
        first_row += rows as u64;
    }
    Ok(part)
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
