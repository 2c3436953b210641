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

/// Private Evolution's Gaussian counts, against the ρ its plan claims: for a Gaussian the KL divergence
/// between the outputs on neighbouring inputs is exactly ρ = Δ²/(2σ²) (the Rényi divergence of order 1),
/// so the empirical KL must stay below the plan's per-step ρ. A wrong sensitivity (Δ² = 1 instead of
/// 2) or a halved σ makes it 2 or 4 times larger.
#[test]
fn pe_counts_spend_no_more_zcdp_than_the_plan_claims() {
    use dpsynth::mechanism::pe::histogram::gaussian_counts;
    use dpsynth::mechanism::pe::PePlan;
    use dpsynth::mechanism::PublicInputs;
    use dpsynth::options::PeOptions;
    use dpsynth::sampler::Placement;

    // ε = 4, δ = 1e-5 in one step: σ² ≈ 3, so a few hundred outcomes carry nearly all the mass.
    let public = PublicInputs {
        dims: 2,
        epsilon: 4.0,
        neighbours: Neighbours::Replace,
        file_rows: 9,
        memory_limit: 1 << 30,
        threads: 1,
        placement: Placement::Uniform,
    };
    let options = PeOptions {
        steps: Some(1),
        ..PeOptions::with_delta(1e-5)
    };
    let plan = PePlan::new(&public, &options).unwrap();
    let claimed_rho = plan.budget().spent_rho();
    let variance = plan.count_variance().unwrap();
    // One replaced row moves its nearest neighbour from candidate 0 to candidate 1.
    let frequencies = |counts: &[u64], seed_base: u64| {
        let mut frequencies: HashMap<Vec<i64>, u64> = HashMap::new();
        for run in 0..RUNS {
            let key = NoiseKey::from_user_seed(seed_base + run);
            *frequencies.entry(gaussian_counts(counts, variance, &key, 1)).or_insert(0) += 1;
        }
        frequencies
    };
    let first = frequencies(&[5, 4], 0);
    let second = frequencies(&[4, 5], 1 << 40);
    // KL(first ‖ second) over the outcomes both saw often enough to compare; the rest carry little mass.
    let (mut kl, mut mass) = (0.0, 0.0);
    for (outcome, &count) in &first {
        let other = second.get(outcome).copied().unwrap_or(0);
        if count >= MIN_PE_COUNT && other >= MIN_PE_COUNT {
            let p = count as f64 / RUNS as f64;
            kl += p * (count as f64 / other as f64).ln();
            mass += p;
        }
    }
    assert!(mass > 0.9, "only {mass} of the mass was compared");
    assert!(
        kl <= claimed_rho * 1.1 + 0.02,
        "empirical KL {kl} exceeds the plan's per-step ρ = {claimed_rho}"
    );
    assert!(
        kl >= 0.7 * claimed_rho,
        "empirical KL {kl}: the noise is much larger than ρ = {claimed_rho} needs"
    );
}

/// Outcomes of the PE test seen fewer times than this on either side are left out of the KL sum.
const MIN_PE_COUNT: u64 = 50;
