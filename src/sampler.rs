//! Synthetic points from released cell counts (docs/design.md, docs/mechanisms/pmm.md): m_θ points in each cell, uniform in the
//! cell (default) or at its centre. The cells are the leaves of the dyadic partition (PMM) or the cubes
//! of a regular grid (PSMM). Pure post-processing: it sees only released counts.
//!
//! Rows are generated in blocks of [`SAMPLE_BLOCK_ROWS`]; block b draws from its own xoshiro256++
//! stream seeded by (seed, b), so any batch of blocks can be generated in parallel and the output does
//! not depend on the thread count.
//!
//! Row order ([`RowOrder`]): by default output row i is drawn in the cell of row π(i) of the cell-ordered
//! table, π a keyed pseudo-random permutation of the rows ([`Permutation`]), so every prefix of the table is
//! a uniform sample of it; the point inside the cell still comes from row i's block stream, in output order
//! (the points of a cell are i.i.d., so only the sequence of cells needs permuting).

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

/// The order the synthetic rows are written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum RowOrder {
    /// A seeded random permutation of the rows: every prefix of the table is a uniform sample of it.
    Random,
    /// Cell by cell, in the cells' order (Morton order for PMM's leaves): a prefix covers a corner of the
    /// space.
    Cells,
}

impl RowOrder {
    pub const DEFAULT: RowOrder = RowOrder::Random;
}

/// Rounds of the Feistel network: four make a pseudo-random permutation of pseudo-random round functions
/// (Luby and Rackoff). Each is a chain of three multiplications, and the permutation was the largest cost of
/// random order after the leaf search: six rounds showed no better prefix or lag-one statistics.
const FEISTEL_ROUNDS: usize = 4;

/// The stream number that keys the row permutation: no block of rows reaches it (10^12 rows are 2^28
/// blocks).
const ORDER_STREAM: u64 = u64::MAX;

/// A keyed pseudo-random permutation of [0, n) in O(1) memory: a balanced Feistel network on the
/// 2·⌈⌈log2 n⌉/2⌉ bits that hold n, with [`mix`] as its round function, cycle-walked into [0, n) (applied
/// again until the value falls below n; under 4 applications on average, as n is over a quarter of the
/// network's domain). Any row's image is computed alone, so blocks of rows are permuted in parallel.
#[derive(Clone, Debug)]
pub(crate) struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; FEISTEL_ROUNDS],
}

impl Permutation {
    /// The permutation of the `rows` rows of a table, or of a part of one that starts at row `first_row`,
    /// drawn with the placement seed `seed`.
    pub fn of_rows(rows: u64, seed: u64, first_row: u64) -> Self {
        Permutation::new(rows, mix(mix(seed, ORDER_STREAM), first_row))
    }

    /// The permutation of [0, n) that `key` picks.
    pub fn new(n: u64, key: u64) -> Self {
        let bits = u64::BITS - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        Permutation { n, half_bits, keys: std::array::from_fn(|round| mix(key, round as u64)) }
    }

    /// π(index), for index < n.
    #[inline]
    pub fn apply(&self, index: u64) -> u64 {
        debug_assert!(index < self.n);
        let mut value = self.feistel(index);
        while value >= self.n {
            value = self.feistel(value);
        }
        value
    }

