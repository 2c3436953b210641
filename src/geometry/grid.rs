//! The regular partition of [0,1]^d into k^d equal cubes (PSMM's partition, dissertation §3.1).
//!
//! Cell layout: row-major over the per-axis indices, coordinate 0 most significant, the layout of
//! `eval::w1::w1_grid` (so its king-move network serves PSMM's projection too). Cells are half-open
//! and the value 1.0 goes to the top cell, as in the dyadic partition (docs/design.md).

use crate::transport::{FlowNetwork, NodeId, INFINITE_CAPACITY};

/// k cells per axis in d dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegularGrid {
    dims: usize,
    cells_per_axis: u32,
    cells: usize,
}

impl RegularGrid {
    /// `None` unless d ≥ 1, k ≥ 1 and k^d fits a `usize`.
    pub fn new(dims: usize, cells_per_axis: u32) -> Option<Self> {
        if dims == 0 || cells_per_axis == 0 {
            return None;
        }
        let cells = (cells_per_axis as usize).checked_pow(u32::try_from(dims).ok()?)?;
        Some(RegularGrid {
            dims,
            cells_per_axis,
            cells,
        })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// k.
    pub fn cells_per_axis(&self) -> u32 {
        self.cells_per_axis
    }

    /// m = k^d.
    pub fn cell_count(&self) -> usize {
        self.cells
    }

    /// ℓ∞ diameter of a cell in normalised units: 1/k.
    pub fn cell_diameter(&self) -> f64 {
        1.0 / f64::from(self.cells_per_axis)
    }

    /// Index step of each axis in the row-major layout (axis 0 has the largest).
    pub fn strides(&self) -> Vec<usize> {
        let side = self.cells_per_axis as usize;
        (0..self.dims)
            .map(|axis| side.pow((self.dims - 1 - axis) as u32))
            .collect()
    }

    /// The per-axis indices of a cell.
    pub fn axis_indices(&self, cell: usize, out: &mut [u32]) {
        debug_assert_eq!(out.len(), self.dims);
        let side = self.cells_per_axis as usize;
        let mut rest = cell;
        for index in out.iter_mut().rev() {
            *index = (rest % side) as u32;
            rest /= side;
        }
    }

    /// Directed arcs of the king-move graph (every cell to its ≤ 3^d − 1 neighbours): (3k − 2)^d − k^d,
    /// since each axis has k + 2(k − 1) ordered pairs of indices at most one apart. `None` on overflow.
    pub fn king_move_arcs(&self) -> Option<u128> {
        let per_axis = 3 * u128::from(self.cells_per_axis) - 2;
        per_axis
            .checked_pow(self.dims as u32)?
            .checked_sub(self.cells as u128)
    }
}

/// Links every cell of the side^d grid (`nodes` in row-major order, coordinate 0 most significant) to its
/// 3^d − 1 neighbours, uncapacitated, at cost 1.
/// The 3^d offsets are enumerated only when side ≥ 2: then the network itself has at least 3^d − 1 arcs,
/// which callers have checked to fit in memory. One cell per axis has no neighbours at all, and
/// enumerating 3^d offsets for it would hang (and overflow for d ≥ 41) on wide tables.
pub(crate) fn add_king_move_arcs(net: &mut FlowNetwork, nodes: &[NodeId], side: usize, dims: usize) {
    if side < 2 {
        return;
    }
    // Offsets in {−1, 0, 1}^d \ {0}, as per-axis steps and as an index delta.
    let strides: Vec<isize> = (0..dims)
        .map(|k| side.pow((dims - 1 - k) as u32) as isize)
        .collect();
    let mut offsets: Vec<(Vec<isize>, isize)> = Vec::new();
    for code in 0..3usize.pow(dims as u32) {
        let steps: Vec<isize> = (0..dims)
            .map(|k| (code / 3usize.pow(k as u32) % 3) as isize - 1)
            .collect();
        if steps.iter().any(|&s| s != 0) {
            let delta = steps.iter().zip(&strides).map(|(s, t)| s * t).sum();
            offsets.push((steps, delta));
        }
    }
    let mut coords = vec![0usize; dims];
    for cell in 0..nodes.len() {
        for (steps, delta) in &offsets {
            let inside = coords
                .iter()
                .zip(steps)
                .all(|(&c, &s)| (s >= 0 || c > 0) && (s <= 0 || c + 1 < side));
            if inside {
                let to = (cell as isize + delta) as usize;
                net.add_arc(nodes[cell], nodes[to], INFINITE_CAPACITY, 1);
            }
        }
        // Advance the mixed-radix coordinates (last coordinate fastest).
        for c in coords.iter_mut().rev() {
            *c += 1;
            if *c < side {
                break;
            }
            *c = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_round_trips_and_counts_king_moves() {
        for (dims, side) in [(1usize, 1u32), (1, 7), (2, 1), (2, 5), (3, 4), (4, 3)] {
            let grid = RegularGrid::new(dims, side).unwrap();
            let strides = grid.strides();
            let mut indices = vec![0u32; dims];
            let mut neighbours = 0u128;
            for cell in 0..grid.cell_count() {
                grid.axis_indices(cell, &mut indices);
                let back: usize = indices
                    .iter()
                    .zip(&strides)
                    .map(|(&index, stride)| index as usize * stride)
                    .sum();
                assert_eq!(back, cell);
                // Neighbours by brute force: cells at ℓ∞ index distance exactly 1.
                for other in 0..grid.cell_count() {
                    let mut theirs = vec![0u32; dims];
                    grid.axis_indices(other, &mut theirs);
                    let distance = indices
                        .iter()
                        .zip(&theirs)
                        .map(|(&a, &b)| a.abs_diff(b))
                        .max()
                        .unwrap();
                    neighbours += u128::from(distance == 1);
                }
            }
            assert_eq!(grid.king_move_arcs(), Some(neighbours), "d={dims} k={side}");
        }
        assert!(RegularGrid::new(0, 3).is_none());
        assert!(RegularGrid::new(2, 0).is_none());
        assert!(RegularGrid::new(64, 3).is_none(), "3^64 overflows");
    }

    #[test]
    fn one_cell_per_axis_has_no_king_moves_in_any_dimension() {
        // d = 200 would enumerate 3^200 offsets (and overflow) if the side were not checked first.
        let mut net = FlowNetwork::with_capacity(1, 0);
        let nodes = [net.add_node(0)];
        add_king_move_arcs(&mut net, &nodes, 1, 200);
        assert_eq!(net.arc_count(), 0);
    }
}
