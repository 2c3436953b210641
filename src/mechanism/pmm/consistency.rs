//! Top-down consistency (dissertation Algorithm 3): turn noisy counts, clipped at 0, into counts whose
//! children sum to their parent, level by level, each pair adjusted towards a point comparable with it.
//! (With `--bottom-up average` the noisy counts are first replaced by estimates: [`super::averaging`].)
//!
//! Given a parent count m and clipped noisy children (a, b), both rules pick integers (x, y) ≥ 0 with
//! x + y = m and (x − a)(y − b) ≥ 0, which is all the accuracy proof (Lemma 3.16) needs. Where a rule
//! must round a half, a coin keyed by (seed, level, cell) decides, so neither child is favoured and the
//! result does not depend on the thread count. This is post-processing: it never reads the data.
//!
//! Pruning: a noisy child below its level's floor f_j = ⌈k·σ_j⌉ is taken as 0 before the split. An empty
//! cell's noise is then mostly pruned away instead of drawing mass from its parent, level after level,
//! into regions the data never reach. The proof survives with f_j added to each child's error (a pruned
//! count differs from the true one by less than |λ| + f_j), so the bound gains Σ_j f_j Δ_{j−1}/n.

use rayon::prelude::*;
use serde::Serialize;

use super::averaging::BottomUp;
use crate::geometry::tree::CountTree;
use crate::noise::discrete_laplace::RationalScale;

/// Parent cells handled per rayon task.
const CELLS_PER_TASK: usize = 1 << 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ConsistencyRule {
    /// Share the deficit or surplus equally: the closest point of the line x + y = m (Euclidean).
    Uniform,
    /// Scale the children to sum to m: the point of the line closest to the ray through (a, b).
    Proportional,
}

/// The rule used when none is asked for. Chosen by measured W1 (see docs/accuracy.md, "Consistency rule").
pub const DEFAULT_CONSISTENCY: ConsistencyRule = ConsistencyRule::Uniform;

/// k of the pruning floors when none is asked for: none. Pruning helps clustered tables and hurts
/// smooth ones (docs/accuracy.md, "Pruning"), and no public input tells them apart.
pub const DEFAULT_PRUNE_SIGMAS: f64 = 0.0;

/// The consistency step's settings: the bottom-up pass before the splits, the top-down rule, and the
/// floors below which noisy counts are taken as empty.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Consistency {
    pub bottom_up: BottomUp,
    pub rule: ConsistencyRule,
    /// k: a noisy count below k·σ of its level is taken as 0 before the splits (0: no pruning).
    pub prune_sigmas: f64,
}

impl Consistency {
    /// The pruning floor of every level of a tree noised with `scales`: ⌈k·σ_j⌉, 0 where a level is
    /// not noised and at the root (never a child, so never pruned).
    pub fn floors(&self, scales: &[Option<RationalScale>]) -> Vec<i64> {
        scales
            .iter()
            .enumerate()
            .map(|(level, scale)| match scale {
                Some(scale) if level > 0 => (self.prune_sigmas * scale.to_f64()).ceil() as i64,
                _ => 0,
            })
            .collect()
    }
}

/// Makes `tree` consistent from the root down, each level's noisy counts clipped at 0 and those below
/// `floors[level]` taken as empty first (no floor where `floors` ends). The root count is kept as it is,
/// clipped at 0.
pub fn enforce_consistency(tree: &mut CountTree, rule: ConsistencyRule, floors: &[i64], coin_seed: u64) {
    let root = &mut tree.level_mut(0)[0];
    *root = (*root).max(0);
    for parent_level in 0..tree.depth() {
        let floor = floors.get(parent_level as usize + 1).copied().unwrap_or(0);
        let (parents, children) = tree.parent_and_children_mut(parent_level);
        split_children(parents, children, parent_level, 0, rule, floor, coin_seed);
    }
}

/// One level of the top-down pass: the children of `parents` (cells `first_parent ..` of `parent_level`,
/// non-negative) made to sum to them, the noisy children read as max(0, ·), those below `floor` taken as
/// empty: a pruned child beside a kept one gets nothing (the uniform rule would otherwise hand it half of
/// any deficit, so the noise of empty cells would still draw mass), two pruned children share their parent
/// by the rule. A rank's part of the tree runs this on its own cells and gets the whole tree's result
/// there: each pair depends only on its parent, its noisy children and its coin.
pub fn split_children(
    parents: &[i64],
    children: &mut [i64],
    parent_level: u32,
    first_parent: u64,
    rule: ConsistencyRule,
    floor: i64,
    coin_seed: u64,
) {
    parents
        .par_chunks(CELLS_PER_TASK)
        .zip(children.par_chunks_mut(2 * CELLS_PER_TASK))
        .enumerate()
        .for_each(|(task, (parents, children))| {
            let first_cell = first_parent + (task * CELLS_PER_TASK) as u64;
            for (offset, (&parent, pair)) in parents.iter().zip(children.chunks_exact_mut(2)).enumerate() {
                let coin = || coin_flip(coin_seed, parent_level, first_cell + offset as u64);
                let (a, b) = (pair[0].max(0), pair[1].max(0));
                let (left, right) = match (a < floor, b < floor) {
                    (true, false) => (0, parent),
                    (false, true) => (parent, 0),
                    (true, true) => split(rule, parent, 0, 0, coin),
                    (false, false) => split(rule, parent, a, b, coin),
                };
                pair[0] = left;
                pair[1] = right;
            }
        });
}

