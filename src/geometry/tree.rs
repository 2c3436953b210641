//! The counts of every cell of every level of the partition, stored densely: level j is an array of
//! 2^j counts indexed by cell code, so the children of θ sit at 2θ and 2θ+1 of level j+1.

use rayon::prelude::*;

/// Below this many parent cells a level is summed on one thread: spawning costs more than it saves.
const PARALLEL_MIN_CELLS: usize = 1 << 12;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountTree {
    levels: Vec<Vec<i64>>,
}

impl CountTree {
    /// Builds levels 0..r from the leaf histogram by pairwise sums, in parallel within a level.
    pub fn from_leaves(leaves: Vec<u64>, depth: u32) -> Self {
        assert_eq!(
            leaves.len(),
            1usize << depth,
            "a depth-{depth} tree needs 2^{depth} leaves"
        );
        // Sequential on purpose: a by-value map between same-sized types reuses the allocation, where a
        // parallel collect would allocate and fill a second 8-byte-per-leaf array.
        let leaves: Vec<i64> = leaves.into_iter().map(|count| count as i64).collect();
        let mut levels = vec![leaves];
        for _ in 0..depth {
            let children = levels.last().expect("the leaf level is always there");
            let sum_pair = |pair: &[i64]| pair[0] + pair[1];
            let parents: Vec<i64> = if children.len() / 2 >= PARALLEL_MIN_CELLS {
                children.par_chunks_exact(2).map(sum_pair).collect()
            } else {
                children.chunks_exact(2).map(sum_pair).collect()
            };
            levels.push(parents);
        }
        levels.reverse();
        CountTree { levels }
    }

    /// A tree from its levels, level j holding 2^j counts (the online mechanism's counter outputs).
    pub fn from_levels(levels: Vec<Vec<i64>>) -> Self {
        assert!(!levels.is_empty(), "a tree has at least its root level");
        for (level, counts) in levels.iter().enumerate() {
            assert_eq!(counts.len(), 1usize << level, "level {level} needs 2^{level} cells");
        }
        CountTree { levels }
    }

    /// The leaf depth r.
    pub fn depth(&self) -> u32 {
        (self.levels.len() - 1) as u32
    }

    pub fn level(&self, level: u32) -> &[i64] {
        &self.levels[level as usize]
    }

    pub fn level_mut(&mut self, level: u32) -> &mut [i64] {
        &mut self.levels[level as usize]
    }

    /// Every level, root first, for passes that walk the tree bottom-up.
    pub fn levels_mut(&mut self) -> &mut [Vec<i64>] {
        &mut self.levels
    }

    /// A parent level and its child level, for top-down passes.
    pub fn parent_and_children_mut(&mut self, parent_level: u32) -> (&[i64], &mut [i64]) {
        let (upper, lower) = self.levels.split_at_mut(parent_level as usize + 1);
        (&upper[parent_level as usize], &mut lower[0])
    }

    #[cfg(test)]
    pub fn root(&self) -> i64 {
        self.levels[0][0]
    }

    #[cfg(test)]
    pub fn leaves(&self) -> &[i64] {
        self.levels
            .last()
            .expect("a tree has at least its root level")
    }

    pub fn into_leaves(mut self) -> Vec<i64> {
        self.levels
            .pop()
            .expect("a tree has at least its root level")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upper_levels_are_pairwise_sums() {
        for depth in [0u32, 1, 3, 14] {
            let leaves: Vec<u64> = (0..1u64 << depth).map(|i| (i * 2654435761) % 11).collect();
            let total: u64 = leaves.iter().sum();
            let tree = CountTree::from_leaves(leaves.clone(), depth);
            assert_eq!(tree.depth(), depth);
            assert_eq!(tree.root(), total as i64);
            for level in 0..depth {
                let parents = tree.level(level);
                let children = tree.level(level + 1);
                assert_eq!(parents.len(), 1 << level);
                for (theta, &parent) in parents.iter().enumerate() {
                    assert_eq!(parent, children[2 * theta] + children[2 * theta + 1]);
                }
            }
            assert_eq!(
                tree.leaves().iter().map(|&c| c as u64).collect::<Vec<_>>(),
                leaves
            );
        }
    }
}
