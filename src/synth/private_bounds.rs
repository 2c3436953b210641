//! `--private-bounds` in a run: before the mechanism's plan, one pass counts each column without public
//! bounds on its public grid, the bounds are released from SHARE·ε ([`crate::privacy::private_bounds`]),
//! and the mechanism runs with them as public bounds on the rest of ε (post-processing of the release).
//! The whole run's budget is checked once, bounds and mechanism together ([`PrivateBounds::composed`]).

use crate::binner::value_grid::grid_counts;
use crate::error::Result;
use crate::geometry::bounds::ColumnBounds;
use crate::io::source::{ColumnKind, Source};
use crate::options::SynthOptions;
use crate::privacy::private_bounds::{BoundsGrid, PrivateBoundsPlan};
use crate::privacy::{Budget, NoiseKey};
use crate::progress::Progress;

use super::columns::{columns_without_bounds, type_range, used_columns};
use super::report::{PrivateBoundsReport, ReleasedColumnBounds};

/// What the bounds release spent and released.
pub(crate) struct PrivateBounds {
    budget: Budget,
    pub report: PrivateBoundsReport,
    released: Vec<ColumnBounds>,
    mechanism_epsilon: f64,
}

impl PrivateBounds {
    /// Releases the bounds `options` ask for (none without `--private-bounds`, or when every used numeric
    /// column has public bounds: then nothing is spent and the mechanism gets all of ε).
    pub fn release(
        source: &Source,
        options: &SynthOptions,
        key: &NoiseKey,
        progress: &Progress,
    ) -> Result<Option<PrivateBounds>> {
        let Some(share) = options.private_bounds else { return Ok(None) };
        let columns = columns_without_bounds(source, options)?;
        if columns.is_empty() {
            return Ok(None);
        }
        // The schema's checks first (the other columns' domains, the types), so that a run they refuse reads
        // no data: bounds of [0, 1] stand in for the ones not yet released.
        let mut stand_in = options.clone();
        for column in &columns {
            stand_in.bounds.push(ColumnBounds::new(&column.name, 0.0, 1.0)?);
        }
        used_columns(source, &stand_in)?;
        let plan = PrivateBoundsPlan::new(options.epsilon, share, columns.len())?;
        let grids: Vec<BoundsGrid> = columns
            .iter()
            .map(|column| BoundsGrid::log_scale(type_range(&column.data_type), column.kind == ColumnKind::Integer))
            .collect();
        let counts = grid_counts(source, &columns, &grids, progress)?;
        let mut released = Vec::with_capacity(columns.len());
        let mut reported = Vec::with_capacity(columns.len());
        for (index, ((column, grid), counts)) in columns.iter().zip(&grids).zip(&counts).enumerate() {
            let ends = plan.release_column(grid, counts, key, index);
            released.push(ColumnBounds::new(&column.name, ends.lo, ends.hi)?);
            reported.push(ReleasedColumnBounds {
                column: column.name.clone(),
                lo: ends.lo,
                hi: ends.hi,
                epsilon: 2.0 * plan.end_epsilon(),
            });
        }
        let names: Vec<String> = columns.iter().map(|column| column.name.clone()).collect();
        let budget = plan.budget(&names);
        Ok(Some(PrivateBounds {
            report: PrivateBoundsReport::new(share, budget.spent(), reported),
            budget,
            released,
            mechanism_epsilon: plan.mechanism_epsilon(),
        }))
    }

    /// The options the mechanism runs with: the released bounds beside the public ones, on (1 − SHARE)·ε.
    pub fn mechanism_options(&self, options: &SynthOptions) -> SynthOptions {
        let mut mechanism = options.clone();
        mechanism.bounds.extend(self.released.iter().cloned());
        mechanism.epsilon = self.mechanism_epsilon;
        mechanism
    }

    /// The run's budget: the bounds' spends, then the mechanism's, against the whole ε (pure ε-DP
    /// mechanisms only, [`SynthOptions::validate`]).
    pub fn composed(&self, mechanism: Budget) -> Budget {
        let mut budget = self.budget.clone();
        budget.delta = mechanism.delta;
        budget.spends.extend(mechanism.spends);
        budget
    }

    /// What the report's guarantee says of the released bounds.
    pub fn public_inputs_note(&self) -> String {
        let names: Vec<&str> = self.released.iter().map(|bounds| bounds.column.as_str()).collect();
        format!(
            "except the bounds of {}: released from {} of epsilon (private_bounds)",
            names.join(", "),
            crate::error::compact_number(self.report.share)
        )
    }
}
