//! The flags of covloss and microagg, each a config key of the same name: the public encoding of the
//! columns both read ([`EncodingArgs`]), then each one's own ([`MicroaggArgs`], [`CovlossArgs`]). Each is
//! refused where its mechanism does not run, and resolved into its options where it does.

use clap::Args;

use super::options::{CovlossOptions, MicroaggOptions};
use super::{CellsFrom, CovlossSettings, Damping};
use crate::binner::device::DeviceChoice;
use crate::encoding::{BinCount, CategoryList, EncodingSpec, Unlisted};
use crate::error::{Error, Result};
use crate::mechanism::args::{refuse_first, CommonFlags, Mechanism};

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Encoded columns (--mechanism covloss and microagg)")]
pub struct EncodingArgs {
    /// covloss and microagg: one-hot a numeric column over K equal bins of its public --bounds (repeatable).
    #[arg(long = "bins", value_name = "COLUMN=K")]
    pub bins: Vec<BinCount>,
}

impl EncodingArgs {
    /// Refuses the encoding's flags where neither covloss nor microagg runs, and where one does the common
    /// flags it has no use for (`--device gpu`, `--root-share`) or needs (`--columns`).
    pub fn check(&self, common: &CommonFlags) -> Result<()> {
        let encoded = common.chosen.runs.is_encoded();
        let given = !self.bins.is_empty();
        refuse_first(&[
            (
                common.device == Some(DeviceChoice::Gpu) && encoded,
                "--device gpu applies to --mechanism pmm, lowdim and pe; covloss and microagg run on the CPU only: give \
                 --device cpu or auto",
            ),
            (given && !encoded, "--bins applies to --mechanism covloss and microagg only"),
            (
                common.root_share.is_some() && encoded,
                "--root-share applies to --mechanism pmm, psmm and lowdim; covloss runs under replace (n public) and microagg releases no noise",
            ),
            (
                common.columns.is_none() && encoded,
                "--mechanism covloss and microagg need --columns (bits, categorical columns with --categories, \
                 numeric columns with --bins and --bounds)",
            ),
        ])
    }

    /// The public encoding of the used columns, with the run's category lists and bounds.
    pub fn options(self, common: &CommonFlags, categories: &[CategoryList], unlisted: Unlisted) -> EncodingSpec {
        EncodingSpec {
            columns: common.columns.map(<[String]>::to_vec).unwrap_or_default(),
            categories: categories.to_vec(),
            bins: self.bins,
            bounds: common.bounds.to_vec(),
            unlisted,
        }
    }
}

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "microagg (--mechanism microagg)")]
pub struct MicroaggArgs {
    /// microagg: number of groups k; each released centroid averages at least ⌊n/k⌋ rows.
    #[arg(long)]
    pub k: Option<u64>,
    /// microagg: the net's cell budget, ⌊√k⌋ as the proof needs or k as the printed algorithm [default: sqrt-k].
    #[arg(long, value_enum)]
    pub cells_from: Option<CellsFrom>,
}

impl MicroaggArgs {
    /// Refuses microagg's flags where it does not run, and a missing `--k` where it does.
    pub fn check(&self, common: &CommonFlags) -> Result<()> {
        let runs_microagg = common.chosen.runs == Mechanism::Microagg;
        refuse_first(&[
            (
                (self.k.is_some() || self.cells_from.is_some()) && !runs_microagg,
                "--k and --cells-from apply to --mechanism microagg only",
            ),
            (
                self.k.is_none() && runs_microagg,
                "--mechanism microagg needs --k K, the number of groups (each of at least n/k rows)",
            ),
        ])
    }

    /// microagg's options on `encoding` (after [`Self::check`], which requires `--k`).
    pub fn options(self, encoding: EncodingSpec) -> MicroaggOptions {
        MicroaggOptions {
            encoding,
            groups: self.k.expect("required by check"),
            cells_from: self.cells_from.unwrap_or(CellsFrom::SqrtK),
        }
    }
}

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "covloss (--mechanism covloss)")]
pub struct CovlossArgs {
    /// covloss: mesh α of the lattice net [default: (ln n)^(-1/4)].
    #[arg(long)]
    pub covloss_alpha: Option<f64>,
    /// covloss: dimension t of the spectral subspace [default: ⌊ln √n / ln(7/α)⌋, at most p].
    #[arg(long)]
    pub covloss_t: Option<usize>,
    /// covloss: damping threshold b, `paper` ((p√n/ε)^(1/2)), `cells` (n/(2s)) or a number [default: cells].
    #[arg(long, value_name = "paper|cells|B")]
    pub damping: Option<Damping>,
    /// covloss: relative ε shares of the second moment, the weights and the centroids [default: 1,1,1].
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub covloss_shares: Option<Vec<f64>>,
}

impl CovlossArgs {
    /// Refuses covloss's flags where it does not run.
    pub fn check(&self, common: &CommonFlags) -> Result<()> {
        let given = self.covloss_alpha.is_some()
            || self.covloss_t.is_some()
            || self.damping.is_some()
            || self.covloss_shares.is_some();
        refuse_first(&[(
            given && common.chosen.runs != Mechanism::Covloss,
            "--covloss-alpha, --covloss-t, --damping and --covloss-shares apply to --mechanism covloss only",
        )])
    }

    /// covloss's options on `encoding`, every default applied.
    pub fn options(self, encoding: EncodingSpec) -> Result<CovlossOptions> {
        let shares = match self.covloss_shares.as_deref() {
            None => CovlossSettings::DEFAULT.shares,
            Some(&[a, b, c]) => [a, b, c],
            Some(other) => {
                return Err(Error::bad_input(format!(
                    "--covloss-shares needs three numbers (second moment, weights, centroids), got {other:?}"
                )))
            }
        };
        let settings = CovlossSettings {
            alpha: self.covloss_alpha,
            t: self.covloss_t,
            damping: self.damping.unwrap_or(CovlossSettings::DEFAULT.damping),
            shares,
        };
        Ok(CovlossOptions { encoding, settings })
    }
}
