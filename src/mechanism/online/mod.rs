//! Online synthesis (docs/mechanisms/online.md): the continual-release algorithm of He–Vershynin–Zhu
//! ("Online differentially private synthetic data generation", the dissertation's chapter 5), with the
//! fixes of docs/mechanisms/online.md.
//!
//! A stream x_1, x_2, … of points of [0,1]^d (the rows of the input, in order) is counted on a binary
//! hierarchical partition that deepens as t grows (depth j appears at t_j = ⌈2^j/ε⌉, [`plan`]); every
//! cell of depth ≥ 1 runs its own private counter ([`counter`]) with the budget ε_{j,r} of its depth
//! and the current time level. A release at time t makes the counters' outputs consistent with PMM's
//! top-down step, the root set to the public t, and places exactly t points in the leaves. Counts are
//! kept incrementally; the tree of outputs is built only when a release is asked. [`state`] saves and
//! restores everything, so a stream can be fed over many runs.
//!
//! Privacy (replace relation: two streams differ in one element, t is public): an element of level r
//! changes the counts of two root-to-leaf paths; each path costs Σ_j ε_{j,r} ≤ ε/2 (d ≥ 2), or at most
//! (1/2 − 3/π²)ε for d = 1 (cells created later replay the history), so the whole infinite sequence of
//! releases is ε-DP. Only the counters read the data; consistency and placement are post-processing.

pub mod counter;
pub mod plan;
pub mod state;

use std::sync::Arc;

use rayon::prelude::*;

use crate::error::Result;
use crate::geometry::partition::CellGeometry;
use crate::geometry::tree::CountTree;
use crate::mechanism::pmm::consistency::{enforce_consistency, ConsistencyRule};
use crate::noise::discrete_laplace::sample_discrete_laplace;
use crate::privacy::resumed_stream::ResumedStream;
use crate::privacy::{NoiseKey, NoiseStream};
use counter::{LevelChecks, LevelSpan, SparseCounter};
pub use plan::{OnlinePlan, MAX_ONLINE_DEPTH};

/// Steps processed per pass: each cell hit or still deciding opens its noise stream once per pass, so a
/// deep cell hit k times in a pass opens it once, not k times; a pass holds about 32 bytes a step.
const STEPS_PER_PASS: usize = 1 << 22;

/// Cells whose level noise comes from one stream ([`NoiseStream::OnlineLevel`]), in cell order.
const LEVEL_NOISE_CELLS: usize = 1 << 12;

/// Cells handled per rayon task, at most.
const CELLS_PER_TASK: usize = 1 << 8;

/// Feeds at least this long split the cells of a depth finely between tasks.
const LONG_FEED: usize = 1 << 12;

/// The consistency rule of the releases (the same default as PMM's, unpruned).
pub const ONLINE_CONSISTENCY: ConsistencyRule = ConsistencyRule::Uniform;

/// One cell: its counter and how far its noise stream has been read.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Cell {
    pub counter: SparseCounter,
    /// ChaCha word position of the cell's stream ([`NoiseStream::OnlineCell`], chunk = heap index).
    pub noise_words: u64,
}

/// The growing tree of counters: the mechanism's whole memory of the stream.
#[derive(Clone, Debug, PartialEq)]
pub struct OnlineTree {
    plan: OnlinePlan,
    /// Elements read so far: the current time t.
    position: u64,
    /// cells[j − 1] holds the 2^j cells of depth j, in Morton order; its length is the tree's depth.
    cells: Vec<Vec<Cell>>,
    /// d = 1 only: the finest cell code of every element read, so that a cell created later can count
    /// its history (the note's P4). 4 bytes per element; d ≥ 2 keeps none (O(εt) cells only).
    history: Vec<u32>,
    checks: CheckCache,
    active: ActiveCells,
}

/// The check samplers of one level, one per depth, built on first use (a table costs about 9σ big-integer
/// products, too much to rebuild at every feed). A cache, not part of what a tree is: trees compare
/// equal and clone whatever it holds.
#[derive(Default)]
struct CheckCache {
    level: u32,
    by_depth: Vec<Option<Arc<LevelChecks>>>,
}

