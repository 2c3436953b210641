//! The two outputs besides the table, kept apart (docs/privacy.md):
//! - [`RunReport`]: publishable. Only public inputs and values computed from the release.
//! - [`Diagnostics`]: for the data owner only. True counts, clamped/dropped rows, timings, memory.

use serde::Serialize;

use crate::binner::ScanStats;
use crate::mechanism::{AccuracyBound, MechanismParameters};
use crate::progress::PhaseTiming;

#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub tool: ToolInfo,
    pub mechanism: &'static str,
    pub guarantee: Guarantee,
    pub input: InputInfo,
    /// Set when `--private-bounds` released some columns' bounds: the share, and each column's released
    /// bounds (also in `input.columns`, where the mechanism read them as public).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_bounds: Option<PrivateBoundsReport>,
    pub parameters: MechanismParameters,
    pub release: ReleaseInfo,
    pub accuracy: AccuracyBound,
    pub device: String,
    /// Set for a table drawn again from a fitted release (the Python package's `sample`): which draw, and
    /// that it spent nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<SampleInfo>,
}

/// A further draw from a released measure: post-processing, so no budget is spent and the guarantee
/// above still holds for every draw together.
#[derive(Clone, Debug, Serialize)]
pub struct SampleInfo {
    /// 0 for the first table drawn after the release, then 1, 2, ...
    pub draw: u64,
    /// Always 0: the draw reads the release, not the data.
    pub epsilon_spent_by_this_draw: f64,
    pub note: &'static str,
    /// The saved release the draw read (`dpsynth sample`, the Python package's `load`), as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saved_release: Option<String>,
}

