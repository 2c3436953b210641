//! Goldberg's cost-scaling push-relabel (partial augment-relabel, global price updates, price
//! refinement), re-derived from the design of LEMON's `CostScaling`. Each of its O(log(nC)) phases is close
//! to linear in practice, so it wins on large networks.

use std::collections::VecDeque;

use super::{Bounds, FlowNetwork, TransportError, INFINITE_CAPACITY};

/// Cost scaling shrinks ε by this factor per phase (Goldberg's and LEMON's default).
pub const COST_SCALING_ALPHA: i64 = 16;
/// Partial augment-relabel follows an admissible path for at most this many arcs before pushing
/// (LEMON's default for its fastest variant).
const MAX_PATH_LENGTH: usize = 4;
/// Price refinement gives up after this many rounds of potential lowering.
const PRICE_REFINEMENT_ROUNDS: usize = 32;

/// One direction of an arc of the residual graph (the other direction is `reverse`).
#[derive(Clone, Copy)]
struct ResidualArc {
    head: u32,
    reverse: u32,
    /// Cost multiplied by the scale K (negated on the reverse direction).
    cost: i64,
    residual: i64,
    /// Residual of both directions together (the arc's capacity), so that the reverse direction's
    /// residual is known without touching it.
    pair_capacity: i64,
}

/// Goldberg's cost-scaling push-relabel in the partial augment-relabel form with global price updates
/// (the design of LEMON's `CostScaling`, re-derived here).
///
/// Costs are multiplied by K = (n + 1)·α. Each phase ("refine") turns an αε-optimal flow into an ε-optimal
/// one (every residual arc has reduced cost ≥ −ε); the last phase has ε = 1, i.e. ε < 1/(n + 1) in original
/// units, so every residual cycle has cost > −1, hence ≥ 0: the flow is optimal for the integer costs.
///
/// Uncapacitated arcs (non-negative cost, checked by the caller) get capacity `flow_bound`, which some
/// optimal flow respects, so the optimum is unchanged. Infeasibility is detected in the first phase: there
/// a deficit node keeps potential 0, and a node with excess that can still reach one has potential
/// ≥ −(n − 1)·(ε + max scaled cost); falling below means its excess has nowhere to go.
pub(super) struct CostScaling {
    node_count: usize,
    first_out: Vec<usize>,
    arcs: Vec<ResidualArc>,
    /// Residual index of each network arc's forward direction.
    forward: Vec<u32>,
    /// Forward directions of uncapacitated arcs: residual in the real problem whatever their flow.
    uncapacitated: Vec<bool>,
    scale: i64,
    max_scaled_cost: i64,
    excess: Vec<i128>,
    potential: Vec<i128>,
    next_out: Vec<usize>,
    active: VecDeque<u32>,
    path: Vec<u32>,
    path_nodes: Vec<u32>,
    rank: Vec<u64>,
    settled: Vec<bool>,
    buckets: Vec<Vec<u32>>,
}

