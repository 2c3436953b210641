//! The binary hierarchical partition of [0,1]^d and its cell codes (docs/design.md).
//!
//! Going from depth j to j+1 halves coordinate k = j mod d at its midpoint. A depth-j cell code θ
//! interleaves the per-axis cell indices, most significant bit first, axis 0 first (Morton order), so
//! the children of θ are 2θ and 2θ+1 and its parent is θ >> 1. Cells are half-open; 1.0 goes to the
//! top cell.

/// Deepest partition the engine will build: leaf codes are u32 and 2^30 cells already need GiBs.
pub const MAX_DEPTH: u32 = 30;

/// The shape of a partition: how many axes and how deep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CellGeometry {
    dims: usize,
    depth: u32,
}

impl CellGeometry {
    /// `dims` ≥ 1 and `depth` ≤ [`MAX_DEPTH`]; callers validate user input before building one.
    pub fn new(dims: usize, depth: u32) -> Self {
        assert!(dims >= 1, "a partition needs at least one axis");
        assert!(depth <= MAX_DEPTH, "depth {depth} exceeds MAX_DEPTH");
        CellGeometry { dims, depth }
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The leaf depth r.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Number of leaf cells, 2^r.
    pub fn leaf_count(&self) -> usize {
        1usize << self.depth
    }

    /// h_k(j): how many times axis k has been halved at depth j.
    pub fn axis_bits_at(&self, axis: usize, level: u32) -> u32 {
        ((level as usize + self.dims - 1 - axis) / self.dims) as u32
    }

    /// h_k(r): the number of bits of axis k's index in a leaf code.
    pub fn axis_bits(&self, axis: usize) -> u32 {
        self.axis_bits_at(axis, self.depth)
    }

    /// ℓ∞ diameter of a depth-j cell in normalised units: 2^{−⌊j/d⌋}.
    pub fn diameter(&self, level: u32) -> f64 {
        cell_diameter(self.dims, level)
    }

    /// The leaf code of a point given by its per-axis leaf indices (q_k < 2^{h_k(r)}).
    pub fn leaf_code(&self, axis_indices: &[u32]) -> u32 {
        debug_assert_eq!(axis_indices.len(), self.dims);
        axis_indices
            .iter()
            .enumerate()
            .fold(0u32, |code, (axis, &index)| {
                code | deposit_bits(index, self.axis_mask(axis))
            })
    }

    /// The bits of a leaf code that belong to `axis`: level j sits at bit r−1−j and splits axis j mod d.
    pub fn axis_mask(&self, axis: usize) -> u32 {
        let mut mask = 0u32;
        let mut level = axis as u32;
        while level < self.depth {
            mask |= 1 << (self.depth - 1 - level);
            level += self.dims as u32;
        }
        mask
    }

    /// Inverse of [`leaf_code`](Self::leaf_code): the per-axis indices of a leaf.
    pub fn axis_indices(&self, code: u32, out: &mut [u32]) {
        debug_assert_eq!(out.len(), self.dims);
        for (axis, index) in out.iter_mut().enumerate() {
            *index = extract_bits(code, self.axis_mask(axis));
        }
    }
}

/// Leaf code → per-axis indices by table lookup: one table of 256 entries per (axis, code byte), so a
/// decode costs 4 lookups per axis instead of [`CellGeometry::axis_indices`]'s bit-by-bit walk. The
/// sampler decodes a leaf for every couple of rows it draws; this is its hot path.
pub struct LeafDecoder {
    /// tables[axis][byte][v]: the axis bits held by byte `byte` of a code whose value there is v.
    tables: Vec<[[u32; 256]; 4]>,
}

impl LeafDecoder {
    pub fn new(geometry: &CellGeometry) -> Self {
        LeafDecoder {
            tables: axis_byte_tables(geometry, extract_bits),
        }
    }

