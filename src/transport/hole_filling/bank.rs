//! A bank on a grid that takes the coarse start: its units placed as the coarse grid's optimum places them,
//! then that placement mended.
//!
//! The coarse start needs a problem without a bank, whose arcs into every cell would need a potential above
//! every start's. An earlier version solved without the bank and then spent it by a search from the bank per unit.
//! That found the optimum, but 2281 units at 10^6 cells in d = 2, ε = 1, under replace took 2281 searches of
//! about 10^5 cells each (29 s of a 37 s run). Here the half-side grid is solved with its bank first
//! (recursively, so it too is placed from its own coarse grid), and each coarse cell's created units go to its
//! children, most negative first. The counts plus those units are then solved as a problem without a bank,
//! from the coarse grid's potentials. With the bank's potential at the highest cell's, a creation is optimal
//! only in a cell at that potential (its arc back to the bank must be tight), so the units created elsewhere
//! go back to the bank, which holds them. Then the holes this leaves are filled, the bank being a source like
//! any that holds units (a search backwards from a hole also passes through the bank, cancelling a creation
//! to make another), and what the bank still holds is spent by searches from it ([`Solver::spend_held_bank`]).
//! Every residual arc keeps a reduced cost ≥ 0 throughout, so the flow ends optimal. On that run most units
//! go back to the bank, but the holes they leave take nearly all of them back from nearby, so only about 3%
//! are left for the searches from the bank: the run took 11 s, with the same d_BL.

use super::{solve, solve_from, CoarseGrid, Fill, Neighbourhood, Solver, Towards};

/// The module's solution of `counts` with a bank of `bank_supply` units on a grid that takes the coarse
/// start; supply covers demand without the bank (Σc ≥ 0).
pub(super) fn solve_with_coarse_bank<'a>(around: &'a Neighbourhood, counts: &[i64], bank_supply: u64) -> Solver<'a> {
    let m = counts.len();
    let coarse = CoarseGrid::new(around, counts);
    let (start, created) = {
        let solved = solve(&coarse.around, &coarse.counts, bank_supply);
        (coarse.fine_start(around, &solved.potential), children_created(&coarse.parents, counts, &solved.bank_flow))
    };
    let with_created: Vec<i64> = counts.iter().zip(&created).map(|(&count, &units)| count + units).collect();
    let mut solver = solve_from(around, &with_created, 0, Some(&start), Fill::HoleByHole);
    // The bank, installed into the solution without it: at the highest potential, holding what the coarse grid
    // did not create, and keeping the creations in cells at that potential only.
    let bank = m;
    let highest = solver.potential[..m].iter().copied().max().unwrap_or(0);
    solver.potential[bank] = highest;
    solver.bank_flow = vec![0; m];
    solver.bank_fed_at = vec![u32::MAX; m];
    solver.bank_spare = Some(0);
    solver.held[bank] = bank_supply as i64 - created.iter().sum::<i64>();
    for (cell, &units) in created.iter().enumerate().filter(|&(_, &units)| units > 0) {
        if solver.potential[cell] == highest {
            solver.change_bank_flow(cell as u32, units);
        } else {
            // Back to the bank: first from what the cell keeps (its potential is S's then), the rest a hole.
            let kept = units.min(solver.spare[cell]);
            solver.spare[cell] -= kept;
            solver.demand[cell] += units - kept;
            solver.held[bank] += units;
        }
    }
    solver.fill_hole_by_hole();
    solver.spend_held_bank();
    solver
}

/// The coarse cells' created units (`coarse_created`, by coarse cell) given to their children (by fine cell,
/// `parents` their coarse cells): to the most negative first, as much as each lacks, and what is left to the
/// most negative child.
fn children_created(parents: &[u32], counts: &[i64], coarse_created: &[i64]) -> Vec<i64> {
    let mut order: Vec<u32> =
        (0..counts.len() as u32).filter(|&cell| coarse_created[parents[cell as usize] as usize] > 0).collect();
    order.sort_unstable_by_key(|&cell| (parents[cell as usize], counts[cell as usize], cell));
    let mut created = vec![0; counts.len()];
    for children in order.chunk_by(|&a, &b| parents[a as usize] == parents[b as usize]) {
        let mut left = coarse_created[parents[children[0] as usize] as usize];
        for &child in children {
            let units = left.min((-counts[child as usize]).max(0));
            created[child as usize] += units;
            left -= units;
        }
        created[children[0] as usize] += left;
    }
    created
}

