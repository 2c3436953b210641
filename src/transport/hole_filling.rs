//! Transport into the holes of a king-move grid, exactly, by successive shortest paths.
//!
//! Cells of a side^d grid (row-major, coordinate 0 most significant) hold integer counts c_i, some
//! negative (holes). Choose king-move flows x ≥ 0 (cost 1 per unit and step, so a unit moved between
//! two cells pays their ℓ∞ distance in steps) and units z ≥ 0 created by a bank of `bank_supply` units
//! (Σz ≤ bank_supply, free, beside every cell) such that no cell ends negative,
//! c_i + in_i − out_i + z_i ≥ 0; minimise Σx. Cells with c_i > 0 may keep what they do not give.
//! PSMM's projection reduces to this (`mechanism::psmm::project_to_probability`). So does the W1 of two
//! histograms on a grid (Σc = 0, no bank: nothing is left over), but there no cell may keep anything, the
//! last holes search the whole grid for the last mass, and cost scaling stays 20× faster (measured at 362²
//! cells), so `eval::w1::w1_grid` keeps the general solver.
//!
//! With a super-source S (S → cell, capacity max(c_i, 0); S → bank, capacity `bank_supply`) this is a
//! min-cost flow of value Σ max(−c_i, 0) into the holes. For each hole in turn, a Dijkstra search
//! backwards from it over reduced costs (potentials p, S's fixed at 0) finds the nearest source at
//! reduced length D; then p(v) += D − d(v) for every node settled below D (the early-stopping update),
//! which keeps every residual arc's reduced cost ≥ 0 and makes the path found tight, and the path takes
//! what the source, the hole and its cancelling arcs allow. Pushing along a shortest path from the
//! sources to a deficit keeps the pseudoflow optimal for what it carries (no residual cycle of negative
//! cost), so once the last hole is full the flow is a min-cost flow.
//!
//! Why not the general solvers of this module: noisy counts put holes beside positive cells almost
//! everywhere, so most searches end a step or two from their hole, and the work follows the holes
//! instead of cost scaling's phases over every arc (PSMM at 10^6 cells in d = 2: 139 s with cost
//! scaling, 22 s here). The holes are taken in a scattered order and ties in first-in first-out order,
//! which keeps the searches short (see [`scattered_order`] and [`BucketQueue`]). Memory: the cells'
//! arrays and one net flow per undirected king-move edge, about 100 + 4·(3^d − 1) bytes per cell.

/// The filled grid: what each cell keeps, and what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct FilledHoles {
    /// c_i + in_i − out_i + z_i ≥ 0 for every cell: what the positive cells kept, 0 in the holes.
    pub leftover: Vec<u64>,
    /// Σx: king-move steps, one unit each, in grid steps.
    pub transport_steps: u128,
}

/// The king-move offsets of a grid, each with the slot of its undirected edge.
struct Neighbourhood {
    dims: usize,
    side: usize,
    /// Per offset: its step in {−1, 0, 1} on each axis (axis-major: `steps[j * dims + axis]`).
    steps: Vec<i8>,
    /// Per offset: the index delta in the row-major layout.
    delta: Vec<isize>,
    /// Per offset: which of the (3^d − 1)/2 forward offsets its edge is stored under, and whether the
    /// offset is that forward one (+1) or its opposite (−1).
    slot: Vec<(usize, i64)>,
    forward_count: usize,
}

impl Neighbourhood {
    /// The offsets in base-3 code order (digit k is the step on axis k, plus 1), the centre left out.
    /// Code c and 3^d − 1 − c are opposite; the codes above the centre's (3^d − 1)/2 are the forward
    /// ones. One cell per axis has no neighbours, and its 3^d codes are not enumerated (they would not
    /// fit for wide tables).
    fn new(side: usize, dims: usize) -> Self {
        let strides: Vec<usize> = (0..dims).map(|axis| side.pow((dims - 1 - axis) as u32)).collect();
        let codes = if side < 2 { 0 } else { 3usize.pow(dims as u32) };
        let centre = codes / 2;
        let (mut steps, mut delta, mut slot) = (Vec::new(), Vec::new(), Vec::new());
        for code in (0..codes).filter(|&code| code != centre) {
            let offset: Vec<i8> = (0..dims)
                .map(|axis| (code / 3usize.pow(axis as u32) % 3) as i8 - 1)
                .collect();
            delta.push(
                offset
                    .iter()
                    .zip(&strides)
                    .map(|(&s, &t)| s as isize * t as isize)
                    .sum(),
            );
            steps.extend(offset);
            slot.push(if code > centre {
                (code - centre - 1, 1)
            } else {
                (codes - 1 - code - centre - 1, -1)
            });
        }
        Neighbourhood {
            dims,
            side,
            steps,
            delta,
            slot,
            forward_count: centre,
        }
    }