impl CostScaling {
    pub(super) fn new(net: &FlowNetwork, bounds: &Bounds) -> Self {
        let n = net.node_count();
        let m = net.arc_count();
        let scale = (n as i64 + 1) * COST_SCALING_ALPHA;
        let mut first_out = vec![0usize; n + 1];
        for e in 0..m {
            first_out[net.tail[e] as usize + 1] += 1;
            first_out[net.head[e] as usize + 1] += 1;
        }
        for u in 0..n {
            first_out[u + 1] += first_out[u];
        }
        let mut fill = first_out.clone();
        let mut arcs = vec![
            ResidualArc {
                head: 0,
                reverse: 0,
                cost: 0,
                residual: 0,
                pair_capacity: 0
            };
            2 * m
        ];
        let mut uncapacitated = vec![false; 2 * m];
        let mut forward = Vec::with_capacity(m);
        let mut max_scaled_cost = 0;
        for e in 0..m {
            let (tail, head) = (net.tail[e] as usize, net.head[e] as usize);
            let f = fill[tail];
            fill[tail] += 1;
            let b = fill[head];
            fill[head] += 1;
            let capacity = net.capacity[e];
            let residual = if capacity == INFINITE_CAPACITY {
                bounds.flow_bound
            } else {
                capacity
            };
            let cost = net.cost[e] * scale;
            max_scaled_cost = max_scaled_cost.max(cost.abs());
            let pair_capacity = residual;
            arcs[f] = ResidualArc {
                head: head as u32,
                reverse: b as u32,
                cost,
                residual,
                pair_capacity,
            };
            arcs[b] = ResidualArc {
                head: tail as u32,
                reverse: f as u32,
                cost: -cost,
                residual: 0,
                pair_capacity,
            };
            uncapacitated[f] = capacity == INFINITE_CAPACITY;
            forward.push(f as u32);
        }
        CostScaling {
            node_count: n,
            next_out: first_out[..n].to_vec(),
            first_out,
            arcs,
            forward,
            uncapacitated,
            scale,
            max_scaled_cost,
            excess: net.supply.iter().map(|&s| s as i128).collect(),
            potential: vec![0; n],
            active: VecDeque::new(),
            path: Vec::new(),
            path_nodes: Vec::new(),
            rank: vec![0; n],
            settled: vec![false; n],
            buckets: Vec::new(),
        }
    }

    pub(super) fn run(&mut self) -> Result<(), TransportError> {
        let mut epsilon = (self.max_scaled_cost / COST_SCALING_ALPHA).max(1);
        let floor = -(self.node_count as i128) * (epsilon as i128 + self.max_scaled_cost as i128);
        let mut infeasibility_floor = Some(floor);
        loop {
            // The first phase starts from the zero flow; later ones from an αε-optimal flow that potentials
            // alone may already make ε-optimal.
            let refined = infeasibility_floor.is_none() && self.price_refinement(epsilon);
            if !refined {
                self.refine(epsilon, infeasibility_floor)?;
            }
            infeasibility_floor = None;
            if epsilon == 1 {
                return Ok(());
            }
            epsilon = if epsilon < COST_SCALING_ALPHA {
                1
            } else {
                epsilon / COST_SCALING_ALPHA
            };
        }
    }

    pub(super) fn flows(&self) -> Vec<i64> {
        self.forward
            .iter()
            .map(|&f| self.arcs[self.arcs[f as usize].reverse as usize].residual)
            .collect()
    }

    /// Exact integer potentials for the optimal flow: shortest-path labels in its residual graph, by a
    /// queue-based Bellman–Ford started from ⌊p/K⌋, which is within a unit of a fixed point, so few labels
    /// move. The residual graph of an optimal flow has no negative cycle; a node dequeued n + 1 times proves
    /// one, i.e. a non-optimal flow, which is reported rather than looped on.
    pub(super) fn exact_potentials(&self) -> Result<Vec<i64>, TransportError> {
        let n = self.node_count;
        let mut label: Vec<i64> = self
            .potential
            .iter()
            .map(|p| p.div_euclid(self.scale as i128) as i64)
            .collect();
        let mut queue: VecDeque<u32> = (0..n as u32).collect();
        let mut queued = vec![true; n];
        let mut visits = vec![0usize; n];
        while let Some(u) = queue.pop_front() {
            let u = u as usize;
            queued[u] = false;
            visits[u] += 1;
            if visits[u] > n {
                return Err(TransportError::Internal(
                    "cost scaling ended with a non-optimal flow",
                ));
            }
            for a in self.first_out[u]..self.first_out[u + 1] {
                let arc = self.arcs[a];
                if arc.residual > 0 || self.uncapacitated[a] {
                    let v = arc.head as usize;
                    let candidate = label[u] + arc.cost / self.scale;
                    if candidate < label[v] {
                        label[v] = candidate;
                        if !queued[v] {
                            queued[v] = true;
                            queue.push_back(v as u32);
                        }
                    }
                }
            }
        }
        Ok(label)
    }

    #[inline]
    fn reduced_cost(&self, tail: usize, arc: &ResidualArc) -> i128 {
        arc.cost as i128 + self.potential[tail] - self.potential[arc.head as usize]
    }

