//! The nearest-neighbour histogram of Private Evolution (the paper's Algorithm 4): for every private
//! row, the candidate (variation) nearest to it gets one vote; ties go to the smallest candidate index.
//!
//! A brute-force scan costs O(n·|V|·d) per step. [`CandidateIndex`] buckets the candidates in a uniform
//! grid on [0,1]^d (about two per cell) and visits cells ring by ring around the query, stopping when
//! no unvisited cell can hold a candidate at distance ≤ the best so far: it returns exactly what the
//! brute force returns, ties included, because both compare the same key (distance, index)
//! lexicographically and the grid only skips candidates that are strictly farther. A grid rather than a
//! k-d tree crate (kiddo): the candidates live in the unit cube and are roughly spread over it, the grid
//! is 100 lines with no dependency, and its exact tie rule is easy to prove; kiddo's tie order among
//! equidistant points is not specified. In high dimension (fewer than three cells per axis) the grid
//! degenerates into one cell, i.e. the brute force.
//!
//! The histogram is summed per chunk of rows in parallel; the counts are integers, so the result does not
//! depend on the order or the thread count.

use rayon::prelude::*;

/// The metric of the domain: ℓ∞ on the box [0,1]^d (dpsynth's metric elsewhere), ℓ2 on the ball.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Chebyshev,
    Euclidean,
}

impl Metric {
    /// A key increasing with the distance: the ℓ∞ distance, or the squared ℓ2 distance (no square root,
    /// so that a lower bound on one coordinate gap is a lower bound on the key in floating point).
    #[inline]
    pub fn key(self, a: &[f64], b: &[f64]) -> f64 {
        match self {
            Metric::Chebyshev => a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max),
            Metric::Euclidean => a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum(),
        }
    }

    /// The key of a distance (a lower bound on a coordinate gap).
    #[inline]
    fn key_of_gap(self, gap: f64) -> f64 {
        match self {
            Metric::Chebyshev => gap,
            Metric::Euclidean => gap * gap,
        }
    }

    /// The distance of a key.
    pub fn distance(self, key: f64) -> f64 {
        match self {
            Metric::Chebyshev => key,
            Metric::Euclidean => key.sqrt(),
        }
    }
}

/// The nearest candidate by brute force: the smallest (key, index). `candidates` is flat, `dims` per point.
pub fn nearest_by_scan(metric: Metric, candidates: &[f64], dims: usize, query: &[f64]) -> usize {
    let mut best = (f64::INFINITY, usize::MAX);
    for (index, candidate) in candidates.chunks_exact(dims).enumerate() {
        let key = metric.key(query, candidate);
        if key < best.0 {
            best = (key, index);
        }
    }
    best.1
}

/// Slack on a cell boundary: a point is in cell ⌊x·g⌋ computed in f64, so it may sit a rounding error
/// outside the cell's exact interval; bounds are lowered by this much.
const BOUNDARY_SLACK: f64 = 1e-12;
/// Candidates per grid cell the index aims at.
const CANDIDATES_PER_CELL: f64 = 2.0;
/// Fewer cells per axis than this makes ring search no better than the scan: one cell is used instead.
const MIN_CELLS_PER_AXIS: usize = 3;
/// At most this many grid cells (the cell-start array's size).
const MAX_CELLS: usize = 1 << 22;

/// The candidates bucketed in a uniform grid of `cells_per_axis`^d cells on [0,1]^d.
pub struct CandidateIndex<'a> {
    metric: Metric,
    dims: usize,
    candidates: &'a [f64],
    cells_per_axis: usize,
    /// Candidates of cell c: `order[cell_start[c] .. cell_start[c + 1]]`, each cell's in index order.
    cell_start: Vec<u32>,
    order: Vec<u32>,
}

impl<'a> CandidateIndex<'a> {
    pub fn new(metric: Metric, candidates: &'a [f64], dims: usize) -> Self {
        let count = candidates.len() / dims;
        let mut cells_per_axis = (count as f64 / CANDIDATES_PER_CELL)
            .powf(1.0 / dims as f64)
            .floor() as usize;
        while cells_per_axis > 1 && (cells_per_axis as f64).powi(dims as i32) > MAX_CELLS as f64 {
            cells_per_axis -= 1;
        }
        if cells_per_axis < MIN_CELLS_PER_AXIS {
            cells_per_axis = 1;
        }
        let cell_count = cells_per_axis.pow(dims as u32);
        let mut index = CandidateIndex {
            metric,
            dims,
            candidates,
            cells_per_axis,
            cell_start: vec![0; cell_count + 1],
            order: vec![0; count],
        };
        let mut axes = vec![0usize; dims];
        let cells: Vec<usize> = candidates
            .chunks_exact(dims)
            .map(|point| {
                index.cell_axes(point, &mut axes);
                index.flat(&axes)
            })
            .collect();
        for &cell in &cells {
            index.cell_start[cell + 1] += 1;
        }
        for cell in 0..cell_count {
            index.cell_start[cell + 1] += index.cell_start[cell];
        }
        let mut next: Vec<u32> = index.cell_start[..cell_count].to_vec();
        for (candidate, &cell) in cells.iter().enumerate() {
            index.order[next[cell] as usize] = candidate as u32;
            next[cell] += 1;
        }
        index
    }

