//! Synthetic points from released cell counts (docs/design.md, docs/mechanisms/pmm.md): m_θ points in each cell, uniform in the
//! cell (default) or at its centre. The cells are the leaves of the dyadic partition (PMM) or the cubes
//! of a regular grid (PSMM). Pure post-processing: it sees only released counts.
//!
//! Rows are generated in blocks of [`SAMPLE_BLOCK_ROWS`]; block b draws from its own xoshiro256++
//! stream seeded by (seed, b), so any batch of blocks can be generated in parallel and the output does
//! not depend on the thread count.

use std::borrow::Cow;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::geometry::grid::RegularGrid;
use crate::geometry::partition::{CellGeometry, LeafDecoder};

/// Rows drawn from one random stream.
pub const SAMPLE_BLOCK_ROWS: usize = 1 << 12;

/// Where the points of a leaf go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Independent uniform points in the cell.
    Uniform,
    /// Every point at the cell's centre.
    Centre,
}

impl Placement {
    pub const DEFAULT: Placement = Placement::Uniform;
}

/// The cells rows are drawn in. Every cell of one layout has the same widths.
enum Cells {
    /// The leaves of the dyadic partition, in Morton order.
    Dyadic(LeafDecoder),
    /// The cubes of a regular grid, in row-major order.
    Regular(RegularGrid),
}

impl Cells {
    #[inline]
    fn axis_indices(&self, cell: usize, out: &mut [u32]) {
        match self {
            Cells::Dyadic(decoder) => decoder.axis_indices(cell as u32, out),
            Cells::Regular(grid) => grid.axis_indices(cell, out),
        }
    }
}

/// Draws the synthetic rows of a released set of cell counts, in cell order.
pub struct LeafSampler<'a> {
    cells: Cells,
    /// The cells counted, where only some are ([`LeafSampler::sparse`]): count i is cell `codes[i]`'s.
    codes: Option<Cow<'a, [u32]>>,
    /// Width of every cell on each axis.
    widths: Vec<f64>,
    /// offsets[θ] = Σ_{θ' < θ} m_θ', with the total at the end.
    offsets: Vec<u64>,
    /// For a part of the rows ([`LeafSampler::sparse`]): the number of its first row in the whole table (the
    /// row streams are keyed by it). 0 for the whole table.
    first_row: u64,
    placement: Placement,
    seed: u64,
}

impl<'a> LeafSampler<'a> {
    /// Rows in the leaves of the dyadic partition (PMM).
    pub fn new(
        geometry: CellGeometry,
        leaf_counts: &[u64],
        placement: Placement,
        seed: u64,
    ) -> Self {
        assert_eq!(leaf_counts.len(), geometry.leaf_count());
        Self::new_unchecked(geometry, leaf_counts, placement, seed)
    }

    fn new_unchecked(geometry: CellGeometry, leaf_counts: &[u64], placement: Placement, seed: u64) -> Self {
        let widths = (0..geometry.dims())
            .map(|axis| (-(geometry.axis_bits(axis) as f64)).exp2())
            .collect();
        let cells = Cells::Dyadic(LeafDecoder::new(&geometry));
        Self::with_cells(cells, widths, leaf_counts, placement, seed)
    }

    /// Rows in the leaves `codes` (ascending) of the dyadic partition, with `leaf_counts` each, where the
    /// rows before them number `first_row`: rows `first_row ..` of [`LeafSampler::new`]'s table on every
    /// leaf's count, the others' 0 (a leaf without rows draws nothing). A part of the table (a rank's rows)
    /// may begin or end inside a leaf: that leaf's count is then the part's rows in it.
    pub fn sparse(
        geometry: CellGeometry,
        codes: impl Into<Cow<'a, [u32]>>,
        leaf_counts: &[u64],
        first_row: u64,
        placement: Placement,
        seed: u64,
    ) -> Self {
        let codes = codes.into();
        assert_eq!(codes.len(), leaf_counts.len());
        assert!(codes.windows(2).all(|pair| pair[0] < pair[1]), "the leaves are listed once each, in code order");
        assert!(codes.last().is_none_or(|&last| (last as usize) < geometry.leaf_count()));
        LeafSampler { codes: Some(codes), first_row, ..Self::new_unchecked(geometry, leaf_counts, placement, seed) }
    }

