//! The nearest-neighbour histogram of Private Evolution (the paper's Algorithm 4): for every private
//! row, the candidate (variation) nearest to it gets one vote; ties go to the smallest candidate index.
//!
//! A brute-force scan costs O(n·|V|·d) per step. [`CandidateIndex`] is a k-d tree over the candidates
//! (median splits on the widest axis, leaves of at most [`LEAF_CANDIDATES`]), so it follows the
//! candidates where they cluster, as they do where the data is. It returns exactly what the brute force
//! returns, ties included: both compare the same key (distance, index) lexicographically, and the tree
//! skips a subtree only when a lower bound on its keys is *strictly* above the best key so far. The
//! bound is exact in floating point, with no slack: a point beyond a split at s is at least |q − s| from
//! q in exact arithmetic, rounding is monotone, and a sum of non-negative rounded terms is at least each
//! term. Our own tree rather than a crate (kiddo): that proof and the tie rule are the point, and kiddo
//! does not specify its order among equidistant points.
//!
//! The histogram is summed per chunk of rows in parallel; the counts are integers, so the result does not
//! depend on the order or the thread count. `search.rs` chooses between this, the GPU kernel
//! (`nearest_gpu.rs`) and rows read again at every step.

use rayon::prelude::*;


/// Rows and candidates lie on the lattice of 2^−LATTICE_BITS of the cube (rows as midpoints of their
/// quantisation cells, candidates by [`snap_to_lattice`]). There every coordinate gap is a multiple of
/// 2^−21 below 2, every squared gap a multiple of 2^−42 below 4, so each key is exact in f64 (for
/// d < 2^11): the CPU and the GPU kernel, which works in integers, compare the same keys.
pub const LATTICE_BITS: u32 = 21;

/// The lattice point nearest to `x` (a candidate coordinate in [0,1]).
pub fn snap_to_lattice(x: f64) -> f64 {
    let unit = f64::from(1u32 << LATTICE_BITS);
    (x * unit).round() / unit
}

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
#[cfg(any(test, feature = "internals"))]
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

/// At most this many candidates in a leaf of the tree (scanned one by one).
pub const LEAF_CANDIDATES: usize = 8;

/// Marks a leaf in [`Node::axis`].
const LEAF: u32 = u32::MAX;

/// A node of the tree. A split holds the points ≤ `split` on `axis` in child `first` and those
/// ≥ `split` in child `second`; a leaf (axis = [`LEAF`]) holds points `first..second` of the tree's order.
#[derive(Clone, Copy, Debug)]
struct Node {
    split: f64,
    axis: u32,
    first: u32,
    second: u32,
}

/// The candidates in a k-d tree.
pub struct CandidateIndex {
    metric: Metric,
    dims: usize,
    /// The candidates' coordinates in leaf order (each leaf's points contiguous).
    points: Vec<f64>,
    /// The candidate index of each point of `points`.
    ids: Vec<u32>,
    /// Node 0 is the root.
    nodes: Vec<Node>,
}

impl CandidateIndex {
    pub fn new(metric: Metric, candidates: &[f64], dims: usize) -> Self {
        let count = candidates.len() / dims;
        let mut ids: Vec<u32> = (0..count as u32).collect();
        let mut nodes = Vec::with_capacity(2 * count.div_ceil(LEAF_CANDIDATES) + 1);
        build(candidates, dims, &mut ids, 0, &mut nodes);
        let points = ids
            .iter()
            .flat_map(|&id| &candidates[id as usize * dims..(id as usize + 1) * dims])
            .copied()
            .collect();
        CandidateIndex {
            metric,
            dims,
            points,
            ids,
            nodes,
        }
    }

    /// Leaves of the tree.
    #[cfg(test)]
    fn leaves(&self) -> usize {
        self.nodes.iter().filter(|node| node.axis == LEAF).count()
    }

    /// Longest path from the root to a leaf, in nodes.
    #[cfg(test)]
    fn height(&self) -> usize {
        fn height(nodes: &[Node], node: usize) -> usize {
            let Node { axis, first, second, .. } = nodes[node];
            if axis == LEAF {
                1
            } else {
                1 + height(nodes, first as usize).max(height(nodes, second as usize))
            }
        }
        height(&self.nodes, 0)
    }

