//! Exact minimum-cost flow on a sparse directed graph with integer capacities, costs and supplies.
//!
//! Problem: minimise Σ_e cost_e·flow_e subject to 0 ≤ flow_e ≤ capacity_e and, at every node v,
//! Σ_{e out of v} flow_e − Σ_{e into v} flow_e = supply_v (Σ supply = 0; demands are negative supplies).
//!
//! Why: the W1 estimators (`eval::w1`) and PSMM's bounded-Lipschitz projection are transportation
//! problems whose sparse king-move formulation reaches 10^6 nodes and 10^7 arcs. Two exact algorithms, both
//! re-derived here from the designs of LEMON's `NetworkSimplex` and `CostScaling`:
//! - primal network simplex, block-search pivoting, strongly feasible spanning-tree basis (thread /
//!   successor representation). Fastest up to ~10^4 nodes, any costs, detects unboundedness;
//! - Goldberg's cost-scaling push-relabel (partial augment-relabel, global price updates, price
//!   refinement). Each of its O(log(nC)) phases is close to linear in practice, so it wins on large networks.
//!
//! Both return the optimal flow and exact integer potentials (the dual, i.e. the Kantorovich potential,
//! which certifies optimality). Arithmetic is exact: flows and costs in `i64`, totals in `i128`; the
//! magnitudes that keep it overflow-free are checked first (see [`MAGNITUDE_LIMIT`]).
//!
//! Cost on king-move grids in d = 2 (8 arcs per cell, unit costs, one 2-core machine under load, release):
//! 10^5 cells ≈ 3–5 s and 10^6 cells ≈ 1–3.5 min with cost scaling (close vs. far-apart measures); the
//! simplex needs 12–72 s and ~25 min (close measures) there, because both its pivot count and its per-pivot
//! subtree updates grow with n. Memory: about 100 bytes per arc at peak (network plus residual graph).
//!
//! PSMM's projection, a transport on a king-move grid in which positive cells fill the negative ones and
//! may keep the rest, has its own exact solver, [`fill_holes`]: successive shortest paths that follow the
//! holes, 6× faster than cost scaling at 10^6 cells in d = 2 and a tenth of its memory (about 45×
//! in all; docs/mechanisms/psmm.md); in d ≥ 3 it fills them in phases of the primal-dual method. In d ≤ 4 it
//! also solves the grid W1 of `eval` (Σ supply = 0) between close measures.

use std::fmt;

mod cost_scaling;
mod hole_filling;
mod simplex;

pub use cost_scaling::COST_SCALING_ALPHA;
pub use hole_filling::{bit_words_per_cell, fill_holes};
use cost_scaling::CostScaling;
use simplex::NetworkSimplex;

/// Capacity of an arc without an upper bound.
pub const INFINITE_CAPACITY: i64 = i64::MAX;

/// Bound on the simplex's artificial "big-M" cost (n + 1)·(max |cost| + 1), on cost scaling's scaled costs
/// and on the total flow Σ positive supplies + Σ finite capacities: below it no potential, reduced cost or
/// flow overflows `i64` (cost scaling keeps potentials and excesses in `i128`).
pub const MAGNITUDE_LIMIT: i64 = 1 << 59;

/// Block search examines `BLOCK_SIZE_FACTOR·√m` arcs (at least [`MIN_BLOCK_SIZE`]) before it takes the
/// most violating one; LEMON's default, a good compromise between pricing cost and pivot count.
pub const BLOCK_SIZE_FACTOR: f64 = 1.0;
/// Smallest pricing block.
pub const MIN_BLOCK_SIZE: usize = 10;

/// A node of a [`FlowNetwork`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