    /// Calls `visit(offset, neighbour)` for every king-move neighbour of `cell` inside the grid.
    #[inline]
    fn for_each(&self, cell: usize, coords: &mut [usize], mut visit: impl FnMut(usize, usize)) {
        let mut rest = cell;
        for coord in coords.iter_mut().rev() {
            *coord = rest % self.side;
            rest /= self.side;
        }
        if coords.iter().all(|&c| c > 0 && c + 1 < self.side) {
            // Away from the faces every neighbour exists: most cells, checked once instead of per offset.
            for (j, &delta) in self.delta.iter().enumerate() {
                visit(j, (cell as isize + delta) as usize);
            }
            return;
        }
        for (j, &delta) in self.delta.iter().enumerate() {
            let steps = &self.steps[j * self.dims..(j + 1) * self.dims];
            let inside = coords
                .iter()
                .zip(steps)
                .all(|(&c, &s)| (s >= 0 || c > 0) && (s <= 0 || c + 1 < self.side));
            if inside {
                visit(j, (cell as isize + delta) as usize);
            }
        }
    }
}

/// The arc a node's search path takes towards its hole.
#[derive(Clone, Copy)]
enum Towards {
    /// A king move to `next`; `offset` leads from `next` back to this node.
    Move { next: u32, offset: u32 },
    /// From the bank: created units into this cell.
    IntoCell(u32),
    /// From a cell: back to the bank (cancelling units it created there).
    Bank,
    /// The hole itself.
    Root,
}

/// Successive shortest paths over the grid's cells and the bank (node index m).
struct Solver<'a> {
    around: &'a Neighbourhood,
    bank: u32,
    /// Net flow on each undirected edge, from the cell to `cell + delta` of the forward offset.
    flow: Vec<i64>,
    /// What each positive cell can still give (S → cell).
    spare: Vec<i64>,
    /// What each hole still needs.
    demand: Vec<i64>,
    /// Bank → cell flow.
    bank_flow: Vec<i64>,
    /// The cells with positive bank flow (the bank's residual in-arcs), with each one's position here.
    bank_fed: Vec<u32>,
    bank_fed_at: Vec<u32>,
    /// What the bank can still create; `None` without a bank (b ≤ 0).
    bank_spare: Option<i64>,
    /// Potentials: the reduced cost of u → v is cost + p(u) − p(v); S's potential is 0.
    potential: Vec<i64>,
    // The search's state, reused across searches (a node's entries count when its stamp is the round's).
    distance: Vec<i64>,
    reached: Vec<u32>,
    settled: Vec<u32>,
    towards: Vec<Towards>,
    round: u32,
    settled_nodes: Vec<u32>,
    queue: BucketQueue,
    coords: Vec<usize>,
    /// Neighbours reached from the node being settled, before they enter the queue.
    pending: Vec<(u32, i64, u32)>,
}

/// Fills every hole of `counts` (side^d cells, c_i < 0) at the least king-move cost from the positive
/// cells and from `bank_supply` units of free creation (the module's problem). Exact; one thread, so the
/// result depends on its inputs only. Supply must cover demand: Σ max(c, 0) + bank_supply ≥ Σ max(−c, 0).
pub fn fill_holes(side: usize, dims: usize, counts: &[i64], bank_supply: u64) -> FilledHoles {
    let around = Neighbourhood::new(side, dims);
    let solver = solve(&around, counts, bank_supply);
    // A flow of least cost never carries both directions of an edge, so |net flow| is its cost.
    let transport_steps = solver.flow.iter().map(|&f| f.unsigned_abs() as u128).sum();
    FilledHoles {
        // A positive cell keeps its spare; a hole ends at exactly 0.
        leftover: solver.spare.iter().map(|&kept| kept as u64).collect(),
        transport_steps,
    }
}

