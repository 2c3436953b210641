//! The primal-dual method for [`Solver`]: the holes filled a phase at a time instead of one search each.
//!
//! A phase searches from every source at once and raises each potential by its distance from the
//! sources, capped at the nearest open hole's ([`Solver::raise_to_nearest_holes`]): every residual arc
//! keeps a reduced cost ≥ 0 and every shortest path to those holes becomes tight. Then the holes are filled
//! along tight arcs only, until no tight path is left (a blocking flow: Dinic's rounds, each a layered
//! graph by breadth-first search backwards from the open holes and depth-first augmenting paths through
//! it). A push along tight arcs keeps every reduced cost ≥ 0, so the flow stays optimal for what it
//! carries, as with the single searches; the phases end when every hole is full.
//!
//! Why: in d = 3 the noise leaves plateaus of equal potential around the holes, and each single search
//! roams its plateau for a source (at 2·10^5 cells, ε = 0.1: 860 nodes settled a search, 2.5·10^5
//! searches), while the potentials only rise a few times (at most 6 there): phases are few, and a round
//! serves every hole its layered graph reaches. In d ≤ 2 the potentials climb far (190 phases at 10^6
//! cells, ε = 1), and the searches hole by hole from the coarse start are kept ([`super::PHASES_MIN_DIMS`]).

use super::{Solver, Towards};

/// The layered graph of a round: each node's hop count to the nearest open hole over tight residual
/// arcs, and the next arc its depth-first search tries.
#[derive(Default)]
pub(super) struct Layers {
    level: Vec<u32>,
    next_arc: Vec<u32>,
    /// The nodes given a level this round, in breadth-first order (the open holes first).
    order: Vec<u32>,
    /// Where each level starts in `order` (one more entry than levels: the end).
    level_start: Vec<usize>,
    /// The path of the current depth-first search, from its source.
    path: Vec<u32>,
    /// Per cell, `sends_words` words: bit j is set while the arc into the cell from its neighbour at
    /// offset j is tight. Potentials change once a phase and flows a few arcs a push, while every round's
    /// search asks this of each neighbour of each node it reaches.
    tight_in: Vec<u64>,
    /// The same for the arcs out of the cell (bit j: the arc to its neighbour at offset j), for the
    /// depth-first searches.
    tight_out: Vec<u64>,
}

impl Layers {
    /// The state for `nodes` nodes, none with a level.
    pub(super) fn new(nodes: usize) -> Self {
        Layers {
            level: vec![NO_LEVEL; nodes],
            next_arc: vec![0; nodes],
            ..Layers::default()
        }
    }
}

/// A node without a level this round.
const NO_LEVEL: u32 = u32::MAX;
/// A node from which no layered path reaches an open hole this round.
const DEAD: u32 = u32::MAX - 1;

/// Levels a round's search goes on past the nearest sources, so that one round also fills holes from
/// sources a few hops farther (each level's paths are still shortest to their source, so the dead ends of
/// a round stay dead). Rounds then take longer and are fewer: at 4.3·10^5 cells in d = 3, 253 → 203 rounds
/// and 15.6 → 13.5 s at ε = 0.1, 390 → 215 rounds and 8.1 → 6.1 s at ε = 1; 2 to 6 are alike, 8 is slower.
const EXTRA_LEVELS: u32 = 4;