    /// Rows in the cubes of a regular grid (PSMM).
    pub fn on_grid(grid: RegularGrid, cell_counts: &[u64], placement: Placement, seed: u64) -> Self {
        assert_eq!(cell_counts.len(), grid.cell_count());
        let widths = vec![grid.cell_diameter(); grid.dims()];
        Self::with_cells(Cells::Regular(grid), widths, cell_counts, placement, seed)
    }

    fn with_cells(
        cells: Cells,
        widths: Vec<f64>,
        counts: &[u64],
        placement: Placement,
        seed: u64,
    ) -> Self {
        LeafSampler {
            cells,
            codes: None,
            widths,
            offsets: running_totals(counts),
            first_row: 0,
            placement,
            seed,
        }
    }

    pub fn total_rows(&self) -> u64 {
        *self.offsets.last().expect("offsets start with 0")
    }

    /// Fills `columns[k]` with the normalised coordinate k of rows `start..start + rows`, reusing their
    /// capacity.
    pub fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]) {
        assert!(start + rows as u64 <= self.total_rows());
        // Pieces cut at the whole table's block boundaries, each drawn from its block's stream.
        let block_rows = SAMPLE_BLOCK_ROWS as u64;
        let mut pieces = Vec::new();
        let (mut row, end) = (self.first_row + start, self.first_row + start + rows as u64);
        while row < end {
            let piece_end = ((row / block_rows + 1) * block_rows).min(end);
            pieces.push((row, (piece_end - row) as usize));
            row = piece_end;
        }
        let mut blocks: Vec<(u64, Vec<&mut [f64]>)> = pieces
            .iter()
            .map(|&(first, _)| (first, Vec::with_capacity(columns.len())))
            .collect();
        for column in columns.iter_mut() {
            column.resize(rows, 0.0);
            let mut rest = column.as_mut_slice();
            for ((_, block), &(_, len)) in blocks.iter_mut().zip(&pieces) {
                let (piece, tail) = rest.split_at_mut(len);
                block.push(piece);
                rest = tail;
            }
        }
        blocks
            .into_par_iter()
            .for_each(|(first, mut block)| self.sample_block(first, &mut block));
    }

    /// Rows first_row.. (numbered in the whole table) of one block, one slice per axis. A piece that starts
    /// inside its block first replays the stream's draws for the rows before it.
    fn sample_block(&self, first_row: u64, columns: &mut [&mut [f64]]) {
        let widths = &self.widths;
        let dims = widths.len();
        let rows = columns[0].len();
        let block_index = first_row / SAMPLE_BLOCK_ROWS as u64;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix(self.seed, block_index));
        if self.placement == Placement::Uniform {
            for _ in 0..(first_row % SAMPLE_BLOCK_ROWS as u64) * dims as u64 {
                rng.next_u64();
            }
        }
        // Row numbers of the part from here on; the streams above used the whole table's.
        let first_row = first_row - self.first_row;
        let mut leaf = self.offsets.partition_point(|&offset| offset <= first_row) - 1;
        let mut corner = vec![0.0f64; dims];
        let mut indices = vec![0u32; dims];
        let mut corner_leaf = usize::MAX;
        for (offset, row) in (first_row..first_row + rows as u64).enumerate() {
            while self.offsets[leaf + 1] <= row {
                leaf += 1;
            }
            if corner_leaf != leaf {
                let cell = self.codes.as_ref().map_or(leaf, |codes| codes[leaf] as usize);
                self.cells.axis_indices(cell, &mut indices);
                for axis in 0..dims {
                    corner[axis] = indices[axis] as f64 * widths[axis];
                }
                corner_leaf = leaf;
            }
            for axis in 0..dims {
                let within = match self.placement {
                    Placement::Uniform => unit_interval(&mut rng),
                    Placement::Centre => 0.5,
                };
                columns[axis][offset] = corner[axis] + within * widths[axis];
            }
        }
    }
}