    pub fn cells_per_axis(&self) -> usize {
        self.cells_per_axis
    }

    fn cell_axes(&self, point: &[f64], axes: &mut [usize]) {
        let g = self.cells_per_axis;
        for (axis, &x) in axes.iter_mut().zip(point) {
            *axis = ((x * g as f64).max(0.0) as usize).min(g - 1);
        }
    }

    fn flat(&self, axes: &[usize]) -> usize {
        axes.iter()
            .fold(0, |flat, &axis| flat * self.cells_per_axis + axis)
    }

    /// The nearest candidate to `query`: the smallest (key, index), as [`nearest_by_scan`]. `scratch`
    /// is reused between queries.
    pub fn nearest(&self, query: &[f64], scratch: &mut Vec<usize>) -> usize {
        let (g, dims) = (self.cells_per_axis, self.dims);
        scratch.resize(4 * dims, 0);
        let (centre, rest) = scratch.split_at_mut(dims);
        let (cursor, rest) = rest.split_at_mut(dims);
        let (lo, hi) = rest.split_at_mut(dims);
        self.cell_axes(query, centre);
        let mut best = (f64::INFINITY, usize::MAX);
        for ring in 0..g {
            // Every cell at Chebyshev cell distance exactly `ring` from the query's cell.
            for axis in 0..dims {
                lo[axis] = centre[axis].saturating_sub(ring);
                hi[axis] = (centre[axis] + ring).min(g - 1);
            }
            cursor.copy_from_slice(lo);
            loop {
                if cursor.iter().zip(centre.iter()).any(|(&a, &c)| a.abs_diff(c) == ring) {
                    let cell = self.flat(cursor);
                    let span = self.cell_start[cell] as usize..self.cell_start[cell + 1] as usize;
                    for &candidate in &self.order[span] {
                        let candidate = candidate as usize;
                        let point = &self.candidates[candidate * dims..(candidate + 1) * dims];
                        let key = self.metric.key(query, point);
                        if key < best.0 || (key == best.0 && candidate < best.1) {
                            best = (key, candidate);
                        }
                    }
                }
                if !next_cell(cursor, lo, hi) {
                    break;
                }
            }
            // Every unvisited candidate lies outside the box of cells lo..=hi, so one of its coordinate
            // gaps to the query is at least the distance to the box's nearest inner face (faces on the
            // cube's boundary have nothing beyond them).
            let mut gap = f64::INFINITY;
            for axis in 0..dims {
                if lo[axis] > 0 {
                    gap = gap.min(query[axis] - lo[axis] as f64 / g as f64);
                }
                if hi[axis] < g - 1 {
                    gap = gap.min((hi[axis] + 1) as f64 / g as f64 - query[axis]);
                }
            }
            if gap == f64::INFINITY
                || self.metric.key_of_gap((gap - BOUNDARY_SLACK).max(0.0)) > best.0
            {
                break;
            }
        }
        best.1
    }
}

/// Steps `cursor` through the box lo..=hi (last axis fastest); false after the last cell.
fn next_cell(cursor: &mut [usize], lo: &[usize], hi: &[usize]) -> bool {
    for axis in (0..cursor.len()).rev() {
        if cursor[axis] < hi[axis] {
            cursor[axis] += 1;
            return true;
        }
        cursor[axis] = lo[axis];
    }
    false
}

/// Rows per parallel task of the histogram.
const HISTOGRAM_CHUNK_ROWS: usize = 1 << 12;

