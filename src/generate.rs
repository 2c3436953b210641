//! Large synthetic test tables (`dpsynth generate`): d Float64 columns `x0..x{d-1}` in [0, 1], drawn
//! from a few laws that stress the mechanisms differently, written straight to Parquet.
//!
//! The table is streamed: row groups are generated a few at a time in the current rayon pool while the
//! previous few are encoded, so memory stays at about `2 × threads × row_group_rows × dims × 8` bytes
//! whatever the row count. Each row group draws from its own xoshiro256++ stream keyed by
//! (seed, row-group index), and the law's own parameters (cluster centres, the flat) from a stream
//! keyed by the seed alone, so the file is bit-identical whatever the thread count.
//!
//! Every column lies in [0, 1] by construction, so [`bounds_toml`] can state public bounds without
//! looking at the data. Only the Gaussian tails of [`Law::Mixture`] are clipped (see there).

use std::f64::consts::{FRAC_PI_2, TAU};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression as ParquetCompression, Encoding, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use rand_xoshiro::rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::io::staging::{commit_all, StagedFile};

/// Rows per row group unless the spec says otherwise: the Parquet writer's own default, large enough
/// that per-group overhead vanishes, small enough that readers have many groups to split.
pub const DEFAULT_ROW_GROUP_ROWS: usize = 1 << 20;

/// Most columns: a Parquet footer describes every column, and tools that read the table choke long before.
pub const MAX_DIMS: usize = 1 << 16;

/// Most values in one row group (2 GiB of doubles): a few row groups are held at once while they are drawn
/// and encoded, so this bounds the memory whatever `--dims` and `--row-group-rows` ask for.
pub const MAX_ROW_GROUP_VALUES: u64 = 1 << 28;

/// Most item probabilities of `latent-class:K` (K × dims doubles, 1 GiB), held for the whole run.
pub const MAX_LATENT_CLASS_PROBABILITIES: u64 = 1 << 27;

/// Number of Gaussian clusters of [`Law::Mixture`].
pub const MIXTURE_CLUSTERS: usize = 5;
/// Standard deviation of each mixture cluster, per coordinate.
pub const MIXTURE_SPREAD: f64 = 0.04;
/// Mixture centres are drawn uniformly in `[margin, 1 - margin]^d`: five spreads from every face, so
/// clipping the Gaussian tails to [0, 1] moves fewer than 3 values in 10^7.
pub const MIXTURE_CENTRE_MARGIN: f64 = 5.0 * MIXTURE_SPREAD;
/// [`Law::Skewed`] draws each coordinate as u^SKEWED_POWER with u uniform: a Beta(1/p, 1) law whose
/// density grows like x^(1/p − 1) near 0; with p = 4 half the mass lies below 1/16.
pub const SKEWED_POWER: i32 = 4;
/// [`Law::HeavyTailed`]'s tail index α: each coordinate is a Lomax (Pareto II) law of index α, truncated
/// to [0, 1]; at 1.5 its variance would be infinite without the truncation.
pub const HEAVY_TAILED_INDEX: f64 = 1.5;
/// [`Law::HeavyTailed`]'s Lomax scale: half the mass lies below 0.0059, 1% above 0.19, and the tail
/// reaches 1 (density ∝ (1 + x/scale)^−(α+1)), as delays do within wide public bounds.
pub const HEAVY_TAILED_SCALE: f64 = 0.01;
/// Half-width of the uniform noise added to every coordinate of [`Law::Subspace`] points: the points
/// lie within this distance (per coordinate) of the flat.
pub const SUBSPACE_NOISE: f64 = 0.01;

/// The law each row is drawn from, i.i.d.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Law {
    /// Uniform on [0, 1]^d: the easy case, every cell equally full.
    Uniform,
    /// [`MIXTURE_CLUSTERS`] Gaussian clusters with spread [`MIXTURE_SPREAD`] and weights ∝ 2^-k,
    /// centres fixed by the seed: mass concentrated in a few small regions, one of them light (3 %).
    /// Coordinates falling outside [0, 1] are clipped to it (rare, see [`MIXTURE_CENTRE_MARGIN`]).
    Mixture,
    /// Independent coordinates u^[`SKEWED_POWER`]: heavy concentration near 0, long thin tail to 1.
    Skewed,
    /// Truncated Lomax coordinates ([`HEAVY_TAILED_INDEX`], [`HEAVY_TAILED_SCALE`]): most mass in a sliver
    /// near 0, a polynomial tail to 1. Each coordinate's uniform is max(u₀, u_k)², u₀ shared by the row:
    /// still uniform, but large values come together (upper-tail dependence, as the delays of one flight).
    HeavyTailed,
    /// Uniform points on a box in a random `dim`-dimensional affine flat through the cube, plus
    /// uniform noise of half-width [`SUBSPACE_NOISE`]: data for the low-dimensional mechanism.
    /// Needs `1 <= dim < dims`.
    Subspace { dim: usize },
    /// 0/1 values from a latent-class model with `classes` classes (Dirichlet(1) mixing weights,
    /// Beta(½, ½) item probabilities, fixed by the seed): a low-rank Boolean law for the covariance-loss
    /// mechanisms (note on seed 004, §3.6). Needs `classes >= 1`.
    LatentClass { classes: usize },
    /// Uniform in the ℓ2 ball of centre (½, …, ½) and radius `radius`/2, `radius` in (0, 1]: `ball:1` is
    /// the ball inscribed in the cube, i.e. the unit disc of the Private Evolution paper's simulations
    /// mapped onto [0, 1]^d, and `ball:0.02` its radius-0.02 ball (Figure 4).
    Ball { radius: f64 },
}

