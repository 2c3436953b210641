//! How a pair histogram cuts each of its two columns (docs/mechanisms/pmm.md, "Mixed columns"). A number
//! is cut into [`PAIR_CELLS`] equal cells of its public bounds, with a cell of its own for null where the
//! column is nullable (its null band, below the bounds on its axis). A categorical or Boolean column whose 1-D
//! marginal was released is cut into a cell per code that marginal gives rows: equal cells of a long list
//! put dozens of codes in one cell, and a pair released on them cannot say which of those codes goes with
//! what (flights' destinations: 46 of the 1 480 listed airports per cell, 2-way TV 0.2–0.46 on their
//! pairs). Which codes have rows is read from that release: post-processing, the same partition on every
//! rank.

use super::marginals::code_leaves;
use crate::binner::pass::PairCut;

/// log2 of the cells per axis of a number's pair cells: 32 did best on flights' 2-way TV at every width and
/// ε tried against 8, 16 and 64 (docs/mechanisms/pmm.md).
pub const PAIR_BITS: u32 = 5;
pub const PAIR_CELLS: usize = 1 << PAIR_BITS;

/// The most pair cells of a coded column: beyond it, consecutive live codes share cells of about equal
/// released rows. A pair of two such columns then has at most 2^14 cells, each noised; flights' 105 flown
/// destinations fit in cells of their own.
pub const CODED_PAIR_CELLS: usize = 128;

/// A coded column gets at most as many pair cells as leave a pair cell beside a number's 32 this many
/// noise scales of released rows on average ([`PairAxis::coded_cells_for`]), and never fewer than a number's
/// 32. Most cells of a pair with a long list are empty, and pruned, so one scale is enough: on flights'
/// 9 columns at ε = 1 (σ ≈ 44) a cell per flown destination (one scale) took the mean 2-way TV from
/// 0.066–0.069 (three scales: 44 cells) to 0.056–0.062; at ε = 0.1 (σ ≈ 440) such cells were mostly noise
/// (0.176 against 0.136–0.142 on 19 cells), and one scale still gives 32 cells at most there
/// (docs/mechanisms/pmm.md, "Mixed columns").
pub const CODED_CELL_SCALES: f64 = 1.0;

/// Equal cells of x a number's pair cell is cut into where a pair map spreads its released rows as the
/// synthetic rows lie (the child's whole 1-D marginal and its shape in each parent cell); a coded
/// column's finer cells are the cells of its codes ([`code_leaves`]).
pub const NUMBER_FINE_CELLS: usize = 1 << 12;

/// log2 of the equal cells of its axis a nullable number's pair cells are counted from, each in the pair
/// cell its centre lies in: exact where the null band is a sixteenth of the axis (a float column, an integer
/// one whose bounds' width is a multiple of 15), else within 1/1024 of the axis.
pub const NULL_BAND_BITS: u32 = 10;

/// A column's pair cells.
#[derive(Clone, Debug, PartialEq)]
pub enum PairAxis {
    /// [`PAIR_CELLS`] equal cells of the normalised axis [0, 1].
    Equal,
    /// A nullable number (a date or a timestamp too): its null band, the share `.0` of the normalised axis
    /// below its public bounds, in cell 0, then [`PAIR_CELLS`] equal cells of its bounds. Equal cells of the whole axis
    /// would put null and the lowest values in one cell and cut the bounds elsewhere than at their 32nds
    /// (flights' delays and air time: the null band is 2 of those 32 cells).
    NullBand(f64),
    /// A coded column of `cell_of_code.len()` code slots: code k in pair cell `cell_of_code[k]`,
    /// consecutive codes in consecutive cells from 0.
    Codes(CodeCells),
}

/// A coded column's pair cells, and where its codes lie on the normalised axis.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeCells {
    cell_of_code: Vec<u32>,
    cells: usize,
    /// The axis in 2^`depth` equal cells (leaves), each holding one code at most, as the 1-D release and
    /// the writer cut it: a value is the code of its leaf (the writer's integer in that cell), not the
    /// code nearest to it. A leaf without a code takes the code nearest its centre.
    depth: u32,
    code_of_leaf: Vec<u32>,
}

