//! The settings of a `synth` run, with documented defaults, and their config-file twin (TOML).
//!
//! Every command-line option has a key of the same name in the config file (`--root-share` is
//! `root-share`); bounds go in a `[bounds]` table, `column = [lo, hi]`. The command line wins over the file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::binner::NullPolicy;
use crate::geometry::bounds::ColumnBounds;
use crate::mechanism::pmm::consistency::{ConsistencyRule, DEFAULT_CONSISTENCY};
use crate::error::{Error, Result};
use crate::privacy::{check_epsilon, Neighbours, DEFAULT_ROOT_SHARE};
use crate::sampler::Placement;

/// The name the command line uses for an option's value (for messages and reports).
pub fn value_name<T: clap::ValueEnum>(value: &T) -> String {
    value
        .to_possible_value()
        .map_or_else(String::new, |possible| possible.get_name().to_string())
}

/// The mechanisms `--mechanism` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Private Measure Mechanism: noisy counts on a dyadic tree (the default).
    Pmm,
    /// Private Signed Measure Mechanism: noisy counts on m equal cubes, projected to a probability measure.
    Psmm,
    /// Private PCA down to d' dimensions, then PMM (or PSMM) there.
    Lowdim,
}

/// The mechanism `lowdim` runs on the projected coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum InnerMechanism {
    Pmm,
    Psmm,
}

/// The subspace dimension d' of `lowdim`: given, or chosen privately from the noisy spectrum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "TargetDimSetting")]
pub enum TargetDim {
    Fixed(usize),
    Auto,
}

impl std::str::FromStr for TargetDim {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        if text == "auto" {
            return Ok(TargetDim::Auto);
        }
        match text.parse::<usize>() {
            Ok(dims) if dims >= 1 => Ok(TargetDim::Fixed(dims)),
            _ => Err(format!("target dimension must be a positive integer or 'auto', got '{text}'")),
        }
    }
}

/// The config file spells d' as an integer or the string "auto".
#[derive(Deserialize)]
#[serde(untagged)]
enum TargetDimSetting {
    Dims(usize),
    Word(String),
}

impl TryFrom<TargetDimSetting> for TargetDim {
    type Error = String;

    fn try_from(setting: TargetDimSetting) -> std::result::Result<Self, String> {
        match setting {
            TargetDimSetting::Dims(dims) => dims.to_string().parse(),
            TargetDimSetting::Word(word) => word.parse(),
        }
    }
}

/// Where binning runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceChoice {
    /// A real GPU when there is one, else the CPU (a software adapter is never chosen automatically).
    Auto,
    Cpu,
    /// A GPU adapter (a software one such as lavapipe included); fails when there is none.
    Gpu,
}

/// Everything a `synth` run needs besides its input and output paths.
#[derive(Clone, Debug)]
pub struct SynthOptions {
    pub epsilon: f64,
    /// Public bounds, one per column used; the columns are those named here.
    pub bounds: Vec<ColumnBounds>,
    pub mechanism: Mechanism,
    /// PSMM's number of equal cubes m (rounded to a whole number per axis); `None` takes the paper's m ≈ εn.
    pub cells: Option<u64>,
    /// lowdim's d'.
    pub target_dim: Option<TargetDim>,
    /// lowdim's mechanism in d' dimensions.
    pub inner_mechanism: InnerMechanism,
    /// lowdim under add-remove: share of ε spent on a noisy n (required there; lowdim has no default).
    pub noisy_n_share: Option<f64>,
    pub neighbours: Neighbours,
    /// Leaf depth r; `None` chooses it (from the public n, or from a released n̂).
    pub depth: Option<u32>,
    /// Share of ε spent on n̂ when the depth is chosen under add-remove.
    pub root_share: f64,
    /// Output rows; `None` gives the released (consistent) root count.
    pub rows: Option<u64>,
    /// Makes the run reproducible and therefore unfit for release.
    pub seed: Option<u64>,
    pub nulls: NullPolicy,
    pub consistency: ConsistencyRule,
    pub placement: Placement,
    pub device: DeviceChoice,
    /// Worker threads; `None` uses every core.
    pub threads: Option<usize>,
    /// Bytes the cell arrays may use; `None` is half the machine's memory.
    pub memory_limit: Option<u64>,
}

impl SynthOptions {
    /// Options with every default, for ε and the public bounds.
    pub fn new(epsilon: f64, bounds: Vec<ColumnBounds>) -> Self {
        SynthOptions {
            epsilon,
            bounds,
            mechanism: Mechanism::Pmm,
            cells: None,
            target_dim: None,
            inner_mechanism: InnerMechanism::Pmm,
            noisy_n_share: None,
            neighbours: Neighbours::DEFAULT,
            depth: None,
            root_share: DEFAULT_ROOT_SHARE,
            rows: None,
            seed: None,
            nulls: NullPolicy::DEFAULT,
            consistency: DEFAULT_CONSISTENCY,
            placement: Placement::DEFAULT,
            device: DeviceChoice::Auto,
            threads: None,
            memory_limit: None,
        }
    }