/// The solver once every hole is full.
fn solve<'a>(around: &'a Neighbourhood, counts: &[i64], bank_supply: u64) -> Solver<'a> {
    let m = counts.len();
    assert_eq!(m, around.side.pow(around.dims as u32), "one count per cell");
    let banked = bank_supply > 0;
    let mut solver = Solver {
        around,
        bank: m as u32,
        flow: vec![0; m * around.forward_count],
        spare: counts.iter().map(|&c| c.max(0)).collect(),
        demand: counts.iter().map(|&c| (-c).max(0)).collect(),
        bank_flow: if banked { vec![0; m] } else { Vec::new() },
        bank_fed: Vec::new(),
        bank_fed_at: if banked { vec![u32::MAX; m] } else { Vec::new() },
        bank_spare: banked.then_some(bank_supply as i64),
        potential: vec![0; m + 1],
        distance: vec![0; m + 1],
        reached: vec![0; m + 1],
        settled: vec![0; m + 1],
        towards: vec![Towards::Root; m + 1],
        round: 0,
        settled_nodes: Vec::new(),
        queue: BucketQueue::default(),
        coords: vec![0; around.dims],
        pending: Vec::new(),
    };
    for hole in scattered_order(m) {
        while solver.demand[hole as usize] > 0 {
            solver.fill_from_nearest_source(hole);
        }
    }
    solver
}

/// 0..m in a fixed scattered order (a multiplicative hash): taken row by row, the first holes of a
/// region empty the cells that the next ones needed, and their searches grow (at 250 000 cells in d = 2,
/// ε = 1: 23 million nodes settled in this order, 101 million row by row).
fn scattered_order(m: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..m as u32).collect();
    order.sort_unstable_by_key(|&cell| u64::from(cell).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    order
}

