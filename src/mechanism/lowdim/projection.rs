//! The map between data space [0,1]^d and the subroutine's unit cube, both ways (paper 002, §2.4–2.8).
//!
//! Down: a = V̂ᵀ(x − X̄_priv) ∈ R^{d'}, binned on the subroutine's partition of a box B ⊂ R^{d'} mapped
//! affinely onto [0,1]^{d'}. Only released values (V̂, X̄_priv) and the public cube [0,1]^d shape the map,
//! so it is a per-row transformation and the subroutine's guarantee holds.
//! Up: x'' = X̄_priv + V̂a for a synthetic a ∈ B, then the metric projection onto [0,1]^d (a clamp per
//! coordinate; Proposition 3.2: it never increases the distance to the data).
//!
//! The box. The paper takes B = [−R, R]^{d'} with R = √d + ‖X̄_priv‖₂ (‖a‖₂ ≤ ‖x − X̄_priv‖₂ ≤ R). dpsynth
//! takes the exact bounding box of the image of [0,1]^d instead: axis j spans
//! [Σ_k min(V̂_kj, 0) − V̂_jᵀX̄, Σ_k max(V̂_kj, 0) − V̂_jᵀX̄], of width ‖V̂_j‖₁ ≤ √d ≤ R, so at most half the
//! paper's 2R (about a third for a spread-out direction in d = 20). Every row still lands inside, the
//! choice is still a function of released values only, and the subroutine's cells are that much finer
//! in data space at the same depth and noise. R is still computed and reported.
//!
//! The subroutine works in the unit cube u = (a − lower)/widths, so its ℓ∞ metric is, in the projected
//! coordinates, the weighted max_j |δa_j|/w_j: the box is not a cube (its widths ‖V̂_j‖₁ differ per axis),
//! and PSMM's d_BL projection (its test functions are bounded by the domain's diameter, so the
//! minimiser depends on the domain's scale and shape) is the one of that normalised cube. The lift's Lipschitz constant [`Projection::lift_lipschitz`] carries the
//! subroutine's bounds back to data space.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};
use rayon::prelude::*;

use super::covariance::unit_value;
use crate::binner::{AxisPlan, BinnerWorker};
use crate::geometry::bounds::ColumnBounds;
use crate::error::Result;
use crate::geometry::partition::CellGeometry;
use crate::sampler::RowGenerator;

/// Rows projected per matrix product: a block of 2^12 × d f64 stays in cache for d in the hundreds.
const PROJECTION_BLOCK_ROWS: usize = 1 << 12;

/// Widths below this (a direction with no extent in the cube, impossible for a unit vector) are raised
/// to it so that every axis has a non-empty interval.
const MIN_AXIS_WIDTH: f64 = 1e-12;

/// The released subspace: private mean, basis V̂ (d × d') and the box of projected coordinates.
pub struct Projection {
    pub mean: Vec<f64>,
    pub basis: Mat<f64>,
    /// The paper's R = √d + ‖X̄_priv‖₂ (reported; the box below is tighter).
    pub radius: f64,
    /// Lower corner and widths of the box B, per principal axis.
    pub lower: Vec<f64>,
    pub widths: Vec<f64>,
    /// The cell index of a projected coordinate on each of the d' axes of the subroutine's partition.
    axes: Vec<AxisPlan>,
}

impl Projection {
    /// `cells_per_axis[j]`: the subroutine's cells on principal axis j (2^bits for PMM's dyadic leaves,
    /// k for PSMM's regular grid).
    pub fn new(mean: Vec<f64>, basis: Mat<f64>, cells_per_axis: &[u32]) -> Self {
        assert_eq!(basis.nrows(), mean.len());
        assert_eq!(basis.ncols(), cells_per_axis.len());
        let radius = radius_for(&mean);
        let (mut lower, mut widths) = (Vec::new(), Vec::new());
        for axis in 0..basis.ncols() {
            let column = basis.col(axis);
            let shift: f64 = column.iter().zip(&mean).map(|(v, m)| v * m).sum();
            let low: f64 = column.iter().map(|v| v.min(0.0)).sum::<f64>() - shift;
            let high: f64 = column.iter().map(|v| v.max(0.0)).sum::<f64>() - shift;
            lower.push(low);
            widths.push((high - low).max(MIN_AXIS_WIDTH));
        }
        let axes = (0..basis.ncols())
            .map(|axis| {
                let bounds = ColumnBounds::new(
                    format!("principal axis {axis}"),
                    lower[axis],
                    lower[axis] + widths[axis],
                )
                .expect("a positive width gives a non-empty interval");
                AxisPlan::with_cells(bounds, cells_per_axis[axis])
            })
            .collect();
        Projection {
            mean,
            basis,
            radius,
            lower,
            widths,
            axes,
        }
    }

