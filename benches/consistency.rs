//! Top-down consistency on a noised tree against building that tree from its leaves (pairwise sums of
//! every level), in one run: both touch every cell of every level once, so the ratio says what the
//! consistency rule costs beyond the memory traffic any tree pass pays. Both rules, and the bottom-up pass
//! (`--bottom-up average`) that runs before them, at two depths.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use dpsynth::geometry::tree::CountTree;
use dpsynth::mechanism::pmm::averaging::{average_tree, LevelWeights};
use dpsynth::mechanism::pmm::consistency::{enforce_consistency, ConsistencyRule};
use dpsynth::mechanism::pmm::noise::add_level_noise;
use dpsynth::mechanism::pmm::schedule::{LevelSchedule, RootNoise};
use dpsynth::privacy::{Neighbours, NoiseKey};

/// Leaf depths timed: 2^16 and 2^22 leaves (a cache-resident and a memory-bound tree).
const DEPTHS: [u32; 2] = [16, 22];
const DIMS: usize = 2;
const EPSILON: f64 = 1.0;

/// Leaf counts of a skewed table: most cells empty or nearly so, as PMM sees at the chosen depth.
fn skewed_leaves(depth: u32) -> Vec<u64> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..1u64 << depth)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 8).saturating_sub(5)
        })
        .collect()
}

/// A tree whose every level carries the schedule's noise (the splits read it clipped at zero), and the
/// bottom-up pass's weights for that schedule.
fn noised_tree(depth: u32) -> (CountTree, LevelWeights) {
    let schedule = LevelSchedule::new(Neighbours::AddRemove, EPSILON, DIMS, depth, RootNoise::InSchedule)
        .expect("a valid bench schedule");
    let mut tree = CountTree::from_leaves(skewed_leaves(depth), depth);
    add_level_noise(&mut tree, &schedule.scales, &NoiseKey::from_user_seed(7));
    (tree, LevelWeights::new(&schedule.scales))
}

fn consistency_against_tree_build(c: &mut Criterion) {
    let mut group = c.benchmark_group("consistency");
    group.sample_size(10);
    for depth in DEPTHS {
        group.throughput(Throughput::Elements(1 << depth));
        let leaves = skewed_leaves(depth);
        group.bench_with_input(BenchmarkId::new("tree_build_baseline", depth), &depth, |b, &depth| {
            b.iter_batched(
                || leaves.clone(),
                |leaves| black_box(CountTree::from_leaves(leaves, depth)),
                BatchSize::LargeInput,
            )
        });
        let (tree, weights) = noised_tree(depth);
        group.bench_with_input(BenchmarkId::new("bottom_up_average", depth), &weights, |b, weights| {
            b.iter_batched(
                || tree.clone(),
                |mut tree| {
                    average_tree(&mut tree, weights);
                    black_box(tree)
                },
                BatchSize::LargeInput,
            )
        });
        for (name, rule) in [("uniform", ConsistencyRule::Uniform), ("proportional", ConsistencyRule::Proportional)] {
            group.bench_with_input(BenchmarkId::new(name, depth), &rule, |b, &rule| {
                b.iter_batched(
                    || tree.clone(),
                    |mut tree| {
                        enforce_consistency(&mut tree, rule, &[], 3);
                        black_box(tree)
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    group.finish();
}

criterion_group!(benches, consistency_against_tree_build);
criterion_main!(benches);