    /// The checks that need no data.
    pub fn validate(&self) -> Result<()> {
        check_epsilon(self.epsilon)?;
        if self.bounds.is_empty() {
            return Err(Error::bad_input("no columns: give --columns with --bounds for each (or a config file with [bounds])"));
        }
        if !(self.root_share > 0.0 && self.root_share < 1.0) {
            return Err(Error::bad_input(format!(
                "--root-share must be strictly between 0 and 1, got {}",
                self.root_share
            )));
        }
        let uses_cells = self.mechanism == Mechanism::Psmm
            || (self.mechanism == Mechanism::Lowdim && self.inner_mechanism == InnerMechanism::Psmm);
        if self.cells.is_some() && !uses_cells {
            return Err(Error::bad_input(
                "--cells applies to --mechanism psmm (or lowdim with --inner-mechanism psmm) only",
            ));
        }
        if self.cells == Some(0) {
            return Err(Error::bad_input("--cells must be at least 1"));
        }
        if self.mechanism != Mechanism::Lowdim
            && (self.target_dim.is_some()
                || self.noisy_n_share.is_some()
                || self.inner_mechanism != InnerMechanism::Pmm)
        {
            return Err(Error::bad_input(
                "--target-dim, --inner-mechanism and --noisy-n-share apply to --mechanism lowdim only",
            ));
        }
        if let Some(share) = self.noisy_n_share {
            if !(share > 0.0 && share < 1.0) {
                return Err(Error::bad_input(format!(
                    "--noisy-n-share must be strictly between 0 and 1, got {share}"
                )));
            }
        }
        if self.threads == Some(0) {
            return Err(Error::bad_input("--threads must be at least 1"));
        }
        if self.neighbours == Neighbours::Replace && self.nulls == NullPolicy::Drop {
            return Err(Error::bad_input(
                "--nulls drop cannot be used with --neighbours replace: dropping rows makes n depend on the data, \
                 while replace treats n as public; use --neighbours add-remove, or clean the file first",
            ));
        }
        Ok(())
    }
}

/// The config-file twin of the command line. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfigFile {
    pub output: Option<PathBuf>,
    pub epsilon: Option<f64>,
    pub columns: Option<Vec<String>>,
    pub bounds: Option<BTreeMap<String, [f64; 2]>>,
    pub mechanism: Option<Mechanism>,
    pub cells: Option<u64>,
    pub target_dim: Option<TargetDim>,
    pub inner_mechanism: Option<InnerMechanism>,
    pub noisy_n_share: Option<f64>,
    pub neighbours: Option<Neighbours>,
    pub depth: Option<u32>,
    pub root_share: Option<f64>,
    pub rows: Option<u64>,
    pub seed: Option<u64>,
    pub nulls: Option<NullPolicy>,
    pub consistency: Option<ConsistencyRule>,
    pub placement: Option<Placement>,
    pub device: Option<DeviceChoice>,
    pub threads: Option<usize>,
    pub memory_limit: Option<u64>,
    pub report: Option<PathBuf>,
    pub diagnostics: Option<PathBuf>,
    pub quiet: Option<bool>,
}

impl ConfigFile {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            Error::in_file(path, format!("cannot read the config file: {error}"))
        })?;
        toml::from_str(&text)
            .map_err(|error| Error::in_file(path, format!("invalid config file: {error}")))
    }

    /// The bounds table as a list, each validated.
    pub fn bounds_list(&self, path: &Path) -> Result<Vec<ColumnBounds>> {
        let Some(table) = &self.bounds else {
            return Ok(Vec::new());
        };
        table
            .iter()
            .map(|(column, [lo, hi])| {
                ColumnBounds::new(column.clone(), *lo, *hi)
                    .map_err(|error| Error::in_file(path, error))
            })
            .collect()
    }
}

/// Chooses the bounds of the columns used: the `--columns` list (or every column with bounds when it
/// is absent), each of which must have public bounds.
pub fn bounds_for_columns(
    columns: Option<&[String]>,
    bounds: &[ColumnBounds],
) -> Result<Vec<ColumnBounds>> {
    let Some(columns) = columns else {
        return Ok(bounds.to_vec());
    };
    columns
        .iter()
        .map(|column| {
            bounds.iter().find(|bounds| &bounds.column == column).cloned().ok_or_else(|| {
                Error::bad_input(format!(
                    "column '{column}' has no public bounds: give --bounds {column}=LO:HI (bounds are never taken from the data)"
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_file_keys_mirror_the_options() {
        let config: ConfigFile = toml::from_str(
            r#"
            epsilon = 0.5
            columns = ["a"]
            neighbours = "replace"
            root-share = 0.1
            consistency = "proportional"
            placement = "centre"
            nulls = "drop"
            device = "cpu"
            target-dim = "auto"
            [bounds]
            a = [0, 10]
            b = [-1.5, 2]
            "#,
        )
        .unwrap();
        assert_eq!(config.neighbours, Some(Neighbours::Replace));
        assert_eq!(config.consistency, Some(ConsistencyRule::Proportional));
        assert_eq!(config.target_dim, Some(TargetDim::Auto));
        let fixed: ConfigFile = toml::from_str("target-dim = 3").unwrap();
        assert_eq!(fixed.target_dim, Some(TargetDim::Fixed(3)));
        assert!(toml::from_str::<ConfigFile>("target-dim = 0").is_err());
        let bounds = config.bounds_list(Path::new("run.toml")).unwrap();
        assert_eq!(bounds.len(), 2);
        let chosen = bounds_for_columns(config.columns.as_deref(), &bounds).unwrap();
        assert_eq!(chosen, vec![ColumnBounds::new("a", 0.0, 10.0).unwrap()]);
        assert!(
            toml::from_str::<ConfigFile>("epsilonn = 1").is_err(),
            "unknown keys are errors"
        );
    }

    #[test]
    fn a_column_without_bounds_is_an_error() {
        let bounds = vec![ColumnBounds::new("a", 0.0, 1.0).unwrap()];
        let error = bounds_for_columns(Some(&["a".into(), "b".into()]), &bounds).unwrap_err();
        assert!(error.to_string().contains("'b' has no public bounds"));
    }
}