/// One step of Algorithm 3: children (a, b) ≥ 0 of a parent with count m ≥ 0 become (x, y).
fn split(rule: ConsistencyRule, m: i64, a: i64, b: i64, coin: impl FnOnce() -> bool) -> (i64, i64) {
    debug_assert!(m >= 0 && a >= 0 && b >= 0);
    let x = match rule {
        ConsistencyRule::Uniform => {
            // x* = a + (m − a − b)/2, rounded half at random, then pushed back onto [0, m].
            let twice = a + m - b;
            let x = twice.div_euclid(2) + i64::from(twice.rem_euclid(2) == 1 && coin());
            x.clamp(0, m)
        }
        ConsistencyRule::Proportional => {
            let total = (a + b) as i128;
            if total == 0 {
                m / 2 + i64::from(m % 2 == 1 && coin())
            } else {
                // x = m·a/(a+b), rounded to nearest, a half at random; exact in i128.
                let scaled = m as i128 * a as i128;
                let (floor, remainder) = (scaled / total, scaled % total);
                let round_up = match (2 * remainder).cmp(&total) {
                    std::cmp::Ordering::Greater => true,
                    std::cmp::Ordering::Equal => coin(),
                    std::cmp::Ordering::Less => false,
                };
                (floor + i128::from(round_up)) as i64
            }
        }
    };
    (x, m - x)
}

