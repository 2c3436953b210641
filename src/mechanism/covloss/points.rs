//! The released measure of both covariance-loss mechanisms: s weighted points ŷ_j ∈ [0,1]^p (0/1 units)
//! with weights ŵ ∈ Δ_s, and its synthetic rows: a weighted bootstrap of m points, each rounded to a row
//! (encoding/decode.rs). All of it is post-processing. Rows come in blocks of [`BLOCK_ROWS`], each block
//! from its own generator seeded by the run's seed and the block index, so a seeded run gives the same
//! rows for any thread count.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

use crate::encoding::decode::{draw_codes, to_batch, Code};
use crate::encoding::Encoding;
use crate::error::Result;

/// Rows drawn from one generator.
pub const BLOCK_ROWS: usize = 1 << 14;

/// Rows sampled and decoded per output batch (a whole number of blocks).
pub const BATCH_ROWS: usize = 16 * BLOCK_ROWS;

/// Weighted points in [0,1]^p.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightedPoints {
    pub bits: usize,
    /// Probabilities (sum 1).
    pub weights: Vec<f64>,
    /// Point j is `points[j * bits..(j + 1) * bits]`.
    pub points: Vec<f64>,
}

impl WeightedPoints {
    // One point per cell of a net, which is never empty: no `is_empty`.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    pub fn point(&self, j: usize) -> &[f64] {
        &self.points[j * self.bits..(j + 1) * self.bits]
    }

    /// Σ_j w_j y_j (the released mean).
    #[cfg(test)]
    pub fn mean(&self) -> Vec<f64> {
        let mut mean = vec![0.0; self.bits];
        for j in 0..self.len() {
            for (m, y) in mean.iter_mut().zip(self.point(j)) {
                *m += self.weights[j] * y;
            }
        }
        mean
    }

    /// Σ_j w_j y_j y_jᵀ (row-major p×p).
    pub fn second_moment(&self) -> Vec<f64> {
        let p = self.bits;
        let mut moment = vec![0.0; p * p];
        for j in 0..self.len() {
            let y = self.point(j);
            for a in 0..p {
                for b in 0..p {
                    moment[a * p + b] += self.weights[j] * y[a] * y[b];
                }
            }
        }
        moment
    }

    /// The cumulative weights, for the bootstrap's inverse-CDF draw.
    fn cumulative(&self) -> Vec<f64> {
        let mut total = 0.0;
        self.weights
            .iter()
            .map(|&weight| {
                total += weight;
                total
            })
            .collect()
    }

    /// Indices of `m` bootstrap draws (i.i.d. with probabilities ŵ), block by block from `seed`.
    #[cfg(test)]
    pub fn bootstrap(&self, m: usize, seed: u64) -> Vec<u32> {
        let cumulative = self.cumulative();
        let total = *cumulative.last().unwrap_or(&0.0);
        let blocks = m.div_ceil(BLOCK_ROWS);
        (0..blocks)
            .into_par_iter()
            .flat_map_iter(|block| {
                let mut rng = block_rng(seed, block as u64, 0);
                let rows = (m - block * BLOCK_ROWS).min(BLOCK_ROWS);
                let cumulative = &cumulative;
                (0..rows).map(move |_| pick(cumulative, rng.random::<f64>() * total))
            })
            .collect()
    }

    /// Rows `start..start + rows` of draw `seed`, decoded to the encoding's columns (`schema`, from
    /// [`crate::encoding::decode::output_schema`]); binned values are placed in their bins with the
    /// batch's own generator. `start` must be a multiple of [`BATCH_ROWS`].
    pub fn batch(
        &self,
        encoding: &Encoding,
        schema: &SchemaRef,
        start: u64,
        rows: usize,
        seed: u64,
    ) -> Result<RecordBatch> {
        debug_assert_eq!(start % BATCH_ROWS as u64, 0);
        let codes = self.sample_codes(encoding, start, rows, seed);
        let mut placement = block_rng(seed, start / BATCH_ROWS as u64, 2);
        to_batch(encoding, schema, &codes, &mut placement)
    }

    /// Rows `start..start + rows` of the synthetic table: per column, the codes of each row (bootstrap
    /// then rounding). `start` must be a multiple of [`BLOCK_ROWS`].
    pub fn sample_codes(&self, encoding: &Encoding, start: u64, rows: usize, seed: u64) -> Vec<Vec<Code>> {
        debug_assert_eq!(start % BLOCK_ROWS as u64, 0);
        let cumulative = self.cumulative();
        let total = *cumulative.last().unwrap_or(&0.0);
        let columns = encoding.columns.len();
        let first_block = start / BLOCK_ROWS as u64;
        let blocks: Vec<Vec<Code>> = (0..rows.div_ceil(BLOCK_ROWS))
            .into_par_iter()
            .map(|offset| {
                let block = first_block + offset as u64;
                let block_rows = (rows - offset * BLOCK_ROWS).min(BLOCK_ROWS);
                let mut rng = block_rng(seed, block, 1);
                let mut codes = vec![0 as Code; block_rows * columns];
                for row in codes.chunks_mut(columns.max(1)).take(block_rows) {
                    let j = pick(&cumulative, rng.random::<f64>() * total);
                    draw_codes(encoding, self.point(j as usize), &mut rng, row);
                }
                codes
            })
            .collect();
        let mut per_column = vec![Vec::with_capacity(rows); columns];
        for block in blocks {
            for row in block.chunks(columns.max(1)) {
                for (column, &code) in per_column.iter_mut().zip(row) {
                    column.push(code);
                }
            }
        }
        per_column
    }
}

/// The generator of one block of one draw kind (0: bootstrap alone, 1: rows): xoshiro256++ seeded
/// through SplitMix64 from the run's post-processing seed, the kind and the block index.
pub fn block_rng(seed: u64, block: u64, kind: u64) -> Xoshiro256PlusPlus {
    let mixed = seed
        ^ block.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ kind.wrapping_mul(0xd1b5_4a32_d192_ed03).rotate_left(32);
    Xoshiro256PlusPlus::seed_from_u64(mixed)
}

/// The first index whose cumulative weight exceeds `target` (the last positive one for round-off).
fn pick(cumulative: &[f64], target: f64) -> u32 {
    let index = cumulative.partition_point(|&total| total <= target);
    index.min(cumulative.len() - 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_frequencies_follow_the_weights_and_skip_zero_weights() {
        let points = WeightedPoints {
            bits: 1,
            weights: vec![0.2, 0.0, 0.5, 0.3],
            points: vec![0.0; 4],
        };
        let draws = points.bootstrap(100_000, 5);
        let mut counts = [0u32; 4];
        for &j in &draws {
            counts[j as usize] += 1;
        }
        assert_eq!(counts[1], 0);
        for (count, weight) in counts.iter().zip(&points.weights) {
            let share = f64::from(*count) / 1e5;
            assert!((share - weight).abs() < 5.0 * (weight * (1.0 - weight) / 1e5).sqrt() + 1e-9);
        }
        assert_eq!(points.bootstrap(100_000, 5), draws, "same seed, same draws");
    }
}