impl PairAxis {
    /// How many pair cells a coded column may have beside `released_rows` released rows, each pair cell
    /// noised at Laplace scale `sigma`: [`CODED_CELL_SCALES`], between a number's cells and
    /// [`CODED_PAIR_CELLS`]. Public: the joint release's total and the plan's scale.
    pub fn coded_cells_for(released_rows: u64, sigma: f64) -> usize {
        let cells = released_rows as f64 / (PAIR_CELLS as f64 * CODED_CELL_SCALES * sigma);
        (cells as usize).clamp(PAIR_CELLS, CODED_PAIR_CELLS)
    }

    /// The cells of a coded column from its released 1-D marginal (`released[k]`: code k's released,
    /// pruned, count): a cell per code with rows, `most_cells` at most; a code without rows shares
    /// the cell of the code with rows before it (the first cell where there is none before it). The data
    /// may have rows there that the release pruned: those count with that neighbour.
    ///
    /// Beyond `most_cells`, consecutive codes with rows share cells: a cell is closed once it holds a share
    /// of the released rows, or before a code that would take it past that, so a heavy code has a cell of
    /// its own; the share is the smallest that keeps the cells within the cap (2/(cap − 1) of the rows
    /// always does: two neighbouring cells then hold more than that together). A fixed 2/(cap − 1) gave
    /// flights' destinations 19 cells under a cap of 32.
    pub fn of_codes(released: &[u64], most_cells: usize) -> PairAxis {
        let live = released.iter().filter(|&&count| count > 0).count();
        if live <= most_cells {
            return PairAxis::of_cells(Self::grouped_codes(released, 0));
        }
        let (mut fits, mut too_small) = ((2 * released.iter().sum::<u64>()).div_ceil(most_cells.max(2) as u64 - 1), 0);
        while fits - too_small > 1 {
            let share = too_small + (fits - too_small) / 2;
            match Self::grouped_codes(released, share).last().map_or(0, |&cell| cell as usize + 1) <= most_cells {
                true => fits = share,
                false => too_small = share,
            }
        }
        PairAxis::of_cells(Self::grouped_codes(released, fits))
    }

    /// Each code's cell when a cell closes once it holds `share` released rows (0: a cell per live code).
    fn grouped_codes(released: &[u64], share: u64) -> Vec<u32> {
        let (mut cell_of_code, mut cell, mut in_cell, mut opened) = (Vec::with_capacity(released.len()), 0u32, 0u64, false);
        for &count in released {
            if count > 0 {
                if opened && (share == 0 || in_cell >= share || in_cell + count > share) {
                    cell += 1;
                    in_cell = 0;
                }
                opened = true;
                in_cell += count;
            }
            cell_of_code.push(cell);
        }
        cell_of_code
    }

    /// The axis with codes in `cell_of_code` (consecutive cells from 0).
    fn of_cells(cell_of_code: Vec<u32>) -> PairAxis {
        let slots = cell_of_code.len();
        let cells = cell_of_code.last().map_or(1, |&last| last as usize + 1);
        let (depth, leaves) = code_leaves(slots);
        let leaf_count = 1usize << depth;
        let mut code_of_leaf: Vec<u32> = (0..leaf_count)
            .map(|leaf| ((((leaf as f64 + 0.5) / leaf_count as f64) * slots as f64) as usize).min(slots - 1) as u32)
            .collect();
        leaves.iter().enumerate().for_each(|(code, &leaf)| code_of_leaf[leaf as usize] = code as u32);
        PairAxis::Codes(CodeCells { cell_of_code, cells, depth, code_of_leaf })
    }

    /// The axis whose coded cells are `cell_of_code` (a saved release's); `None` unless they start at 0 and
    /// step by at most one.
    pub fn from_cell_of_code(cell_of_code: Vec<u32>) -> Option<PairAxis> {
        let steps = cell_of_code.windows(2).all(|pair| pair[1] == pair[0] || pair[1] == pair[0] + 1);
        (cell_of_code.first() == Some(&0) && steps).then(|| PairAxis::of_cells(cell_of_code))
    }