/// A uniform draw from [0, 1) with 53 random bits.
pub(crate) fn unit_interval(rng: &mut impl Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// SplitMix64's finaliser of (seed, stream): well-spread seeds for neighbouring stream numbers.
fn mix(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Synthetic rows in normalised [0,1] units, generated in any order of batches with the same result.
pub trait RowGenerator: Sync {
    fn total_rows(&self) -> u64;
    /// Fills `columns[k]` with rows `start .. start + rows` of coordinate k.
    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]);
}

impl RowGenerator for LeafSampler<'_> {
    fn total_rows(&self) -> u64 {
        LeafSampler::total_rows(self)
    }

    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]) {
        LeafSampler::sample_rows(self, start, rows, columns)
    }
}

/// Rows `first .. first + rows` of `inner`, numbered from 0: one rank's even share of a table that every rank
/// can draw whole (a replicated release across ranks, `crate::cluster::driver`). Rows are keyed by their
/// number in the whole table, so the shares in rank order are the whole table.
pub struct RowRange<'a> {
    pub inner: Box<dyn RowGenerator + 'a>,
    pub first: u64,
    pub rows: u64,
}

impl RowGenerator for RowRange<'_> {
    fn total_rows(&self) -> u64 {
        self.rows
    }

    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]) {
        self.inner.sample_rows(self.first + start, rows, columns);
    }
}

/// Counts per task of [`running_totals`].
const TOTALS_CHUNK: usize = 1 << 16;

/// [0, c_0, c_0 + c_1, …, Σc]: each chunk's sum, then each chunk's running totals from its start, in
/// parallel (10^8 rows fill 2^26 leaves: a 512 MB scan that one thread made alone).
fn running_totals(counts: &[u64]) -> Vec<u64> {
    let chunk_sums: Vec<u64> = counts.par_chunks(TOTALS_CHUNK).map(|chunk| chunk.iter().sum()).collect();
    let chunk_starts: Vec<u64> = chunk_sums
        .iter()
        .scan(0u64, |total, &sum| {
            let start = *total;
            *total += sum;
            Some(start)
        })
        .collect();
    let mut totals = vec![0u64; counts.len() + 1];
    totals[1..]
        .par_chunks_mut(TOTALS_CHUNK)
        .zip(counts.par_chunks(TOTALS_CHUNK))
        .zip(chunk_starts)
        .for_each(|((totals, counts), mut total)| {
            for (running, &count) in totals.iter_mut().zip(counts) {
                total += count;
                *running = total;
            }
        });
    totals
}

/// `--rows N`: spreads N rows over the leaves in proportion to the released counts by rounding the running
/// total: leaf θ gets round(C_θ) − round(C_{θ−1}) rows, C_θ = N·(m_1 + … + m_θ)/m in code order, halves up.
/// Exact: the rows sum to N and every leaf gets ⌊N·m_θ/m⌋ or one more. Spread along the code order: the
/// largest-remainder rule this replaced broke its ties towards the lower codes, so where most leaves held a
/// row or two and N was well below m, the rows left out the top of the code range, a block of the space
/// (docs/accuracy.md, "A defect at n = 10^7"). An empty release spreads the rows evenly over all leaves, the
/// data-independent choice.
pub fn allocate_rows(leaf_counts: &[u64], rows: u64) -> Vec<u64> {
    let total: u128 = leaf_counts.iter().map(|&count| u128::from(count)).sum();
    if total == 0 {
        return allocate_from(std::iter::repeat_n(1, leaf_counts.len()), 0, leaf_counts.len() as u128, rows);
    }
    allocate_from(leaf_counts.iter().copied(), 0, total, rows)
}