impl NodeId {
    #[cfg(any(test, feature = "internals"))]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// An arc of a [`FlowNetwork`]; `FlowSolution::flows[arc.index()]` is its flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArcId(u32);

impl ArcId {
    #[cfg(any(test, feature = "internals"))]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Largest number of nodes (the solver adds one root node and one artificial arc per node, and indexes
/// nodes and arcs with `u32`).
pub const MAX_NODES: usize = (u32::MAX / 4) as usize;
/// Largest number of arcs.
pub const MAX_ARCS: usize = (u32::MAX / 2) as usize;

/// A directed graph with integer capacities, integer costs and node supplies, built incrementally.
#[derive(Clone, Debug, Default)]
pub struct FlowNetwork {
    supply: Vec<i64>,
    tail: Vec<u32>,
    head: Vec<u32>,
    capacity: Vec<i64>,
    cost: Vec<i64>,
}

impl FlowNetwork {
    #[cfg(any(test, feature = "internals"))]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty network with room for `nodes` nodes and `arcs` arcs.
    pub fn with_capacity(nodes: usize, arcs: usize) -> Self {
        FlowNetwork {
            supply: Vec::with_capacity(nodes),
            tail: Vec::with_capacity(arcs),
            head: Vec::with_capacity(arcs),
            capacity: Vec::with_capacity(arcs),
            cost: Vec::with_capacity(arcs),
        }
    }

    /// Adds a node with the given supply (negative: demand).
    ///
    /// # Panics
    /// If the network already has [`MAX_NODES`] nodes; callers size their problems first.
    pub fn add_node(&mut self, supply: i64) -> NodeId {
        assert!(
            self.supply.len() < MAX_NODES,
            "flow network: more than {MAX_NODES} nodes"
        );
        self.supply.push(supply);
        NodeId((self.supply.len() - 1) as u32)
    }

    /// Adds an arc `from → to`. Capacity must be ≥ 0 ([`INFINITE_CAPACITY`] for none); checked by the solver.
    ///
    /// # Panics
    /// If the network already has [`MAX_ARCS`] arcs; callers size their problems first.
    pub fn add_arc(&mut self, from: NodeId, to: NodeId, capacity: i64, cost: i64) -> ArcId {
        assert!(
            self.tail.len() < MAX_ARCS,
            "flow network: more than {MAX_ARCS} arcs"
        );
        self.tail.push(from.0);
        self.head.push(to.0);
        self.capacity.push(capacity);
        self.cost.push(cost);
        ArcId((self.tail.len() - 1) as u32)
    }

    /// Replaces the supply of a node.
    #[cfg(any(test, feature = "internals"))]
    pub fn set_supply(&mut self, node: NodeId, supply: i64) {
        self.supply[node.index()] = supply;
    }

    pub fn node_count(&self) -> usize {
        self.supply.len()
    }

    pub fn arc_count(&self) -> usize {
        self.tail.len()
    }
}

/// An optimal flow with its dual certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSolution {
    /// Σ cost_e·flow_e.
    pub cost: i128,
    /// Flow per arc, indexed by `ArcId::index`.
    pub flows: Vec<i64>,
    /// Node potentials π (shortest-path-like labels): every arc with flow < capacity has
    /// cost + π[from] − π[to] ≥ 0 and every arc with flow > 0 has cost + π[from] − π[to] ≤ 0.
    /// For a transportation problem −Σ_v supply_v·π_v equals the optimal cost (Kantorovich duality).
    pub potentials: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// Σ supply ≠ 0; `excess` is the sum.
    Unbalanced { excess: i128 },
    /// No flow meets the supplies within the capacities.
    Infeasible,
    /// A negative-cost cycle of uncapacitated arcs makes the cost unbounded below.
    Unbounded,
    /// An arc refers to a node outside the network or has a negative capacity.
    InvalidArc { arc: usize, reason: &'static str },
    /// The data exceeds the magnitudes the exact `i64` arithmetic supports (the message says which).
    TooLarge(String),
    /// The algorithm asked for does not apply to this network (the message says why).
    Unsupported(String),
    /// A self-check failed: a bug, reported instead of a wrong answer.
    Internal(&'static str),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Unbalanced { excess } => {
                write!(
                    f,
                    "min-cost flow: supplies do not sum to zero (sum = {excess})"
                )
            }
            TransportError::Infeasible => {
                write!(f, "min-cost flow: no feasible flow meets the supplies")
            }
            TransportError::Unbounded => {
                write!(
                    f,
                    "min-cost flow: unbounded (a negative-cost cycle of uncapacitated arcs)"
                )
            }
            TransportError::InvalidArc { arc, reason } => {
                write!(f, "min-cost flow: arc {arc}: {reason}")
            }
            TransportError::TooLarge(reason) | TransportError::Unsupported(reason) => {
                write!(f, "min-cost flow: {reason}")
            }
            TransportError::Internal(reason) => {
                write!(f, "min-cost flow: internal error: {reason}")
            }
        }
    }
}

