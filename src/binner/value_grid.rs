//! The pass `--private-bounds` reads before the mechanism's plan: each column's finite values counted in
//! the buckets of its public grid ([`BoundsGrid`]), row groups in parallel. Nothing else of the data is
//! read: the counts are all the bounds release sees. Nulls, NaN and infinities count nowhere (the
//! mechanism's own pass applies `--nulls` to them).

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::io::source::column::{AsF64, NumericValues};
use crate::io::source::{NumericColumn, Source};
use crate::privacy::private_bounds::{BoundsGrid, GridCounts};
use crate::progress::Progress;

/// The grid counts of `columns` (in schema order), column k on `grids[k]`.
pub fn grid_counts(
    source: &Source,
    columns: &[NumericColumn],
    grids: &[BoundsGrid],
    progress: &Progress,
) -> Result<Vec<GridCounts>> {
    let bar = progress.phase("bounds", source.row_count(), "rows");
    let empty = || grids.iter().map(|grid| vec![0u64; grid.buckets()]).collect::<Vec<_>>();
    let counts = (0..source.row_group_count())
        .into_par_iter()
        .map(|row_group| {
            let mut counts = empty();
            for batch in source.row_group_reader(row_group, columns)? {
                let batch = batch.map_err(|error| {
                    let (file, group) = source.row_group_place(row_group);
                    Error::in_file(file, format!("row group {group} cannot be decoded: {error}"))
                })?;
                for (k, (column, grid)) in columns.iter().zip(grids).enumerate() {
                    let array = batch.column(k);
                    let values = NumericValues::of(array.as_ref()).ok_or_else(|| {
                        Error::internal(format!("column '{}' decoded as {}", column.name, array.data_type()))
                    })?;
                    count_values(&values, array.logical_nulls().as_ref(), grid, &mut counts[k]);
                }
                bar.advance(batch.num_rows() as u64)?;
            }
            Ok(counts)
        })
        .try_reduce(empty, |mut total, part| {
            for (total, part) in total.iter_mut().zip(part) {
                total.iter_mut().zip(part).for_each(|(total, count)| *total += count);
            }
            Ok(total)
        })?;
    bar.finish();
    Ok(counts.into_iter().map(GridCounts::new).collect())
}

fn count_values(
    values: &NumericValues,
    nulls: Option<&arrow::buffer::NullBuffer>,
    grid: &BoundsGrid,
    counts: &mut [u64],
) {
    macro_rules! each {
        ($values:expr) => {
            count_slice($values, nulls, grid, counts)
        };
    }
    match values {
        NumericValues::F32(values) => each!(values),
        NumericValues::F64(values) => each!(values),
        NumericValues::I8(values) => each!(values),
        NumericValues::I16(values) => each!(values),
        NumericValues::I32(values) => each!(values),
        NumericValues::I64(values) => each!(values),
        NumericValues::U8(values) => each!(values),
        NumericValues::U16(values) => each!(values),
        NumericValues::U32(values) => each!(values),
        NumericValues::U64(values) => each!(values),
    }
}

fn count_slice<T: AsF64>(
    values: &[T],
    nulls: Option<&arrow::buffer::NullBuffer>,
    grid: &BoundsGrid,
    counts: &mut [u64],
) {
    for (row, &value) in values.iter().enumerate() {
        let value = value.as_f64();
        if value.is_finite() && nulls.is_none_or(|nulls| nulls.is_valid(row)) {
            counts[grid.bucket(value)] += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Float64Array, Int32Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use std::sync::Arc;

    #[test]
    fn every_finite_value_counts_once_in_its_bucket() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("x", DataType::Float64, true),
            Field::new("k", DataType::Int32, false),
        ]));
        let x: Float64Array = vec![Some(-3.0), None, Some(f64::NAN), Some(0.5), Some(2.0), Some(f64::INFINITY)].into();
        let k: Int32Array = vec![1, 2, 3, 4, 5, 6].into();
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(x) as ArrayRef, Arc::new(k)]).unwrap();
        let source = Source::from_batches("table", schema, vec![batch.clone(), batch]).unwrap();
        let columns = source.numeric_columns(&["x".into(), "k".into()]).unwrap();
        let grid = BoundsGrid::new(vec![0.0, 1.0, 2.0]).unwrap();
        let counts = grid_counts(&source, &columns, &[grid.clone(), grid], &Progress::hidden()).unwrap();
        // x: −3 below 0, 0.5 between 0 and 1, 2 on the last point; null, NaN and ∞ nowhere.
        assert_eq!(counts[0].buckets(), [2, 0, 2, 0, 0, 2, 0]);
        // k: 1 and 2 on points, 3..6 above.
        assert_eq!(counts[1].buckets(), [0, 0, 0, 2, 0, 2, 8]);
    }
}