impl Solver<'_> {
    /// Fills every hole, a phase at a time (the module's method).
    pub(super) fn fill_in_phases(&mut self) {
        let mut open_holes: Vec<u32> = (0..self.bank).filter(|&cell| self.demand[cell as usize] > 0).collect();
        while self.raise_to_nearest_holes() {
            self.mark_tight_arcs();
            loop {
                open_holes.retain(|&hole| self.demand[hole as usize] > 0);
                let Some(sources) = self.layer_back_from(&open_holes) else {
                    break;
                };
                for position in sources {
                    let source = self.layers.order[position];
                    while self.source_room(source) > 0 && self.augment_from(source) {}
                }
            }
        }
        #[cfg(test)]
        self.check_tight_bits();
        // Free them before what the cells hold is settled.
        self.layers = Layers::default();
    }

    /// What `node` can give: a cell's spare (its potential is S's then) and what it holds, or the bank's
    /// spare.
    fn source_room(&self, node: u32) -> i64 {
        if node == self.bank {
            self.bank_spare.unwrap_or(0)
        } else {
            self.spare[node as usize] + self.held[node as usize]
        }
    }

    /// Dijkstra forwards from every source at once until the nearest open hole, at reduced distance T;
    /// then p(v) += min(d(v), T) for every node. For a residual arc u → v, d(v) ≤ d(u) + reduced(u, v),
    /// so min(d(v), T) ≤ min(d(u), T) + reduced(u, v): reduced costs stay ≥ 0, and those on shortest
    /// paths to the holes at T become 0. Sources keep their potentials (d = 0; S's, for those with spare).
    /// False when no hole is open.
    fn raise_to_nearest_holes(&mut self) -> bool {
        self.round = self.round.checked_add(1).expect("fewer than 2^32 searches");
        self.queue.clear();
        self.settled_nodes.clear();
        for node in 0..=self.bank {
            if self.source_room(node) > 0 {
                self.reach(node, 0, Towards::Root);
            }
        }
        let mut nearest: Option<(u32, i64)> = None;
        while let Some((distance, node)) = self.settle_next(nearest) {
            let v = node as usize;
            if node == self.bank {
                for cell in 0..self.bank {
                    let reduced = self.potential[v] - self.potential[cell as usize];
                    debug_assert!(reduced >= 0, "residual arcs keep reduced cost ≥ 0");
                    self.reach(cell, distance + reduced, Towards::Root);
                }
                continue;
            }
            if self.demand[v] > 0 {
                nearest = Some((node, distance));
                continue;
            }
            if self.bank_spare.is_some() && self.bank_flow[v] > 0 {
                let reduced = self.potential[v] - self.potential[self.bank as usize];
                debug_assert!(reduced >= 0, "residual arcs keep reduced cost ≥ 0");
                self.reach(self.bank, distance + reduced, Towards::Root);
            }
            self.reach_over_king_moves::<false>(node, distance);
        }
        let Some((_, reach)) = nearest else {
            return false;
        };
        // The settled nodes are those at most T away.
        for potential in &mut self.potential {
            *potential += reach;
        }
        for &node in &self.settled_nodes {
            self.potential[node as usize] -= reach - self.marks[node as usize].distance;
        }
        true
    }

    /// Sets every cell's [`Layers::tight_in`] bits for the phase's potentials.
    fn mark_tight_arcs(&mut self) {
        let mut tight_in = std::mem::take(&mut self.layers.tight_in);
        let mut tight_out = std::mem::take(&mut self.layers.tight_out);
        for bits in [&mut tight_in, &mut tight_out] {
            bits.clear();
            bits.resize(self.bank as usize * self.sends_words, 0);
        }
        let mut coords = std::mem::take(&mut self.coords);
        let words = self.sends_words;
        for v in 0..self.bank as usize {
            self.around.for_each(v, &mut coords, |j, u| {
                if self.tight_into(v, j, u) {
                    let back = self.around.opposite[j];
                    tight_in[v * words + j / 64] |= 1 << (j % 64);
                    tight_out[u * words + back / 64] |= 1 << (back % 64);
                }
            });
        }
        self.coords = coords;
        self.layers.tight_in = tight_in;
        self.layers.tight_out = tight_out;
    }

    /// Whether the arc into `cell` from its `neighbour` at offset `j` is tight: −1 where it cancels flow
    /// cell → neighbour, else +1.
    #[inline]
    fn tight_into(&self, cell: usize, j: usize, neighbour: usize) -> bool {
        let cost = if self.sends_to(cell, j) { -1 } else { 1 };
        cost + self.potential[neighbour] - self.potential[cell] == 0
    }

    /// Updates the tight bits of both arcs between `cell` and its `neighbour` at offset `j` after their
    /// flow changed.
    fn refresh_tight_bits(&self, layers: &mut Layers, cell: usize, j: usize, neighbour: usize) {
        let words = self.sends_words;
        let opposite = self.around.opposite[j];
        let set = |bits: &mut [u64], at: usize, offset: usize, tight: bool| {
            let word = &mut bits[at * words + offset / 64];
            if tight {
                *word |= 1 << (offset % 64);
            } else {
                *word &= !(1 << (offset % 64));
            }
        };
        for (at, offset, from, back) in [(cell, j, neighbour, opposite), (neighbour, opposite, cell, j)] {
            let tight = self.tight_into(at, offset, from);
            set(&mut layers.tight_in, at, offset, tight);
            set(&mut layers.tight_out, from, back, tight);
        }
    }

    /// The first offset from `cell`'s next arc on whose king move the arc out is tight, else the arc into
    /// the bank (which [`Solver::tight_arc`] checks), else past it.
    fn next_tight_offset(&self, layers: &Layers, cell: usize) -> u32 {
        let at = layers.next_arc[cell] as usize;
        let moves = self.around.delta.len();
        if at >= moves {
            return at as u32;
        }
        let words = self.sends_words;
        for w in at / 64..words {
            let mut bits = layers.tight_out[cell * words + w];
            if w == at / 64 {
                bits &= !0 << (at % 64);
            }
            if bits != 0 {
                return (w * 64 + bits.trailing_zeros() as usize) as u32;
            }
        }
        moves as u32
    }

    /// The next round's layered graph: hop counts to the nearest open hole over tight residual arcs, by
    /// breadth-first search backwards from `holes`, up to [`EXTRA_LEVELS`] past the level of the nearest
    /// sources. Returns where the nodes from that level on are in `layers.order` (the round's sources among
    /// them), or `None` when no source reaches an open hole.
    fn layer_back_from(&mut self, holes: &[u32]) -> Option<std::ops::Range<usize>> {
        let mut layers = std::mem::take(&mut self.layers);
        for &node in &layers.order {
            layers.level[node as usize] = NO_LEVEL;
        }
        layers.order.clear();
        layers.level_start.clear();
        layers.level_start.push(0);
        for &hole in holes {
            layers.level[hole as usize] = 0;
            layers.next_arc[hole as usize] = 0;
            layers.order.push(hole);
        }
        let mut source_level = NO_LEVEL;
        let mut read = 0;
        while let Some(&node) = layers.order.get(read) {
            let level = layers.level[node as usize];
            if level >= source_level.saturating_add(EXTRA_LEVELS) {
                break;
            }
            read += 1;
            let v = node as usize;
            // The tail `from` of a tight residual arc into `node` joins the next level.
            let visit = |from: u32, layers: &mut Layers, source_level: &mut u32| {
                if layers.level[from as usize] == NO_LEVEL {
                    if layers.level_start.len() == level as usize + 1 {
                        layers.level_start.push(layers.order.len());
                    }
                    layers.level[from as usize] = level + 1;
                    layers.next_arc[from as usize] = 0;
                    layers.order.push(from);
                    if self.source_room(from) > 0 {
                        *source_level = (*source_level).min(level + 1);
                    }
                }
            };
            if node == self.bank {
                // Cells the bank created units in can cancel them.
                for &cell in &self.bank_fed {
                    if self.potential[cell as usize] == self.potential[v] {
                        visit(cell, &mut layers, &mut source_level);
                    }
                }
                continue;
            }
            if self.bank_spare.is_some() && self.potential[self.bank as usize] == self.potential[v] {
                visit(self.bank, &mut layers, &mut source_level);
            }
            let words = self.sends_words;
            for w in 0..words {
                let mut bits = layers.tight_in[v * words + w];
                while bits != 0 {
                    let j = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let u = (v as isize + self.around.delta[j]) as u32;
                    visit(u, &mut layers, &mut source_level);
                }
            }
        }
        layers.level_start.push(layers.order.len());
        self.layers = layers;
        (source_level != NO_LEVEL)
            .then(|| self.layers.level_start[source_level as usize]..self.layers.order.len())
    }

    /// Arc `arc` out of `node` if it is residual and tight: its head and what it can carry. A cell's arcs
    /// are its king moves (by offset) and then its arc into the bank; the bank's are numbered by cell.
    #[inline]
    fn tight_arc(&self, node: u32, arc: u32) -> Option<(u32, i64)> {
        let v = node as usize;
        let (head, cost, room) = if node == self.bank {
            (arc, 0, i64::MAX)
        } else if arc as usize == self.around.delta.len() {
            // Cancelling units the bank created in the cell.
            let fed = if self.bank_spare.is_some() { self.bank_flow[v] } else { 0 };
            if fed == 0 {
                return None;
            }
            (self.bank, 0, fed)
        } else {
            let j = arc as usize;
            let u = self.around.neighbour(v, j)?;
            let opposite = self.net_flow(u, self.around.opposite[j], v);
            if opposite > 0 {
                (u as u32, -1, opposite)
            } else {
                (u as u32, 1, i64::MAX)
            }
        };
        (cost + self.potential[v] - self.potential[head as usize] == 0).then_some((head, room))
    }

    /// The arc `node`'s depth-first search tries next, if any is left: a cell's next offset (or its arc
    /// into the bank); for the bank, the next cell one level below it.
    fn next_arc(&self, layers: &Layers, node: u32) -> Option<u32> {
        let at = layers.next_arc[node as usize];
        if node == self.bank {
            let level = layers.level[node as usize] as usize;
            let position = layers.level_start[level - 1] + at as usize;
            (position < layers.level_start[level]).then(|| layers.order[position])
        } else {
            (at as usize <= self.around.delta.len()).then_some(at)
        }
    }

    /// One augmenting path of the round from `source` down the levels to an open hole (depth first, each
    /// node resuming at its next untried arc, dead ends marked), filled by what it allows. False once no
    /// path is left from `source`.
    fn augment_from(&mut self, source: u32) -> bool {
        let mut layers = std::mem::take(&mut self.layers);
        layers.path.clear();
        layers.path.push(source);
        let found = loop {
            let node = *layers.path.last().expect("the path starts at its source");
            if node != self.bank && self.demand[node as usize] > 0 {
                break true;
            }
            let level = layers.level[node as usize];
            let mut advanced = false;
            if level > 0 && level != DEAD {
                loop {
                    if node != self.bank {
                        layers.next_arc[node as usize] = self.next_tight_offset(&layers, node as usize);
                    }
                    let Some(arc) = self.next_arc(&layers, node) else {
                        break;
                    };
                    let next = self.tight_arc(node, arc).map(|(next, _)| next);
                    if next.is_some_and(|next| layers.level[next as usize] == level - 1) {
                        layers.path.push(next.expect("checked"));
                        advanced = true;
                        break;
                    }
                    layers.next_arc[node as usize] += 1;
                }
            }
            if !advanced {
                layers.level[node as usize] = DEAD;
                layers.path.pop();
                match layers.path.last() {
                    Some(&back) => layers.next_arc[back as usize] += 1,
                    None => break false,
                }
            }
        };
        if found {
            self.push_along_path_of(&mut layers);
        }
        self.layers = layers;
        found
    }

    /// Pushes along `layers.path` (each node's next arc leads to the next node) as much as the source, the
    /// hole and the cancelling arcs allow.
    fn push_along_path_of(&mut self, layers: &mut Layers) {
        let path = std::mem::take(&mut layers.path);
        let (source, hole) = (path[0], *path.last().expect("a path"));
        let arc = |node: u32| self.next_arc(layers, node).expect("each node on the path has its arc");
        let mut amount = self.source_room(source).min(self.demand[hole as usize]);
        for &node in &path[..path.len() - 1] {
            let (_, room) = self.tight_arc(node, arc(node)).expect("the path's arcs are tight");
            amount = amount.min(room);
        }
        // A real check: a broken invariant would otherwise push nothing, forever.
        assert!(amount > 0, "the path has room: its arcs are tight and residual");
        for step in path.windows(2) {
            let (node, next) = (step[0], step[1]);
            let offset = layers.next_arc[node as usize] as usize;
            if node == self.bank {
                self.change_bank_flow(next, amount);
            } else if offset == self.around.delta.len() {
                self.change_bank_flow(node, -amount);
            } else {
                self.add_flow(node as usize, offset, next as usize, amount);
                self.refresh_tight_bits(layers, node as usize, offset, next as usize);
            }
        }
        if source == self.bank {
            *self.bank_spare.as_mut().expect("a bank") -= amount;
        } else {
            let s = source as usize;
            let held = amount.min(self.held[s]);
            self.held[s] -= held;
            self.spare[s] -= amount - held;
        }
        self.demand[hole as usize] -= amount;
        layers.path = path;
    }

    /// Test support: panics unless every tight bit matches the potentials and flows it stands for.
    #[cfg(test)]
    fn check_tight_bits(&self) {
        if self.layers.tight_in.is_empty() {
            return; // no hole, no phase
        }
        let mut coords = vec![0; self.around.dims];
        let words = self.sends_words;
        for v in 0..self.bank as usize {
            self.around.for_each(v, &mut coords, |j, u| {
                let back = self.around.opposite[j];
                let bit_in = self.layers.tight_in[v * words + j / 64] >> (j % 64) & 1 == 1;
                let bit_out = self.layers.tight_out[u * words + back / 64] >> (back % 64) & 1 == 1;
                assert_eq!((bit_in, bit_out), (self.tight_into(v, j, u), self.tight_into(v, j, u)), "arc {u} → {v}");
            });
        }
    }
}
