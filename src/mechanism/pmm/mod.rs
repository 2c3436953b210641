//! The Private Measure Mechanism (dissertation Algorithm 4): noisy counts on every level of the
//! partition, made consistent top-down. The leaf histogram is the only private input.
//!
//! - [`plan`]: the plan from public inputs and the release from the data (the mechanism's one entry);
//! - [`schedule`]: the per-level noise scales, the depth rule and the accuracy bound;
//! - [`noise`]: noise on every cell of every noised level; [`consistency`]: the top-down step;
//! - [`marginals`], [`pairs`]: released 1-D and 2-way marginals the synthetic columns are mapped onto;
//! - [`report`]: what the run report says about a PMM release.

pub mod consistency;
pub mod marginals;
pub mod noise;
pub mod pairs;
pub mod plan;
pub mod report;
pub mod schedule;

pub use plan::PmmPlan;

use crate::geometry::tree::CountTree;
use crate::privacy::NoiseKey;
use crate::progress::Timings;
use consistency::{enforce_consistency, Consistency};
use noise::add_level_noise;
use schedule::LevelSchedule;

/// Sums blocks of 2^(from − to) consecutive leaves: in Morton order a coarser cell's leaves are contiguous.
pub fn coarsen_leaves(leaves: Vec<u64>, from_depth: u32, to_depth: u32) -> Vec<u64> {
    assert!(to_depth <= from_depth);
    if to_depth == from_depth {
        return leaves;
    }
    leaves
        .chunks_exact(1 << (from_depth - to_depth))
        .map(|block| block.iter().sum())
        .collect()
}

/// Noise every level the schedule noises, then make the tree consistent (pruned below `consistency`'s
/// floors). With `released_root`, the root count is that already-released n̂ and is not noised again.
/// Returns the consistent leaf counts.
pub fn release_leaf_counts(
    true_leaves: Vec<u64>,
    schedule: &LevelSchedule,
    released_root: Option<u64>,
    key: &NoiseKey,
    consistency: Consistency,
    coin_seed: u64,
    timings: &mut Timings,
) -> Vec<u64> {
    let mut tree = timings.time("tree", || CountTree::from_leaves(true_leaves, schedule.depth));
    let mut scales = schedule.scales.clone();
    if let Some(root) = released_root {
        tree.level_mut(0)[0] = root as i64;
        scales[0] = None;
    }
    timings.time("noise", || add_level_noise(&mut tree, &scales, key));
    let floors = consistency.floors(&scales);
    timings.time("consistency", || enforce_consistency(&mut tree, consistency.rule, &floors, coin_seed));
    timings.time("leaves", || tree.into_leaves().into_iter().map(|count| count as u64).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::{Neighbours, NoisyRowCount};
    use consistency::ConsistencyRule;
    use schedule::RootNoise;

    #[test]
    fn coarsening_sums_whole_subtrees() {
        let leaves: Vec<u64> = (0..64).collect();
        let coarse = coarsen_leaves(leaves.clone(), 6, 3);
        assert_eq!(coarse.len(), 8);
        assert_eq!(coarse[0], (0..8).sum::<u64>());
        assert_eq!(
            coarse,
            CountTree::from_leaves(leaves, 6)
                .level(3)
                .iter()
                .map(|&c| c as u64)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn released_root_is_kept_and_not_noised_again() {
        let key = NoiseKey::from_user_seed(1);
        let row_count = NoisyRowCount::plan(1.0 / 16.0).unwrap();
        let schedule = LevelSchedule::new(
            Neighbours::AddRemove,
            0.9,
            2,
            8,
            RootNoise::Released(row_count.scale),
        )
        .unwrap();
        let leaves: Vec<u64> = (0..256).map(|leaf| leaf % 3).collect();
        let n_hat = row_count.release(leaves.iter().sum(), &key);
        let released = release_leaf_counts(
            leaves,
            &schedule,
            Some(n_hat),
            &key,
            Consistency { rule: ConsistencyRule::Uniform, prune_sigmas: 2.0 },
            2,
            &mut Timings::default(),
        );
        assert_eq!(
            released.iter().sum::<u64>(),
            n_hat,
            "the consistent leaves must sum to the released root"
        );
    }

    #[test]
    fn replace_keeps_the_public_root() {
        let key = NoiseKey::from_user_seed(3);
        let schedule =
            LevelSchedule::new(Neighbours::Replace, 1.0, 1, 10, RootNoise::InSchedule).unwrap();
        let leaves: Vec<u64> = (0..1024).map(|leaf| leaf % 5).collect();
        let n: u64 = leaves.iter().sum();
        let released = release_leaf_counts(
            leaves,
            &schedule,
            None,
            &key,
            Consistency { rule: ConsistencyRule::Proportional, prune_sigmas: 0.0 },
            2,
            &mut Timings::default(),
        );
        assert_eq!(released.iter().sum::<u64>(), n);
    }
}
