//! Where each Private Evolution step's nearest-neighbour counts come from: the private rows read once and
//! held (in memory for the k-d tree of `nearest.rs`, or on a GPU for the kernel of `nearest_gpu.rs`), or,
//! when holding them would exceed the memory limit, read again at every step and counted row group by row
//! group against the step's tree. Every way counts the same candidate for every row, so a seeded run
//! writes the same table whichever is used.

#[cfg(feature = "gpu")]
use super::nearest_gpu::GpuNearest;
use super::nearest::{nearest_neighbour_counts, CandidateIndex, Metric, LATTICE_BITS, LEAF_CANDIDATES};
use crate::binner::device::{Device, DeviceChoice};
use crate::binner::pass::DataPass;
use crate::binner::{AxisPlan, BinnerWorker, ScanStats};
use crate::error::{Error, Result};

/// Private rows are quantised to the midpoints of 2^ROW_CELL_BITS cells per axis (the engine's one
/// quantisation, so every row is a point of [0,1]^d whatever its type); 2^−21 is far below any PE
/// resolution α. The midpoints lie on the lattice of the nearest-neighbour search.
pub const ROW_CELL_BITS: u32 = LATTICE_BITS - 1;

/// The midpoint of cell `q` of an axis cut into 2^ROW_CELL_BITS cells: (2q + 1)·2^−21, a lattice point.
fn midpoint(q: u32) -> f64 {
    f64::from(2 * q + 1) / f64::from(1u32 << (ROW_CELL_BITS + 1))
}

/// Collects quantised rows as points of [0,1]^d (cell midpoints).
struct RowCollector {
    dims: usize,
    rows: Vec<f64>,
}

impl BinnerWorker for RowCollector {
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
        let count = axes.first().map_or(0, |axis| axis.len());
        self.rows.reserve(count * self.dims);
        for row in 0..count {
            for axis in axes {
                self.rows.push(midpoint(axis[row]));
            }
        }
        Ok(())
    }
}

/// Each used column cut into the 2^ROW_CELL_BITS cells whose midpoints the rows become.
fn row_axes(data: &DataPass) -> Vec<AxisPlan> {
    data.bounds
        .iter()
        .map(|bounds| AxisPlan::with_cells(bounds.clone(), 1 << ROW_CELL_BITS))
        .collect()
}

/// Every row of `data` as a point of [0,1]^d (flat), in no particular order.
pub fn read_rows(data: &DataPass, label: &str) -> Result<(Vec<f64>, ScanStats)> {
    let dims = data.dims();
    let (workers, scan) = data.fold_quantised_rows(label, &row_axes(data), &|| {
        Ok(RowCollector {
            dims,
            rows: Vec::new(),
        })
    })?;
    let mut rows = Vec::with_capacity(workers.iter().map(|w| w.rows.len()).sum());
    for worker in workers {
        rows.extend_from_slice(&worker.rows);
    }
    Ok((rows, scan))
}

/// Counts each row's nearest candidate in the step's tree, as the rows stream past.
struct NearestWorker<'a> {
    index: &'a CandidateIndex,
    point: Vec<f64>,
    stack: Vec<(u32, f64)>,
    counts: Vec<u64>,
}

impl BinnerWorker for NearestWorker<'_> {
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
        let count = axes.first().map_or(0, |axis| axis.len());
        for row in 0..count {
            for (coordinate, axis) in self.point.iter_mut().zip(axes) {
                *coordinate = midpoint(axis[row]);
            }
            self.counts[self.index.nearest(&self.point, &mut self.stack)] += 1;
        }
        Ok(())
    }
}

/// The private rows as the steps read them.
enum Rows<'a> {
    /// Read once into memory (flat, d per row).
    Held(Vec<f64>),
    /// Read once onto the GPU.
    #[cfg(feature = "gpu")]
    OnGpu(GpuNearest),
    /// Read again at every step.
    Streamed(&'a DataPass<'a>),
}

/// How a release counts nearest neighbours, and the report's lines for it.
pub struct NearestSearch<'a> {
    metric: Metric,
    dims: usize,
    rows: Rows<'a>,
    device: String,
    /// The pass the rows came from: across ranks its sums make each step's counts the whole table's.
    data: &'a DataPass<'a>,
}

/// Under `--device auto`, the largest candidates a step × CPU threads at which a real GPU counts the
/// nearest neighbours: the kernel scans every candidate for every row, the k-d tree visits a few on each
/// thread. Fitted on two lent H100s against their 16 Xeon cores (docs/mechanisms/pe.md): flights
/// (17,703 candidates) ran 5.7–6.1× faster on the GPU than on one thread, 1.6× than on four, 0.6–0.7× against
/// sixteen; 10^6 generated rows, d = 2 (121,618 candidates), 0.88–1.0× against one thread.
pub const AUTO_GPU_MAX_CANDIDATE_THREADS: usize = 120_000;

/// Whether `--device auto` counts on a real GPU (when there is one) rather than the CPU's k-d tree.
pub fn auto_takes_the_gpu(candidates: usize, threads: usize) -> bool {
    candidates.saturating_mul(threads) <= AUTO_GPU_MAX_CANDIDATE_THREADS
}