/// Page compression of the written file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Compression {
    None,
    Snappy,
    /// zstd at level 1: the fast end, as a data pipeline would write.
    Zstd,
}

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateSpec {
    pub rows: u64,
    pub dims: usize,
    pub law: Law,
    pub seed: u64,
    pub compression: Compression,
    pub row_group_rows: usize,
}

/// What was written.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateSummary {
    pub rows: u64,
    pub row_groups: usize,
    /// Size of the finished file.
    pub bytes: u64,
}

#[derive(Debug)]
pub enum GenerateError {
    /// The spec (or a law / compression name) cannot be honoured; the text says which field and why.
    InvalidSpec(String),
    /// A file-system step failed on `path`.
    Io { path: PathBuf, step: &'static str, source: io::Error },
    /// Encoding or writing the Parquet data of `path` failed.
    Parquet { path: PathBuf, source: ParquetError },
    /// The output cannot be staged or moved into place (the message names it).
    Output(crate::error::Error),
}

impl fmt::Display for GenerateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GenerateError::InvalidSpec(reason) => write!(f, "invalid table spec: {reason}"),
            GenerateError::Io { path, step, source } => {
                write!(f, "{step} '{}': {source}", path.display())
            }
            GenerateError::Parquet { path, source } => {
                write!(f, "cannot write Parquet table '{}': {source}", path.display())
            }
            GenerateError::Output(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for GenerateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GenerateError::InvalidSpec(_) | GenerateError::Output(_) => None,
            GenerateError::Io { source, .. } => Some(source),
            GenerateError::Parquet { source, .. } => Some(source),
        }
    }
}

impl FromStr for Law {
    type Err = GenerateError;

    /// Parses `uniform`, `mixture`, `skewed`, `heavy-tailed`, `subspace:DIM`, `latent-class:K` or `ball:R`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let name = text.trim().to_ascii_lowercase();
        match name.as_str() {
            "uniform" => Ok(Law::Uniform),
            "mixture" => Ok(Law::Mixture),
            "skewed" => Ok(Law::Skewed),
            "heavy-tailed" => Ok(Law::HeavyTailed),
            _ if name.starts_with("latent-class:") => match name["latent-class:".len()..].trim().parse::<usize>() {
                Ok(classes) if classes >= 1 => Ok(Law::LatentClass { classes }),
                _ => Err(GenerateError::InvalidSpec(format!(
                    "law '{text}': the number of classes must be a whole number of at least 1, as in latent-class:4"
                ))),
            },
            _ if name.starts_with("ball:") => match name["ball:".len()..].trim().parse::<f64>() {
                Ok(radius) if radius > 0.0 && radius <= 1.0 => Ok(Law::Ball { radius }),
                _ => Err(GenerateError::InvalidSpec(format!(
                    "law '{text}': the ball's radius must be a number in (0, 1], as in ball:0.5"
                ))),
            },
            _ => {
                let dim = name.strip_prefix("subspace:").ok_or_else(|| {
                    GenerateError::InvalidSpec(format!(
                        "unknown law '{text}': expected uniform, mixture, skewed, heavy-tailed, subspace:DIM, latent-class:K or \
                         ball:R"
                    ))
                })?;
                match dim.trim().parse::<usize>() {
                    Ok(dim) if dim >= 1 => Ok(Law::Subspace { dim }),
                    _ => Err(GenerateError::InvalidSpec(format!(
                        "law '{text}': the flat's dimension must be a whole number of at least 1, as in subspace:2"
                    ))),
                }
            }
        }
    }
}

impl fmt::Display for Law {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Law::Uniform => f.write_str("uniform"),
            Law::Mixture => f.write_str("mixture"),
            Law::Skewed => f.write_str("skewed"),
            Law::HeavyTailed => f.write_str("heavy-tailed"),
            Law::Subspace { dim } => write!(f, "subspace:{dim}"),
            Law::LatentClass { classes } => write!(f, "latent-class:{classes}"),
            Law::Ball { radius } => write!(f, "ball:{radius}"),
        }
    }
}

impl FromStr for Compression {
    type Err = GenerateError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" | "uncompressed" => Ok(Compression::None),
            "snappy" => Ok(Compression::Snappy),
            "zstd" => Ok(Compression::Zstd),
            _ => {
                Err(GenerateError::InvalidSpec(format!("unknown compression '{text}': expected none, snappy or zstd")))
            }
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Snappy => "snappy",
            Compression::Zstd => "zstd",
        })
    }
}

/// Name of column `k`.
fn column_name(k: usize) -> String {
    format!("x{k}")
}

/// The public-bounds schema file for a generated table (every column x_k = [0, 1]), TOML text in the
/// format of dpsynth's config file.
pub fn bounds_toml(spec: &GenerateSpec) -> String {
    let names: Vec<String> = (0..spec.dims).map(column_name).collect();
    let quoted: Vec<String> = names.iter().map(|name| format!("\"{name}\"")).collect();
    let mut text = format!(
        "# Public bounds for a table made by `dpsynth generate` ({} rows, {} columns, law {}, seed {}).\n\
         # Every column lies in [0, 1] by construction of the generator, so these bounds are known\n\
         # without looking at the data.\n\
         columns = [{}]\n\n[bounds]\n",
        spec.rows,
        spec.dims,
        spec.law,
        spec.seed,
        quoted.join(", ")
    );
    for name in &names {
        text.push_str(&format!("{name} = [0.0, 1.0]\n"));
    }
    text
}