    pub fn data_dims(&self) -> usize {
        self.mean.len()
    }

    pub fn target_dims(&self) -> usize {
        self.basis.ncols()
    }

    /// ‖widths‖₂: the map u ↦ x'' from ([0,1]^{d'}, ℓ∞) to (R^d, ℓ∞) is this-Lipschitz, since
    /// ‖V̂(w∘δu)‖∞ ≤ ‖w∘δu‖₂ ≤ ‖w‖₂‖δu‖∞.
    pub fn lift_lipschitz(&self) -> f64 {
        self.widths.iter().map(|w| w * w).sum::<f64>().sqrt()
    }

    /// a = V̂ᵀ(x − X̄_priv) for rows given as quantised cell indices (`rows[k]` = axis k), written as
    /// the subroutine's per-axis cell indices into `cells` (one vector per principal axis).
    pub fn project_to_cells(&self, rows: &[&[u32]], cells: &mut [Vec<u32>]) {
        let count = rows.first().map_or(0, |axis| axis.len());
        for cell in cells.iter_mut() {
            cell.clear();
            cell.resize(count, 0);
        }
        let mut projected = Mat::<f64>::zeros(PROJECTION_BLOCK_ROWS.min(count), self.target_dims());
        let mut start = 0;
        while start < count {
            let block = (count - start).min(PROJECTION_BLOCK_ROWS);
            let centred = Mat::<f64>::from_fn(block, self.data_dims(), |row, axis| {
                unit_value(rows[axis][start + row]) - self.mean[axis]
            });
            let mut out = projected.get_mut(..block, ..);
            matmul(
                out.as_mut(),
                Accum::Replace,
                centred.as_ref(),
                self.basis.as_ref(),
                1.0,
                Par::Seq,
            );
            for (axis, plan) in self.axes.iter().enumerate() {
                for row in 0..block {
                    cells[axis][start + row] = plan.quantize(out[(row, axis)]);
                }
            }
            start += block;
        }
    }

    /// Lifts synthetic points u ∈ [0,1]^{d'} (`unit[j]` = axis j) to data space and clamps them:
    /// `columns[k]` gets coordinate k of every point.
    pub fn lift(&self, unit: &[Vec<f64>], columns: &mut [Vec<f64>]) {
        let rows = unit.first().map_or(0, Vec::len);
        let (basis, mean) = (&self.basis, &self.mean);
        columns
            .par_iter_mut()
            .enumerate()
            .for_each(|(coordinate, column)| {
                column.clear();
                column.resize(rows, mean[coordinate]);
                for (axis, values) in unit.iter().enumerate() {
                    let weight = basis[(coordinate, axis)];
                    let (low, width) = (self.lower[axis], self.widths[axis]);
                    for (x, &u) in column.iter_mut().zip(values) {
                        *x += weight * (low + width * u);
                    }
                }
                for x in column.iter_mut() {
                    *x = x.clamp(0.0, 1.0);
                }
            });
    }
}

/// The cells per axis of the leaves of a dyadic partition (PMM as the subroutine).
pub fn leaf_cells_per_axis(geometry: &CellGeometry) -> Vec<u32> {
    (0..geometry.dims())
        .map(|axis| 1 << geometry.axis_bits(axis))
        .collect()
}

/// R = √d + ‖X̄_priv‖₂: from the private mean, never from the data.
pub fn radius_for(mean: &[f64]) -> f64 {
    (mean.len() as f64).sqrt() + mean.iter().map(|m| m * m).sum::<f64>().sqrt()
}