    pub fn cells(&self) -> usize {
        match self {
            PairAxis::Equal => PAIR_CELLS,
            PairAxis::NullBand(_) => PAIR_CELLS + 1,
            PairAxis::Codes(codes) => codes.cells,
        }
    }

    /// The pair cell of a normalised value.
    pub fn cell_of(&self, value: f64) -> usize {
        match self {
            PairAxis::Equal => cell_of(value, PAIR_CELLS),
            &PairAxis::NullBand(band) => match value < band {
                true => 0,
                false => 1 + cell_of((value - band) / (1.0 - band), PAIR_CELLS),
            },
            PairAxis::Codes(codes) => {
                let code = codes.code_of_leaf[cell_of(value, codes.code_of_leaf.len())];
                codes.cell_of_code[code as usize] as usize
            }
        }
    }

    /// The finer cells of the axis a pair map works on: [`NUMBER_FINE_CELLS`] equal ones, or the codes'
    /// leaves.
    pub fn fine_cells(&self) -> usize {
        match self {
            PairAxis::Equal | PairAxis::NullBand(_) => NUMBER_FINE_CELLS,
            PairAxis::Codes(codes) => codes.code_of_leaf.len(),
        }
    }

    /// The pair cell of each of [`Self::fine_cells`], in order.
    pub fn cell_of_fine(&self) -> Vec<u32> {
        match self {
            PairAxis::Equal => (0..NUMBER_FINE_CELLS).map(|fine| (fine * PAIR_CELLS / NUMBER_FINE_CELLS) as u32).collect(),
            PairAxis::NullBand(_) => self.centres_cells(NUMBER_FINE_CELLS),
            PairAxis::Codes(codes) => codes.code_of_leaf.iter().map(|&code| codes.cell_of_code[code as usize]).collect(),
        }
    }

    /// The coded cells, for a saved release (`None` for equal cells).
    pub fn cell_of_code(&self) -> Option<&[u32]> {
        match self {
            PairAxis::Equal | PairAxis::NullBand(_) => None,
            PairAxis::Codes(codes) => Some(&codes.cell_of_code),
        }
    }

    /// The equal cells the data's pass bins the column on before grouping them into these: 2^this per
    /// axis ([`PAIR_BITS`] for a number, [`NULL_BAND_BITS`] for a nullable one, the codes' leaves).
    pub fn bits(&self) -> u32 {
        match self {
            PairAxis::Equal => PAIR_BITS,
            PairAxis::NullBand(_) => NULL_BAND_BITS,
            PairAxis::Codes(codes) => codes.depth,
        }
    }

    /// How the data's pass puts a row in these cells from the column's cell among 2^`bits` equal ones of
    /// its public bounds (the binner's; at least [`Self::bits`]): its top [`Self::bits`], grouped as
    /// [`Self::cell_of_fine`] groups a coded column's leaves.
    pub fn cut(&self, bits: u32) -> PairCut {
        let shift = bits - self.bits();
        let groups = match self {
            // The pass's own cells: no lookup in its loop over the rows.
            PairAxis::Equal if shift == 0 => return PairCut::equal(bits),
            PairAxis::Equal => (0..1u32 << bits).map(|cell| cell >> shift).collect(),
            PairAxis::NullBand(_) => {
                let cells = self.centres_cells(1 << self.bits());
                (0..1u32 << bits).map(|cell| cells[(cell >> shift) as usize]).collect()
            }
            PairAxis::Codes(_) => {
                let leaf_cells = self.cell_of_fine();
                (0..1u32 << bits).map(|cell| leaf_cells[(cell >> shift) as usize]).collect()
            }
        };
        PairCut { bits, groups: Some(groups), cells: self.cells() }
    }

    /// The pair cell of the centre of each of `cells` equal cells of the axis.
    fn centres_cells(&self, cells: usize) -> Vec<u32> {
        (0..cells).map(|cell| self.cell_of((cell as f64 + 0.5) / cells as f64) as u32).collect()
    }
}

/// The cell of a normalised value among `cells` equal cells of [0, 1] (1 in the last).
pub fn cell_of(value: f64, cells: usize) -> usize {
    ((value * cells as f64) as usize).min(cells - 1)
}