impl Solver<'_> {
    /// Spends what the bank holds once every hole is full: each search runs forwards from the bank (arcs of
    /// cost 0 into every cell) to the nearest way into S, a path that creates units in a cell, cancels
    /// transport back from it and leaves them with the cell it ends at, saving the steps it cancels; until
    /// the bank holds nothing or no path saves a step (the rest is not created). The bank's potential P stays
    /// at or above every cell's, so that its arcs keep reduced cost P − p(v) ≥ 0, and a search takes the cells
    /// from the bank a potential level at a time ([`Solver::search_from_bank`]).
    fn spend_held_bank(&mut self) {
        let m = self.bank as usize;
        let mut bank_potential = self.potential[m];
        let mut levels = cells_by_potential(&self.potential[..m], bank_potential);
        while self.held[m] > 0 {
            let Some((keeper, length)) = self.search_from_bank(bank_potential, &levels) else {
                break;
            };
            if length > 0 {
                self.update_settled_potentials::<false>(length);
                bank_potential -= length;
                levels = cells_by_potential(&self.potential[..m], bank_potential);
            }
            let (moved, first) = self.push_to_keeper(keeper, self.held[m]);
            // A real check: a broken invariant would otherwise create units off the shortest path.
            assert_eq!(bank_potential, self.potential[first as usize], "the bank's arc is tight");
            self.change_bank_flow(first, moved);
            self.held[m] -= moved;
        }
        *self.bank_spare.as_mut().expect("a bank") += std::mem::take(&mut self.held[m]);
        self.potential[m] = bank_potential;
    }

    /// Dijkstra forwards from the bank at potential `bank_potential` over its arcs into the cells (reduced
    /// cost `bank_potential` − p(v); `levels[q]` lists the cells at potential q) and the king moves, until
    /// no unsettled cell is closer than the nearest way into S. Returns the cell of that way and its
    /// reduced length, if it saves a step (is shorter than the bank's own way into S, `bank_potential`). A
    /// cell enters from the bank only once nothing waits as close, so the search follows one cell's paths
    /// before it takes the next of a wide level.
    fn search_from_bank(&mut self, bank_potential: i64, levels: &[Vec<u32>]) -> Option<(u32, i64)> {
        self.round = self.round.checked_add(1).expect("fewer than 2^32 searches");
        self.queue.clear();
        self.settled_nodes.clear();
        let mut cells =
            levels.iter().enumerate().rev().flat_map(|(level, cells)| cells.iter().map(move |&cell| (level, cell)));
        let mut next = cells.next();
        let mut nearest: Option<(u32, i64)> = None;
        loop {
            let bound = nearest.map_or(bank_potential, |(_, length)| length.min(bank_potential));
            while let Some((level, cell)) = next {
                let distance = bank_potential - level as i64;
                if distance >= bound || self.waits_at_most(distance) {
                    break;
                }
                self.reach(cell, distance, Towards::Bank);
                next = cells.next();
            }
            let Some((distance, node)) = self.settle_next(Some((u32::MAX, bound))) else {
                return nearest;
            };
            let length = distance + self.potential[node as usize];
            if nearest.is_none_or(|(_, best)| length < best) && length < bank_potential {
                nearest = Some((node, length));
            }
            self.reach_over_king_moves::<false>(node, distance);
        }
    }

    /// Whether a node waits in the queue, not yet settled, at a distance of at most `limit`; drops the
    /// stale entries before it, so that the next node settled is that one, and else a push at `limit` may
    /// follow.
    fn waits_at_most(&mut self, limit: i64) -> bool {
        while let Some((distance, node)) = self.queue.peek_at_most(limit) {
            let mark = &self.marks[node as usize];
            if mark.settled != self.round && mark.distance == distance {
                return true;
            }
            self.queue.pop();
        }
        false
    }
}

/// The cells at each potential 0..=`highest`.
fn cells_by_potential(potentials: &[i64], highest: i64) -> Vec<Vec<u32>> {
    let mut levels = vec![Vec::new(); highest as usize + 1];
    for (cell, &potential) in potentials.iter().enumerate() {
        levels[potential as usize].push(cell as u32);
    }
    levels
}
