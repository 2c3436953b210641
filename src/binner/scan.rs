//! The binning pass: row groups decoded in parallel, each worker folding its batches straight into its
//! own histogram (docs/design.md). Never holds more than one batch of columns per thread.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use arrow::array::Array;
use arrow::record_batch::RecordBatch;

use super::{
    quantize_values, AxisPlan, Binner, BinnerWorker, NullPolicy, ROW_CLAMPED, ROW_INVALID,
};
use crate::error::{Error, Result};
use crate::progress::{PhaseBar, Timings};
use crate::ranks::RankSums;
use crate::io::domain::{code_values, Unreadable};
use crate::io::source::column::NumericValues;
use crate::io::source::{NumericColumn, Source};

/// What the pass saw. Owner-only diagnostics: none of this is ever released.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScanStats {
    pub rows_read: u64,
    pub rows_binned: u64,
    /// Rows left out for a null, NaN or infinite value (`--nulls drop`).
    pub rows_dropped: u64,
    /// Rows with at least one value clamped to the bounds.
    pub rows_clamped: u64,
    /// Clamped values per column, in column order.
    pub clamped_values: Vec<u64>,
}

impl ScanStats {
    /// What every rank's scan saw, added up (each rank passes its own).
    pub fn summed_over(self, ranks: &dyn RankSums) -> ScanStats {
        let mut values = vec![self.rows_read, self.rows_binned, self.rows_dropped, self.rows_clamped];
        values.extend(&self.clamped_values);
        ranks.sum(&mut values);
        ScanStats {
            rows_read: values[0],
            rows_binned: values[1],
            rows_dropped: values[2],
            rows_clamped: values[3],
            clamped_values: values[4..].to_vec(),
        }
    }

    fn merge(mut self, other: ScanStats) -> ScanStats {
        self.rows_read += other.rows_read;
        self.rows_binned += other.rows_binned;
        self.rows_dropped += other.rows_dropped;
        self.rows_clamped += other.rows_clamped;
        if self.clamped_values.is_empty() {
            self.clamped_values = other.clamped_values;
        } else {
            for (mine, theirs) in self.clamped_values.iter_mut().zip(other.clamped_values) {
                *mine += theirs;
            }
        }
        self
    }
}

/// Per-thread buffers reused across batches.
struct Scratch {
    indices: Vec<Vec<u32>>,
    flags: Vec<u8>,
}

/// Reads every row group of `source` on the current rayon pool and returns the leaf histogram.
/// `columns` and `axes` are in the same (schema) order.
pub fn scan_leaf_counts<B: Binner>(
    source: &Source,
    columns: &[NumericColumn],
    axes: &[AxisPlan],
    nulls: NullPolicy,
    binner: &B,
    progress: &PhaseBar,
    timings: &mut Timings,
) -> Result<(Vec<u64>, ScanStats)> {
    let (workers, stats) = timings.time("read and bin", || {
        scan_quantised_rows(source, columns, axes, nulls, &|| binner.worker(), progress)
    })?;
    let leaves = timings.time("merge", || binner.finish(workers))?;
    Ok((leaves, stats))
}

/// The pass itself: every row group of `source` decoded on the current rayon pool, quantised by
/// `axes` (bounds clamp, `--nulls` policy, stats) and fed to one worker per thread, made by
/// `new_worker`; returns the workers for the caller to merge. Binning is one use; `lowdim` folds
/// the same quantised rows into exact Gram sums, or projects them before binning.
pub fn scan_quantised_rows<W: BinnerWorker>(
    source: &Source,
    columns: &[NumericColumn],
    axes: &[AxisPlan],
    nulls: NullPolicy,
    new_worker: &(dyn Fn() -> Result<W> + Sync),
    progress: &PhaseBar,
) -> Result<(Vec<W>, ScanStats)> {
    let row_groups = source.row_group_count();
    let next_row_group = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let outcomes: Vec<Result<(W, ScanStats)>> = rayon::broadcast(|_| {
        let mut worker = new_worker()?;
        let mut stats = ScanStats {
            clamped_values: vec![0; columns.len()],
            ..ScanStats::default()
        };
        let mut scratch = Scratch {
            indices: vec![Vec::new(); columns.len()],
            flags: Vec::new(),
        };
        while !failed.load(Ordering::Relaxed) {
            let row_group = next_row_group.fetch_add(1, Ordering::Relaxed);
            if row_group >= row_groups {
                break;
            }
            let scanned = scan_row_group(
                source,
                row_group,
                columns,
                axes,
                nulls,
                &mut worker,
                &mut stats,
                &mut scratch,
                progress,
            );
            if let Err(error) = scanned {
                failed.store(true, Ordering::Relaxed);
                return Err(error);
            }
        }
        Ok((worker, stats))
    });
    let mut workers = Vec::with_capacity(outcomes.len());
    let mut stats = ScanStats::default();
    for outcome in outcomes {
        let (worker, worker_stats) = outcome?;
        workers.push(worker);
        stats = stats.merge(worker_stats);
    }
    Ok((workers, stats))
}