    #[inline]
    fn feistel(&self, value: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (value >> self.half_bits, value & mask);
        for &key in &self.keys {
            (left, right) = (right, left ^ (mix(key, right) & mask));
        }
        (left << self.half_bits) | right
    }
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

/// Draws the synthetic rows of a released set of cell counts, in cell order or permuted ([`RowOrder`]).
pub struct LeafSampler<'a> {
    cells: Cells,
    /// The cells counted, where only some are ([`LeafSampler::sparse`]): count i is cell `codes[i]`'s.
    codes: Option<Cow<'a, [u32]>>,
    /// Width of every cell on each axis.
    widths: Vec<f64>,
    /// offsets[θ] = Σ_{θ' < θ} m_θ', with the total at the end.
    offsets: Vec<u64>,
    /// In random order ([`RowOrder::Random`]), where to look for a row's leaf; `None` in cell order.
    guide: Option<LeafGuide>,
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
        order: RowOrder,
        seed: u64,
    ) -> Self {
        assert_eq!(leaf_counts.len(), geometry.leaf_count());
        Self::new_unchecked(geometry, leaf_counts, placement, order, seed)
    }

    fn new_unchecked(
        geometry: CellGeometry,
        leaf_counts: &[u64],
        placement: Placement,
        order: RowOrder,
        seed: u64,
    ) -> Self {
        let widths = (0..geometry.dims())
            .map(|axis| (-(geometry.axis_bits(axis) as f64)).exp2())
            .collect();
        let cells = Cells::Dyadic(LeafDecoder::new(&geometry));
        Self::with_cells(cells, widths, leaf_counts, placement, order, seed)
    }

    /// Rows in the leaves `codes` (ascending) of the dyadic partition, with `leaf_counts` each, where the
    /// rows before them number `first_row`: rows `first_row ..` of [`LeafSampler::new`]'s table on every
    /// leaf's count, the others' 0 (a leaf without rows draws nothing). A part of the table (a rank's rows)
    /// may begin or end inside a leaf: that leaf's count is then the part's rows in it. In random order the
    /// part's own rows are permuted (keyed by `first_row` too): a part with `first_row` > 0 is then not
    /// those rows of the whole table but the same cells' rows in another order.
    pub fn sparse(
        geometry: CellGeometry,
        codes: impl Into<Cow<'a, [u32]>>,
        leaf_counts: &[u64],
        first_row: u64,
        placement: Placement,
        order: RowOrder,
        seed: u64,
    ) -> Self {
        let codes = codes.into();
        assert_eq!(codes.len(), leaf_counts.len());
        assert!(codes.windows(2).all(|pair| pair[0] < pair[1]), "the leaves are listed once each, in code order");
        assert!(codes.last().is_none_or(|&last| (last as usize) < geometry.leaf_count()));
        LeafSampler {
            codes: Some(codes),
            first_row,
            ..Self::new_unchecked(geometry, leaf_counts, placement, order, seed)
        }
    }

    /// Rows in the cubes of a regular grid (PSMM).
    pub fn on_grid(
        grid: RegularGrid,
        cell_counts: &[u64],
        placement: Placement,
        order: RowOrder,
        seed: u64,
    ) -> Self {
        assert_eq!(cell_counts.len(), grid.cell_count());
        let widths = vec![grid.cell_diameter(); grid.dims()];
        Self::with_cells(Cells::Regular(grid), widths, cell_counts, placement, order, seed)
    }

    fn with_cells(
        cells: Cells,
        widths: Vec<f64>,
        counts: &[u64],
        placement: Placement,
        order: RowOrder,
        seed: u64,
    ) -> Self {
        let offsets = running_totals(counts);
        let guide = (order == RowOrder::Random).then(|| LeafGuide::new(&offsets));
        LeafSampler { cells, codes: None, widths, offsets, guide, first_row: 0, placement, seed }
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
        // Random order: the leaf of every row of the piece, looked up all at once.
        let permuted = self.guide.as_ref().map(|guide| {
            let permutation = Permutation::of_rows(self.total_rows(), self.seed, self.first_row);
            let targets: Vec<u64> = (first_row..first_row + rows as u64).map(|row| permutation.apply(row)).collect();
            guide.leaves_of(&self.offsets, &targets)
        });
        let mut leaf = self.offsets.partition_point(|&offset| offset <= first_row) - 1;
        let mut corner = vec![0.0f64; dims];
        let mut indices = vec![0u32; dims];
        let mut corner_leaf = usize::MAX;
        for (offset, row) in (first_row..first_row + rows as u64).enumerate() {
            match &permuted {
                Some(leaves) => leaf = leaves[offset],
                None => {
                    while self.offsets[leaf + 1] <= row {
                        leaf += 1;
                    }
                }
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

/// Most leaves per entry of a [`LeafGuide`], on average: its memory is at most 2 bytes a leaf, a quarter of the
/// offsets'.
const LEAVES_PER_GUIDE_ENTRY: usize = 2;

/// A guide table (Chen and Asau's) to the leaf of any row: entry j is the leaf of row j·2^shift, with 2^shift
/// the fewest rows that give at most one entry per [`LEAVES_PER_GUIDE_ENTRY`] leaves. A row's leaf then lies
/// between its entry's and the next one's, a few leaves apart: random order looks up every row's leaf, and a
/// binary search over all of the offsets missed the cache at every step of its deep levels (the sampling
/// phase ran 8× as long as in cell order on 10^7 rows and 2^23 leaves; 2× with the guide).
struct LeafGuide {
    shift: u32,
    /// Leaf numbers: a release of 2^32 leaves does not fit in memory.
    entries: Vec<u32>,
}

impl LeafGuide {
    fn new(offsets: &[u64]) -> Self {
        let (leaves, rows) = (offsets.len() - 1, *offsets.last().expect("offsets start with 0"));
        assert!(leaves <= u32::MAX as usize, "{leaves} leaves");
        let most_entries = (leaves / LEAVES_PER_GUIDE_ENTRY).max(1) as u64;
        let shift = (0..u64::BITS).find(|&shift| rows.div_ceil(1 << shift) <= most_entries).unwrap_or(u64::BITS - 1);
        let mut entries = vec![0u32; rows.div_ceil(1 << shift) as usize];
        // Each chunk searches for its first row's leaf, then walks forward.
        const CHUNK: usize = 1 << 14;
        entries.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk, entries)| {
            let row_of = |entry: usize| ((chunk * CHUNK + entry) as u64) << shift;
            let mut leaf = offsets.partition_point(|&offset| offset <= row_of(0)) - 1;
            for (entry, leaf_entry) in entries.iter_mut().enumerate() {
                while offsets[leaf + 1] <= row_of(entry) {
                    leaf += 1;
                }
                *leaf_entry = leaf as u32;
            }
        });
        LeafGuide { shift, entries }
    }

    /// The leaf of each of `rows` (each < the total): the last θ with offsets[θ] ≤ row, as a search of all the
    /// offsets finds it. In two passes: the first reads each row's entries and the offset after the first
    /// of them, loads that do not wait on one another, so that the cache misses of many rows overlap; the
    /// second searches between the entries where that offset does not settle it.
    fn leaves_of(&self, offsets: &[u64], rows: &[u64]) -> Vec<usize> {
        let last_leaf = offsets.len() - 2;
        let guided: Vec<(usize, usize, u64)> = rows
            .iter()
            .map(|&row| {
                let entry = (row >> self.shift) as usize;
                let low = self.entries[entry] as usize;
                let high = self.entries.get(entry + 1).map_or(last_leaf, |&leaf| leaf as usize);
                (low, high, offsets[low + 1])
            })
            .collect();
        rows.iter()
            .zip(guided)
            .map(|(&row, (low, high, next))| match next > row {
                true => low,
                false => low + 1 + offsets[low + 2..=high].partition_point(|&offset| offset <= row),
            })
            .collect()
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
            for (placement, order) in PLACEMENTS_AND_ORDERS {
                let sampler = LeafSampler::new(geometry, &counts, placement, order, 9);
                let total = sampler.total_rows() as usize;
                let mut columns = vec![Vec::new(); dims];
                sampler.sample_rows(0, total, &mut columns);
                let mut seen = vec![0u64; 128];
                let mut codes = Vec::with_capacity(total);
                for row in 0..total {
                    let indices: Vec<u32> = (0..dims)
                        .map(|axis| {
                            crate::geometry::partition::tests::unit_axis(geometry.axis_bits(axis))
                                .quantize(columns[axis][row])
                        })
                        .collect();
                    let code = geometry.leaf_code(&indices);
                    seen[code as usize] += 1;
                    codes.push(code);
                }
                // Random order only reorders: the leaves drawn are the released counts exactly.
                assert_eq!(seen, counts, "{placement:?} {order:?} d={dims}");
                let in_cell_order = codes.windows(2).all(|pair| pair[0] <= pair[1]);
                assert_eq!(in_cell_order, order == RowOrder::Cells, "{placement:?} {order:?} d={dims}");
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
            for (placement, order) in PLACEMENTS_AND_ORDERS {
                let sampler = LeafSampler::on_grid(grid, &counts, placement, order, 3);
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
                for &cell in &cells {
                    seen[cell] += 1;
                }
                assert_eq!(seen, counts, "{placement:?} {order:?} d={dims} k={side}");
                let in_cell_order = cells.windows(2).all(|pair| pair[0] <= pair[1]);
                assert_eq!(in_cell_order, order == RowOrder::Cells, "{placement:?} {order:?} d={dims} k={side}");
            }
        }
    }

    #[test]
    fn batches_and_threads_do_not_change_the_points() {
        let geometry = CellGeometry::new(2, 10);
        let counts: Vec<u64> = (0..1024u64).map(|leaf| leaf % 23).collect();
        for (placement, order) in PLACEMENTS_AND_ORDERS {
            let sampler = LeafSampler::new(geometry, &counts, placement, order, 4);
            let total = sampler.total_rows() as usize;
            let whole = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let mut columns = vec![Vec::new(); 2];
                pool.install(|| sampler.sample_rows(0, total, &mut columns));
                columns
            };
            let reference = whole(1);
            assert_eq!(reference, whole(3), "{placement:?} {order:?}");
            // Pieces of two blocks, and pieces that start and end inside blocks.
            for piece_rows in [2 * SAMPLE_BLOCK_ROWS, SAMPLE_BLOCK_ROWS / 3 + 7] {
                let mut pieces = vec![Vec::new(); 2];
                let mut start = 0;
                while start < total {
                    let rows = piece_rows.min(total - start);
                    let mut columns = vec![Vec::new(); 2];
                    sampler.sample_rows(start as u64, rows, &mut columns);
                    for axis in 0..2 {
                        pieces[axis].extend_from_slice(&columns[axis]);
                    }
                    start += rows;
                }
                assert_eq!(reference, pieces, "{placement:?} {order:?}, pieces of {piece_rows} rows");
            }
        }
    }

    /// Every (placement, order) pair.
    const PLACEMENTS_AND_ORDERS: [(Placement, RowOrder); 4] = [
        (Placement::Uniform, RowOrder::Random),
        (Placement::Uniform, RowOrder::Cells),
        (Placement::Centre, RowOrder::Random),
        (Placement::Centre, RowOrder::Cells),
    ];

    #[test]
    fn the_feistel_permutation_is_a_bijection_on_every_size() {
        for n in [1u64, 2, 3, 4, 5, 7, 8, 9, 1000, 4095, 4096, 4097, 65_537, 100_003] {
            for key in [0u64, 1, 0xdead_beef] {
                let permutation = Permutation::new(n, key);
                let mut seen = vec![false; n as usize];
                for index in 0..n {
                    let image = permutation.apply(index);
                    assert!(image < n, "n = {n}: π({index}) = {image}");
                    assert!(!seen[image as usize], "n = {n}, key {key}: {image} hit twice");
                    seen[image as usize] = true;
                }
            }
        }
        // Not the identity, and another key gives another permutation.
        let (first, second) = (Permutation::new(1000, 1), Permutation::new(1000, 2));
        let fixed = (0..1000).filter(|&index| first.apply(index) == index).count();
        assert!(fixed < 10, "{fixed} fixed points of 1000 (about 1 expected)");
        let same = (0..1000).filter(|&index| first.apply(index) == second.apply(index)).count();
        assert!(same < 10, "two keys agree on {same} of 1000 rows");
    }

    #[test]
    fn every_prefix_of_a_random_order_is_a_uniform_sample() {
        // Two leaves, the first half of the rows in leaf A (x < 1/2), the second in B. In cell order the
        // first 1% of the rows are all A's; in random order A's share of them is a draw without replacement
        // of 1000 rows from 50 000 + 50 000: mean 1/2, standard error √(¼/1000 · (1 − 1000/100 000)).
        let (rows, prefix) = (100_000u64, 1000usize);
        let geometry = CellGeometry::new(1, 1);
        let counts = [rows / 2, rows / 2];
        let standard_error = (0.25 / prefix as f64 * (1.0 - prefix as f64 / rows as f64)).sqrt();
        for seed in [1, 2, 3] {
            let share_of_a = |order| {
                let sampler = LeafSampler::new(geometry, &counts, Placement::Uniform, order, seed);
                let mut columns = vec![Vec::new()];
                sampler.sample_rows(0, prefix, &mut columns);
                columns[0].iter().filter(|&&x| x < 0.5).count() as f64 / prefix as f64
            };
            let random = share_of_a(RowOrder::Random);
            assert!((random - 0.5).abs() < 4.0 * standard_error, "seed {seed}: A's share {random}");
            assert_eq!(share_of_a(RowOrder::Cells), 1.0, "seed {seed}");
        }
        // And a prefix that starts inside a block, far into the table: the same.
        let sampler = LeafSampler::new(geometry, &counts, Placement::Uniform, RowOrder::Random, 9);
        let mut columns = vec![Vec::new()];
        sampler.sample_rows(60_001, prefix, &mut columns);
        let share = columns[0].iter().filter(|&&x| x < 0.5).count() as f64 / prefix as f64;
        assert!((share - 0.5).abs() < 4.0 * standard_error, "rows 60 001..: A's share {share}");
    }

    #[test]
    fn leaves_listed_where_they_hold_rows_draw_the_rows_of_every_leaf() {
        let geometry = CellGeometry::new(3, 9);
        let counts: Vec<u64> = (0..512u64).map(|leaf| if leaf % 5 == 2 { leaf % 7 } else { 0 }).collect();
        let (codes, listed): (Vec<u32>, Vec<u64>) = (counts.iter().enumerate())
            .filter(|(_, &count)| count > 0)
            .map(|(code, &count)| (code as u32, count))
            .unzip();
        for (placement, order) in PLACEMENTS_AND_ORDERS {
            let dense = LeafSampler::new(geometry, &counts, placement, order, 5);
            let sparse = LeafSampler::sparse(geometry, &codes, &listed, 0, placement, order, 5);
            assert_eq!(sparse.total_rows(), dense.total_rows());
            let rows = dense.total_rows() as usize;
            let (mut from_dense, mut from_sparse) = (vec![Vec::new(); 3], vec![Vec::new(); 3]);
            dense.sample_rows(0, rows, &mut from_dense);
            sparse.sample_rows(0, rows, &mut from_sparse);
            assert_eq!(from_dense, from_sparse, "{placement:?} {order:?}");
            // A rank's part: the listed leaves from the `at`-th on, after the rows of those before them, or
            // beginning one row into that leaf. In cell order it is the rest of the whole table; in random
            // order the part's own rows permuted: at the centres, the same rows as the cell-ordered part.
            let at = 3 + listed[3..].iter().position(|&count| count >= 2).expect("a leaf of two rows or more");
            for skipped in [0, 1] {
                let first_row = listed[..at].iter().sum::<u64>() + skipped;
                let mut counts = listed[at..].to_vec();
                counts[0] -= skipped;
                let part_in = |order| {
                    let part = LeafSampler::sparse(geometry, &codes[at..], &counts, first_row, placement, order, 5);
                    let mut from_part = vec![Vec::new(); 3];
                    part.sample_rows(0, part.total_rows() as usize, &mut from_part);
                    from_part
                };
                let from_part = part_in(order);
                let rest: Vec<Vec<f64>> =
                    from_dense.iter().map(|column| column[first_row as usize..].to_vec()).collect();
                match (order, placement) {
                    (RowOrder::Cells, _) => assert_eq!(from_part, rest, "{placement:?}, {skipped} rows skipped"),
                    (RowOrder::Random, Placement::Centre) => {
                        assert_ne!(from_part, rest, "{skipped} rows skipped: the part is permuted");
                        assert_eq!(
                            sorted_rows(&from_part),
                            sorted_rows(&part_in(RowOrder::Cells)),
                            "{skipped} rows skipped: the part's own rows, reordered"
                        );
                    }
                    (RowOrder::Random, Placement::Uniform) => {}
                }
            }
        }
    }

    /// The rows of `columns` (one vector per axis), sorted.
    fn sorted_rows(columns: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let mut rows: Vec<Vec<f64>> =
            (0..columns[0].len()).map(|row| columns.iter().map(|column| column[row]).collect()).collect();
        rows.sort_by(|a, b| a.partial_cmp(b).unwrap());
        rows
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