/// `fine`, a pair's histogram on two cuts without groups (2^`first.bits` × 2^`second.bits`, first major),
/// summed into the cells `first` and `second` group them into.
pub fn grouped(fine: &[u64], first: &PairCut, second: &PairCut) -> Vec<u64> {
    let (first_groups, second_groups) = (first.groups(), second.groups());
    let mut counts = vec![0; first.cells * second.cells];
    for (&a, row) in first_groups.iter().zip(fine.chunks_exact(second_groups.len())) {
        let cells = &mut counts[a as usize * second.cells..][..second.cells];
        second_groups.iter().zip(row).for_each(|(&b, &count)| cells[b as usize] += count);
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_coded_axis_gives_each_live_code_a_cell_and_the_dead_ones_to_the_code_before() {
        let axis = PairAxis::of_codes(&[0, 5, 0, 0, 7, 1, 0], CODED_PAIR_CELLS);
        assert_eq!(axis.cell_of_code(), Some(&[0, 0, 0, 0, 1, 2, 2][..]));
        assert_eq!(axis.cells(), 3);
        // A value at code k lands in its cell.
        assert_eq!((0..7).map(|k| axis.cell_of((k as f64 + 0.5) / 7.0)).collect::<Vec<_>>(), [0, 0, 0, 0, 1, 2, 2]);
        assert_eq!(PairAxis::of_codes(&[0, 0], CODED_PAIR_CELLS).cells(), 1);
        assert_eq!(PairAxis::from_cell_of_code(vec![0, 0, 1, 2, 2]).map(|axis| axis.cells()), Some(3));
        assert_eq!(PairAxis::from_cell_of_code(vec![0, 2]), None);
        assert_eq!(PairAxis::from_cell_of_code(vec![1]), None);
        assert_eq!(PairAxis::from_cell_of_code(Vec::new()), None);
    }

    #[test]
    fn a_long_list_shares_at_most_the_cap_of_cells_by_released_rows() {
        // 1000 live codes, code 10 holding half the rows: it gets a cell of its own.
        let released: Vec<u64> = (0..1000).map(|code| if code == 10 { 999 } else { 1 }).collect();
        let axis = PairAxis::of_codes(&released, CODED_PAIR_CELLS);
        let (cell_of_code, cells) = (axis.cell_of_code().unwrap(), axis.cells());
        assert!(cells <= CODED_PAIR_CELLS && cells > CODED_PAIR_CELLS / 4, "{cells} cells");
        assert!(cell_of_code.windows(2).all(|pair| pair[1] - pair[0] <= 1));
        assert!(cell_of_code[9] < cell_of_code[10] && cell_of_code[10] < cell_of_code[11], "the heavy code alone");
        // Many equal codes, and skewed ones: never past the cap, and as many cells as live codes up to it.
        for live in [CODED_PAIR_CELLS, CODED_PAIR_CELLS + 1, 4000] {
            let equal = PairAxis::of_codes(&vec![7; live], CODED_PAIR_CELLS);
            assert!(equal.cells() <= CODED_PAIR_CELLS && equal.cells() >= CODED_PAIR_CELLS / 2, "{live}: {}", equal.cells());
            let skewed: Vec<u64> = (1..=live as u64).map(|code| code * code).collect();
            assert!(PairAxis::of_codes(&skewed, CODED_PAIR_CELLS).cells() <= CODED_PAIR_CELLS);
        }
        assert_eq!(PairAxis::of_codes(&vec![7; CODED_PAIR_CELLS], CODED_PAIR_CELLS).cells(), CODED_PAIR_CELLS);
        // A smaller cap where the pair cells would be mostly noise: no more cells than it, nor than a number's
        // where they would be noise at any width.
        assert!(PairAxis::of_codes(&vec![7; 100], 40).cells() <= 40);
        // Many more codes than the cap: nearly as many cells as it allows (64 with a fixed share).
        assert!(PairAxis::of_codes(&vec![7; 4000], CODED_PAIR_CELLS).cells() >= CODED_PAIR_CELLS * 9 / 10);
        // Skewed counts under a small cap (flights' 72 released destinations under 32): close to the cap.
        let skewed: Vec<u64> = (0..72u64).map(|code| 30_000 / (code + 1)).collect();
        let cells = PairAxis::of_codes(&skewed, PAIR_CELLS).cells();
        assert!((PAIR_CELLS * 9 / 10..=PAIR_CELLS).contains(&cells), "{cells} cells");
        assert_eq!(PairAxis::coded_cells_for(336_000, 444.0), PAIR_CELLS);
        assert_eq!(PairAxis::coded_cells_for(336_000, 100.0), 105);
        assert_eq!(PairAxis::coded_cells_for(336_000, 4.44), CODED_PAIR_CELLS);
    }

    #[test]
    fn a_nullable_number_has_a_null_cell_and_its_bounds_in_32_equal_cells() {
        let axis = PairAxis::NullBand(1.0 / 16.0);
        assert_eq!(axis.cells(), PAIR_CELLS + 1);
        assert_eq!([0.0, 0.062, 0.0625, 1.0].map(|value| axis.cell_of(value)), [0, 0, 1, PAIR_CELLS]);
        for cell in 0..PAIR_CELLS {
            let centre = 1.0 / 16.0 + 15.0 / 16.0 * (cell as f64 + 0.5) / PAIR_CELLS as f64;
            assert_eq!(axis.cell_of(centre), cell + 1);
        }
        // A sixteenth of the axis is null: the first 2^(bits − 4) of the pass's cells, and of the fine ones.
        let cut = axis.cut(12);
        assert_eq!(cut.cells, PAIR_CELLS + 1);
        let groups = cut.groups();
        assert!(groups[..256].iter().all(|&cell| cell == 0) && groups[256] == 1 && groups[4095] == PAIR_CELLS as u32);
        // Each value cell is 15 · 2^(bits − 9) of the pass's cells, its edges on theirs.
        assert!((1..=PAIR_CELLS as u32).all(|cell| groups.iter().filter(|&&group| group == cell).count() == 120));
        assert_eq!(axis.cell_of_fine(), groups.to_vec());
    }

    /// A value is its leaf's code, as the writer decodes it: near a code's edge the leaf, not the nearest
    /// code, says which (flights' destinations: values spread in LAX's leaf below LAX − ½ were written as
    /// LAX, but counted as LAW, a code without flights, and the pair map moved rows there).
    #[test]
    fn a_coded_value_is_in_its_leafs_code_and_the_pass_cut_groups_the_leaves_alike() {
        let slots = 1480;
        let released: Vec<u64> = (0..slots).map(|code| u64::from(code % 3 == 0)).collect();
        let axis = PairAxis::of_codes(&released, CODED_PAIR_CELLS);
        let (depth, leaves) = code_leaves(slots);
        let leaf_count = 1u32 << depth;
        let PairAxis::Codes(codes) = &axis else { panic!("codes") };
        for (code, &leaf) in leaves.iter().enumerate() {
            // Anywhere in the code's leaf, even beyond half a code from it.
            for place in [0.001, 0.5, 0.999] {
                let value = (f64::from(leaf) + place) / f64::from(leaf_count);
                assert_eq!(codes.code_of_leaf[cell_of(value, leaf_count as usize)] as usize, code);
                assert_eq!(axis.cell_of(value), codes.cell_of_code[code] as usize);
            }
        }
        // The pass's cut, 2 bits deeper than the leaves, groups every binned cell as its leaf.
        let cut = axis.cut(depth + 2);
        let fine = axis.cell_of_fine();
        assert_eq!(cut.cells, axis.cells());
        assert!(cut.groups().iter().enumerate().all(|(cell, &group)| group == fine[cell >> 2]));
        let number = PairAxis::Equal.cut(8);
        assert_eq!((number.groups()[255], number.groups()[8], number.cells), (31, 1, 32));
        // Fine counts grouped by two cuts.
        let small = PairAxis::of_codes(&[3, 0, 4], CODED_PAIR_CELLS).cut(7);
        let fine: Vec<u64> = (0..256 * 128).map(|cell| cell as u64 % 3).collect();
        let counts = grouped(&fine, &number, &small);
        assert_eq!(counts.len(), 64);
        assert_eq!(counts.iter().sum::<u64>(), fine.iter().sum::<u64>());
    }
}