/// A fair coin that depends only on (seed, level, cell): SplitMix64's finaliser of the three.
fn coin_flip(seed: u64, level: u32, cell: u64) -> bool {
    let mut z = seed ^ (u64::from(level) << 58) ^ cell.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: [ConsistencyRule; 2] = [ConsistencyRule::Uniform, ConsistencyRule::Proportional];

    fn comparable(x: i64, y: i64, a: i64, b: i64) -> bool {
        (x >= a && y >= b) || (x <= a && y <= b)
    }

    #[test]
    fn every_split_is_non_negative_sums_to_the_parent_and_is_comparable() {
        for rule in RULES {
            for m in 0..25 {
                for a in 0..25 {
                    for b in 0..25 {
                        for coin in [false, true] {
                            let (x, y) = split(rule, m, a, b, || coin);
                            assert!(x >= 0 && y >= 0, "{rule:?} m={m} a={a} b={b}");
                            assert_eq!(x + y, m);
                            assert!(
                                comparable(x, y, a, b),
                                "{rule:?} m={m} a={a} b={b} -> ({x},{y})"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn uniform_is_the_closest_point_and_proportional_keeps_the_ratio() {
        // Brute force over the discrete segment x + y = m.
        for m in 0..20i64 {
            for a in 0..20i64 {
                for b in 0..20i64 {
                    let (x, _) = split(ConsistencyRule::Uniform, m, a, b, || false);
                    let distance = |x: i64| (x - a).pow(2) + (m - x - b).pow(2);
                    let best = (0..=m).map(distance).min().unwrap();
                    assert_eq!(distance(x), best, "uniform m={m} a={a} b={b}");
                    if a + b > 0 {
                        let (x, _) = split(ConsistencyRule::Proportional, m, a, b, || false);
                        let ideal = m as f64 * a as f64 / (a + b) as f64;
                        assert!(
                            (x as f64 - ideal).abs() <= 0.5 + 1e-9,
                            "proportional m={m} a={a} b={b}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn consistent_tree_sums_down_from_the_root() {
        let depth = 13;
        let leaves: Vec<u64> = (0..1u64 << depth).map(|i| (i * 7919) % 13).collect();
        for rule in RULES {
            let mut tree = CountTree::from_leaves(leaves.clone(), depth);
            // Scramble the counts as noise would, keeping them non-negative.
            for level in 1..=depth {
                for (cell, count) in tree.level_mut(level).iter_mut().enumerate() {
                    *count = (*count + (cell as i64 % 9) - 4).max(0);
                }
            }
            let noisy = tree.clone();
            enforce_consistency(&mut tree, rule, &[], 11);
            assert_eq!(tree.root(), noisy.root());
            for level in 0..depth {
                for (theta, &parent) in tree.level(level).iter().enumerate() {
                    let (x, y) = (
                        tree.level(level + 1)[2 * theta],
                        tree.level(level + 1)[2 * theta + 1],
                    );
                    assert!(x >= 0 && y >= 0);
                    assert_eq!(x + y, parent);
                    let (a, b) = (
                        noisy.level(level + 1)[2 * theta],
                        noisy.level(level + 1)[2 * theta + 1],
                    );
                    assert!(comparable(x, y, a, b));
                }
            }
            assert_eq!(tree.leaves().iter().sum::<i64>(), tree.root());
        }
    }

    #[test]
    fn noisy_children_below_the_floor_count_as_empty() {
        // Under a parent of 12: unpruned, both rules give the 4 some units; pruned below 5, both give it
        // nothing, also when its sibling leaves a deficit (the uniform rule would hand it half of it).
        for (rule, floor, noisy, expected) in [
            (ConsistencyRule::Uniform, 0, [4, 12], [2, 10]),
            (ConsistencyRule::Uniform, 5, [4, 12], [0, 12]),
            (ConsistencyRule::Uniform, 0, [4, 6], [5, 7]),
            (ConsistencyRule::Uniform, 5, [4, 6], [0, 12]),
            (ConsistencyRule::Uniform, 5, [6, 4], [12, 0]),
            (ConsistencyRule::Proportional, 0, [4, 12], [3, 9]),
            (ConsistencyRule::Proportional, 5, [4, 12], [0, 12]),
            (ConsistencyRule::Proportional, 5, [4, 6], [0, 12]),
            // At the floor a count is kept.
            (ConsistencyRule::Proportional, 4, [4, 12], [3, 9]),
            (ConsistencyRule::Uniform, 4, [4, 6], [5, 7]),
            // Both pruned: the parent is shared by the rule, as between two empty children.
            (ConsistencyRule::Uniform, 7, [4, 6], [6, 6]),
            (ConsistencyRule::Proportional, 7, [4, 6], [6, 6]),
        ] {
            let mut children = noisy;
            split_children(&[12], &mut children, 0, 0, rule, floor, 1);
            assert_eq!(children, expected, "{rule:?}, floor {floor}, noisy {noisy:?}");
        }
    }

    #[test]
    fn pruning_keeps_noise_on_empty_cells_from_drawing_mass() {
        // All 1000 rows in leaf 0 of a depth-10 tree, its cells' noise a little negative; every other cell
        // carries a noise-like count of 1..4.
        let depth = 10;
        let mut leaves = vec![0u64; 1 << depth];
        leaves[0] = 1000;
        let mut tree = CountTree::from_leaves(leaves, depth);
        for level in 1..=depth {
            for (cell, count) in tree.level_mut(level).iter_mut().enumerate() {
                *count = if cell == 0 { 1000 - level as i64 } else { 1 + (cell as i64 * 7) % 4 };
            }
        }
        for rule in RULES {
            let leaked = |floor: i64| {
                let mut tree = tree.clone();
                enforce_consistency(&mut tree, rule, &vec![floor; depth as usize + 1], 5);
                tree.root() - tree.leaves()[0]
            };
            assert!(leaked(0) > 0, "{rule:?} unpruned: the noise draws mass into empty cells");
            assert_eq!(leaked(5), 0, "{rule:?} pruned below 5: every empty cell stays empty");
        }
    }

    #[test]
    fn floors_are_k_sigma_rounded_up_on_noised_levels_below_the_root() {
        let scale = |sigma: f64| RationalScale::round_up(sigma);
        let scales = [scale(3.0), None, scale(1.5), scale(2.25)];
        let pruned = Consistency { bottom_up: BottomUp::None, rule: ConsistencyRule::Proportional, prune_sigmas: 2.0 };
        assert_eq!(pruned.floors(&scales), [0, 0, 3, 5]);
        let unpruned = Consistency { prune_sigmas: 0.0, ..pruned };
        assert_eq!(unpruned.floors(&scales), [0, 0, 0, 0]);
    }

    #[test]
    fn halves_are_shared_fairly() {
        // A deficit of one unit at 4096 parents: a rule that always favoured one side would give it all.
        let mut left = 0;
        for cell in 0..4096u64 {
            let (x, _) = split(ConsistencyRule::Uniform, 1, 0, 0, || coin_flip(3, 5, cell));
            left += x;
        }
        assert!(
            (1800..2300).contains(&left),
            "left child got {left} of 4096 units"
        );
    }
}