impl CheckCache {
    fn get(&mut self, plan: &OnlinePlan, depth: u32, level: u32) -> Result<Arc<LevelChecks>> {
        if self.level != level {
            *self = CheckCache {
                level,
                by_depth: Vec::new(),
            };
        }
        let index = depth as usize;
        if self.by_depth.len() <= index {
            self.by_depth.resize(index + 1, None);
        }
        if let Some(checks) = &self.by_depth[index] {
            return Ok(Arc::clone(checks));
        }
        let span = LevelSpan {
            first: plan.level_start(level),
            last: plan.level_start(level + 1) - 1,
        };
        let checks = Arc::new(LevelChecks::new(span, plan.cell_noise(depth, level)?));
        self.by_depth[index] = Some(Arc::clone(&checks));
        Ok(checks)
    }
}

/// A cache the state carries beside its released values: a clone starts empty, and two states compare
/// equal whatever their caches hold (they are derived, never part of the state's meaning).
macro_rules! derived_cache {
    ($name:ident) => {
        impl Clone for $name {
            fn clone(&self) -> Self {
                $name::default()
            }
        }

        impl PartialEq for $name {
            fn eq(&self, _: &Self) -> bool {
                true
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(stringify!($name))
            }
        }
    };
}

derived_cache!(CheckCache);

/// Per depth, the cells that may draw before the level ends without being hit: those whose decided
/// checks stop short of it or hold a closing (ascending cell codes; `None`: every cell, as after a
/// level starts or a state is loaded). A superset is always correct, so a clone starts over.
#[derive(Default)]
struct ActiveCells(Vec<Option<Vec<u32>>>);

impl ActiveCells {
    fn at(&self, index: usize) -> Option<&[u32]> {
        self.0.get(index).and_then(|active| active.as_deref())
    }

    fn set(&mut self, index: usize, cells: Vec<u32>) {
        if self.0.len() <= index {
            self.0.resize(index + 1, None);
        }
        self.0[index] = Some(cells);
    }

    /// Every cell may draw again (a level starts).
    fn reset(&mut self) {
        self.0.clear();
    }
}

derived_cache!(ActiveCells);

/// What a release at time t is made of (before placing points).
pub struct OnlineRelease {
    pub geometry: CellGeometry,
    /// Consistent leaf counts summing to t.
    pub leaf_counts: Vec<u64>,
}

impl OnlineTree {
    pub fn new(plan: OnlinePlan) -> Self {
        OnlineTree {
            plan,
            position: 0,
            cells: Vec::new(),
            history: Vec::new(),
            checks: CheckCache::default(),
            active: ActiveCells::default(),
        }
    }