/// A binner worker behind the projection: fed quantised rows of [0,1]^d, it feeds the subroutine's
/// cell indices in d' dimensions to `inner`.
pub struct ProjectingWorker<'a, W> {
    pub inner: W,
    projection: &'a Projection,
    cells: Vec<Vec<u32>>,
}

impl<'a, W> ProjectingWorker<'a, W> {
    pub fn new(inner: W, projection: &'a Projection) -> Self {
        ProjectingWorker {
            inner,
            projection,
            cells: vec![Vec::new(); projection.target_dims()],
        }
    }
}

impl<W: BinnerWorker> BinnerWorker for ProjectingWorker<'_, W> {
    fn add_batch(&mut self, axes: &[&[u32]]) -> Result<()> {
        self.projection.project_to_cells(axes, &mut self.cells);
        let slices: Vec<&[u32]> = self.cells.iter().map(Vec::as_slice).collect();
        self.inner.add_batch(&slices)
    }
}

/// Synthetic rows: the subroutine's points in the projected unit cube, lifted to data space and clamped.
pub struct LiftedRows<'a> {
    pub inner: Box<dyn RowGenerator + 'a>,
    pub projection: &'a Projection,
}

impl RowGenerator for LiftedRows<'_> {
    fn total_rows(&self) -> u64 {
        self.inner.total_rows()
    }

    fn sample_rows(&self, start: u64, rows: usize, columns: &mut [Vec<f64>]) {
        let mut unit = vec![Vec::new(); self.projection.target_dims()];
        self.inner.sample_rows(start, rows, &mut unit);
        self.projection.lift(&unit, columns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::lowdim::covariance::VALUE_CELL_BITS;

    /// The leaves' cells per axis of a d'-dimensional dyadic partition of depth `depth`.
    fn dyadic(dims: usize, depth: u32) -> Vec<u32> {
        leaf_cells_per_axis(&CellGeometry::new(dims, depth))
    }

    fn diagonal_plane(d: usize) -> Mat<f64> {
        // Two orthonormal directions: (1,1,0,…)/√2 and (0,0,1,0,…).
        Mat::from_fn(d, 2, |row, column| match (row, column) {
            (0 | 1, 0) => std::f64::consts::FRAC_1_SQRT_2,
            (2, 1) => 1.0,
            _ => 0.0,
        })
    }

    #[test]
    fn points_on_the_subspace_survive_the_round_trip() {
        let d = 4;
        let projection = Projection::new(vec![0.5; d], diagonal_plane(d), &dyadic(2, 20));
        assert!(
            (projection.radius - 3.0).abs() < 1e-12,
            "√4 + ‖(½,½,½,½)‖ = 3"
        );
        // The box of the cube's image: axis 0 spans (0 − 1)/√2 … (2 − 1)/√2, axis 1 spans −½ … ½.
        let half = std::f64::consts::FRAC_1_SQRT_2;
        assert!(
            (projection.lower[0] + half).abs() < 1e-12
                && (projection.widths[0] - 2.0 * half).abs() < 1e-12
        );
        assert!(
            (projection.lower[1] + 0.5).abs() < 1e-12 && (projection.widths[1] - 1.0).abs() < 1e-12
        );
        // Rows on the plane through the mean: x = (t, t, s, 0.5) in cell-index form.
        let top = (1u32 << VALUE_CELL_BITS) as f64;
        let (t, s) = (0.3, 0.8);
        let index = |x: f64| (x * top) as u32;
        let rows: Vec<Vec<u32>> = vec![
            vec![index(t)],
            vec![index(t)],
            vec![index(s)],
            vec![index(0.5)],
        ];
        let slices: Vec<&[u32]> = rows.iter().map(Vec::as_slice).collect();
        let mut cells = vec![Vec::new(); 2];
        projection.project_to_cells(&slices, &mut cells);
        // Back up from the cell's centre: within a cell width (at most 2^−10 per axis here) of the row.
        let width = (-10f64).exp2();
        let unit: Vec<Vec<f64>> = cells
            .iter()
            .map(|c| vec![(c[0] as f64 + 0.5) * width])
            .collect();
        let mut lifted = vec![Vec::new(); d];
        projection.lift(&unit, &mut lifted);
        let expected = [t, t, s, 0.5];
        for (coordinate, column) in lifted.iter().enumerate() {
            assert!(
                (column[0] - expected[coordinate]).abs() < 2.0 * width,
                "{coordinate}: {}",
                column[0]
            );
        }
    }

    #[test]
    fn lifted_points_are_clamped_into_the_cube() {
        let d = 5;
        let projection = Projection::new(vec![0.9; d], diagonal_plane(d), &dyadic(2, 8));
        let unit = vec![vec![0.0, 0.25, 0.5, 1.0], vec![1.0, 0.0, 0.9, 0.1]];
        let mut lifted = vec![Vec::new(); d];
        projection.lift(&unit, &mut lifted);
        assert!(lifted.iter().flatten().all(|x| (0.0..=1.0).contains(x)));
        assert!(
            lifted[0].contains(&1.0) && lifted[0].contains(&0.0),
            "extremes are clamped"
        );
    }

    #[test]
    fn the_metric_projection_never_increases_the_distance_to_the_data() {
        // Proposition 3.2 (Prop 4.8 in the dissertation): W1(μ_Y, μ_X'') ≤ W1(μ_X, μ_X'') for data X in the
        // cube, unclamped synthetic X'' and Y = the clamped X'' from `lift`. Exact W1 on small random sets.
        use crate::eval::w1::{w1_exact_small, Sample};
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut unit = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut clamped_instances = 0;
        for instance in 0..30 {
            let d = 3 + instance % 4;
            let (n, m) = (20 + instance, 25 - instance % 7);
            let data: Vec<f64> = (0..n * d).map(|_| unit()).collect();
            let mean: Vec<f64> = (0..d).map(|_| unit()).collect();
            let projection = Projection::new(mean.clone(), diagonal_plane(d), &dyadic(2, 6));
            let points: Vec<Vec<f64>> = (0..2).map(|_| (0..m).map(|_| unit()).collect()).collect();
            let mut clamped = vec![Vec::new(); d];
            projection.lift(&points, &mut clamped);
            // X'' without the clamp, row-major; it stays within [−R, 1 + R] per coordinate.
            let radius = projection.radius;
            let unclamped: Vec<f64> = (0..m)
                .flat_map(|i| {
                    let (p, mean, points) = (&projection, &mean, &points);
                    (0..d).map(move |k| {
                        mean[k]
                            + (0..2)
                                .map(|j| {
                                    p.basis[(k, j)] * (p.lower[j] + p.widths[j] * points[j][i])
                                })
                                .sum::<f64>()
                    })
                })
                .collect();
            if unclamped.iter().all(|x| (0.0..=1.0).contains(x)) {
                continue; // nothing to project in this instance
            }
            clamped_instances += 1;
            let clamped_rows: Vec<f64> = (0..m)
                .flat_map(|i| (0..d).map(|k| clamped[k][i]).collect::<Vec<_>>())
                .collect();
            // The metric wants [0,1]: an affine map z → (z + R)/(1 + 2R) scales every ℓ∞ distance alike.
            let fit = |values: &[f64]| -> Vec<f64> {
                values
                    .iter()
                    .map(|z| (z + radius) / (1.0 + 2.0 * radius))
                    .collect()
            };
            let (data, unclamped, clamped_rows) = (fit(&data), fit(&unclamped), fit(&clamped_rows));
            let x = Sample::new(&data, d).unwrap();
            let x2 = Sample::new(&unclamped, d).unwrap();
            let y = Sample::new(&clamped_rows, d).unwrap();
            let before = w1_exact_small(&x, &x2).unwrap();
            let after = w1_exact_small(&y, &x2).unwrap();
            assert!(
                after <= before + 1e-9,
                "instance {instance}: {after} > {before}"
            );
        }
        assert!(
            clamped_instances >= 10,
            "only {clamped_instances} instances left the cube"
        );
    }
}
