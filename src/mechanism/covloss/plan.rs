//! covloss and microagg in the shape of every mechanism ([`crate::mechanism::Plan`]): the plan of either
//! algorithm from public inputs only (n from the input's metadata, public under replace; p from the
//! public encoding of the schema; ε), and its release through the data pass: the encoded rows, their
//! exact pair counts (one AND + popcount pass, shared by the release and the owner-only covariance
//! loss), then the weighted points.

use super::moments::{covariance_loss, pair_counts};
use super::points::WeightedPoints;
use super::{CovlossPlan, MicroaggPlan};
use crate::binner::pass::DataPass;
use crate::binner::ScanStats;
use crate::encoding::decode::valid_under_independent_rounding;
use crate::encoding::Encoding;
use crate::error::{Error, Result};
use crate::mechanism::{AccuracyBound, MechanismOptions, MechanismParameters, PublicInputs, Release, ReleasedMeasure};
use crate::privacy::{Budget, RunSeeds};
use crate::progress::Timings;

/// The binner line of the report: the encoded rows are counted on the CPU.
const BINNING: &str = "cpu: bit planes, AND + popcount";

/// One of the two algorithms, with the public encoding it reads the table through.
pub struct EncodedPlan {
    pub encoding: Encoding,
    pub algorithm: Algorithm,
    epsilon: f64,
}

pub enum Algorithm {
    /// Algorithm 2: pure ε-DP under replace.
    Covloss(Box<CovlossPlan>),
    /// Algorithm 1: (n/k)-anonymous, not DP.
    Microagg(MicroaggPlan),
}

impl EncodedPlan {
    /// The plan of `options` (covloss or microagg) for the public n and the public encoding.
    pub fn new(public: &PublicInputs, options: &MechanismOptions) -> Result<Self> {
        let encoding = public
            .encoding
            .ok_or_else(|| Error::internal("covloss and microagg are planned on a resolved encoding"))?
            .clone();
        let rows = public.file_rows;
        let algorithm = match options {
            MechanismOptions::Covloss(covloss) => Algorithm::Covloss(Box::new(CovlossPlan::new(
                rows,
                encoding.bits,
                public.epsilon,
                &covloss.settings,
            )?)),
            MechanismOptions::Microagg(microagg) => {
                Algorithm::Microagg(MicroaggPlan::new(rows, encoding.bits, microagg.groups, microagg.cells_from)?)
            }
            other => return Err(Error::internal(format!("{} is not an encoded mechanism", other.name()))),
        };
        Ok(EncodedPlan {
            encoding,
            algorithm,
            epsilon: public.epsilon,
        })
    }

    /// The release: the encoded rows, then the weighted points of the algorithm. Across ranks (covloss
    /// only) each rank reads its share of the rows and sums what it counts from them over the ranks, so
    /// every rank makes the single machine's release.
    pub fn release(&self, data: &DataPass, seeds: &RunSeeds, timings: &mut Timings) -> Result<Release> {
        if data.ranks.is_some() && matches!(self.algorithm, Algorithm::Microagg(_)) {
            return Err(Error::internal("microagg groups the rows themselves: it does not run across ranks"));
        }
        let rows = timings.time("encode", || data.bits(&self.encoding))?;
        let sum_over_ranks = |counts: &mut [u64]| data.sum_over_ranks(counts);
        let (points, budget, mut parameters, exact) = timings.time("release", || -> Result<_> {
            let exact = pair_counts(&rows).summed_with(&sum_over_ranks);
            Ok(match &self.algorithm {
                Algorithm::Covloss(plan) => (
                    plan.release(&rows, &exact, &seeds.noise, &sum_over_ranks)?,
                    plan.budget(),
                    MechanismParameters::Covloss(Box::new(plan.parameters.clone())),
                    exact,
                ),
                Algorithm::Microagg(plan) => (
                    plan.release(&rows, &exact)?,
                    // Nothing noisy is released: no spend (the guarantee is anonymity, stated below).
                    Budget::new(self.epsilon),
                    MechanismParameters::Microagg(plan.parameters.clone()),
                    exact,
                ),
            })
        })?;
        let decodable = Some(decodable_share(&self.encoding, &points));
        match &mut parameters {
            MechanismParameters::Covloss(covloss) => covloss.independent_rounding_decodable_rows = decodable,
            MechanismParameters::Microagg(microagg) => microagg.independent_rounding_decodable_rows = decodable,
            _ => {}
        }
        let n = exact.rows;
        Ok(Release {
            mechanism: match self.algorithm {
                Algorithm::Covloss(_) => "covloss",
                Algorithm::Microagg(_) => "microagg",
            },
            covariance_loss: Some(covariance_loss(&exact, &points)),
            measure: ReleasedMeasure::Encoded { points, rows: n },
            budget,
            parameters,
            root_count: n,
            root_count_is: "the row count n of the input's metadata, public (replace relation / anonymity)",
            accuracy: AccuracyBound {
                expected_w1_bound: 1.0,
                units: "none: the paper bounds average squared d-way marginal errors, not W1",
                n,
                formula: "trivial (the diameter of the normalised cube); the paper's marginal bounds \
                    32^d (loglog n/log n + p/(eps sqrt n) + 1/m) have constants that make them vacuous at every \
                    feasible n (docs/mechanisms/covloss.md); dpsynth eval reports mse_1..mse_3",
                holds_for_table: true,
            },
            anonymity: match &self.algorithm {
                Algorithm::Covloss(_) => None,
                Algorithm::Microagg(plan) => Some(format!(
                    "({} / {})-anonymity: every released centroid is the exact mean of at least {} input rows \
                     (paper Algorithm 1). NOT differential privacy: the release can reveal facts about individuals \
                     (for example a bit shared by a whole group), so it is not fit for release where DP is required",
                    plan.rows, plan.groups, plan.parameters.anonymity
                )),
            },
            scan: ScanStats {
                rows_read: n,
                rows_binned: n,
                rows_dropped: 0,
                rows_clamped: 0,
                clamped_values: vec![0; self.encoding.columns.len()],
            },
            binning: BINNING.to_string(),
            output_phase: "sample",
        })
    }
}

/// Σ_j ŵ_j Π_blocks P(independent rounding sets exactly one bit of the block).
fn decodable_share(encoding: &Encoding, points: &WeightedPoints) -> f64 {
    let blocks = encoding.one_hot_blocks();
    (0..points.len())
        .map(|j| {
            let point = points.point(j);
            points.weights[j]
                * blocks
                    .iter()
                    .map(|block| valid_under_independent_rounding(&point[block.clone()]))
                    .product::<f64>()
        })
        .sum()
}