impl<'a> NearestSearch<'a> {
    /// Reads the rows once when their n·d·8 bytes fit in `memory_limit` (onto a GPU when `choice` takes
    /// one: `auto` only a real GPU, and only where [`auto_takes_the_gpu`] for `candidates` a step on this
    /// pool's threads), else leaves them to be read again at every step (CPU). What the read saw comes back
    /// for the report. Across ranks each rank holds its share of the rows but chooses by the whole table's
    /// `n`, as every rank and one machine do.
    pub fn for_run(
        choice: DeviceChoice,
        metric: Metric,
        data: &'a DataPass<'a>,
        n: u64,
        memory_limit: u64,
        candidates: usize,
    ) -> Result<(Self, ScanStats)> {
        let dims = data.dims();
        let held_bytes = u128::from(n) * dims as u128 * 8;
        let search = |rows, device: String| NearestSearch {
            metric,
            dims,
            rows,
            device,
            data,
        };
        if held_bytes > u128::from(memory_limit) {
            if choice == DeviceChoice::Gpu {
                return Err(Error::bad_input(format!(
                    "--device gpu: pe holds the rows on the device, and their {held_bytes} bytes exceed the memory \
                     limit of {memory_limit} bytes: use --device cpu (the rows are then read again at every step) \
                     or raise --memory-limit-mib"
                )));
            }
            let scan = data.count_rows()?;
            let device = format!(
                "cpu (nearest-neighbour k-d tree; the rows are read again at every step: their {held_bytes} \
                 bytes exceed the memory limit of {memory_limit})"
            );
            return Ok((search(Rows::Streamed(data), device), scan));
        }
        let (rows, scan) = read_rows(data, "pe rows")?;
        let cpu = |rows, reason: &str| search(Rows::Held(rows), format!("cpu (nearest-neighbour k-d tree{reason})"));
        let threads = rayon::current_num_threads();
        if choice == DeviceChoice::Auto && !auto_takes_the_gpu(candidates, threads) {
            let reason = format!(
                "; --device auto takes the tree at {candidates} candidates a step × {threads} threads, above the \
                 {AUTO_GPU_MAX_CANDIDATE_THREADS} where a GPU's scan of every candidate pays"
            );
            return Ok((cpu(rows, &reason), scan));
        }
        let chosen = match Device::choose(choice)? {
            Device::Cpu(reason) => cpu(rows, &reason),
            #[cfg(feature = "gpu")]
            Device::Gpu(context) => match GpuNearest::new(&context, metric, dims, &rows) {
                Ok(gpu) => search(Rows::OnGpu(gpu), format!("gpu: {}", context.adapter_description())),
                Err(error) => cpu(rows, &Device::unusable_gpu(choice, error)?),
            },
        };
        Ok((chosen, scan))
    }

    /// The report's device line.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The report's line for the search itself.
    pub fn method(&self) -> String {
        match &self.rows {
            #[cfg(feature = "gpu")]
            Rows::OnGpu(_) => format!(
                "every candidate scanned on the GPU, exact integer keys on the 2^-{LATTICE_BITS} lattice, \
                 ties to the smallest index"
            ),
            Rows::Held(_) | Rows::Streamed(_) => format!(
                "k-d tree over the candidates (median splits on the widest axis, at most {LEAF_CANDIDATES} a \
                 leaf), ties to the smallest index"
            ),
        }
    }

    /// Entry j: the rows whose nearest candidate is j (ties to the smallest j); across ranks, of every rank's
    /// rows.
    pub fn counts(&self, candidates: &[f64]) -> Result<Vec<u64>> {
        let mut counts = self.data.agreed(self.counts_on_this_rank(candidates))?;
        self.data.sum_over_ranks(&mut counts);
        Ok(counts)
    }

    fn counts_on_this_rank(&self, candidates: &[f64]) -> Result<Vec<u64>> {
        match &self.rows {
            Rows::Held(rows) => Ok(nearest_neighbour_counts(self.metric, candidates, self.dims, rows)),
            #[cfg(feature = "gpu")]
            Rows::OnGpu(gpu) => gpu
                .counts(candidates)
                .map_err(|error| Error::internal(format!("pe nearest-neighbour counts: {error}"))),
            Rows::Streamed(data) => {
                let index = CandidateIndex::new(self.metric, candidates, self.dims);
                let count = candidates.len() / self.dims;
                let (workers, _) = data.fold_quantised_rows("pe step", &row_axes(data), &|| {
                    Ok(NearestWorker {
                        index: &index,
                        point: vec![0.0; self.dims],
                        stack: Vec::new(),
                        counts: vec![0; count],
                    })
                })?;
                let mut counts = vec![0u64; count];
                for worker in workers {
                    counts.iter_mut().zip(&worker.counts).for_each(|(total, part)| *total += part);
                }
                Ok(counts)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_the_gpu_only_where_it_measured_faster() {
        // Flights' 17,703 candidates a step: the GPU against one to four threads, the tree on sixteen.
        assert!(auto_takes_the_gpu(17_703, 1) && auto_takes_the_gpu(17_703, 4));
        assert!(!auto_takes_the_gpu(17_703, 16));
        // 121,618 candidates: the tree, as fast on one thread.
        assert!(!auto_takes_the_gpu(121_618, 1));
        assert!(!auto_takes_the_gpu(usize::MAX, 2));
    }
}
