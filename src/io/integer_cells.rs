//! Integer columns: each synthetic value becomes an integer inside the released cell it was drawn in.
//!
//! A release spreads a cell's mass evenly over the cell (the sampler draws uniformly inside it, the
//! marginal maps are linear inside it), but the data in an integer column sit on the integers the binner
//! put in that cell. Rounding to nearest moves mass across cell boundaries wherever a cell does not end
//! at a half-integer: hour on [0, 24] in 32 cells of 0.75 puts every 6 in [6, 6.75), and rounding sends a
//! third of them to 7 (flights, d = 6, ε = 0.1: hour's 1-D TV 0.116 on the 32 cells, against 0.004 for
//! MST). Instead the value goes to the integers the binner maps to its cell, evenly by its place in the
//! cell: monotone, so ranks (and the joint structure) are kept, and a function of released values and
//! public bounds only, so it is post-processing. A cell that holds no integer holds only noise; its
//! values are rounded to nearest.

use crate::geometry::axis::AxisPlan;
use crate::geometry::bounds::ColumnBounds;

/// The most cells an axis can have for the binner to quantise it ([`AxisPlan::with_cells`]).
const MAX_CELLS: u64 = 1 << 31;

/// Beyond 2^53 a float no longer holds every integer (nanosecond timestamps do go there): such bounds keep
/// rounding to nearest, which is all a float can say there.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

/// Up to this many cells, each cell's integers are found once, when the column's [`IntegerCells`] are
/// made (16 bytes a cell), instead of for every value written. Sampling and writing 10^7 rows of two
/// integer columns (2 threads, four runs): 0.36–0.47 s rounding to nearest, 0.65–0.78 s searching for
/// every value, 0.49–0.63 s from the table.
const TABLE_MAX_CELLS: u64 = 1 << 16;

/// One integer column's equal cells of its public bounds, as the release spread values over them.
pub struct IntegerCells {
    axis: AxisPlan,
    cells: f64,
    /// The smallest and largest integers inside the bounds.
    lowest: f64,
    highest: f64,
    /// Per cell (where there are at most [`TABLE_MAX_CELLS`]): its first integer and how many it holds.
    table: Option<Vec<(f64, f64)>>,
}

impl IntegerCells {
    /// `cells` equal cells of `bounds`; `None` where the binner could not cut the axis that finely, the
    /// bounds hold no integer or reach past [`EXACT_INTEGERS`] (then values are rounded to nearest).
    pub fn new(bounds: &ColumnBounds, cells: u64) -> Option<Self> {
        let (lowest, highest) = (bounds.lo.ceil(), bounds.hi.floor());
        let exact = lowest.abs() < EXACT_INTEGERS && highest.abs() < EXACT_INTEGERS;
        if !(1..=MAX_CELLS).contains(&cells) || lowest > highest || !exact {
            return None;
        }
        let mut integers = IntegerCells {
            axis: AxisPlan::with_cells(bounds.clone(), cells as u32),
            cells: cells as f64,
            lowest,
            highest,
            table: None,
        };
        if cells <= TABLE_MAX_CELLS {
            let table = (0..cells as u32).map(|index| integers.searched(index, f64::from(index))).collect();
            integers.table = Some(table);
        }
        Some(integers)
    }

    /// The integer (in column units) for the normalised value `unit`.
    pub fn integer(&self, unit: f64) -> f64 {
        let scaled = unit.clamp(0.0, 1.0) * self.cells;
        let cell = scaled.floor().min(self.cells - 1.0);
        let (first, count) = match &self.table {
            Some(table) => table[cell as usize],
            None => self.searched(cell as u32, cell),
        };
        if count == 0.0 {
            return self.axis.bounds.denormalise(unit).round().clamp(self.lowest, self.highest);
        }
        // The place in the cell, [0, 1], picks one of its integers: each gets an equal share.
        first + ((scaled - cell) * count).floor().min(count - 1.0)
    }

    /// The first integer of cell `index` (`cell` as a float) and how many it holds (0: none).
    fn searched(&self, index: u32, cell: f64) -> (f64, f64) {
        self.integers_in(index, cell).map_or((0.0, 0.0), |(first, last)| (first, last - first + 1.0))
    }