    /// The same result as [`CellGeometry::axis_indices`].
    #[inline]
    pub fn axis_indices(&self, code: u32, out: &mut [u32]) {
        let bytes = code.to_le_bytes();
        for (index, table) in out.iter_mut().zip(&self.tables) {
            *index = table[0][bytes[0] as usize]
                | table[1][bytes[1] as usize]
                | table[2][bytes[2] as usize]
                | table[3][bytes[3] as usize];
        }
    }
}

/// Per axis, one 256-entry table per byte of a 32-bit word: `tables[axis][byte][v]` is
/// `map(v << 8·byte, axis_mask(axis))`. With `deposit_bits` (the binner) or `extract_bits` (the sampler's
/// decoder), a whole-word scatter or gather then costs four lookups.
pub fn axis_byte_tables(geometry: &CellGeometry, map: fn(u32, u32) -> u32) -> Vec<[[u32; 256]; 4]> {
    (0..geometry.dims())
        .map(|axis| {
            let mask = geometry.axis_mask(axis);
            let mut table = [[0u32; 256]; 4];
            for (byte, entries) in table.iter_mut().enumerate() {
                for (value, entry) in entries.iter_mut().enumerate() {
                    *entry = map((value as u32) << (8 * byte), mask);
                }
            }
            table
        })
        .collect()
}

/// ℓ∞ diameter of a depth-j cell of [0,1]^d: 2^{−⌊j/d⌋}.
pub fn cell_diameter(dims: usize, level: u32) -> f64 {
    (-((level as usize / dims) as f64)).exp2()
}

/// Δ_j = Σ_{|θ|=j} diam(Ω_θ) = 2^{j−⌊j/d⌋}; Δ_{−1} := Δ_0 (pass `None` for level −1).
pub fn level_diameter_sum(dims: usize, level: Option<u32>) -> f64 {
    let level = level.unwrap_or(0);
    ((level as usize - level as usize / dims) as f64).exp2()
}

/// Scatters the low bits of `value` into the set bits of `mask`, lowest first (portable `pdep`).
#[inline(always)]
pub fn deposit_bits(mut value: u32, mut mask: u32) -> u32 {
    let mut out = 0u32;
    while mask != 0 {
        let lowest = mask & mask.wrapping_neg();
        if value & 1 != 0 {
            out |= lowest;
        }
        value >>= 1;
        mask &= mask - 1;
    }
    out
}

/// Gathers the bits of `value` at the set bits of `mask` into the low bits, lowest first (portable `pext`).
#[inline(always)]
pub fn extract_bits(value: u32, mut mask: u32) -> u32 {
    let mut out = 0u32;
    let mut bit = 0;
    while mask != 0 {
        let lowest = mask & mask.wrapping_neg();
        if value & lowest != 0 {
            out |= 1 << bit;
        }
        bit += 1;
        mask &= mask - 1;
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The leaf code straight from the definition: walk down the tree, halving axis j mod d at level j.
    fn code_by_bisection(point: &[f64], depth: u32) -> u32 {
        let dims = point.len();
        let mut low = vec![0.0f64; dims];
        let mut width = vec![1.0f64; dims];
        let mut code = 0u32;
        for level in 0..depth {
            let axis = level as usize % dims;
            width[axis] /= 2.0;
            let upper = point[axis] >= low[axis] + width[axis];
            // The top cell is closed at 1.0: a point on the upper face stays in the upper half.
            if upper {
                low[axis] += width[axis];
            }
            code = code << 1 | upper as u32;
        }
        code
    }

    /// The binner's quantisation of a coordinate already in [0, 1].
    pub(crate) fn unit_axis(bits: u32) -> crate::geometry::axis::AxisPlan {
        crate::geometry::axis::AxisPlan::new(
            crate::geometry::bounds::ColumnBounds::new("u", 0.0, 1.0).unwrap(),
            bits,
        )
    }

    fn code_by_quantization(point: &[f64], depth: u32) -> u32 {
        let geometry = CellGeometry::new(point.len(), depth);
        let indices: Vec<u32> = (0..point.len())
            .map(|axis| unit_axis(geometry.axis_bits(axis)).quantize(point[axis]))
            .collect();
        geometry.leaf_code(&indices)
    }

    #[test]
    fn table_decoder_matches_the_bit_walk() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for dims in 1..=6usize {
            for depth in [0u32, 1, 7, 8, 9, 17, 24, MAX_DEPTH] {
                let geometry = CellGeometry::new(dims, depth);
                let decoder = LeafDecoder::new(&geometry);
                let (mut expected, mut decoded) = (vec![0u32; dims], vec![0u32; dims]);
                for _ in 0..500 {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    let code = (state as u32) & ((1u64 << depth) - 1) as u32;
                    geometry.axis_indices(code, &mut expected);
                    decoder.axis_indices(code, &mut decoded);
                    assert_eq!(
                        decoded, expected,
                        "dims {dims} depth {depth} code {code:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn quantised_codes_match_bisection_on_grid_points_and_boundaries() {
        // Dyadic grid points are exactly the cell boundaries, where half-open cells matter most.
        for dims in 1..=4usize {
            for depth in 0..=12u32 {
                let steps = 16usize;
                let total = steps.pow(dims.min(3) as u32);
                for i in 0..total {
                    let mut point = vec![0.0; dims];
                    let mut rest = i;
                    for value in point.iter_mut() {
                        *value = (rest % (steps + 1)) as f64 / steps as f64;
                        rest /= steps + 1;
                    }
                    assert_eq!(
                        code_by_quantization(&point, depth),
                        code_by_bisection(&point, depth),
                        "dims {dims} depth {depth} point {point:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn quantised_codes_match_bisection_on_pseudo_random_points() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for dims in 1..=5usize {
            for depth in [1u32, 5, 17, 30] {
                for _ in 0..2000 {
                    let point: Vec<f64> = (0..dims).map(|_| next()).collect();
                    assert_eq!(
                        code_by_quantization(&point, depth),
                        code_by_bisection(&point, depth)
                    );
                }
            }
        }
    }

    #[test]
    fn one_goes_to_the_top_cell_and_zero_to_the_bottom() {
        for dims in 1..=3 {
            let geometry = CellGeometry::new(dims, 9);
            assert_eq!(
                code_by_quantization(&vec![1.0; dims], 9),
                geometry.leaf_count() as u32 - 1
            );
            assert_eq!(code_by_quantization(&vec![0.0; dims], 9), 0);
        }
    }

    #[test]
    fn axis_masks_partition_the_code_and_round_trip() {
        for dims in 1..=5 {
            for depth in 0..=MAX_DEPTH {
                let geometry = CellGeometry::new(dims, depth);
                let masks: Vec<u32> = (0..dims).map(|axis| geometry.axis_mask(axis)).collect();
                let union = masks.iter().fold(0u32, |acc, mask| {
                    assert_eq!(acc & mask, 0, "masks overlap");
                    acc | mask
                });
                assert_eq!(union as u64, (1u64 << depth) - 1);
                for axis in 0..dims {
                    assert_eq!(masks[axis].count_ones(), geometry.axis_bits(axis));
                }
                let code = 0x2bad_f00d_u32 & union;
                let mut indices = vec![0u32; dims];
                geometry.axis_indices(code, &mut indices);
                assert_eq!(geometry.leaf_code(&indices), code);
            }
        }
    }

    #[test]
    fn diameters_follow_the_definition() {
        assert_eq!(cell_diameter(1, 0), 1.0);
        assert_eq!(cell_diameter(1, 3), 0.125);
        assert_eq!(cell_diameter(2, 3), 0.5);
        assert_eq!(cell_diameter(3, 6), 0.25);
        // Δ_j counts 2^j cells of diameter 2^{−⌊j/d⌋}.
        for dims in 1..=4 {
            for level in 0..20u32 {
                let expected = (1u64 << level) as f64 * cell_diameter(dims, level);
                assert_eq!(level_diameter_sum(dims, Some(level)), expected);
            }
            assert_eq!(
                level_diameter_sum(dims, None),
                level_diameter_sum(dims, Some(0))
            );
        }
    }
}
