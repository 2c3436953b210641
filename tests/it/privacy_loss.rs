//! The released counts of neighbouring datasets must have probability ratios within e^ε.
//!
//! A small tree is released many times from two neighbouring histograms and the empirical log ratio of
//! every frequent outcome is compared with ε. A wrong sensitivity or a budget that sums past ε shows up
//! as ratios near e^{2ε}.

use std::collections::HashMap;

use dpsynth::mechanism::pmm::consistency::ConsistencyRule;
use dpsynth::mechanism::pmm::release_leaf_counts;
use dpsynth::mechanism::pmm::schedule::{LevelSchedule, RootNoise};
use dpsynth::privacy::{Neighbours, NoiseKey};

use crate::common::max_log_frequency_ratio;

const RUNS: u64 = 200_000;
/// Outcomes seen fewer times than this in either run are too noisy to compare.
const MIN_COUNT: u64 = 2_000;
/// Sampling slack on the log ratio: with ≥ 2000 hits per side the standard error is about 0.03.
const SLACK: f64 = 0.2;

fn outcome_frequencies(
    leaves: &[u64],
    schedule: &LevelSchedule,
    seed_base: u64,
) -> HashMap<Vec<u64>, u64> {
    let mut frequencies = HashMap::new();
    for run in 0..RUNS {
        let key = NoiseKey::from_user_seed(seed_base + run);
        let released = release_leaf_counts(
            leaves.to_vec(),
            schedule,
            None,
            &key,
            ConsistencyRule::Uniform,
            run,
        );
        *frequencies.entry(released).or_insert(0) += 1;
    }
    frequencies
}

fn max_log_ratio(neighbours: Neighbours, a: &[u64], b: &[u64], epsilon: f64) -> f64 {
    let schedule = LevelSchedule::new(neighbours, epsilon, 1, 1, RootNoise::InSchedule).unwrap();
    let first = outcome_frequencies(a, &schedule, 0);
    let second = outcome_frequencies(b, &schedule, 1 << 40);
    max_log_frequency_ratio(&first, &second, MIN_COUNT)
}

#[test]
fn add_remove_neighbours_stay_within_e_epsilon() {
    // One row added to leaf 1 changes one cell on each level (root and leaf).
    let epsilon = 1.0;
    let worst = max_log_ratio(Neighbours::AddRemove, &[3, 5], &[3, 6], epsilon);
    assert!(
        worst <= epsilon + SLACK,
        "log ratio {worst} exceeds ε = {epsilon}"
    );
    // The bound is nearly attained: a mechanism with far too much noise would not be this close.
    assert!(
        worst >= 0.5 * epsilon,
        "log ratio {worst}: the noise is much larger than ε needs"
    );
}

#[test]
fn replace_neighbours_stay_within_e_epsilon() {
    // One row moved from leaf 0 to leaf 1: the public root stays, two leaves change by one each.
    let epsilon = 1.0;
    let worst = max_log_ratio(Neighbours::Replace, &[4, 5], &[3, 6], epsilon);
    assert!(
        worst <= epsilon + SLACK,
        "log ratio {worst} exceeds ε = {epsilon}"
    );
    assert!(
        worst >= 0.5 * epsilon,
        "log ratio {worst}: the noise is much larger than ε needs"
    );
}