impl Solver<'_> {
    /// One successive shortest path: the search from `hole`, the potential update, the push.
    fn fill_from_nearest_source(&mut self, hole: u32) {
        let (source, length) = self.search(hole);
        for &node in &self.settled_nodes {
            let v = node as usize;
            if self.distance[v] < length {
                self.potential[v] += length - self.distance[v];
            }
        }
        self.push_along_path(source, hole);
    }

    /// Dijkstra backwards from `hole` over the residual arcs' reduced costs, until no unsettled node is
    /// closer than the nearest source. Returns that source (a cell that can still give, or the bank)
    /// and its reduced length D from S.
    fn search(&mut self, hole: u32) -> (u32, i64) {
        self.round = self.round.checked_add(1).expect("fewer than 2^32 searches");
        self.queue.clear();
        self.settled_nodes.clear();
        self.reach(hole, 0, Towards::Root);
        let bank = self.bank;
        let mut nearest: Option<(u32, i64)> = None;
        let mut coords = std::mem::take(&mut self.coords);
        let mut pending = std::mem::take(&mut self.pending);
        while let Some((distance, node)) = self.queue.pop() {
            if nearest.is_some_and(|(_, length)| distance >= length) {
                break;
            }
            let v = node as usize;
            if self.settled[v] == self.round || distance != self.distance[v] {
                continue;
            }
            self.settled[v] = self.round;
            self.settled_nodes.push(node);
            // S → v, reduced cost 0 − p(v), while v can still give.
            if self.can_give(node) {
                let length = distance - self.potential[v];
                debug_assert!(length >= distance, "S's arcs keep reduced cost ≥ 0");
                if nearest.is_none_or(|(_, best)| length < best) {
                    nearest = Some((node, length));
                }
            }
            if node == bank {
                // The bank's residual in-arcs: cell → bank where the bank created into the cell.
                for i in 0..self.bank_fed.len() {
                    let cell = self.bank_fed[i];
                    let reduced = self.potential[cell as usize] - self.potential[v];
                    debug_assert!(reduced >= 0, "residual arcs keep reduced cost ≥ 0");
                    self.reach(cell, distance + reduced, Towards::Bank);
                }
                continue;
            }
            // Bank → v, cost 0, always residual.
            if self.bank_spare.is_some() {
                let reduced = self.potential[bank as usize] - self.potential[v];
                debug_assert!(reduced >= 0, "residual arcs keep reduced cost ≥ 0");
                self.reach(bank, distance + reduced, Towards::IntoCell(node));
            }
            // u → v over a king move: −1 where it cancels flow v → u, else +1.
            self.around.for_each(v, &mut coords, |j, u| {
                let cost = if self.net_flow(v, j, u) > 0 { -1 } else { 1 };
                let reduced = cost + self.potential[u] - self.potential[v];
                debug_assert!(reduced >= 0, "residual arcs keep reduced cost ≥ 0");
                pending.push((u as u32, distance + reduced, j as u32));
            });
            for (u, at, offset) in pending.drain(..) {
                self.reach(u, at, Towards::Move { next: node, offset });
            }
        }
        self.coords = coords;
        self.pending = pending;
        nearest.expect("supply covers demand, so some source is reachable")
    }

    fn can_give(&self, node: u32) -> bool {
        if node == self.bank {
            self.bank_spare.is_some_and(|spare| spare > 0)
        } else {
            self.spare[node as usize] > 0
        }
    }

    fn reach(&mut self, node: u32, distance: i64, towards: Towards) {
        let v = node as usize;
        if self.reached[v] != self.round || distance < self.distance[v] {
            self.reached[v] = self.round;
            self.distance[v] = distance;
            self.towards[v] = towards;
            self.queue.push(distance, node);
        }
    }

    /// Pushes from `source` along the search's path to `hole` as much as the source, the hole and the
    /// path's cancelling arcs allow.
    fn push_along_path(&mut self, source: u32, hole: u32) {
        debug_assert_eq!(self.potential[source as usize], 0, "S → source is tight");
        let mut amount = if source == self.bank {
            self.bank_spare.unwrap_or(0)
        } else {
            self.spare[source as usize]
        };
        let mut at = source;
        while let Some(next) = self.next_on_path(at) {
            amount = amount.min(self.tight_room(at));
            at = next;
        }
        debug_assert_eq!(at, hole);
        amount = amount.min(self.demand[hole as usize]);
        // A real check: a broken invariant would otherwise push nothing, forever.
        assert!(amount > 0, "the shortest path has room: its arcs are tight");
        let mut at = source;
        while let Some(next) = self.next_on_path(at) {
            self.push_towards_hole(at, amount);
            at = next;
        }
        if source == self.bank {
            *self.bank_spare.as_mut().expect("a bank") -= amount;
        } else {
            self.spare[source as usize] -= amount;
        }
        self.demand[hole as usize] -= amount;
    }

    fn next_on_path(&self, node: u32) -> Option<u32> {
        match self.towards[node as usize] {
            Towards::Move { next, .. } | Towards::IntoCell(next) => Some(next),
            Towards::Bank => Some(self.bank),
            Towards::Root => None,
        }
    }

    /// What the arc from `node` towards its hole can carry at reduced cost 0 now: unlimited on a king
    /// move of cost +1 or from the bank, the opposite flow on an arc that cancels it, 0 when the arc is not
    /// tight.
    fn tight_room(&self, node: u32) -> i64 {
        let tight = |head: u32, cost: i64| {
            cost + self.potential[node as usize] - self.potential[head as usize] == 0
        };
        match self.towards[node as usize] {
            Towards::Move { next, offset } => {
                let opposite = self.net_flow(next as usize, offset as usize, node as usize);
                match (opposite > 0, tight(next, if opposite > 0 { -1 } else { 1 })) {
                    (_, false) => 0,
                    (true, true) => opposite,
                    (false, true) => i64::MAX,
                }
            }
            Towards::IntoCell(cell) => {
                if tight(cell, 0) {
                    i64::MAX
                } else {
                    0
                }
            }
            Towards::Bank => {
                if tight(self.bank, 0) {
                    self.bank_flow[node as usize]
                } else {
                    0
                }
            }
            Towards::Root => unreachable!("the path ends at its hole"),
        }
    }

    fn push_towards_hole(&mut self, node: u32, amount: i64) {
        match self.towards[node as usize] {
            Towards::Move { next, offset } => {
                self.add_flow(next as usize, offset as usize, node as usize, -amount)
            }
            Towards::IntoCell(cell) => self.change_bank_flow(cell, amount),
            Towards::Bank => self.change_bank_flow(node, -amount),
            Towards::Root => unreachable!("the path ends at its hole"),
        }
    }

    fn change_bank_flow(&mut self, cell: u32, amount: i64) {
        let c = cell as usize;
        self.bank_flow[c] += amount;
        debug_assert!(self.bank_flow[c] >= 0);
        let listed = self.bank_fed_at[c] != u32::MAX;
        if self.bank_flow[c] > 0 && !listed {
            self.bank_fed_at[c] = self.bank_fed.len() as u32;
            self.bank_fed.push(cell);
        } else if self.bank_flow[c] == 0 && listed {
            let position = self.bank_fed_at[c] as usize;
            self.bank_fed.swap_remove(position);
            if let Some(&moved) = self.bank_fed.get(position) {
                self.bank_fed_at[moved as usize] = position as u32;
            }
            self.bank_fed_at[c] = u32::MAX;
        }
    }

    /// Flow from `cell` to its neighbour at offset `j`.
    #[inline]
    fn net_flow(&self, cell: usize, j: usize, neighbour: usize) -> i64 {
        let (slot, sign) = self.around.slot[j];
        let owner = if sign > 0 { cell } else { neighbour };
        sign * self.flow[owner * self.around.forward_count + slot]
    }

    fn add_flow(&mut self, cell: usize, j: usize, neighbour: usize, amount: i64) {
        let (slot, sign) = self.around.slot[j];
        let owner = if sign > 0 { cell } else { neighbour };
        self.flow[owner * self.around.forward_count + slot] += sign * amount;
    }
}