    /// Rebuilds a tree from the parts a state file holds (checked by the caller).
    pub fn from_parts(plan: OnlinePlan, position: u64, cells: Vec<Vec<Cell>>, history: Vec<u32>) -> Self {
        OnlineTree {
            plan,
            position,
            cells,
            history,
            checks: CheckCache::default(),
            active: ActiveCells::default(),
        }
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn plan(&self) -> &OnlinePlan {
        &self.plan
    }

    /// t: the number of elements read.
    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn depth(&self) -> u32 {
        self.cells.len() as u32
    }

    pub fn cells(&self) -> &[Vec<Cell>] {
        &self.cells
    }

    pub fn history(&self) -> &[u32] {
        &self.history
    }

    /// Reads the next elements of the stream, given as their cell codes at depth
    /// [`MAX_ONLINE_DEPTH`] (Morton order, `CellGeometry::new(d, MAX_ONLINE_DEPTH)`).
    pub fn feed(&mut self, codes: &[u32], key: &NoiseKey) -> Result<()> {
        self.plan.check_depth(self.position + codes.len() as u64)?;
        let mut rest = codes;
        while !rest.is_empty() {
            let t = self.position + 1;
            let level = self.plan.level_at(t);
            let level_start = self.plan.level_start(level);
            if t == level_start || self.position == 0 {
                self.begin_level(level, key)?;
            }
            let level_left = self.plan.level_start(level + 1) - t;
            let steps = rest.len().min(STEPS_PER_PASS).min(usize::try_from(level_left).unwrap_or(usize::MAX));
            let (now, later) = rest.split_at(steps);
            self.read_steps(now, level, key)?;
            if self.plan.dims() == 1 {
                self.history.extend_from_slice(now);
            }
            self.position += steps as u64;
            rest = later;
        }
        Ok(())
    }

    /// At the first element of level `level`: finishes the previous level in every cell (S̃ update),
    /// grows the tree to depth `level` and starts the level in every cell.
    fn begin_level(&mut self, level: u32, key: &NoiseKey) -> Result<()> {
        let plan = self.plan;
        self.active.reset();
        let previous = (self.position > 0).then(|| plan.level_at(self.position));
        let existing = self.cells.len();
        for depth in self.depth() + 1..=level {
            let mut cells = vec![Cell::default(); 1usize << depth];
            if plan.dims() == 1 {
                // A 1-D cell counts from level 0 (r0 = 0): its history enters S̃ as one noisy total
                // per past non-empty level, each Lap_Z(2/ε_j) (the Algorithm 2 outputs of past levels
                // were never released, so only their totals need replaying).
                let mut counts = vec![0i64; 1usize << depth];
                for &code in &self.history {
                    counts[(code >> (MAX_ONLINE_DEPTH - depth)) as usize] += 1;
                }
                let mut past_noise = Vec::new();
                for past in 0..level {
                    if plan.level_length(past) > 0 {
                        past_noise.push(plan.cell_noise(depth, past)?);
                    }
                }
                for_each_cell(&mut cells, depth, key, |code, cell, rng| {
                    cell.counter.noisy_past_levels = counts[code as usize]
                        + past_noise
                            .iter()
                            .map(|noise| sample_discrete_laplace(rng, noise.level_total))
                            .sum::<i64>();
                });
            }
            self.cells.push(cells);
        }
        // Every cell finishes the previous level (if it had one) and starts this one with draws from the
        // level's streams, read in cell order by blocks of cells: data-independent draws that need no
        // cell's own stream.
        for (index, cells) in self.cells.iter_mut().enumerate() {
            let depth = index as u32 + 1;
            let finished = match previous {
                Some(previous) if index < existing => Some(plan.cell_noise(depth, previous)?),
                _ => None,
            };
            let noise = plan.cell_noise(depth, level)?;
            cells.par_chunks_mut(LEVEL_NOISE_CELLS).enumerate().for_each(|(block, chunk)| {
                // level ≤ 31, depth ≤ 30 and block < 2^18: disjoint fields below the chunk's 2^40.
                let stream = u64::from(level) << 35 | u64::from(depth) << 30 | block as u64;
                let mut rng = key.stream(NoiseStream::OnlineLevel, stream);
                for cell in chunk {
                    if let Some(finished) = &finished {
                        cell.counter.finish_level(finished, &mut rng);
                    }
                    cell.counter.start_level(&noise, &mut rng);
                }
            });
        }
        Ok(())
    }

    /// Reads `codes` (the next steps, all of level `level`) into every cell: each step's pending check
    /// (none at the level's first step), then its read. Only the cells hit in these steps and those
    /// whose decided checks do not reach the level's end are visited: the others would draw nothing,
    /// and visiting every cell at every pass would make a stream of n elements cost n²/pass.
    fn read_steps(&mut self, codes: &[u32], level: u32, key: &NoiseKey) -> Result<()> {
        let plan = self.plan;
        let (first, last) = (self.position + 1, self.position + codes.len() as u64);
        let level_last = plan.level_start(level + 1) - 1;
        // The steps as (finest code, step), kept sorted by (cell at the current depth, step): each depth
        // splits every cell's run of its parent's order stably by the code's next bit (Morton order is
        // prefix order), so a cell's steps are consecutive and ascending at O(steps) a depth.
        let mut keyed: Vec<u64> =
            codes.iter().enumerate().map(|(step, &code)| u64::from(code) << 32 | step as u64).collect();
        let mut split = vec![0u64; keyed.len()];
        let mut sorted_steps = vec![0u32; keyed.len()];
        for (index, cells) in self.cells.iter_mut().enumerate() {
            let depth = index as u32 + 1;
            let checks = self.checks.get(&plan, depth, level)?;
            let shift = 32 + MAX_ONLINE_DEPTH - depth;
            split_by_next_bit(&keyed, &mut split, shift);
            std::mem::swap(&mut keyed, &mut split);
            for (step, &keyed) in sorted_steps.iter_mut().zip(&keyed) {
                *step = keyed as u32;
            }
            // (cell, first, end) of each cell hit, in cell order, as ranges of `sorted_steps`.
            let mut hit_cells: Vec<(u32, u32, u32)> = Vec::new();
            for (position, &keyed) in keyed.iter().enumerate() {
                let cell = (keyed >> shift) as u32;
                match hit_cells.last_mut() {
                    Some(open) if open.0 == cell => open.2 = position as u32 + 1,
                    _ => hit_cells.push((cell, position as u32, position as u32 + 1)),
                }
            }
            // The densest cells (small depths) draw many checks over long feeds: then a task per cell
            // or few, so that they run in parallel; deep depths get about a thousand tasks per pass.
            let per_task = if codes.len() >= LONG_FEED {
                (cells.len() / (4 * rayon::current_num_threads())).clamp(1, CELLS_PER_TASK)
            } else {
                CELLS_PER_TASK.max(cells.len() >> 10)
            };
            let active = self.active.at(index);
            let still_active: Vec<Vec<u32>> = cells
                .par_chunks_mut(per_task)
                .enumerate()
                .map(|(task, chunk)| {
                    let base = (task * per_task) as u32;
                    let end = base + chunk.len() as u32;
                    let in_chunk = |cell: u32| cell >= base && cell < end;
                    let hits = &hit_cells[hit_cells.partition_point(|hit| hit.0 < base)..];
                    let mut hits = hits.iter().take_while(|hit| in_chunk(hit.0)).peekable();
                    let mut visit = |cell: u32, ones: &[u32], kept: &mut Vec<u32>| {
                        let counter_cell = &mut chunk[(cell - base) as usize];
                        if !ones.is_empty() || !counter_cell.counter.is_idle_through(last) {
                            with_cell_stream(counter_cell, depth, u64::from(cell), key, |counter_cell, rng| {
                                counter_cell.counter.run_steps(first, last, ones, checks.as_ref(), rng)
                            });
                        }
                        if !counter_cell.counter.is_idle_through(level_last) {
                            kept.push(cell);
                        }
                    };
                    let mut kept = Vec::new();
                    let candidates: Box<dyn Iterator<Item = u32>> = match active {
                        None => Box::new(base..end),
                        Some(active) => {
                            let from = active.partition_point(|&cell| cell < base);
                            Box::new(active[from..].iter().copied().take_while(move |&cell| cell < end))
                        }
                    };
                    let mut candidates = candidates.peekable();
                    loop {
                        let next_hit = hits.peek().map(|hit| hit.0);
                        let next_candidate = candidates.peek().copied();
                        let cell = match (next_hit, next_candidate) {
                            (None, None) => break,
                            (Some(hit), Some(candidate)) => hit.min(candidate),
                            (Some(hit), None) => hit,
                            (None, Some(candidate)) => candidate,
                        };
                        let mut ones: &[u32] = &[];
                        if next_hit == Some(cell) {
                            let (_, from, to) = *hits.next().expect("peeked");
                            ones = &sorted_steps[from as usize..to as usize];
                        }
                        if next_candidate == Some(cell) {
                            candidates.next();
                        }
                        visit(cell, ones, &mut kept);
                    }
                    kept
                })
                .collect();
            self.active.set(index, still_active.concat());
        }
        Ok(())
    }
}

impl OnlineTree {
    /// The release at the current time t ≥ 1: every counter's output, clipped at 0, made consistent
    /// top-down from the root t (PMM's consistency; the coins of its ties from `coin_seed`), and the
    /// leaves of depth r(t).
    pub fn release(&self, coin_seed: u64) -> OnlineRelease {
        let t = self.position;
        assert!(t >= 1, "a release needs at least one element");
        let mut levels = vec![vec![t as i64]];
        for cells in &self.cells {
            levels.push(cells.par_iter().map(|cell| cell.counter.output().max(0)).collect());
        }
        let mut tree = CountTree::from_levels(levels);
        enforce_consistency(&mut tree, ONLINE_CONSISTENCY, &[], coin_seed);
        OnlineRelease {
            geometry: CellGeometry::new(self.plan.dims(), self.depth()),
            leaf_counts: tree.into_leaves().into_iter().map(|count| count as u64).collect(),
        }
    }
}

/// Writes `sorted` (sorted by (code >> (shift + 1), step)) into `split` sorted by (code >> shift, step):
/// each run of one parent keeps its order, its 0-bit children first.
fn split_by_next_bit(sorted: &[u64], split: &mut [u64], shift: u32) {
    let mut start = 0;
    while start < sorted.len() {
        let parent = sorted[start] >> (shift + 1);
        let end = start + sorted[start..].partition_point(|&keyed| keyed >> (shift + 1) == parent);
        let mut written = start;
        for bit in [0, 1] {
            for &keyed in &sorted[start..end] {
                if keyed >> shift & 1 == bit {
                    split[written] = keyed;
                    written += 1;
                }
            }
        }
        start = end;
    }
}

/// Runs `work(code, cell, rng)` on every cell of one depth in parallel, each cell with its own noise
/// stream resumed where it stopped, so the draws do not depend on the thread count.
fn for_each_cell(
    cells: &mut [Cell],
    depth: u32,
    key: &NoiseKey,
    work: impl Fn(u64, &mut Cell, &mut ResumedStream) + Sync,
) {
    cells.par_chunks_mut(CELLS_PER_TASK).enumerate().for_each(|(task, chunk)| {
        for (offset, cell) in chunk.iter_mut().enumerate() {
            let code = (task * CELLS_PER_TASK + offset) as u64;
            with_cell_stream(cell, depth, code, key, |cell, rng| work(code, cell, rng));
        }
    });
}

/// Opens the noise stream of the depth-`depth` cell `code` at its saved position, runs `work`, and saves
/// the position back. The stream's chunk is the cell's heap index 2^depth + code: unique per cell.
fn with_cell_stream(
    cell: &mut Cell,
    depth: u32,
    code: u64,
    key: &NoiseKey,
    work: impl FnOnce(&mut Cell, &mut ResumedStream),
) {
    let mut rng = key.resumed_stream(NoiseStream::OnlineCell, (1u64 << depth) | code, cell.noise_words);
    work(cell, &mut rng);
    cell.noise_words = rng.word_position();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(count: usize, dims: usize) -> Vec<u32> {
        let geometry = CellGeometry::new(dims, MAX_ONLINE_DEPTH);
        let mut point = vec![0u32; dims];
        (0..count as u32)
            .map(|i| {
                for (axis, index) in point.iter_mut().enumerate() {
                    let bits = geometry.axis_bits(axis);
                    *index = i.wrapping_mul(2_654_435_761).rotate_left(7 * axis as u32) >> (32 - bits);
                }
                geometry.leaf_code(&point)
            })
            .collect()
    }

    #[test]
    fn feeding_in_pieces_is_feeding_at_once() {
        for (dims, epsilon) in [(1, 1.0), (2, 0.5), (3, 4.0)] {
            let plan = OnlinePlan::new(epsilon, dims).unwrap();
            let key = NoiseKey::from_user_seed(3);
            let stream = codes(1500, dims);
            let mut whole = OnlineTree::new(plan);
            whole.feed(&stream, &key).unwrap();
            let mut pieces = OnlineTree::new(plan);
            for piece in [&stream[..1], &stream[1..7], &stream[7..700], &stream[700..]] {
                pieces.feed(piece, &key).unwrap();
            }
            assert_eq!(whole, pieces, "d = {dims}");
            assert_eq!(whole.release(5).leaf_counts, pieces.release(5).leaf_counts);
        }
    }

    #[test]
    fn a_release_has_t_points_on_the_leaves_of_depth_r_of_t() {
        for (dims, epsilon) in [(1, 2.0), (2, 1.0), (8, 0.3)] {
            let plan = OnlinePlan::new(epsilon, dims).unwrap();
            let key = NoiseKey::from_user_seed(8);
            let stream = codes(900, dims);
            let mut tree = OnlineTree::new(plan);
            let mut fed = 0;
            for t in [1usize, 2, 3, 50, 257, 900] {
                tree.feed(&stream[fed..t], &key).unwrap();
                fed = t;
                let release = tree.release(t as u64);
                assert_eq!(release.geometry.depth(), plan.level_at(t as u64), "d={dims} t={t}");
                assert_eq!(release.leaf_counts.len(), 1 << release.geometry.depth());
                assert_eq!(release.leaf_counts.iter().sum::<u64>(), t as u64);
            }
            assert_eq!(tree.history().len(), if dims == 1 { 900 } else { 0 });
        }
    }

    #[test]
    fn the_tree_is_refused_past_its_deepest_level() {
        let plan = OnlinePlan::new(1e6, 2).unwrap();
        // t_31 = ⌈2^31/10^6⌉ = 2148: the tree would be deeper than 30 there.
        let error = plan.check_depth(2148).unwrap_err();
        assert!(error.to_string().contains("deeper than 30"));
        assert!(plan.check_depth(2147).is_ok());
        let mut tree = OnlineTree::new(plan);
        tree.position = 2147;
        let refused = tree.feed(&[0], &NoiseKey::from_user_seed(1)).unwrap_err();
        assert!(matches!(refused, crate::error::Error::BadInput(_)));
        assert_eq!(tree.position(), 2147, "nothing was read");
    }
}