/// Leaves `weights`, after `weight_before` of the `total` weight, get round(C_θ) − round(C_{θ−1}) of `rows`
/// (see [`allocate_rows`]); a rank's part of the tree runs this on its own leaves and gets the whole tree's
/// allocation there.
pub fn allocate_from(weights: impl IntoIterator<Item = u64>, weight_before: u128, total: u128, rows: u64) -> Vec<u64> {
    // round(N·w/m) = ⌊(2·N·w + m) / (2·m)⌋, exact in u128 (N ≤ 10^12 and w ≤ m < 2^64).
    let rounded = |weight: u128| (2 * u128::from(rows) * weight + total) / (2 * total);
    let mut cumulative = weight_before;
    let mut given = rounded(cumulative);
    weights
        .into_iter()
        .map(|weight| {
            cumulative += u128::from(weight);
            let reached = rounded(cumulative);
            let leaf_rows = (reached - given) as u64;
            given = reached;
            leaf_rows
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_totals_match_a_plain_scan_across_chunk_edges() {
        for len in [0, 1, TOTALS_CHUNK - 1, TOTALS_CHUNK, TOTALS_CHUNK + 1, 3 * TOTALS_CHUNK + 5] {
            let counts: Vec<u64> = (0..len as u64).map(|i| i.wrapping_mul(0x9e37_79b9) % 7).collect();
            let mut plain = vec![0u64];
            for &count in &counts {
                plain.push(plain.last().unwrap() + count);
            }
            assert_eq!(running_totals(&counts), plain, "{len} counts");
        }
    }

    #[test]
    fn every_point_lands_in_its_leaf_cell() {
        for dims in 1..=3 {
            let geometry = CellGeometry::new(dims, 7);
            let counts: Vec<u64> = (0..128u64).map(|leaf| (leaf * 37) % 5).collect();
            for placement in [Placement::Uniform, Placement::Centre] {
                let sampler = LeafSampler::new(geometry, &counts, placement, 9);
                let total = sampler.total_rows() as usize;
                let mut columns = vec![Vec::new(); dims];
                sampler.sample_rows(0, total, &mut columns);
                let mut seen = vec![0u64; 128];
                for row in 0..total {
                    let indices: Vec<u32> = (0..dims)
                        .map(|axis| {
                            crate::geometry::partition::tests::unit_axis(geometry.axis_bits(axis))
                                .quantize(columns[axis][row])
                        })
                        .collect();
                    seen[geometry.leaf_code(&indices) as usize] += 1;
                }
                assert_eq!(seen, counts, "{placement:?} d={dims}");
            }
        }
    }

    #[test]
    fn every_point_lands_in_its_regular_grid_cell() {
        for (dims, side) in [(1usize, 7u32), (2, 5), (3, 3)] {
            let grid = RegularGrid::new(dims, side).unwrap();
            let counts: Vec<u64> = (0..grid.cell_count() as u64).map(|cell| (cell * 7) % 4).collect();
            let axis = crate::binner::AxisPlan::with_cells(
                crate::geometry::bounds::ColumnBounds::new("u", 0.0, 1.0).unwrap(),
                side,
            );
            let strides = grid.strides();
            for placement in [Placement::Uniform, Placement::Centre] {
                let sampler = LeafSampler::on_grid(grid, &counts, placement, 3);
                let total = sampler.total_rows() as usize;
                let mut columns = vec![Vec::new(); dims];
                sampler.sample_rows(0, total, &mut columns);
                let mut cells = vec![0usize; total];
                for (column, stride) in columns.iter().zip(&strides) {
                    for (cell, &x) in cells.iter_mut().zip(column) {
                        *cell += axis.quantize(x) as usize * stride;
                    }
                }
                let mut seen = vec![0u64; grid.cell_count()];
                for cell in cells {
                    seen[cell] += 1;
                }
                assert_eq!(seen, counts, "{placement:?} d={dims} k={side}");
            }
        }
    }

    #[test]
    fn batches_and_threads_do_not_change_the_points() {
        let geometry = CellGeometry::new(2, 10);
        let counts: Vec<u64> = (0..1024u64).map(|leaf| leaf % 23).collect();
        let sampler = LeafSampler::new(geometry, &counts, Placement::Uniform, 4);
        let total = sampler.total_rows() as usize;
        let whole = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut columns = vec![Vec::new(); 2];
            pool.install(|| sampler.sample_rows(0, total, &mut columns));
            columns
        };
        let reference = whole(1);
        assert_eq!(reference, whole(3));
        let mut pieces = vec![Vec::new(); 2];
        let mut start = 0;
        while start < total {
            let rows = (2 * SAMPLE_BLOCK_ROWS).min(total - start);
            let mut columns = vec![Vec::new(); 2];
            sampler.sample_rows(start as u64, rows, &mut columns);
            for axis in 0..2 {
                pieces[axis].extend_from_slice(&columns[axis]);
            }
            start += rows;
        }
        assert_eq!(reference, pieces);
    }

    #[test]
    fn leaves_listed_where_they_hold_rows_draw_the_rows_of_every_leaf() {
        let geometry = CellGeometry::new(3, 9);
        let counts: Vec<u64> = (0..512u64).map(|leaf| if leaf % 5 == 2 { leaf % 7 } else { 0 }).collect();
        let (codes, listed): (Vec<u32>, Vec<u64>) = (counts.iter().enumerate())
            .filter(|(_, &count)| count > 0)
            .map(|(code, &count)| (code as u32, count))
            .unzip();
        for placement in [Placement::Uniform, Placement::Centre] {
            let dense = LeafSampler::new(geometry, &counts, placement, 5);
            let sparse = LeafSampler::sparse(geometry, &codes, &listed, 0, placement, 5);
            assert_eq!(sparse.total_rows(), dense.total_rows());
            let rows = dense.total_rows() as usize;
            let (mut from_dense, mut from_sparse) = (vec![Vec::new(); 3], vec![Vec::new(); 3]);
            dense.sample_rows(0, rows, &mut from_dense);
            sparse.sample_rows(0, rows, &mut from_sparse);
            assert_eq!(from_dense, from_sparse, "{placement:?}");
            // A rank's part: the listed leaves from the `at`-th on, after the rows of those before them, or
            // beginning one row into that leaf.
            let at = 3 + listed[3..].iter().position(|&count| count >= 2).expect("a leaf of two rows or more");
            for skipped in [0, 1] {
                let first_row = listed[..at].iter().sum::<u64>() + skipped;
                let mut counts = listed[at..].to_vec();
                counts[0] -= skipped;
                let part = LeafSampler::sparse(geometry, &codes[at..], &counts, first_row, placement, 5);
                let mut from_part = vec![Vec::new(); 3];
                part.sample_rows(0, part.total_rows() as usize, &mut from_part);
                let rest: Vec<Vec<f64>> =
                    from_dense.iter().map(|column| column[first_row as usize..].to_vec()).collect();
                assert_eq!(from_part, rest, "{placement:?}, {skipped} rows skipped");
            }
        }
    }

    #[test]
    fn allocation_is_exact_and_rounds_the_running_total() {
        let counts = [3u64, 0, 1, 6];
        let allocation = allocate_rows(&counts, 7);
        assert_eq!(allocation.iter().sum::<u64>(), 7);
        // Running totals 2.1, 2.1, 2.8, 7 round to 2, 2, 3, 7.
        assert_eq!(allocation, vec![2, 0, 1, 4]);
        for rows in [0u64, 1, 10, 1000, 12345] {
            let allocation = allocate_rows(&counts, rows);
            assert_eq!(allocation.iter().sum::<u64>(), rows);
            for (leaf, &given) in allocation.iter().enumerate() {
                let share = rows as f64 * counts[leaf] as f64 / 10.0;
                assert!((given as f64 - share).abs() < 1.0);
            }
        }
        // Running totals 1.5, 3, 4.5, 6, halves up.
        assert_eq!(allocate_rows(&[0, 0, 0, 0], 6), vec![2, 1, 2, 1]);
    }

    #[test]
    fn fewer_rows_than_released_are_spread_over_the_whole_code_range() {
        // 10^4 leaves of one row each and 10^3 rows asked: every block of 10^3 leaves gets its 100 rows. The
        // largest-remainder rule gave all of them to the first 10^3 leaves (its ties went to the lower codes).
        let allocation = allocate_rows(&vec![1u64; 10_000], 1000);
        for block in allocation.chunks(1000) {
            assert_eq!(block.iter().sum::<u64>(), 100);
        }
        // The same with leaves of one and two rows mixed: each tenth of the rows lands in its tenth of the code
        // range, up to one row at each end.
        let counts: Vec<u64> = (0..10_000u64).map(|leaf| 1 + leaf % 2).collect();
        let allocation = allocate_rows(&counts, 1500);
        for block in allocation.chunks(1000) {
            assert!((149..=151).contains(&block.iter().sum::<u64>()), "{}", block.iter().sum::<u64>());
        }
    }
}