impl SampleInfo {
    pub fn post_processing(draw: u64) -> Self {
        SampleInfo {
            draw,
            epsilon_spent_by_this_draw: 0.0,
            note: "drawn from the released measure (post-processing): the data was not read again and no budget \
                   was spent; the guarantee covers every draw together",
            saved_release: None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ToolInfo {
    pub name: &'static str,
    pub version: &'static str,
    pub arrow_parquet: &'static str,
}

impl ToolInfo {
    pub fn current() -> Self {
        ToolInfo { name: "dpsynth", version: env!("CARGO_PKG_VERSION"), arrow_parquet: "60" }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Guarantee {
    /// (ε, δ)-differential privacy; δ = 0 (pure ε-DP) for every mechanism but PE.
    pub epsilon: f64,
    pub delta: f64,
    /// ε actually spent with the rounded noise scales (never above `epsilon`).
    pub epsilon_spent: f64,
    /// Each release of the run and the ε it spent, in the plan's order: pure ε composes by summing, so
    /// these add up to `epsilon_spent` (an (ε, δ) release, PE's, states its own accounting instead).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub epsilon_breakdown: Vec<EpsilonPart>,
    pub neighbours: String,
    /// What the guarantee treats as public.
    pub public_inputs: Vec<String>,
    /// False for a run with `--seed` (its noise is reproducible by anyone who knows the seed), and for a
    /// release that is not differentially private (`microagg`).
    pub fit_for_release: bool,
    pub noise: &'static str,
    /// Set only for a release whose guarantee is anonymity, NOT differential privacy (`microagg`: then
    /// `epsilon`, `delta` and `epsilon_spent` are null).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anonymity: Option<String>,
}

/// One release of a run and its share of ε.
#[derive(Clone, Debug, Serialize)]
pub struct EpsilonPart {
    pub release: String,
    pub epsilon: f64,
    /// `epsilon` as a share of the run's ε.
    pub share: f64,
    /// The neighbouring relation its noise is calibrated to (`add-remove` or `replace`), the run's.
    pub relation: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct InputInfo {
    /// The input as given: a file, a directory or a glob.
    pub file: String,
    /// How many Parquet files it named (1 for a plain file).
    pub files: usize,
    pub columns: Vec<ColumnInfo>,
    /// Columns of the input left out on purpose (`--exclude`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ColumnInfo {
    pub name: String,
    pub data_type: String,
    pub lo: f64,
    pub hi: f64,
    /// How the column became numbers: bits for an encoded mechanism (covloss, microagg), codes for a
    /// categorical or Boolean column, and whether null is a value of its domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
}

/// The bounds `--private-bounds` released, and how.
#[derive(Clone, Debug, Serialize)]
pub struct PrivateBoundsReport {
    /// SHARE: the fraction of epsilon spent on the bounds.
    pub share: f64,
    /// What the bounds spent (SHARE·epsilon, less the rounding of the scales).
    pub epsilon: f64,
    pub method: &'static str,
    pub clamping: &'static str,
    pub columns: Vec<ReleasedColumnBounds>,
}

impl PrivateBoundsReport {
    pub fn new(share: f64, epsilon: f64, columns: Vec<ReleasedColumnBounds>) -> Self {
        PrivateBoundsReport {
            share,
            epsilon,
            method: "per column and end, the exponential mechanism (sampled exactly, by rejection with integer \
                     arithmetic) over the cells of the public grid {0, +-m*2^k: m in 1, 1.25, 1.5, 1.75; k in -32..62} \
                     in the column's stored unit, with the rank utility -max(0, t - #{x < c_i+1}, #{x < c_i} - t) \
                     (sensitivity 1 under add-remove and replace), aiming at the t-th value from each end, \
                     t = min(max(ceil(n/1000), tau), floor(n/2)); the share is split evenly over the columns and \
                     their two ends",
            clamping: "values outside the released bounds are clamped to them, as outside public bounds",
            columns,
        }
    }
}

/// One column's released bounds, in its stored unit, and the epsilon they spent (both ends).
#[derive(Clone, Debug, Serialize)]
pub struct ReleasedColumnBounds {
    pub column: String,
    pub lo: f64,
    pub hi: f64,
    pub epsilon: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReleaseInfo {
    /// n̂ under add-remove (released), the public n under replace.
    pub root_count: u64,
    pub root_count_is: &'static str,
    pub synthetic_rows: u64,
}

/// Owner-only facts about the run. Not differentially private; never publish.
#[derive(Clone, Debug, Serialize)]
pub struct Diagnostics {
    pub warning: &'static str,
    pub true_rows: u64,
    pub rows_read: u64,
    pub rows_dropped: u64,
    pub rows_clamped: u64,
    pub clamped_values: Vec<ClampedColumn>,
    /// Wall-clock seconds per phase, in the order the phases ran.
    pub timings_seconds: Vec<PhaseTiming>,
    pub threads: usize,
    pub binning: String,
    pub peak_memory_bytes: Option<u64>,
    /// Whether the input's pages carry CRC checksums (then verified as read). Without them a corrupt
    /// page can decode to wrong values unnoticed.
    pub input_page_checksums: bool,
    /// covloss and microagg: the covariance loss ‖S − Σ_j w_j ỹ_j ỹ_jᵀ‖_F of the released points against
    /// the data's exact second moment (rescaled units, x̃ = x/√p).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub covariance_loss: Option<f64>,
    /// A run across ranks (`mpirun`): each rank's share of the work.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankInfo>,
}

/// One rank's share of a distributed run (owner-only: its true rows are not private).
#[derive(Clone, Debug, Serialize)]
pub struct RankInfo {
    pub rank: usize,
    pub row_groups: u64,
    pub rows_read: u64,
    /// Leaf counts it received from the reduce-scatter (8 bytes each, from every rank); 0 where every rank
    /// makes the whole release (lowdim, PSMM, PE).
    pub leaves_owned: u64,
    pub rows_written: u64,
    pub seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClampedColumn {
    pub column: String,
    pub clamped: u64,
}

pub const DIAGNOSTICS_WARNING: &str =
    "NOT PRIVATE: true counts and timings about the sensitive data, for the data owner only. Never publish this file.";

impl Diagnostics {
    pub fn new(stats: &ScanStats, columns: &[String], threads: usize, binning: String) -> Self {
        Diagnostics {
            warning: DIAGNOSTICS_WARNING,
            true_rows: stats.rows_binned,
            rows_read: stats.rows_read,
            rows_dropped: stats.rows_dropped,
            rows_clamped: stats.rows_clamped,
            clamped_values: columns
                .iter()
                .zip(&stats.clamped_values)
                .map(|(column, &clamped)| ClampedColumn { column: column.clone(), clamped })
                .collect(),
            timings_seconds: Vec::new(),
            threads,
            binning,
            peak_memory_bytes: None,
            input_page_checksums: false,
            covariance_loss: None,
            ranks: Vec::new(),
        }
    }
}

/// The prefix of the keys every synthetic Parquet file carries in its footer ([`TableMetadata`]).
pub const METADATA_PREFIX: &str = "dpsynth.";

/// The key of the public domain in a synthetic file's footer: `{"bounds": {column: [lo, hi]}, "categories":
/// {column: [names]}}`, what `eval` compares the file with when it is given no bounds.
pub const DOMAIN_KEY: &str = "dpsynth.domain";

/// What a synthetic table says of itself in its Parquet footer (key-value metadata), so that the file
/// tells what it is wherever it goes: that it is synthetic, what made it, its guarantee and its public
/// domain. Public facts only, nothing about the data (docs/usage.md, "What a synthetic file says").
pub struct TableMetadata<'a> {
    pub mechanism: &'a str,
    /// The mechanism's settings in a line (`MechanismParameters::summary`).
    pub settings: String,
    /// `None` for a release that is not differentially private (microagg): then `anonymity` says what it is.
    pub epsilon_delta: Option<(f64, f64)>,
    pub anonymity: Option<&'a str>,
    /// `add-remove` or `replace`.
    pub neighbours: String,
    /// A run with `--seed`: its time is left out, so that the same seed writes the same bytes.
    pub seeded: bool,
    pub domain: PublicDomain,
}

/// The public domain of a table's columns, as its footer gives it under [`DOMAIN_KEY`]: each number's,
/// date's or timestamp's bounds (in its stored unit) and each categorical column's list, in column order.
#[derive(Default)]
pub struct PublicDomain {
    bounds: serde_json::Map<String, serde_json::Value>,
    categories: serde_json::Map<String, serde_json::Value>,
}

impl PublicDomain {
    pub fn add_bounds(&mut self, column: &str, lo: f64, hi: f64) {
        self.bounds.insert(column.to_string(), serde_json::json!([lo, hi]));
    }

    pub fn add_categories(&mut self, column: &str, names: &[String]) {
        self.categories.insert(column.to_string(), serde_json::json!(names));
    }

    fn to_json(&self) -> String {
        serde_json::json!({ "bounds": self.bounds, "categories": self.categories }).to_string()
    }
}

impl TableMetadata<'_> {
    pub fn key_values(&self) -> Vec<(String, String)> {
        let mut pairs = vec![
            ("synthetic", "true".to_string()),
            ("tool", format!("dpsynth {}", env!("CARGO_PKG_VERSION"))),
            ("mechanism", self.mechanism.to_string()),
            ("settings", self.settings.clone()),
        ];
        match (self.epsilon_delta, self.anonymity) {
            (Some((epsilon, delta)), _) => {
                pairs.push(("epsilon", epsilon.to_string()));
                pairs.push(("delta", delta.to_string()));
                pairs.push(("neighbours", self.neighbours.clone()));
            }
            (None, anonymity) => {
                pairs.push(("guarantee", anonymity.unwrap_or("none").to_string()));
            }
        }
        match self.seeded {
            true => pairs
                .push(("seeded", "true: reproducible by anyone who knows the seed, NOT fit for release".to_string())),
            false => pairs.push(("released_at", release_time())),
        }
        let mut pairs: Vec<(String, String)> =
            pairs.into_iter().map(|(key, value)| (format!("{METADATA_PREFIX}{key}"), value)).collect();
        pairs.push((DOMAIN_KEY.to_string(), self.domain.to_json()));
        pairs
    }
}

/// Now, in RFC 3339 UTC to the second.
fn release_time() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64);
    chrono::DateTime::from_timestamp(seconds, 0)
        .map_or_else(|| seconds.to_string(), |time| time.format("%Y-%m-%dT%H:%M:%SZ").to_string())
}