impl std::error::Error for TransportError {}

/// Which exact algorithm solves the problem. Both return an optimal flow and exact integer potentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// Network simplex up to [`AUTO_SIMPLEX_MAX_NODES`] nodes, cost scaling above (when it applies).
    Auto,
    /// Primal network simplex, block search. Any costs; unboundedness is reported.
    NetworkSimplex,
    /// Cost-scaling push-relabel. Needs non-negative costs on uncapacitated arcs and
    /// max |cost|·(n + 1)·[`COST_SCALING_ALPHA`] ≤ [`MAGNITUDE_LIMIT`]. (`Auto` picks it on large
    /// networks; asked for by name only in the tests that compare the two algorithms.)
    #[cfg(test)]
    CostScaling,
}

/// Above this many nodes `Algorithm::Auto` uses cost scaling (measured crossover on king-move grids:
/// equal at 10^4 cells, cost scaling 2–3× faster at 2·10^4, 12× at 10^6).
pub const AUTO_SIMPLEX_MAX_NODES: usize = 10_000;

/// Solves the min-cost flow problem exactly with `Algorithm::Auto`.
pub fn solve_min_cost_flow(net: &FlowNetwork) -> Result<FlowSolution, TransportError> {
    solve_min_cost_flow_with(net, Algorithm::Auto)
}

/// Solves the min-cost flow problem exactly with the given algorithm.
pub fn solve_min_cost_flow_with(
    net: &FlowNetwork,
    algorithm: Algorithm,
) -> Result<FlowSolution, TransportError> {
    let bounds = validate(net)?;
    if net.node_count() == 0 {
        return Ok(FlowSolution {
            cost: 0,
            flows: Vec::new(),
            potentials: Vec::new(),
        });
    }
    let scaling_ok = bounds.cost_scaling_applies(net.node_count());
    let use_scaling = match algorithm {
        Algorithm::Auto => scaling_ok.is_ok() && net.node_count() > AUTO_SIMPLEX_MAX_NODES,
        Algorithm::NetworkSimplex => false,
        #[cfg(test)]
        Algorithm::CostScaling => {
            scaling_ok?;
            true
        }
    };
    let (flows, potentials) = if use_scaling {
        let mut scaling = CostScaling::new(net, &bounds);
        scaling.run()?;
        (scaling.flows(), scaling.exact_potentials()?)
    } else {
        let mut simplex = NetworkSimplex::new(net, bounds.art_cost);
        simplex.run()?;
        simplex.into_flows_and_potentials()
    };
    let cost = flows
        .iter()
        .zip(&net.cost)
        .map(|(&f, &c)| f as i128 * c as i128)
        .sum();
    Ok(FlowSolution {
        cost,
        flows,
        potentials,
    })
}

/// Magnitudes of a validated network.
struct Bounds {
    /// Big-M cost of the artificial arcs, (max |cost| + 1)·(n + 1): more than any simple path costs.
    art_cost: i64,
    /// Σ positive supplies + Σ finite capacities: no arc of some optimal basic flow carries more.
    flow_bound: i64,
    max_abs_cost: i64,
    /// Some uncapacitated arc has a negative cost (the problem may be unbounded).
    negative_uncapacitated: bool,
}

impl Bounds {
    fn cost_scaling_applies(&self, nodes: usize) -> Result<(), TransportError> {
        if self.negative_uncapacitated {
            return Err(TransportError::Unsupported(
                "cost scaling needs non-negative costs on uncapacitated arcs; use the network simplex".into(),
            ));
        }
        let scaled = self.max_abs_cost as i128 * (nodes as i128 + 1) * COST_SCALING_ALPHA as i128;
        if scaled > MAGNITUDE_LIMIT as i128 {
            return Err(TransportError::Unsupported(format!(
                "cost scaling: scaled cost {scaled} > {MAGNITUDE_LIMIT}; use the network simplex"
            )));
        }
        Ok(())
    }
}