/// The nearest-neighbour counts: entry j is the number of `rows` (flat, `dims` per row) whose nearest
/// candidate is j (ties to the smallest j).
pub fn nearest_neighbour_counts(
    metric: Metric,
    candidates: &[f64],
    dims: usize,
    rows: &[f64],
) -> Vec<u64> {
    let count = candidates.len() / dims;
    let index = CandidateIndex::new(metric, candidates, dims);
    rows.par_chunks(HISTOGRAM_CHUNK_ROWS * dims)
        .fold(
            || (vec![0u64; count], Vec::new()),
            |(mut counts, mut scratch), chunk| {
                for row in chunk.chunks_exact(dims) {
                    counts[index.nearest(row, &mut scratch)] += 1;
                }
                (counts, scratch)
            },
        )
        .map(|(counts, _)| counts)
        .reduce(
            || vec![0u64; count],
            |mut total, part| {
                for (t, p) in total.iter_mut().zip(&part) {
                    *t += p;
                }
                total
            },
        )
}

/// The same counts by brute force (the oracle of the index, and the baseline of its throughput).
pub fn nearest_neighbour_counts_by_scan(
    metric: Metric,
    candidates: &[f64],
    dims: usize,
    rows: &[f64],
) -> Vec<u64> {
    let count = candidates.len() / dims;
    rows.par_chunks(HISTOGRAM_CHUNK_ROWS * dims)
        .map(|chunk| {
            let mut counts = vec![0u64; count];
            for row in chunk.chunks_exact(dims) {
                counts[nearest_by_scan(metric, candidates, dims, row)] += 1;
            }
            counts
        })
        .reduce(
            || vec![0u64; count],
            |mut total, part| {
                for (t, p) in total.iter_mut().zip(&part) {
                    *t += p;
                }
                total
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Points on a coarse lattice, so that many distances tie exactly, plus duplicates.
    fn lattice_points(rng: &mut Xoshiro256PlusPlus, count: usize, dims: usize, steps: u32) -> Vec<f64> {
        (0..count * dims)
            .map(|_| f64::from(rng.random_range(0..=steps)) / f64::from(steps))
            .collect()
    }

    #[test]
    fn the_index_equals_the_scan_with_ties() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for metric in [Metric::Chebyshev, Metric::Euclidean] {
            for dims in 1..=4 {
                for (candidates, steps) in [(7, 4), (60, 8), (500, 16), (3000, 64)] {
                    let mut points = lattice_points(&mut rng, candidates, dims, steps);
                    // Duplicates: the first copy must win.
                    let copy = points[..dims].to_vec();
                    points.extend_from_slice(&copy);
                    let rows: Vec<f64> = lattice_points(&mut rng, 400, dims, 2 * steps)
                        .into_iter()
                        .chain((0..400 * dims).map(|_| rng.random::<f64>()))
                        .collect();
                    let index = CandidateIndex::new(metric, &points, dims);
                    let mut scratch = Vec::new();
                    for row in rows.chunks_exact(dims) {
                        assert_eq!(
                            index.nearest(row, &mut scratch),
                            nearest_by_scan(metric, &points, dims, row),
                            "{metric:?} d={dims} m={candidates} row {row:?}"
                        );
                    }
                    assert_eq!(
                        nearest_neighbour_counts(metric, &points, dims, &rows),
                        nearest_neighbour_counts_by_scan(metric, &points, dims, &rows)
                    );
                }
            }
        }
    }

    #[test]
    fn ties_go_to_the_smallest_index() {
        // The query sits half-way between two candidates on both metrics; a duplicate sits last.
        let points = [0.25, 0.5, 0.75, 0.5, 0.25, 0.5];
        for metric in [Metric::Chebyshev, Metric::Euclidean] {
            assert_eq!(nearest_by_scan(metric, &points, 2, &[0.5, 0.5]), 0);
            let index = CandidateIndex::new(metric, &points, 2);
            assert_eq!(index.nearest(&[0.5, 0.5], &mut Vec::new()), 0);
        }
    }

    #[test]
    fn the_index_uses_a_grid_when_it_pays() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let points = lattice_points(&mut rng, 2000, 2, 1000);
        assert!(CandidateIndex::new(Metric::Euclidean, &points, 2).cells_per_axis() >= 30);
        let points = lattice_points(&mut rng, 50, 8, 1000);
        assert_eq!(CandidateIndex::new(Metric::Euclidean, &points, 8).cells_per_axis(), 1);
    }

    #[test]
    fn the_histogram_does_not_depend_on_the_thread_count() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let points = lattice_points(&mut rng, 300, 3, 10);
        let rows: Vec<f64> = (0..30_000 * 3).map(|_| rng.random::<f64>()).collect();
        let run = |threads| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| nearest_neighbour_counts(Metric::Chebyshev, &points, 3, &rows))
        };
        let one = run(1);
        assert_eq!(one.iter().sum::<u64>(), 30_000);
        assert_eq!(one, run(3));
    }
}