    /// Price refinement (Goldberg; LEMON's `priceRefinement`): before a phase, try to make the current flow
    /// ε-optimal by moving potentials only, and skip the phase when that works. Ranks are longest-path
    /// lengths with arc weight ⌈−rc/ε⌉ − 1 (positive only on arcs violating ε-optimality), then p −= ε·rank:
    /// an arc u → v with rank[v] ≥ rank[u] + weight gets rc' ≥ −ε. Fails when the admissible arcs form a
    /// cycle or the ranks have not settled after [`PRICE_REFINEMENT_ROUNDS`] rounds; either way the
    /// potentials stay valid for the phase that follows.
    fn price_refinement(&mut self, epsilon: i64) -> bool {
        let n = self.node_count;
        let eps = epsilon as i128;
        for _ in 0..PRICE_REFINEMENT_ROUNDS {
            let Some(order) = self.admissible_topological_order() else {
                return false;
            };
            // Longest paths over the admissible arcs, in topological order.
            self.rank.fill(0);
            for &u in &order {
                let u = u as usize;
                let ru = self.rank[u];
                for a in self.first_out[u]..self.first_out[u + 1] {
                    let arc = self.arcs[a];
                    if arc.residual > 0 {
                        let rc = self.reduced_cost(u, &arc);
                        if rc < 0 {
                            let weight = ((-rc - 1) / eps) as u64;
                            let v = arc.head as usize;
                            self.rank[v] = self.rank[v].max(ru + weight);
                        }
                    }
                }
            }
            let top = self.rank.iter().copied().max().unwrap_or(0);
            if top == 0 {
                return true;
            }
            // Top down, raise the heads of the other residual arcs so that lowering keeps rc' ≥ −ε on them.
            for bucket in &mut self.buckets {
                bucket.clear();
            }
            if self.buckets.len() <= top as usize {
                self.buckets.resize_with(top as usize + 1, Vec::new);
            }
            for u in 0..n {
                if self.rank[u] > 0 {
                    self.buckets[self.rank[u] as usize].push(u as u32);
                }
            }
            for r in (1..=top).rev() {
                while let Some(u) = self.buckets[r as usize].pop() {
                    let u = u as usize;
                    if self.rank[u] != r {
                        continue;
                    }
                    for a in self.first_out[u]..self.first_out[u + 1] {
                        let arc = self.arcs[a];
                        if arc.residual == 0 {
                            continue;
                        }
                        let rc = self.reduced_cost(u, &arc);
                        let need = if rc < 0 {
                            r
                        } else {
                            let drop = rc / eps + 1;
                            if drop >= r as i128 {
                                continue;
                            }
                            r - drop as u64
                        };
                        let v = arc.head as usize;
                        if need > self.rank[v] {
                            self.rank[v] = need;
                            self.buckets[need as usize].push(v as u32);
                        }
                    }
                }
            }
            for u in 0..n {
                self.potential[u] -= eps * self.rank[u] as i128;
            }
        }
        false
    }