/// Writes the table `spec` describes to `path`, through a temporary file beside it that is renamed into
/// place only once complete (an existing file at `path` is replaced). Runs in the current rayon pool
/// (`pool.install(|| write_table(..))` to choose one); the bytes do not depend on the pool's size.
/// `rows = 0` writes a valid table with the schema and no row groups.
pub fn write_table(path: &Path, spec: &GenerateSpec) -> Result<GenerateSummary, GenerateError> {
    let (staged, summary) = stage_table(path, spec)?;
    commit_all(vec![staged]).map_err(GenerateError::Output)?;
    Ok(summary)
}

/// [`write_table`] up to the rename: the table complete under its temporary name, for the caller to commit
/// together with other outputs (removed if dropped uncommitted).
pub fn stage_table(path: &Path, spec: &GenerateSpec) -> Result<(StagedFile, GenerateSummary), GenerateError> {
    let sampler = Sampler::new(spec)?;
    if path.file_name().is_none() {
        return Err(GenerateError::InvalidSpec(format!("output path '{}' does not name a file", path.display())));
    }
    // Removed on every error path (and by the signal handler) until committed.
    let staged = StagedFile::new(path).map_err(GenerateError::Output)?;
    let file = OpenOptions::new().write(true).create_new(true).open(staged.temporary()).map_err(|source| {
        GenerateError::Io { path: staged.temporary().to_path_buf(), step: "cannot create temporary file", source }
    })?;
    let summary = write_row_groups(file, spec, &sampler)
        .map_err(|source| GenerateError::Parquet { path: path.to_path_buf(), source })?;
    Ok((staged, summary))
}

fn writer_properties(spec: &GenerateSpec) -> WriterProperties {
    let compression = match spec.compression {
        Compression::None => ParquetCompression::UNCOMPRESSED,
        Compression::Snappy => ParquetCompression::SNAPPY,
        Compression::Zstd => ParquetCompression::ZSTD(ZstdLevel::default()),
    };
    // Random doubles almost never repeat: a dictionary would only cost time before falling back.
    WriterProperties::builder()
        .set_compression(compression)
        .set_dictionary_enabled(false)
        .set_encoding(Encoding::PLAIN)
        .set_max_row_group_row_count(Some(spec.row_group_rows))
        .build()
}

fn schema(dims: usize) -> SchemaRef {
    Arc::new(Schema::new((0..dims).map(|k| Field::new(column_name(k), DataType::Float64, false)).collect::<Vec<_>>()))
}

/// Generates the next few row groups in parallel while the current few are encoded and written.
fn write_row_groups(file: File, spec: &GenerateSpec, sampler: &Sampler) -> Result<GenerateSummary, ParquetError> {
    let schema = schema(spec.dims);
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(writer_properties(spec)))?;
    let group_rows = spec.row_group_rows as u64;
    let groups = spec.rows.div_ceil(group_rows);
    let in_flight = rayon::current_num_threads().max(1) as u64;
    let generate = |first: u64| -> Result<Vec<RecordBatch>, ParquetError> {
        use rayon::prelude::*;
        (first..groups.min(first + in_flight))
            .into_par_iter()
            .map(|group| {
                let rows = group_rows.min(spec.rows - group * group_rows) as usize;
                sampler.row_group(spec.seed, group, rows, &schema)
            })
            .collect()
    };
    let mut next = 0;
    let mut pending = generate(next)?;
    while !pending.is_empty() {
        next += pending.len() as u64;
        let (written, upcoming) =
            rayon::join(|| pending.iter().try_for_each(|batch| writer.write(batch)), || generate(next));
        written?;
        pending = upcoming?;
    }
    let metadata = writer.finish()?;
    Ok(GenerateSummary { rows: spec.rows, row_groups: metadata.num_row_groups(), bytes: writer.bytes_written() as u64 })
}

/// Key of the stream the law's own parameters are drawn from; row groups use keys 0, 1, 2, …
const LAW_STREAM: u64 = u64::MAX;

/// The xoshiro256++ generator for `stream` under `seed`. Distinct (seed, stream) pairs give distinct
/// keys (two bijective SplitMix64 finalisers around an xor), expanded to 256 bits of state by SplitMix64.
fn stream_rng(seed: u64, stream: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(splitmix_finalise(splitmix_finalise(seed) ^ stream))
}