    /// The first and last integers the binner puts in cell `index` (`cell` as a float), if any.
    fn integers_in(&self, index: u32, cell: f64) -> Option<(f64, f64)> {
        let ColumnBounds { lo, hi, .. } = self.axis.bounds;
        let width = (hi - lo) / self.cells;
        let in_or_after = |k: f64| self.axis.quantize(k) >= index;
        let in_or_before = |k: f64| self.axis.quantize(k) <= index;
        // The edges lo + j·width are inexact in floating point; step to where the binner's cells change.
        let mut first = (lo + cell * width).ceil().clamp(self.lowest, self.highest);
        while first > self.lowest && in_or_after(first - 1.0) {
            first -= 1.0;
        }
        while first < self.highest && !in_or_after(first) {
            first += 1.0;
        }
        let mut last = ((lo + (cell + 1.0) * width).ceil() - 1.0).clamp(first, self.highest);
        while last < self.highest && in_or_before(last + 1.0) {
            last += 1.0;
        }
        while last > first && !in_or_before(last) {
            last -= 1.0;
        }
        (self.axis.quantize(first) == index && self.axis.quantize(last) == index).then_some((first, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use rand::RngExt;

    use crate::testing::case_rng;

    fn cells(lo: f64, hi: f64, count: u64) -> IntegerCells {
        IntegerCells::new(&ColumnBounds::new("x", lo, hi).unwrap(), count).unwrap()
    }

    #[test]
    fn a_cell_keeps_its_integers_where_rounding_would_leak() {
        // hour on [0, 24] in 32 cells: [6, 6.75) holds 6 only; rounding sends a third of it to 7.
        let hours = cells(0.0, 24.0, 32);
        let cell_of_six = 8.0 / 32.0;
        for step in 0..100 {
            let unit = cell_of_six + step as f64 / 100.0 / 32.0;
            assert_eq!(hours.integer(unit), 6.0, "unit {unit}");
        }
        assert_eq!(hours.axis.bounds.denormalise(cell_of_six + 0.9 / 32.0).round(), 7.0);
        // [0, 10] in 2 cells: 0..=4 and 5..=10 (5 is the edge: the binner puts it in the upper cell).
        let halves = cells(0.0, 10.0, 2);
        let hits: Vec<f64> = (0..12).map(|i| halves.integer((i as f64 + 0.5) / 24.0)).collect();
        assert_eq!(hits, [0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0, 4.0]);
        let upper: Vec<f64> = (0..6).map(|i| halves.integer(0.5 + (i as f64 + 0.5) / 12.0)).collect();
        assert_eq!(upper, [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
    }

    #[test]
    fn integers_stay_in_the_binners_cell_spread_evenly_and_in_order() {
        let mut rng = case_rng(7);
        for _ in 0..300 {
            let lo = (rng.random_range(-50.0..50.0f64) * 4.0).round() / 4.0;
            let hi = lo + [0.5, 1.0, 3.0, 7.25, 24.0, 1000.0][rng.random_range(0..6)];
            // 100 000 cells: past TABLE_MAX_CELLS, each value searches its cell.
            let count = [1, 2, 3, 7, 32, 100, 4096, 100_000][rng.random_range(0..8)];
            let Some(integers) = IntegerCells::new(&ColumnBounds::new("x", lo, hi).unwrap(), count) else {
                assert!(lo.ceil() > hi.floor());
                continue;
            };
            let mut previous = f64::NEG_INFINITY;
            for step in 0..=2000 {
                let unit = step as f64 / 2000.0;
                let integer = integers.integer(unit);
                assert_eq!(integer, integer.round());
                assert!((lo.ceil()..=hi.floor()).contains(&integer), "{integer} outside [{lo}, {hi}]");
                assert!(integer >= previous, "not monotone at {unit} in [{lo}, {hi}] / {count}");
                previous = integer;
                let cell = ((unit * count as f64).floor() as u32).min(count as u32 - 1);
                let held = (lo.ceil() as i64..=hi.floor() as i64).any(|k| integers.axis.quantize(k as f64) == cell);
                if held {
                    assert_eq!(
                        integers.axis.quantize(integer),
                        cell,
                        "{integer} left cell {cell} of [{lo}, {hi}] / {count}"
                    );
                }
            }
            // Evenly: the m integers of a cell each take 1/m of it.
            let cell = rng.random_range(0..count);
            if let Some((first, last)) = integers.integers_in(cell as u32, cell as f64) {
                let m = (last - first + 1.0) as usize;
                let hits: Vec<f64> = (0..m)
                    .map(|i| integers.integer((cell as f64 + (i as f64 + 0.5) / m as f64) / count as f64))
                    .collect();
                let expected: Vec<f64> = (0..m).map(|i| first + i as f64).collect();
                assert_eq!(hits, expected, "cell {cell} of [{lo}, {hi}] / {count}");
            }
        }
    }

    #[test]
    fn bounds_without_an_integer_too_many_cells_or_inexact_integers_keep_rounding() {
        assert!(IntegerCells::new(&ColumnBounds::new("x", 0.2, 0.8).unwrap(), 4).is_none());
        assert!(IntegerCells::new(&ColumnBounds::new("x", 0.0, 1.0).unwrap(), MAX_CELLS + 1).is_none());
        // Nanoseconds since 1970 in 2024: a step of one no longer changes the float there.
        let nanoseconds = ColumnBounds::new("t", 1.70e18, 1.73e18).unwrap();
        assert!(IntegerCells::new(&nanoseconds, 32).is_none());
        // Microseconds are still exact.
        let microseconds = ColumnBounds::new("t", 1.70e15, 1.73e15).unwrap();
        let cells = IntegerCells::new(&microseconds, 32).unwrap();
        assert_eq!(cells.integer(0.5), cells.integer(0.5).round());
    }
}