/// Checks the arcs and the magnitudes.
fn validate(net: &FlowNetwork) -> Result<Bounds, TransportError> {
    let n = net.node_count();
    let excess: i128 = net.supply.iter().map(|&s| s as i128).sum();
    if excess != 0 {
        return Err(TransportError::Unbalanced { excess });
    }
    let mut max_abs_cost: i128 = 0;
    let mut total_flow: i128 = net
        .supply
        .iter()
        .filter(|&&s| s > 0)
        .map(|&s| s as i128)
        .sum();
    let mut negative_uncapacitated = false;
    for arc in 0..net.arc_count() {
        if net.tail[arc] as usize >= n || net.head[arc] as usize >= n {
            return Err(TransportError::InvalidArc {
                arc,
                reason: "endpoint is not a node of this network",
            });
        }
        let capacity = net.capacity[arc];
        if capacity < 0 {
            return Err(TransportError::InvalidArc {
                arc,
                reason: "negative capacity",
            });
        }
        if capacity == INFINITE_CAPACITY {
            negative_uncapacitated |= net.cost[arc] < 0;
        } else {
            total_flow += capacity as i128;
        }
        max_abs_cost = max_abs_cost.max((net.cost[arc] as i128).abs());
    }
    let limit = MAGNITUDE_LIMIT as i128;
    if total_flow > limit {
        return Err(TransportError::TooLarge(format!(
            "positive supplies plus finite capacities sum to {total_flow} > {limit}"
        )));
    }
    let art_cost = (max_abs_cost + 1) * (n as i128 + 1);
    if art_cost > limit {
        return Err(TransportError::TooLarge(format!(
            "(max |cost| + 1)·(nodes + 1) = {art_cost} > {limit}"
        )));
    }
    Ok(Bounds {
        art_cost: art_cost as i64,
        flow_bound: total_flow as i64,
        max_abs_cost: max_abs_cost as i64,
        negative_uncapacitated,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand_xoshiro::rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn below(rng: &mut Xoshiro256PlusPlus, n: u64) -> u64 {
        rng.next_u64() % n
    }

    fn range(rng: &mut Xoshiro256PlusPlus, lo: i64, hi: i64) -> i64 {
        lo + below(rng, (hi - lo + 1) as u64) as i64
    }

    /// Independent optimality certificate: feasibility, complementary slackness of the potentials, and
    /// strong duality (primal cost = dual objective), which together prove optimality.
    fn assert_certified(net: &FlowNetwork, sol: &FlowSolution) {
        let n = net.node_count();
        assert_eq!(sol.flows.len(), net.arc_count());
        assert_eq!(sol.potentials.len(), n);
        let mut balance = vec![0i128; n];
        let mut primal = 0i128;
        let mut dual = 0i128;
        for e in 0..net.arc_count() {
            let (t, h, cap, c, f) = (
                net.tail[e] as usize,
                net.head[e] as usize,
                net.capacity[e],
                net.cost[e],
                sol.flows[e],
            );
            assert!(f >= 0 && f <= cap, "arc {e}: flow {f} outside [0, {cap}]");
            balance[t] += f as i128;
            balance[h] -= f as i128;
            primal += f as i128 * c as i128;
            let rc = c as i128 + sol.potentials[t] as i128 - sol.potentials[h] as i128;
            if f < cap {
                assert!(rc >= 0, "arc {e}: residual forward with reduced cost {rc}");
            }
            if f > 0 {
                assert!(rc <= 0, "arc {e}: positive flow with reduced cost {rc}");
            }
            if rc < 0 {
                dual += cap as i128 * rc;
            }
        }
        for (v, (&b, (&s, &p))) in balance
            .iter()
            .zip(net.supply.iter().zip(&sol.potentials))
            .enumerate()
        {
            assert_eq!(b, s as i128, "conservation at node {v}");
            dual -= s as i128 * p as i128;
        }
        assert_eq!(primal, sol.cost);
        assert_eq!(dual, sol.cost, "strong duality");
    }

    /// Brute force: all integer flows with 0 ≤ f_e ≤ bound_e; min cost over those meeting the supplies.
    fn brute_force(net: &FlowNetwork, bound: i64) -> Option<i128> {
        fn rec(
            net: &FlowNetwork,
            bound: i64,
            e: usize,
            flows: &mut Vec<i64>,
            best: &mut Option<i128>,
        ) {
            if e == net.arc_count() {
                let mut balance = vec![0i64; net.node_count()];
                let mut cost = 0i128;
                for (a, &f) in flows.iter().enumerate() {
                    balance[net.tail[a] as usize] += f;
                    balance[net.head[a] as usize] -= f;
                    cost += f as i128 * net.cost[a] as i128;
                }
                if balance == net.supply && best.is_none_or(|b| cost < b) {
                    *best = Some(cost);
                }
                return;
            }
            for f in 0..=net.capacity[e].min(bound) {
                flows.push(f);
                rec(net, bound, e + 1, flows, best);
                flows.pop();
            }
        }
        let mut best = None;
        rec(net, bound, 0, &mut Vec::new(), &mut best);
        best
    }

    const EXACT_ALGORITHMS: [Algorithm; 2] = [Algorithm::NetworkSimplex, Algorithm::CostScaling];

    fn random_balanced_supplies(rng: &mut Xoshiro256PlusPlus, n: usize, spread: i64) -> Vec<i64> {
        let mut supply: Vec<i64> = (0..n).map(|_| range(rng, -spread, spread)).collect();
        let excess: i64 = supply.iter().sum();
        supply[0] -= excess;
        supply
    }

    #[test]
    fn tiny_random_graphs_match_brute_force_including_negative_costs_and_infeasible() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let (mut feasible, mut infeasible) = (0, 0);
        for _ in 0..400 {
            let n = range(&mut rng, 2, 4) as usize;
            let m = range(&mut rng, 1, 5) as usize;
            let mut net = FlowNetwork::new();
            let supply = random_balanced_supplies(&mut rng, n, 2);
            let nodes: Vec<NodeId> = supply.iter().map(|&s| net.add_node(s)).collect();
            let mut finite_caps = 0;
            for _ in 0..m {
                let (t, h) = (
                    nodes[below(&mut rng, n as u64) as usize],
                    nodes[below(&mut rng, n as u64) as usize],
                );
                // Uncapacitated arcs get non-negative costs, so the optimum is bounded; finite ones any cost.
                if below(&mut rng, 4) == 0 {
                    net.add_arc(t, h, INFINITE_CAPACITY, range(&mut rng, 0, 5));
                } else {
                    let cap = range(&mut rng, 0, 2);
                    finite_caps += cap;
                    net.add_arc(t, h, cap, range(&mut rng, -3, 5));
                }
            }
            // Some optimal basic flow puts at most Σ positive supply + Σ finite capacities on any arc.
            let bound = supply.iter().filter(|&&s| s > 0).sum::<i64>() + finite_caps;
            let expected = brute_force(&net, bound);
            for algorithm in EXACT_ALGORITHMS {
                match (solve_min_cost_flow_with(&net, algorithm), expected) {
                    (Ok(sol), Some(cost)) => {
                        assert_eq!(sol.cost, cost, "{algorithm:?}");
                        assert_certified(&net, &sol);
                    }
                    (Err(TransportError::Infeasible), None) => {}
                    (got, want) => panic!("{algorithm:?} {got:?}, brute force {want:?}"),
                }
            }
            match expected {
                Some(_) => feasible += 1,
                None => infeasible += 1,
            }
        }
        assert!(
            feasible > 50 && infeasible > 50,
            "{feasible} feasible, {infeasible} infeasible"
        );
    }

    /// Successive shortest paths with Bellman–Ford from a super source to a super sink (non-negative costs).
    fn naive_ssp(net: &FlowNetwork) -> Option<i128> {
        let n = net.node_count();
        let (s, t) = (n, n + 1);
        // Residual graph: arc 2k forward, 2k + 1 backward.
        let mut to = Vec::new();
        let mut cap = Vec::new();
        let mut cost = Vec::new();
        let mut add = |a: usize, b: usize, c: i64, w: i64| {
            to.extend([b, a]);
            cap.extend([c, 0]);
            cost.extend([w, -w]);
        };
        let mut from = Vec::new();
        for e in 0..net.arc_count() {
            add(
                net.tail[e] as usize,
                net.head[e] as usize,
                net.capacity[e],
                net.cost[e],
            );
            from.extend([net.tail[e] as usize, net.head[e] as usize]);
        }
        let mut need = 0;
        for v in 0..n {
            let sv = net.supply[v];
            if sv > 0 {
                add(s, v, sv, 0);
                from.extend([s, v]);
                need += sv;
            } else if sv < 0 {
                add(v, t, -sv, 0);
                from.extend([v, t]);
            }
        }
        let mut total = 0i128;
        let mut sent = 0;
        loop {
            let mut dist = vec![i64::MAX; n + 2];
            let mut via = vec![usize::MAX; n + 2];
            dist[s] = 0;
            for _ in 0..n + 2 {
                for a in 0..to.len() {
                    if cap[a] > 0
                        && dist[from[a]] != i64::MAX
                        && dist[from[a]] + cost[a] < dist[to[a]]
                    {
                        dist[to[a]] = dist[from[a]] + cost[a];
                        via[to[a]] = a;
                    }
                }
            }
            if dist[t] == i64::MAX {
                break;
            }
            let mut push = i64::MAX;
            let mut v = t;
            while v != s {
                push = push.min(cap[via[v]]);
                v = from[via[v]];
            }
            let mut v = t;
            while v != s {
                cap[via[v]] -= push;
                cap[via[v] ^ 1] += push;
                v = from[via[v]];
            }
            total += push as i128 * dist[t] as i128;
            sent += push;
        }
        (sent == need).then_some(total)
    }

    #[test]
    fn random_graphs_match_bellman_ford_successive_shortest_paths() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut feasible = 0;
        for round in 0..150 {
            let n = range(&mut rng, 3, 16) as usize;
            let m = range(&mut rng, n as i64, 5 * n as i64) as usize;
            let mut net = FlowNetwork::new();
            let supply = random_balanced_supplies(&mut rng, n, 6);
            let nodes: Vec<NodeId> = supply.iter().map(|&s| net.add_node(s)).collect();
            for _ in 0..m {
                let (t, h) = (
                    nodes[below(&mut rng, n as u64) as usize],
                    nodes[below(&mut rng, n as u64) as usize],
                );
                let cap = if round % 3 == 0 && below(&mut rng, 5) == 0 {
                    INFINITE_CAPACITY
                } else {
                    range(&mut rng, 0, 8)
                };
                net.add_arc(t, h, cap, range(&mut rng, 0, 20));
            }
            let expected = naive_ssp(&net);
            for algorithm in EXACT_ALGORITHMS {
                match (solve_min_cost_flow_with(&net, algorithm), expected) {
                    (Ok(sol), Some(cost)) => {
                        assert_eq!(sol.cost, cost, "{algorithm:?}");
                        assert_certified(&net, &sol);
                    }
                    (Err(TransportError::Infeasible), None) => {}
                    (got, want) => panic!("{algorithm:?} {got:?}, SSP {want:?}"),
                }
            }
            feasible += usize::from(expected.is_some());
        }
        assert!(feasible > 30, "only {feasible} feasible instances");
    }

    #[test]
    fn cost_scaling_matches_simplex_on_larger_random_networks() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(13);
        let mut feasible = 0;
        for round in 0..30 {
            let n = range(&mut rng, 50, 300) as usize;
            let m = range(&mut rng, 2 * n as i64, 6 * n as i64) as usize;
            let mut net = FlowNetwork::new();
            let supply = random_balanced_supplies(&mut rng, n, 20);
            let nodes: Vec<NodeId> = supply.iter().map(|&s| net.add_node(s)).collect();
            for _ in 0..m {
                let (t, h) = (
                    nodes[below(&mut rng, n as u64) as usize],
                    nodes[below(&mut rng, n as u64) as usize],
                );
                if below(&mut rng, 3) == 0 {
                    net.add_arc(t, h, INFINITE_CAPACITY, range(&mut rng, 0, 1000));
                } else {
                    net.add_arc(t, h, range(&mut rng, 0, 40), range(&mut rng, -200, 1000));
                }
            }
            if round % 3 != 0 {
                // An uncapacitated ring makes the instance feasible.
                for i in 0..n {
                    net.add_arc(
                        nodes[i],
                        nodes[(i + 1) % n],
                        INFINITE_CAPACITY,
                        range(&mut rng, 0, 1000),
                    );
                }
            }
            let simplex = solve_min_cost_flow_with(&net, Algorithm::NetworkSimplex);
            let scaling = solve_min_cost_flow_with(&net, Algorithm::CostScaling);
            match (simplex, scaling) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.cost, b.cost);
                    assert_certified(&net, &a);
                    assert_certified(&net, &b);
                    feasible += 1;
                }
                (Err(TransportError::Infeasible), Err(TransportError::Infeasible)) => {}
                (a, b) => panic!("simplex {a:?}, cost scaling {b:?}"),
            }
        }
        assert!(feasible >= 10, "only {feasible} feasible instances");
    }

    /// All orderings of 0..n (brute-force oracles here and in eval::w1).
    pub(crate) fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![Vec::new()];
        }
        let mut out = Vec::new();
        for p in permutations(n - 1) {
            for i in 0..n {
                let mut q = p.clone();
                q.insert(i, n - 1);
                out.push(q);
            }
        }
        out
    }

    #[test]
    fn assignment_matches_enumeration_of_permutations() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for n in 1..=6 {
            let perms = permutations(n);
            for _ in 0..20 {
                let cost: Vec<Vec<i64>> = (0..n)
                    .map(|_| (0..n).map(|_| range(&mut rng, -50, 100)).collect())
                    .collect();
                let mut net = FlowNetwork::new();
                let left: Vec<NodeId> = (0..n).map(|_| net.add_node(1)).collect();
                let right: Vec<NodeId> = (0..n).map(|_| net.add_node(-1)).collect();
                for i in 0..n {
                    for j in 0..n {
                        net.add_arc(left[i], right[j], INFINITE_CAPACITY, cost[i][j]);
                    }
                }
                let best = perms
                    .iter()
                    .map(|p| (0..n).map(|i| cost[i][p[i]] as i128).sum::<i128>())
                    .min();
                // Negative costs on uncapacitated arcs: only the simplex applies.
                let sol =
                    solve_min_cost_flow_with(&net, Algorithm::NetworkSimplex).expect("feasible");
                assert_eq!(Some(sol.cost), best);
                assert_certified(&net, &sol);
                assert!(
                    solve_min_cost_flow_with(&net, Algorithm::CostScaling).is_err()
                        || cost.iter().flatten().all(|&c| c >= 0)
                );
            }
        }
    }

    #[test]
    fn degenerate_grid_transport_is_certified() {
        // A path-heavy, highly degenerate instance: unit costs on a 4-neighbour grid, many zero supplies.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let side = 30;
        let mut net = FlowNetwork::new();
        add_grid(
            &mut net,
            &random_balanced_supplies(&mut rng, side * side, 1),
            side,
        );
        let simplex = solve_min_cost_flow_with(&net, Algorithm::NetworkSimplex).expect("feasible");
        let scaling = solve_min_cost_flow_with(&net, Algorithm::CostScaling).expect("feasible");
        assert_certified(&net, &simplex);
        assert_certified(&net, &scaling);
        assert_eq!(simplex.cost, scaling.cost);
    }

    /// A side×side grid with arcs both ways between 4-neighbours, unit cost, uncapacitated; returns its nodes.
    fn add_grid(net: &mut FlowNetwork, supply: &[i64], side: usize) -> Vec<NodeId> {
        let nodes: Vec<NodeId> = supply.iter().map(|&s| net.add_node(s)).collect();
        for y in 0..side {
            for x in 0..side {
                let v = nodes[y * side + x];
                for w in [
                    (x + 1 < side).then(|| nodes[y * side + x + 1]),
                    (y + 1 < side).then(|| nodes[(y + 1) * side + x]),
                ]
                .into_iter()
                .flatten()
                {
                    net.add_arc(v, w, INFINITE_CAPACITY, 1);
                    net.add_arc(w, v, INFINITE_CAPACITY, 1);
                }
            }
        }
        nodes
    }

    #[test]
    fn infeasibility_is_detected_on_larger_networks() {
        // Two grids with no arc between them: each is unbalanced, only the totals cancel.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let side = 12;
        let mut left = random_balanced_supplies(&mut rng, side * side, 3);
        let mut right = random_balanced_supplies(&mut rng, side * side, 3);
        left[0] += 5;
        right[0] -= 5;
        let mut net = FlowNetwork::new();
        let left_nodes = add_grid(&mut net, &left, side);
        add_grid(&mut net, &right, side);
        for algorithm in EXACT_ALGORITHMS {
            assert_eq!(
                solve_min_cost_flow_with(&net, algorithm),
                Err(TransportError::Infeasible),
                "{algorithm:?}"
            );
        }
        // One arc from the surplus grid to the other makes it feasible.
        let right_corner = NodeId((side * side) as u32);
        net.add_arc(
            left_nodes[side * side - 1],
            right_corner,
            INFINITE_CAPACITY,
            7,
        );
        let simplex = solve_min_cost_flow_with(&net, Algorithm::NetworkSimplex).expect("feasible");
        let scaling = solve_min_cost_flow_with(&net, Algorithm::CostScaling).expect("feasible");
        assert_certified(&net, &simplex);
        assert_certified(&net, &scaling);
        assert_eq!(simplex.cost, scaling.cost);
    }

    #[test]
    fn errors_are_reported() {
        let mut net = FlowNetwork::new();
        let a = net.add_node(2);
        let b = net.add_node(-1);
        net.add_arc(a, b, INFINITE_CAPACITY, 1);
        assert_eq!(
            solve_min_cost_flow(&net),
            Err(TransportError::Unbalanced { excess: 1 })
        );

        net.set_supply(b, -2);
        let c = net.add_node(0);
        // A negative cycle of uncapacitated arcs through c.
        net.add_arc(b, c, INFINITE_CAPACITY, -3);
        net.add_arc(c, b, INFINITE_CAPACITY, 1);
        assert_eq!(solve_min_cost_flow(&net), Err(TransportError::Unbounded));
        assert!(matches!(
            solve_min_cost_flow_with(&net, Algorithm::CostScaling),
            Err(TransportError::Unsupported(_))
        ));

        let mut net = FlowNetwork::new();
        let a = net.add_node(1);
        let b = net.add_node(-1);
        net.add_arc(b, a, INFINITE_CAPACITY, 0);
        for algorithm in EXACT_ALGORITHMS {
            assert_eq!(
                solve_min_cost_flow_with(&net, algorithm),
                Err(TransportError::Infeasible)
            );
        }
        net.add_arc(a, b, -1, 0);
        assert!(matches!(
            solve_min_cost_flow(&net),
            Err(TransportError::InvalidArc { arc: 1, .. })
        ));

        let mut other = FlowNetwork::new();
        let x = other.add_node(0);
        let y = other.add_node(0);
        let z = other.add_node(0);
        let mut small = FlowNetwork::new();
        small.add_node(0);
        small.add_arc(x, z, 1, 0);
        assert!(matches!(
            solve_min_cost_flow(&small),
            Err(TransportError::InvalidArc { arc: 0, .. })
        ));
        other.add_arc(x, y, 1, MAGNITUDE_LIMIT);
        assert!(matches!(
            solve_min_cost_flow(&other),
            Err(TransportError::TooLarge(_))
        ));
    }

    #[test]
    fn empty_and_trivial_networks() {
        let sol = solve_min_cost_flow(&FlowNetwork::new()).expect("empty network");
        assert_eq!(sol.cost, 0);
        let mut net = FlowNetwork::new();
        let a = net.add_node(0);
        net.add_arc(a, a, 5, -2); // a negative self-loop with finite capacity is saturated
        for algorithm in EXACT_ALGORITHMS {
            let sol = solve_min_cost_flow_with(&net, algorithm).expect("self-loop");
            assert_eq!((sol.cost, sol.flows.clone()), (-10, vec![5]));
            assert_certified(&net, &sol);
        }
    }
}