    /// The nearest candidate to `query`: the smallest (key, index), as [`nearest_by_scan`]. `stack`
    /// holds the subtrees still to visit with a lower bound on their keys; it is reused between queries.
    pub fn nearest(&self, query: &[f64], stack: &mut Vec<(u32, f64)>) -> usize {
        let dims = self.dims;
        let mut best = (f64::INFINITY, u32::MAX);
        stack.clear();
        stack.push((0, 0.0));
        while let Some((node, bound)) = stack.pop() {
            if bound > best.0 {
                continue;
            }
            let Node { split, axis, first, second } = self.nodes[node as usize];
            if axis == LEAF {
                for slot in first as usize..second as usize {
                    let key = self.metric.key(query, &self.points[slot * dims..(slot + 1) * dims]);
                    let id = self.ids[slot];
                    if key < best.0 || (key == best.0 && id < best.1) {
                        best = (key, id);
                    }
                }
                continue;
            }
            let offset = query[axis as usize] - split;
            let (near, far) = if offset < 0.0 { (first, second) } else { (second, first) };
            // Far side first on the stack, so the near side is searched first.
            stack.push((far, bound.max(self.metric.key_of_gap(offset.abs()))));
            stack.push((near, bound));
        }
        best.1 as usize
    }
}

/// Builds the subtree of `ids` (candidate indices; reordered into leaf order) whose first point sits at
/// `offset` of the tree's order; returns its node.
fn build(candidates: &[f64], dims: usize, ids: &mut [u32], offset: usize, nodes: &mut Vec<Node>) -> u32 {
    let node = nodes.len() as u32;
    let leaf = Node {
        split: 0.0,
        axis: LEAF,
        first: offset as u32,
        second: (offset + ids.len()) as u32,
    };
    nodes.push(leaf);
    if ids.len() <= LEAF_CANDIDATES {
        return node;
    }
    let coordinate = |id: u32, axis: usize| candidates[id as usize * dims + axis];
    let spread = |axis: usize| {
        let (lo, hi) = ids.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &id| {
            let x = coordinate(id, axis);
            (lo.min(x), hi.max(x))
        });
        hi - lo
    };
    let (axis, widest) = (0..dims)
        .map(|axis| (axis, spread(axis)))
        .fold((0, 0.0), |best, next| if next.1 > best.1 { next } else { best });
    if widest == 0.0 {
        // All points equal: one leaf, scanned in full (the first index wins the tie).
        return node;
    }
    let middle = ids.len() / 2;
    ids.select_nth_unstable_by(middle, |&a, &b| coordinate(a, axis).total_cmp(&coordinate(b, axis)));
    let split = coordinate(ids[middle], axis);
    let (low, high) = ids.split_at_mut(middle);
    let first = build(candidates, dims, low, offset, nodes);
    let second = build(candidates, dims, high, offset + middle, nodes);
    nodes[node as usize] = Node {
        split,
        axis: axis as u32,
        first,
        second,
    };
    node
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
            |(mut counts, mut stack), chunk| {
                for row in chunk.chunks_exact(dims) {
                    counts[index.nearest(row, &mut stack)] += 1;
                }
                (counts, stack)
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
#[cfg(any(test, feature = "internals"))]
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
    use crate::testing::{case_rng, lattice_points};
    use rand::RngExt;

    #[test]
    fn the_index_equals_the_scan_with_ties() {
        let mut rng = case_rng(5);
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
                    let mut stack = Vec::new();
                    for row in rows.chunks_exact(dims) {
                        assert_eq!(
                            index.nearest(row, &mut stack),
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
    fn the_tree_stays_balanced_where_candidates_cluster() {
        // 19 in 20 candidates in a corner box of side 10^-3 (where a uniform grid would put them all in
        // one cell), the rest spread over the cube.
        let mut rng = case_rng(3);
        let (count, dims) = (20_000usize, 2);
        let points: Vec<f64> = (0..count)
            .flat_map(|i| {
                let side = if i % 20 == 0 { 1.0 } else { 1e-3 };
                [side * rng.random::<f64>(), side * rng.random::<f64>()]
            })
            .collect();
        let index = CandidateIndex::new(Metric::Chebyshev, &points, dims);
        let fewest = count.div_ceil(LEAF_CANDIDATES);
        assert!((fewest..=2 * fewest).contains(&index.leaves()), "{} leaves", index.leaves());
        let balanced = (count as f64 / LEAF_CANDIDATES as f64).log2().ceil() as usize + 1;
        assert!(index.height() <= balanced, "height {} > {balanced}", index.height());
        let rows: Vec<f64> = (0..4000 * dims)
            .map(|i| if i % 7 == 0 { rng.random::<f64>() } else { 1e-3 * rng.random::<f64>() })
            .collect();
        for metric in [Metric::Chebyshev, Metric::Euclidean] {
            assert_eq!(
                nearest_neighbour_counts(metric, &points, dims, &rows),
                nearest_neighbour_counts_by_scan(metric, &points, dims, &rows)
            );
        }
    }

    #[test]
    fn the_histogram_does_not_depend_on_the_thread_count() {
        let mut rng = case_rng(9);
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
