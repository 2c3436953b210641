//! PMM's noise: n_θ + Lap_Z(σ_j) on every cell of every noised level (the top-down split reads it clipped
//! at 0, after the bottom-up pass when there is one). Each (level, chunk of
//! cells) draws from its own stream of the run's key, so the noise of a cell depends only on the key and
//! the cell's position, never on how threads split the work.

use rayon::prelude::*;

use crate::geometry::tree::CountTree;
use crate::noise::discrete_laplace::RationalScale;
use crate::noise::laplace_table::ScaleSampler;
use crate::privacy::seeds::NoiseKey;
use crate::privacy::streams::{NoiseStream, NOISE_CHUNK_CELLS};

/// n_θ + Lap_Z(σ_j) for every cell of every noised level, empty cells included.
/// Levels with no scale (a public root count) are left as they are.
pub fn add_level_noise(tree: &mut CountTree, scales: &[Option<RationalScale>], key: &NoiseKey) {
    for (level, scale) in scales.iter().enumerate() {
        let Some(scale) = *scale else { continue };
        add_noise_to_cells(tree.level_mut(level as u32), level as u32, 0, scale, key);
    }
}

/// The noise of [`add_level_noise`] on cells `first_cell ..` of one level only (a rank's part of the
/// tree): each cell gets the very draw it gets in the whole level. A chunk the range starts inside is
/// drawn from its start, the draws before the range discarded (the sampler's draws vary in length).
pub fn add_noise_to_cells(cells: &mut [i64], level: u32, first_cell: u64, scale: RationalScale, key: &NoiseKey) {
    let sampler = ScaleSampler::new(scale);
    let chunk_cells = NOISE_CHUNK_CELLS as u64;
    let end = first_cell + cells.len() as u64;
    // The range cut at chunk boundaries: (chunk, cells of the range in it).
    let mut pieces = Vec::new();
    let mut cell = first_cell;
    while cell < end {
        let chunk = cell / chunk_cells;
        let piece_end = ((chunk + 1) * chunk_cells).min(end);
        pieces.push((chunk, (piece_end - cell) as usize));
        cell = piece_end;
    }
    let mut rest = cells;
    let mut slices = Vec::with_capacity(pieces.len());
    for &(chunk, len) in &pieces {
        let (piece, tail) = rest.split_at_mut(len);
        slices.push((chunk, piece));
        rest = tail;
    }
    slices.into_par_iter().for_each(|(chunk, piece)| {
        let mut rng = key.stream(NoiseStream::PmmLevel(level), chunk);
        let skipped = (first_cell.max(chunk * chunk_cells) - chunk * chunk_cells) as usize;
        for _ in 0..skipped {
            sampler.sample(&mut rng);
        }
        for count in piece {
            *count += sampler.sample(&mut rng);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_of_every_noised_level_gets_noise() {
        // An empty tree: if any cell were skipped, it would stay exactly 0 at a scale where zero
        // noise has probability ≈ 0.0125 per cell, so a level of 2^12 untouched zeros cannot happen.
        let depth = 12;
        let mut tree = CountTree::from_leaves(vec![0; 1 << depth], depth);
        let scale = RationalScale::round_up(40.0).unwrap();
        let scales: Vec<_> = (0..=depth)
            .map(|level| (level > 0).then_some(scale))
            .collect();
        add_level_noise(&mut tree, &scales, &NoiseKey::from_user_seed(7));
        assert!(
            tree.level(0).iter().all(|&count| count == 0),
            "a public root must stay un-noised"
        );
        for level in 1..=depth {
            let cells = tree.level(level);
            if cells.len() >= 64 {
                assert!(cells.iter().any(|&count| count < 0), "level {level}: the noise is not clipped here");
            }
            let touched = cells.iter().filter(|&&count| count != 0).count();
            // Nearly every draw is non-zero; a skipped chunk of cells would pull this far below 90%.
            assert!(
                touched * 10 >= cells.len() * 9,
                "level {level}: only {touched} of {} cells noised",
                cells.len()
            );
            if cells.len() >= NOISE_CHUNK_CELLS * 2 {
                for chunk in cells.chunks(NOISE_CHUNK_CELLS) {
                    assert!(chunk.iter().any(|&count| count != 0));
                }
            }
        }
    }

    #[test]
    fn noise_is_a_function_of_key_and_position_only() {
        let depth = 16;
        let leaves: Vec<u64> = (0..1u64 << depth).map(|i| i % 7).collect();
        let scales: Vec<_> = (0..=depth).map(|_| RationalScale::round_up(3.5)).collect();
        let run = |threads: usize, seed: u64| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut tree = CountTree::from_leaves(leaves.clone(), depth);
                add_level_noise(&mut tree, &scales, &NoiseKey::from_user_seed(seed));
                tree
            })
        };
        let one = run(1, 5);
        assert_eq!(one, run(2, 5));
        assert_eq!(one, run(3, 5));
        assert_ne!(one, run(2, 6));
    }
}