    /// Nodes in a topological order of the admissible arcs (residual, negative reduced cost), or None if
    /// those arcs contain a cycle. Iterative depth-first search; reuses `next_out` as the arc cursor.
    fn admissible_topological_order(&mut self) -> Option<Vec<u32>> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let n = self.node_count;
        let mut state = vec![NEW; n];
        let mut postorder = Vec::with_capacity(n);
        let mut stack: Vec<u32> = Vec::new();
        self.next_out.copy_from_slice(&self.first_out[..n]);
        for root in 0..n {
            if state[root] != NEW {
                continue;
            }
            state[root] = OPEN;
            stack.push(root as u32);
            while let Some(&u) = stack.last() {
                let u = u as usize;
                let mut descended = false;
                while self.next_out[u] < self.first_out[u + 1] {
                    let a = self.next_out[u];
                    self.next_out[u] += 1;
                    let arc = self.arcs[a];
                    if arc.residual > 0 && self.reduced_cost(u, &arc) < 0 {
                        let v = arc.head as usize;
                        match state[v] {
                            NEW => {
                                state[v] = OPEN;
                                stack.push(v as u32);
                                descended = true;
                                break;
                            }
                            OPEN => return None,
                            _ => {}
                        }
                    }
                }
                if !descended {
                    state[u] = DONE;
                    postorder.push(u as u32);
                    stack.pop();
                }
            }
        }
        postorder.reverse();
        Some(postorder)
    }

    /// Turns an αε-optimal flow into an ε-optimal one. With `infeasibility_floor`, fails when a node with
    /// excess sinks below it (see the type's doc).
    fn refine(
        &mut self,
        epsilon: i64,
        infeasibility_floor: Option<i128>,
    ) -> Result<(), TransportError> {
        let n = self.node_count;
        // Saturate every residual arc of negative reduced cost: the pseudoflow becomes 0-optimal.
        for u in 0..n {
            for a in self.first_out[u]..self.first_out[u + 1] {
                let arc = self.arcs[a];
                if arc.residual > 0 && self.reduced_cost(u, &arc) < 0 {
                    self.push(u, a, arc.residual);
                }
            }
        }
        self.active.clear();
        self.active
            .extend((0..n as u32).filter(|&u| self.excess[u as usize] > 0));
        self.next_out.copy_from_slice(&self.first_out[..n]);
        // A global update costs O(m); after every n relabels it pays for itself (measured on king-move grids).
        let update_interval = n as u64;
        let mut relabels = 0u64;
        let mut next_update = update_interval;
        let sunk = |this: &Self, u: usize| {
            infeasibility_floor.is_some_and(|f| this.excess[u] > 0 && this.potential[u] < f)
        };

        while let Some(&start) = self.active.front() {
            let start = start as usize;
            if self.excess[start] <= 0 {
                self.active.pop_front();
                continue;
            }
            // Follow admissible arcs from `start` until a deficit or the length limit; relabel dead ends.
            self.path.clear();
            self.path_nodes.clear();
            self.path_nodes.push(start as u32);
            let mut tip = start;
            while self.path.len() < MAX_PATH_LENGTH && self.excess[tip] >= 0 {
                if let Some(a) = self.admissible_arc(tip) {
                    self.next_out[tip] = a;
                    self.path.push(a as u32);
                    tip = self.arcs[a].head as usize;
                    self.path_nodes.push(tip as u32);
                    continue;
                }
                let back = self
                    .path
                    .last()
                    .map(|&a| self.arcs[a as usize].reverse as usize);
                if !self.relabel(tip, epsilon, back) || sunk(self, tip) {
                    return Err(TransportError::Infeasible);
                }
                relabels += 1;
                if tip != start {
                    self.path.pop();
                    self.path_nodes.pop();
                    tip = self.path_nodes[self.path_nodes.len() - 1] as usize;
                }
            }
            for i in 0..self.path.len() {
                let (u, a) = (self.path_nodes[i] as usize, self.path[i] as usize);
                let v = self.arcs[a].head as usize;
                let delta = (self.arcs[a].residual as i128).min(self.excess[u]) as i64;
                let was_inactive = self.excess[v] <= 0;
                self.push(u, a, delta);
                if was_inactive && self.excess[v] > 0 {
                    self.active.push_back(v as u32);
                }
            }
            if relabels >= next_update {
                self.global_update(epsilon);
                next_update = relabels + update_interval;
                if (0..n).any(|u| sunk(self, u)) {
                    return Err(TransportError::Infeasible);
                }
            }
        }
        Ok(())
    }

    #[inline]
    fn push(&mut self, tail: usize, a: usize, amount: i64) {
        let arc = self.arcs[a];
        self.arcs[a].residual -= amount;
        self.arcs[arc.reverse as usize].residual += amount;
        self.excess[tail] -= amount as i128;
        self.excess[arc.head as usize] += amount as i128;
    }

    /// The first admissible arc (residual, negative reduced cost) from the current-arc pointer on.
    #[inline]
    fn admissible_arc(&self, u: usize) -> Option<usize> {
        let pu = self.potential[u];
        (self.next_out[u]..self.first_out[u + 1]).find(|&a| {
            let arc = &self.arcs[a];
            arc.residual > 0 && arc.cost as i128 + pu - self.potential[arc.head as usize] < 0
        })
    }

    /// Lowers u's potential until its cheapest residual arc (or `back`, the reverse of the path arc into u)
    /// has reduced cost −ε. Lowering by less than the plain relabel keeps ε-optimality, and the amount is at
    /// least ε: u had no admissible arc and `back` has positive reduced cost. `back` also makes the path arc
    /// inadmissible when u has no residual arc at all. Returns false when u has neither: then it is a path
    /// start whose excess cannot leave (all its arcs are saturated outwards and empty inwards), so the
    /// supplies are infeasible.
    fn relabel(&mut self, u: usize, epsilon: i64, back: Option<usize>) -> bool {
        let mut min_rc = back.map(|b| self.reduced_cost(u, &self.arcs[b]));
        for a in self.first_out[u]..self.first_out[u + 1] {
            let arc = self.arcs[a];
            if arc.residual > 0 {
                let rc = self.reduced_cost(u, &arc);
                min_rc = Some(min_rc.map_or(rc, |m| m.min(rc)));
            }
        }
        self.next_out[u] = self.first_out[u];
        match min_rc {
            Some(rc) => {
                self.potential[u] -= rc + epsilon as i128;
                true
            }
            None => false,
        }
    }

    /// Global price update: lowers every potential by ε × its bucket distance to the deficit nodes, an arc
    /// counting ⌊rc/ε⌋ + 1 ≥ 0, distances capped at the level R where the last excess node was reached.
    /// Keeps ε-optimality (d(v) ≤ d(w) + ⌊rc/ε⌋ + 1 gives rc' ≥ −ε, and capping at any R preserves that)
    /// and leaves an admissible path from every reached excess node to a deficit.
    fn global_update(&mut self, epsilon: i64) {
        let n = self.node_count;
        let mut remaining: i128 = self.excess.iter().filter(|&&e| e > 0).sum();
        if remaining == 0 {
            return;
        }
        let limit = COST_SCALING_ALPHA as u64 * n as u64;
        self.rank.fill(u64::MAX);
        self.settled.fill(false);
        for bucket in &mut self.buckets {
            bucket.clear();
        }
        if self.buckets.is_empty() {
            self.buckets.push(Vec::new());
        }
        for u in 0..n {
            if self.excess[u] < 0 {
                self.rank[u] = 0;
                self.buckets[0].push(u as u32);
            }
        }
        let mut r = 0u64;
        'search: while r <= limit && (r as usize) < self.buckets.len() {
            while let Some(u) = self.buckets[r as usize].pop() {
                let u = u as usize;
                if self.settled[u] || self.rank[u] != r {
                    continue;
                }
                self.settled[u] = true;
                if self.excess[u] > 0 {
                    remaining -= self.excess[u];
                    if remaining <= 0 {
                        break 'search;
                    }
                }
                let pu = self.potential[u];
                for b in self.first_out[u]..self.first_out[u + 1] {
                    let out = self.arcs[b];
                    let v = out.head as usize;
                    // The arc v → u is the reverse of `out`: its residual is what `out` has used of the pair.
                    if out.pair_capacity > out.residual && !self.settled[v] {
                        // Reduced cost of v → u; ≥ −ε by ε-optimality, so its length ⌊rc/ε⌋ + 1 is ≥ 0.
                        let rc = -(out.cost as i128) + self.potential[v] - pu;
                        let length = if rc < 0 {
                            0
                        } else if rc >= (limit - r) as i128 * epsilon as i128 {
                            continue;
                        } else {
                            rc as u64 / epsilon as u64 + 1
                        };
                        let new_rank = r + length;
                        if new_rank < self.rank[v] {
                            self.rank[v] = new_rank;
                            if self.buckets.len() <= new_rank as usize {
                                self.buckets.resize_with(new_rank as usize + 1, Vec::new);
                            }
                            self.buckets[new_rank as usize].push(v as u32);
                        }
                    }
                }
            }
            r += 1;
        }
        for u in 0..n {
            let k = self.rank[u].min(r);
            if k > 0 {
                self.potential[u] -= epsilon as i128 * k as i128;
                self.next_out[u] = self.first_out[u];
            }
        }
    }
}