fn splitmix_finalise(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Uniform on [0, 1): the top 53 bits as a multiple of 2^-53.
#[inline(always)]
fn unit(rng: &mut Xoshiro256PlusPlus) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Two independent standard normals (Box–Muller); the first uniform is shifted to (0, 1] so ln is finite.
#[inline(always)]
fn normal_pair(rng: &mut Xoshiro256PlusPlus) -> (f64, f64) {
    let radius_uniform = ((rng.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64);
    let radius = (-2.0 * radius_uniform.ln()).sqrt();
    let (sin, cos) = (TAU * unit(rng)).sin_cos();
    (radius * cos, radius * sin)
}

/// A law with its seed-fixed parameters drawn.
enum Sampler {
    Uniform {
        dims: usize,
    },
    Mixture {
        centres: Vec<Vec<f64>>,
        cumulative_weights: Vec<f64>,
    },
    Skewed {
        dims: usize,
    },
    HeavyTailed {
        dims: usize,
    },
    Subspace {
        centre: Vec<f64>,
        basis: Vec<Vec<f64>>,
        half_width: f64,
    },
    LatentClass {
        /// Item probabilities, one row of `dims` per class.
        profiles: Vec<Vec<f64>>,
        cumulative_weights: Vec<f64>,
    },
    Ball {
        dims: usize,
        radius: f64,
    },
}

impl Sampler {
    fn new(spec: &GenerateSpec) -> Result<Self, GenerateError> {
        let dims = spec.dims;
        if dims == 0 {
            return Err(GenerateError::InvalidSpec("dims must be at least 1".into()));
        }
        if spec.row_group_rows == 0 {
            return Err(GenerateError::InvalidSpec("row_group_rows must be at least 1".into()));
        }
        if dims > MAX_DIMS {
            return Err(GenerateError::InvalidSpec(format!("dims must be at most {MAX_DIMS}, got {dims}")));
        }
        let values = (spec.row_group_rows as u64).saturating_mul(dims as u64);
        if values > MAX_ROW_GROUP_VALUES {
            return Err(GenerateError::InvalidSpec(format!(
                "a row group of {} rows x {dims} columns holds {values} values, above the {MAX_ROW_GROUP_VALUES} \
                 (2 GiB) one may take while it is drawn and encoded; lower --row-group-rows to at most {}",
                spec.row_group_rows,
                MAX_ROW_GROUP_VALUES / dims as u64
            )));
        }
        let mut rng = stream_rng(spec.seed, LAW_STREAM);
        Ok(match spec.law {
            Law::Uniform => Sampler::Uniform { dims },
            Law::Skewed => Sampler::Skewed { dims },
            Law::HeavyTailed => Sampler::HeavyTailed { dims },
            Law::Ball { radius } => Sampler::Ball { dims, radius },
            Law::Mixture => {
                let centres = (0..MIXTURE_CLUSTERS)
                    .map(|_| {
                        (0..dims)
                            .map(|_| MIXTURE_CENTRE_MARGIN + (1.0 - 2.0 * MIXTURE_CENTRE_MARGIN) * unit(&mut rng))
                            .collect()
                    })
                    .collect();
                let total: f64 = (0..MIXTURE_CLUSTERS).map(|k| 0.5f64.powi(k as i32)).sum();
                let cumulative_weights = (0..MIXTURE_CLUSTERS)
                    .scan(0.0, |sum, k| {
                        *sum += 0.5f64.powi(k as i32) / total;
                        Some(*sum)
                    })
                    .collect();
                Sampler::Mixture { centres, cumulative_weights }
            }
            Law::Subspace { dim } => {
                if dim == 0 || dim >= dims {
                    return Err(GenerateError::InvalidSpec(format!(
                        "law subspace:{dim} needs a flat of dimension 1 to dims - 1 = {}",
                        dims - 1
                    )));
                }
                let centre: Vec<f64> = (0..dims).map(|_| 0.4 + 0.2 * unit(&mut rng)).collect();
                let basis = orthonormal_basis(&mut rng, dims, dim);
                // Keep centre + basis·t + noise inside the cube for every t in [-h, h]^dim: per coordinate
                // the offset is at most h·Σ_j |basis_j[k]| + noise, which must not exceed the distance to
                // the nearer face. The 1e-9 absorbs rounding so no value needs clipping.
                let room = centre.iter().map(|&c| c.min(1.0 - c)).fold(f64::INFINITY, f64::min) - SUBSPACE_NOISE - 1e-9;
                let reach = (0..dims)
                    .map(|k| basis.iter().map(|direction| direction[k].abs()).sum::<f64>())
                    .fold(0.0, f64::max);
                Sampler::Subspace { centre, basis, half_width: room / reach }
            }
            Law::LatentClass { classes } => {
                if classes == 0 {
                    return Err(GenerateError::InvalidSpec("latent-class needs at least 1 class".into()));
                }
                if (classes as u64).saturating_mul(dims as u64) > MAX_LATENT_CLASS_PROBABILITIES {
                    return Err(GenerateError::InvalidSpec(format!(
                        "latent-class:{classes} with {dims} columns needs {classes} x {dims} item probabilities, \
                         above the {MAX_LATENT_CLASS_PROBABILITIES} (1 GiB) it may hold; use fewer classes"
                    )));
                }
                // Beta(½, ½) is the law of sin²(πU/2); Dirichlet(1) weights are normalised exponentials.
                let profiles = (0..classes)
                    .map(|_| (0..dims).map(|_| (FRAC_PI_2 * unit(&mut rng)).sin().powi(2)).collect())
                    .collect();
                let raw: Vec<f64> = (0..classes).map(|_| -(1.0 - unit(&mut rng)).ln()).collect();
                let total: f64 = raw.iter().sum();
                let cumulative_weights = raw
                    .iter()
                    .scan(0.0, |sum, weight| {
                        *sum += weight / total;
                        Some(*sum)
                    })
                    .collect();
                Sampler::LatentClass { profiles, cumulative_weights }
            }
        })
    }

    /// Row group `group` (its own random stream) with `rows` rows, as one record batch.
    fn row_group(&self, seed: u64, group: u64, rows: usize, schema: &SchemaRef) -> Result<RecordBatch, ParquetError> {
        let mut rng = stream_rng(seed, group);
        let columns = match self {
            Sampler::Uniform { dims } => column_wise(*dims, rows, || unit(&mut rng)),
            Sampler::Skewed { dims } => column_wise(*dims, rows, || unit(&mut rng).powi(SKEWED_POWER)),
            Sampler::HeavyTailed { dims } => row_wise(*dims, rows, |row| {
                let shared = unit(&mut rng);
                for value in row.iter_mut() {
                    *value = truncated_lomax(shared.max(unit(&mut rng)).powi(2));
                }
            }),
            Sampler::Mixture { centres, cumulative_weights } => row_wise(centres[0].len(), rows, |row| {
                let pick = unit(&mut rng);
                let cluster = cumulative_weights.iter().position(|&edge| pick < edge).unwrap_or(MIXTURE_CLUSTERS - 1);
                let centre = &centres[cluster];
                for k in (0..row.len()).step_by(2) {
                    let (first, second) = normal_pair(&mut rng);
                    row[k] = (centre[k] + MIXTURE_SPREAD * first).clamp(0.0, 1.0);
                    if k + 1 < row.len() {
                        row[k + 1] = (centre[k + 1] + MIXTURE_SPREAD * second).clamp(0.0, 1.0);
                    }
                }
            }),
            Sampler::Subspace { centre, basis, half_width } => row_wise(centre.len(), rows, |row| {
                row.copy_from_slice(centre);
                for direction in basis {
                    let t = half_width * (2.0 * unit(&mut rng) - 1.0);
                    row.iter_mut().zip(direction).for_each(|(value, &b)| *value += t * b);
                }
                for value in row.iter_mut() {
                    *value += SUBSPACE_NOISE * (2.0 * unit(&mut rng) - 1.0);
                }
            }),
            Sampler::LatentClass { profiles, cumulative_weights } => row_wise(profiles[0].len(), rows, |row| {
                let pick = unit(&mut rng);
                let class = cumulative_weights.iter().position(|&edge| pick < edge).unwrap_or(profiles.len() - 1);
                for (value, &probability) in row.iter_mut().zip(&profiles[class]) {
                    *value = f64::from(u8::from(unit(&mut rng) < probability));
                }
            }),
            Sampler::Ball { dims, radius } => row_wise(*dims, rows, |row| {
                // A uniform direction (normalised Gaussian) at radius (R/2)·U^{1/d}.
                let mut norm = 0.0;
                while norm == 0.0 {
                    for k in (0..row.len()).step_by(2) {
                        let (first, second) = normal_pair(&mut rng);
                        row[k] = first;
                        if k + 1 < row.len() {
                            row[k + 1] = second;
                        }
                    }
                    norm = row.iter().map(|x| x * x).sum::<f64>().sqrt();
                }
                let length = 0.5 * radius * unit(&mut rng).powf(1.0 / *dims as f64);
                for value in row.iter_mut() {
                    *value = (0.5 + *value / norm * length).clamp(0.0, 1.0);
                }
            }),
        };
        let arrays: Vec<ArrayRef> =
            columns.into_iter().map(|column| Arc::new(Float64Array::from(column)) as ArrayRef).collect();
        Ok(RecordBatch::try_new(schema.clone(), arrays)?)
    }
}

/// The truncated Lomax law of [`Law::HeavyTailed`] at the uniform `u`: its inverse CDF,
/// F(x) = (1 − (1 + x/s)^−α) / (1 − (1 + 1/s)^−α) on [0, 1].
fn truncated_lomax(u: f64) -> f64 {
    let (index, scale) = (HEAVY_TAILED_INDEX, HEAVY_TAILED_SCALE);
    let mass = 1.0 - (1.0 + 1.0 / scale).powf(-index);
    (scale * ((1.0 - u * mass).powf(-1.0 / index) - 1.0)).clamp(0.0, 1.0)
}

/// `dims` columns of `rows` independent draws, one column after the other.
fn column_wise(dims: usize, rows: usize, mut draw: impl FnMut() -> f64) -> Vec<Vec<f64>> {
    (0..dims).map(|_| (0..rows).map(|_| draw()).collect()).collect()
}

/// `rows` rows filled by `fill_row`, transposed into `dims` columns.
fn row_wise(dims: usize, rows: usize, mut fill_row: impl FnMut(&mut [f64])) -> Vec<Vec<f64>> {
    let mut columns: Vec<Vec<f64>> = (0..dims).map(|_| Vec::with_capacity(rows)).collect();
    let mut row = vec![0.0; dims];
    for _ in 0..rows {
        fill_row(&mut row);
        columns.iter_mut().zip(&row).for_each(|(column, &value)| column.push(value));
    }
    columns
}

/// `count` orthonormal directions in R^dims: Gaussian vectors through Gram–Schmidt (a Haar-random
/// frame). A draw left (numerically) in the span of the earlier ones is drawn again.
fn orthonormal_basis(rng: &mut Xoshiro256PlusPlus, dims: usize, count: usize) -> Vec<Vec<f64>> {
    let mut basis: Vec<Vec<f64>> = Vec::with_capacity(count);
    while basis.len() < count {
        let mut vector: Vec<f64> = (0..dims).map(|_| normal_pair(rng).0).collect();
        for done in &basis {
            let dot: f64 = vector.iter().zip(done).map(|(a, b)| a * b).sum();
            vector.iter_mut().zip(done).for_each(|(a, b)| *a -= dot * b);
        }
        let norm = vector.iter().map(|a| a * a).sum::<f64>().sqrt();
        if norm > 1e-6 {
            basis.push(vector.into_iter().map(|a| a / norm).collect());
        }
    }
    basis
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::{Repetition, Type as PhysicalType};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::fs;

    fn spec(rows: u64, dims: usize, law: Law) -> GenerateSpec {
        GenerateSpec { rows, dims, law, seed: 7, compression: Compression::None, row_group_rows: 1000 }
    }

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("test thread pool")
    }

    /// Writes `spec` in a fresh directory and reads the columns back through the Arrow reader.
    fn generate_columns(spec: &GenerateSpec) -> Vec<Vec<f64>> {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("table.parquet");
        write_table(&path, spec).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap().build().unwrap();
        let mut columns = vec![Vec::new(); spec.dims];
        for batch in reader {
            let batch = batch.unwrap();
            for (k, column) in columns.iter_mut().enumerate() {
                let values = batch.column(k).as_any().downcast_ref::<Float64Array>().unwrap();
                column.extend_from_slice(values.values());
            }
        }
        columns
    }

    fn mean(values: &[f64]) -> f64 {
        values.iter().sum::<f64>() / values.len() as f64
    }

    #[test]
    fn reads_back_rows_columns_types_and_row_groups() {
        for (compression, codec) in [
            (Compression::None, ParquetCompression::UNCOMPRESSED),
            (Compression::Snappy, ParquetCompression::SNAPPY),
            (Compression::Zstd, ParquetCompression::ZSTD(ZstdLevel::default())),
        ] {
            let directory = tempfile::tempdir().unwrap();
            let path = directory.path().join("table.parquet");
            let spec =
                GenerateSpec { rows: 2_500, dims: 3, row_group_rows: 1_000, compression, ..spec(0, 0, Law::Mixture) };
            let summary = write_table(&path, &spec).unwrap();
            let file_len = fs::metadata(&path).unwrap().len();
            assert_eq!(summary, GenerateSummary { rows: 2_500, row_groups: 3, bytes: file_len });

            let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
            let metadata = reader.metadata();
            assert_eq!(metadata.file_metadata().num_rows(), 2_500);
            let group_rows: Vec<i64> = metadata.row_groups().iter().map(|group| group.num_rows()).collect();
            assert_eq!(group_rows, [1_000, 1_000, 500]);
            let schema = metadata.file_metadata().schema_descr();
            assert_eq!(schema.num_columns(), 3);
            for k in 0..3 {
                let column = schema.column(k);
                assert_eq!(column.name(), format!("x{k}"));
                assert_eq!(column.physical_type(), PhysicalType::DOUBLE);
                assert_eq!(column.self_type().get_basic_info().repetition(), Repetition::REQUIRED);
            }
            for group in metadata.row_groups() {
                for chunk in group.columns() {
                    assert_eq!(chunk.compression(), codec);
                    assert!(chunk.dictionary_page_offset().is_none(), "no dictionary pages");
                    assert!(chunk
                        .encodings()
                        .all(|e| e != Encoding::PLAIN_DICTIONARY && e != Encoding::RLE_DICTIONARY));
                }
            }
            let arrow_schema =
                ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap().schema().clone();
            assert!(arrow_schema.fields().iter().all(|f| f.data_type() == &DataType::Float64 && !f.is_nullable()));
            assert_eq!(fs::read_dir(directory.path()).unwrap().count(), 1, "no temporary file left behind");
        }
    }

    #[test]
    fn same_seed_gives_identical_bytes_whatever_the_thread_count() {
        let directory = tempfile::tempdir().unwrap();
        for law in [Law::Uniform, Law::Mixture, Law::Skewed, Law::HeavyTailed, Law::Subspace { dim: 2 }] {
            // 7 row groups: more than one batch in flight for both pools, and a short last group.
            let spec = GenerateSpec {
                rows: 6_500,
                dims: 3,
                law,
                seed: 11,
                compression: Compression::Zstd,
                row_group_rows: 1_000,
            };
            let bytes_with = |threads: usize| {
                let path = directory.path().join(format!("{law}-{threads}.parquet"));
                pool(threads).install(|| write_table(&path, &spec)).unwrap();
                fs::read(&path).unwrap()
            };
            let one = bytes_with(1);
            assert_eq!(one, bytes_with(2), "{law}");
            assert_eq!(one, bytes_with(3), "{law}");
            let other_seed = directory.path().join("other.parquet");
            write_table(&other_seed, &GenerateSpec { seed: 12, ..spec }).unwrap();
            assert_ne!(one, fs::read(&other_seed).unwrap(), "{law}: another seed gives another table");
        }
    }

    #[test]
    fn values_lie_in_the_unit_cube_and_follow_their_laws() {
        let n = 20_000;
        for law in [Law::Uniform, Law::Mixture, Law::Skewed, Law::HeavyTailed, Law::Subspace { dim: 1 }] {
            let columns = generate_columns(&spec(n, 3, law));
            for column in &columns {
                assert_eq!(column.len() as u64, n);
                assert!(column.iter().all(|v| (0.0..=1.0).contains(v)), "{law}");
            }
        }
        // Exact moments, tolerance about five standard errors at n = 20 000.
        for column in generate_columns(&spec(n, 2, Law::Uniform)) {
            assert!((mean(&column) - 0.5).abs() < 0.01);
            let second = column.iter().map(|v| v * v).sum::<f64>() / n as f64;
            assert!((second - 1.0 / 3.0).abs() < 0.01);
        }
        // u^4 is Beta(1/4, 1): mean 1/5, and P(x < 1/16) = P(u < 1/2) = 1/2.
        for column in generate_columns(&spec(n, 2, Law::Skewed)) {
            assert!((mean(&column) - 0.2).abs() < 0.01);
            let below = column.iter().filter(|&&v| v < 1.0 / 16.0).count() as f64 / n as f64;
            assert!((below - 0.5).abs() < 0.02);
        }
    }

    #[test]
    fn heavy_tailed_columns_have_their_quantiles_and_large_values_together() {
        let n = 20_000;
        let columns = generate_columns(&spec(n, 2, Law::HeavyTailed));
        let share = |keep: &dyn Fn(usize) -> bool| (0..n as usize).filter(|&row| keep(row)).count() as f64 / n as f64;
        // The truncated Lomax law's median and its mass beyond 0.2, from its CDF.
        let (index, scale) = (HEAVY_TAILED_INDEX, HEAVY_TAILED_SCALE);
        let mass = 1.0 - (1.0 + 1.0 / scale).powf(-index);
        let median = scale * ((1.0 - 0.5 * mass).powf(-1.0 / index) - 1.0);
        let beyond = ((1.0 + 0.2 / scale).powf(-index) - (1.0 + 1.0 / scale).powf(-index)) / mass;
        for column in &columns {
            assert!((share(&|row| column[row] < median) - 0.5).abs() < 0.02);
            assert!((share(&|row| column[row] > 0.2) - beyond).abs() < 0.004, "the tail's mass, {beyond} expected");
        }
        // max(u₀, u_k)² above ½ in both columns: (1 − m) + m(1 − m)² with m = √½, against ¼ if independent.
        let m = 0.5f64.sqrt();
        let both = share(&|row| columns[0][row] > median && columns[1][row] > median);
        assert!((both - ((1.0 - m) + m * (1.0 - m).powi(2))).abs() < 0.02, "both above the median: {both}");
    }

    #[test]
    fn mixture_mass_sits_in_a_few_small_cells() {
        // On a 20 × 20 grid (cells 0.05 = 1.25 spreads wide) the cell holding a cluster's centre gets at
        // least P(0 < Z < 1.25)² ≈ 0.155 of that cluster, so the fullest MIXTURE_CLUSTERS cells hold at
        // least 15 % of all points; under the uniform law they would hold 5/400 = 1.25 %.
        let n = 20_000;
        let columns = generate_columns(&spec(n, 2, Law::Mixture));
        let mut cells = vec![0usize; 400];
        for (x, y) in columns[0].iter().zip(&columns[1]) {
            let index = |v: f64| ((v * 20.0) as usize).min(19);
            cells[index(*x) * 20 + index(*y)] += 1;
        }
        cells.sort_unstable_by(|a, b| b.cmp(a));
        let fullest: usize = cells[..MIXTURE_CLUSTERS].iter().sum();
        assert!(fullest as f64 > 0.14 * n as f64, "fullest cells hold {fullest} of {n}");
    }

    /// Eigenvalues of a symmetric matrix, largest first (cyclic Jacobi rotations).
    fn symmetric_eigenvalues(mut a: Vec<Vec<f64>>) -> Vec<f64> {
        let n = a.len();
        for _ in 0..100 {
            let off: f64 = (0..n).flat_map(|p| (p + 1..n).map(move |q| (p, q))).map(|(p, q)| a[p][q] * a[p][q]).sum();
            if off < 1e-30 {
                break;
            }
            for p in 0..n {
                for q in p + 1..n {
                    if a[p][q] == 0.0 {
                        continue;
                    }
                    let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
                    let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                    let c = 1.0 / (t * t + 1.0).sqrt();
                    let s = t * c;
                    for row in a.iter_mut() {
                        let (kp, kq) = (row[p], row[q]);
                        row[p] = c * kp - s * kq;
                        row[q] = s * kp + c * kq;
                    }
                    let (upper, lower) = a.split_at_mut(q);
                    for (pk, qk) in upper[p].iter_mut().zip(lower[0].iter_mut()) {
                        let (x, y) = (*pk, *qk);
                        *pk = c * x - s * y;
                        *qk = s * x + c * y;
                    }
                }
            }
        }
        let mut values: Vec<f64> = (0..n).map(|k| a[k][k]).collect();
        values.sort_by(|x, y| y.total_cmp(x));
        values
    }

    #[test]
    fn ball_points_fill_the_ball_uniformly() {
        for (dims, radius) in [(2usize, 1.0), (3, 0.04)] {
            let columns = generate_columns(&spec(20_000, dims, Law::Ball { radius }));
            let norms: Vec<f64> = (0..columns[0].len())
                .map(|i| columns.iter().map(|c| (c[i] - 0.5).powi(2)).sum::<f64>().sqrt())
                .collect();
            assert!(norms.iter().all(|&r| r <= 0.5 * radius + 1e-12));
            // Uniform in a d-ball: P(r ≤ R/2 · 2^{−1/d}) = 1/2.
            let half = 0.5 * radius * 0.5f64.powf(1.0 / dims as f64);
            let inner = norms.iter().filter(|&&r| r <= half).count() as f64 / norms.len() as f64;
            assert!((inner - 0.5).abs() < 0.02, "{inner}");
        }
        assert_eq!("ball:0.5".parse::<Law>().unwrap(), Law::Ball { radius: 0.5 });
        for bad in ["ball:", "ball:0", "ball:1.5", "ball:x"] {
            assert!(bad.parse::<Law>().is_err(), "{bad}");
        }
    }

    #[test]
    fn subspace_points_lie_near_a_flat_of_the_asked_dimension() {
        let known = symmetric_eigenvalues(vec![vec![2.0, 1.0, 0.0], vec![1.0, 2.0, 0.0], vec![0.0, 0.0, 5.0]]);
        assert!(known.iter().zip([5.0, 3.0, 1.0]).all(|(got, want)| (got - want).abs() < 1e-12), "{known:?}");

        // Uniform noise of half-width η adds η²/3 to every eigenvalue of the covariance; the flat adds
        // `dim` large ones. So the d − dim smallest eigenvalues (the mean squared residual off the best
        // flat) are η²/3 each, and the dim largest are far above.
        let noise_variance = SUBSPACE_NOISE * SUBSPACE_NOISE / 3.0;
        for (dims, dim) in [(4, 2), (3, 1), (5, 3)] {
            let columns = generate_columns(&spec(20_000, dims, Law::Subspace { dim }));
            let means: Vec<f64> = columns.iter().map(|c| mean(c)).collect();
            let covariance: Vec<Vec<f64>> = (0..dims)
                .map(|i| {
                    (0..dims)
                        .map(|j| {
                            let products =
                                columns[i].iter().zip(&columns[j]).map(|(x, y)| (x - means[i]) * (y - means[j]));
                            products.sum::<f64>() / columns[i].len() as f64
                        })
                        .collect()
                })
                .collect();
            let eigenvalues = symmetric_eigenvalues(covariance);
            for &residual in &eigenvalues[dim..] {
                assert!((0.9..1.1).contains(&(residual / noise_variance)), "{dims}/{dim}: {eigenvalues:?}");
            }
            assert!(eigenvalues[dim - 1] > 100.0 * noise_variance, "{dims}/{dim}: {eigenvalues:?}");
        }
    }

    #[test]
    fn empty_table_keeps_its_schema() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("empty.parquet");
        let summary = write_table(&path, &spec(0, 2, Law::Uniform)).unwrap();
        assert_eq!((summary.rows, summary.row_groups), (0, 0));
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows(), 0);
        assert_eq!(reader.metadata().file_metadata().schema_descr().num_columns(), 2);
    }

    #[test]
    fn bad_specs_are_errors_and_write_nothing() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("table.parquet");
        for bad in [
            spec(10, 0, Law::Uniform),
            GenerateSpec { row_group_rows: 0, ..spec(10, 2, Law::Uniform) },
            spec(10, 2, Law::Subspace { dim: 0 }),
            spec(10, 2, Law::Subspace { dim: 2 }),
            spec(10, 1, Law::Subspace { dim: 1 }),
        ] {
            let error = write_table(&path, &bad).unwrap_err();
            assert!(matches!(error, GenerateError::InvalidSpec(_)), "{bad:?}: {error}");
        }
        assert_eq!(fs::read_dir(directory.path()).unwrap().count(), 0);
    }

    #[test]
    fn unwritable_paths_are_errors_naming_the_path() {
        let directory = tempfile::tempdir().unwrap();
        let missing = directory.path().join("no-such-directory").join("table.parquet");
        let error = write_table(&missing, &spec(10, 2, Law::Uniform)).unwrap_err();
        assert!(matches!(error, GenerateError::Io { .. }), "{error}");
        assert!(error.to_string().contains("no-such-directory"), "{error}");

        // A directory in the way: everything is written, the final rename fails, the temporary goes.
        let occupied = directory.path().join("occupied");
        fs::create_dir(&occupied).unwrap();
        fs::write(occupied.join("keep"), b"x").unwrap();
        let error = write_table(&occupied, &spec(10, 2, Law::Uniform)).unwrap_err();
        assert!(error.to_string().contains("occupied"), "{error}");
        let mut left: Vec<_> = fs::read_dir(directory.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        left.sort();
        assert_eq!(left, ["occupied"]);

        let error = write_table(Path::new("/"), &spec(10, 2, Law::Uniform)).unwrap_err();
        assert!(matches!(error, GenerateError::InvalidSpec(_)), "{error}");
    }

    #[test]
    fn laws_and_compressions_parse_and_print() {
        for law in [Law::Uniform, Law::Mixture, Law::Skewed, Law::HeavyTailed, Law::Subspace { dim: 3 }] {
            assert_eq!(law.to_string().parse::<Law>().unwrap(), law);
        }
        assert_eq!(" Subspace:2 ".parse::<Law>().unwrap(), Law::Subspace { dim: 2 });
        for bad in ["", "gauss", "subspace", "subspace:", "subspace:0", "subspace:-1", "subspace:x"] {
            assert!(bad.parse::<Law>().is_err(), "{bad}");
        }
        for compression in [Compression::None, Compression::Snappy, Compression::Zstd] {
            assert_eq!(compression.to_string().parse::<Compression>().unwrap(), compression);
        }
        assert!("lzma".parse::<Compression>().is_err());
    }

    #[test]
    fn bounds_toml_declares_every_column_in_the_unit_interval() {
        let text = bounds_toml(&spec(100, 3, Law::Subspace { dim: 2 }));
        let table: toml::Table = text.parse().unwrap();
        let columns: Vec<&str> = table["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        assert_eq!(columns, ["x0", "x1", "x2"]);
        let bounds = table["bounds"].as_table().unwrap();
        assert_eq!(bounds.len(), 3);
        for name in columns {
            let range: Vec<f64> = bounds[name].as_array().unwrap().iter().map(|v| v.as_float().unwrap()).collect();
            assert_eq!(range, [0.0, 1.0]);
        }
    }
}