#[allow(clippy::too_many_arguments)]
fn scan_row_group<W: BinnerWorker>(
    source: &Source,
    row_group: usize,
    columns: &[NumericColumn],
    axes: &[AxisPlan],
    nulls: NullPolicy,
    worker: &mut W,
    stats: &mut ScanStats,
    scratch: &mut Scratch,
    progress: &PhaseBar,
) -> Result<()> {
    let mut first_row = 0u64;
    for batch in source.row_group_reader(row_group, columns)? {
        let batch = batch.map_err(|error| {
            let (file, group) = source.row_group_place(row_group);
            Error::in_file(file, format!("row group {group} cannot be decoded: {error}"))
        })?;
        let rows = batch.num_rows();
        scratch.flags.clear();
        scratch.flags.resize(rows, 0);
        for (axis, plan) in axes.iter().enumerate() {
            let column = &columns[axis];
            let array = if column.is_plain_number() {
                batch.column(axis).clone()
            } else {
                code_values(&column.coding, column.nulls, batch.column(axis))
                    .map_err(|unreadable| unreadable_error(source, row_group, first_row, column, unreadable))?
            };
            let values = NumericValues::of(array.as_ref()).ok_or_else(|| {
                Error::internal(format!(
                    "column '{}' decoded as {}",
                    columns[axis].name,
                    array.data_type()
                ))
            })?;
            let indices = &mut scratch.indices[axis];
            indices.clear();
            indices.resize(rows, 0);
            stats.clamped_values[axis] += quantize_values(
                &values,
                array.logical_nulls().as_ref(),
                plan,
                indices,
                &mut scratch.flags,
            );
        }
        let invalid = scratch
            .flags
            .iter()
            .filter(|&&flag| flag & ROW_INVALID != 0)
            .count();
        if invalid > 0 {
            match nulls {
                NullPolicy::Error | NullPolicy::Keep => {
                    return Err(invalid_value_error(
                        source,
                        row_group,
                        first_row,
                        &batch,
                        columns,
                        &scratch.flags,
                    ))
                }
                NullPolicy::Drop => drop_invalid_rows(scratch),
            }
        }
        stats.rows_read += rows as u64;
        stats.rows_dropped += invalid as u64;
        stats.rows_binned += (rows - invalid) as u64;
        stats.rows_clamped += scratch
            .flags
            .iter()
            .filter(|&&flag| flag & ROW_CLAMPED != 0)
            .count() as u64;
        let slices: Vec<&[u32]> = scratch.indices.iter().map(Vec::as_slice).collect();
        worker.add_batch(&slices)?;
        progress.advance(rows as u64)?;
        first_row += rows as u64;
    }
    Ok(())
}

/// Keeps only the rows without [`ROW_INVALID`], in order, in every buffer.
fn drop_invalid_rows(scratch: &mut Scratch) {
    for indices in &mut scratch.indices {
        let mut kept = 0;
        for row in 0..indices.len() {
            if scratch.flags[row] & ROW_INVALID == 0 {
                indices[kept] = indices[row];
                kept += 1;
            }
        }
        indices.truncate(kept);
    }
    scratch.flags.retain(|&flag| flag & ROW_INVALID == 0);
}

/// Where a null stopped the run: the mechanisms that can keep it say so.
fn keep_hint(what: &str) -> &'static str {
    if what == "a null" {
        " (--mechanism auto, pmm and psmm keep nulls as a value of the column's domain with --nulls keep)"
    } else {
        ""
    }
}

/// A value the column's coding cannot read: file, column, row group and row, and what to do.
fn unreadable_error(
    source: &Source,
    row_group: usize,
    first_row: u64,
    column: &NumericColumn,
    unreadable: Unreadable,
) -> Error {
    match unreadable {
        Unreadable::Unlisted { row, value } => {
            let (file, place) = source.row_place(row_group, first_row + row as u64);
            Error::in_column(
                file,
                &column.name,
                format!(
                    "value '{value}' in {place} is not in the public category list: add it to the list, or give \
                     --unlisted other (category lists are never read from the data)"
                ),
            )
        }
        Unreadable::Cast(reason) => {
            let (file, group) = source.row_group_place(row_group);
            Error::in_column(file, &column.name, format!("row group {group} cannot be read: {reason}"))
        }
    }
}

/// Names the first bad value: file, column, row group, row and what is wrong with it.
fn invalid_value_error(
    source: &Source,
    row_group: usize,
    first_row: u64,
    batch: &RecordBatch,
    columns: &[NumericColumn],
    flags: &[u8],
) -> Error {
    let row = flags
        .iter()
        .position(|&flag| flag & ROW_INVALID != 0)
        .unwrap_or(0);
    for (axis, column) in columns.iter().enumerate() {
        let array = batch.column(axis);
        let what = if array.is_null(row) {
            "a null"
        } else {
            let value = crate::io::source::column::value_as_f64(array.as_ref(), row);
            if value.is_nan() {
                "NaN"
            } else if value.is_infinite() {
                "an infinite value"
            } else {
                continue;
            }
        };
        let (file, place) = source.row_place(row_group, first_row + row as u64);
        return Error::in_column(
            file,
            &column.name,
            format!("{what} in {place}; pass --nulls drop to leave such rows out{}", keep_hint(what)),
        );
    }
    Error::internal("a row was flagged invalid but no column holds a bad value")
}