/// Dial's bucket queue for the search's integer distances, first in first out within a distance: pops
/// come in non-decreasing order as long as no push goes below the last pop, which Dijkstra's non-negative
/// reduced costs guarantee. Among equal distances the oldest node first keeps a search near its hole on
/// the wide plateaus of reduced cost 0 (27% fewer nodes settled at 10^6 cells than the heap's order).
#[derive(Default)]
struct BucketQueue {
    buckets: Vec<Vec<u32>>,
    used: Vec<usize>,
    current: usize,
    read: usize,
}

impl BucketQueue {
    fn clear(&mut self) {
        for &distance in &self.used {
            self.buckets[distance].clear();
        }
        self.used.clear();
        self.current = 0;
        self.read = 0;
    }

    fn push(&mut self, distance: i64, node: u32) {
        let d = usize::try_from(distance).expect("distances are non-negative");
        debug_assert!(d >= self.current, "pushes never go below the last pop");
        if d >= self.buckets.len() {
            self.buckets.resize_with(d + 1, Vec::new);
        }
        if self.buckets[d].is_empty() {
            self.used.push(d);
        }
        self.buckets[d].push(node);
    }

    fn pop(&mut self) -> Option<(i64, u32)> {
        while self.current < self.buckets.len() {
            if let Some(&node) = self.buckets[self.current].get(self.read) {
                self.read += 1;
                return Some((self.current as i64, node));
            }
            self.current += 1;
            self.read = 0;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::grid::add_king_move_arcs;
    use crate::testing::case_rng;
    use crate::transport::{solve_min_cost_flow, FlowNetwork, INFINITE_CAPACITY};
    use rand::RngExt;

    /// The module's problem as a general min-cost flow: the cells with supplies c_i and king moves at
    /// cost 1, a bank node with supply `bank` and free arcs into every cell, and a sink taking what is
    /// left (Σc + bank) from any cell or the bank for free.
    fn general_optimum(side: usize, dims: usize, counts: &[i64], bank: u64) -> i128 {
        let mut net = FlowNetwork::new();
        let cells: Vec<_> = counts.iter().map(|&c| net.add_node(c)).collect();
        add_king_move_arcs(&mut net, &cells, side, dims);
        let bank_node = net.add_node(bank as i64);
        let left = counts.iter().sum::<i64>() + bank as i64;
        let sink = net.add_node(-left);
        net.add_arc(bank_node, sink, INFINITE_CAPACITY, 0);
        for &cell in &cells {
            net.add_arc(bank_node, cell, INFINITE_CAPACITY, 0);
            net.add_arc(cell, sink, INFINITE_CAPACITY, 0);
        }
        solve_min_cost_flow(&net).expect("a feasible network").cost
    }

    /// Checks the solver's flow cell by cell: c_i + in_i − out_i + z_i is what the cell kept, never
    /// negative and never more than it had; the bank created what it says it did. Returns Σ|flow|.
    fn checked_steps(around: &Neighbourhood, counts: &[i64], bank: u64) -> u128 {
        let solver = solve(around, counts, bank);
        let mut coords = vec![0; around.dims];
        let mut created = 0;
        for (cell, &count) in counts.iter().enumerate() {
            let mut net_out = 0;
            around.for_each(cell, &mut coords, |j, neighbour| {
                net_out += solver.net_flow(cell, j, neighbour);
            });
            let into = if bank > 0 { solver.bank_flow[cell] } else { 0 };
            created += into;
            let kept = count - net_out + into;
            assert_eq!(kept, solver.spare[cell], "cell {cell} of {counts:?}");
            assert!(kept >= 0 && kept <= count.max(0), "cell {cell} kept {kept} of {count}");
            assert_eq!(solver.demand[cell], 0, "hole {cell} left unfilled");
        }
        assert_eq!(created, bank as i64 - solver.bank_spare.unwrap_or(0));
        solver.flow.iter().map(|&f| f.unsigned_abs() as u128).sum()
    }

    #[test]
    fn filling_costs_what_the_general_min_cost_flow_costs() {
        let mut rng = case_rng(31);
        let mut cases = 0;
        for dims in 1..=3usize {
            let largest_side = [12, 7, 4][dims - 1];
            for side in 1..=largest_side {
                let around = Neighbourhood::new(side, dims);
                let cells = side.pow(dims as u32);
                // Mostly holes, balanced, mostly positive.
                for (low, high) in [(-6, 2), (-3, 3), (-1, 6)] {
                    for _ in 0..4 {
                        let counts: Vec<i64> =
                            (0..cells).map(|_| rng.random_range(low..=high)).collect();
                        let shortfall = (-counts.iter().sum::<i64>()).max(0) as u64;
                        for bank in [shortfall, shortfall + rng.random_range(1..5u64)] {
                            let steps = checked_steps(&around, &counts, bank);
                            let filled = fill_holes(side, dims, &counts, bank);
                            assert_eq!(filled.transport_steps, steps);
                            assert_eq!(
                                steps as i128,
                                general_optimum(side, dims, &counts, bank),
                                "d = {dims}, side {side}, bank {bank}: {counts:?}"
                            );
                            cases += 1;
                        }
                    }
                }
            }
        }
        assert!(cases > 500, "{cases} cases");
    }

    /// Noisy counts over a large empty region and a dense corner: holes far from any supply, long
    /// paths that reroute earlier ones, and (with a bank) creation competing with transport.
    #[test]
    fn long_reroutes_stay_optimal() {
        let mut rng = case_rng(32);
        let side = 40;
        let around = Neighbourhood::new(side, 2);
        for bank_units in [0u64, 30] {
            let counts: Vec<i64> = (0..side * side)
                .map(|cell| {
                    let noise = rng.random_range(-3..=3);
                    if cell % side < 5 && cell / side < 5 {
                        noise + 40
                    } else {
                        noise - 1
                    }
                })
                .collect();
            let shortfall = (-counts.iter().sum::<i64>()).max(0) as u64;
            let bank = shortfall + bank_units;
            let steps = checked_steps(&around, &counts, bank);
            assert_eq!(steps as i128, general_optimum(side, 2, &counts, bank));
        }
    }

    #[test]
    fn balanced_counts_are_transported_whole() {
        // Σc = 0 and no bank: every unit moves, so the cost is W1 in steps. Two unit masses at opposite
        // corners of a 5 × 5 grid are 4 king moves apart.
        let mut counts = vec![0i64; 25];
        counts[0] = 1;
        counts[24] = -1;
        let filled = fill_holes(5, 2, &counts, 0);
        assert_eq!(filled.transport_steps, 4);
        assert!(filled.leftover.iter().all(|&kept| kept == 0));
    }
}
