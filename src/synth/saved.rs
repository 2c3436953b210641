//! The saved release: a fitted release written to a file (`synth --save-release`, the Python package's
//! `save`) and read back to draw tables from (`dpsynth sample`, `load`) without the data and without
//! spending budget. docs/release-format.md describes the file; this module is its only reader and writer.
//!
//! The file holds what drawing needs and what may be published: the released measure, the columns it
//! maps back to (names, types, bounds, category lists, encodings), placement and row order, and the
//! publishable run report. Never the data, the owner-only diagnostics, or the noise key.
//!
//! Envelope: [`MAGIC`], the format version (u32), the body's length and its XXH3-64 checksum (u64 each,
//! little-endian), then the body: CBOR of [`Body`], zstd-compressed. A reader refuses a version it does
//! not know, and checks the length and the checksum before decoding anything, so a truncated or damaged
//! file is named as such. The checksum catches accidents (a flipped bit, a cut transfer), not forgery:
//! anyone can recompute it, and the file is not signed.

use std::borrow::Cow;
use std::fs::File;
use std::hash::Hasher;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use faer::Mat;
use serde::{Deserialize, Serialize};
use twox_hash::XxHash3_64;

use super::report::SampleInfo;
use super::{thread_pool_of, to_json, Draws, Fitted, RunColumns};
use crate::encoding::{ColumnEncoding, EncodedColumn, Encoding};
use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::geometry::cdf::CellCdf;
use crate::geometry::grid::RegularGrid;
use crate::geometry::partition::{CellGeometry, MAX_DEPTH};
use crate::io::domain::{Categories, CategoryList, Coding, NullSlot};
use crate::io::paths::{check_output_paths, NamedPath, OutputPaths};
use crate::io::source::{ColumnKind, NumericColumn};
use crate::io::staging::{commit_all, StagedFile};
use crate::mechanism::covloss::points::WeightedPoints;
use crate::mechanism::lowdim::projection::Projection;
use crate::mechanism::pmm::marginals::MonotoneMap;
use crate::mechanism::pmm::pair_axis::PairAxis;
use crate::mechanism::pmm::pairs::PairMap;
use crate::mechanism::pmm::refine::SparseLeaves;
use crate::mechanism::ReleasedMeasure;
use crate::progress::{Progress, Timings};
use crate::sampler::{Placement, RowOrder};

/// The first bytes of every saved release.
pub const MAGIC: &[u8; 15] = b"DPSYNTH-RELEASE";

/// The format this build writes, and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Magic, version, body length, checksum.
const HEADER_BYTES: u64 = 15 + 4 + 8 + 8;

/// Where the body's length and checksum go, written once the body is.
const LENGTH_OFFSET: u64 = 15 + 4;

/// zstd's default level: counts of small integers shrink several-fold at hundreds of MB/s.
const ZSTD_LEVEL: i32 = 3;

/// Buffers between the CBOR encoder (a write per number) and zstd, and when reading.
const BUFFER_BYTES: usize = 1 << 20;

impl Fitted {
    /// Saves the release at `path` (atomically): what [`SavedRelease::load`] reads back.
    pub fn save(&self, path: &Path) -> Result<()> {
        commit_all(vec![self.stage_saved(path)?])
    }

    /// The saved release in a staged file beside `path`, to commit with the table.
    pub(crate) fn stage_saved(&self, path: &Path) -> Result<StagedFile> {
        let report = serde_json::to_string(&self.report)
            .map_err(|error| Error::internal(format!("serialising a report: {error}")))?;
        stage(&self.draws, &report, path)
    }
}

/// A release read from a file: drawn from like a [`Fitted`] one, with the run's publishable report.
pub struct SavedRelease {
    draws: Draws,
    /// The report of the run that made it (JSON, `release.synthetic_rows` 0, no `sample`).
    report: serde_json::Value,
    /// The file it came from, as given (named in the reports of its draws).
    path: PathBuf,
}

impl SavedRelease {
    /// Reads the release saved at `path`, refusing a file that is not one, is damaged or truncated, or is
    /// of another format version. Draw 0's placement coins are those `synth --seed seed` used, so draw 0 is
    /// the table that run wrote (with the same `--rows` and row order); without a seed they are fresh from
    /// the OS. Draws run on `threads` workers (default: all cores).
    pub fn load(path: &Path, seed: Option<u64>, threads: Option<usize>) -> Result<SavedRelease> {
        let body = read_body(path)?;
        let damaged = |reason: String| Error::in_file(path, format!("not a valid saved release: {reason}"));
        let columns = body.columns.into_columns().map_err(damaged)?;
        let measure = body.measure.into_measure().map_err(damaged)?;
        check_measure_fits(&measure, &columns).map_err(damaged)?;
        let report = serde_json::from_str(&body.report).map_err(|error| damaged(format!("its report: {error}")))?;
        let (_, pool) = thread_pool_of(threads)?;
        let placement_seed = crate::privacy::RunSeeds::new(seed)?.placement();
        let (placement, row_order, metadata) = (body.placement, body.row_order, body.metadata);
        let draws = Draws { columns, measure, placement, row_order, placement_seed, pool, metadata };
        Ok(SavedRelease { draws, report, path: path.to_path_buf() })
    }

    /// Draws rows in `order` instead of the saved run's.
    pub fn set_row_order(&mut self, order: RowOrder) {
        self.draws.row_order = order;
    }

    /// The synthetic table's schema, as the run that saved it wrote it.
    pub fn schema(&self) -> SchemaRef {
        self.draws.schema()
    }

    /// The publishable report of the run that made the release.
    pub fn report(&self) -> &serde_json::Value {
        &self.report
    }

    /// Saves the release again at `path` (atomically).
    pub fn save(&self, path: &Path) -> Result<()> {
        commit_all(vec![stage(&self.draws, &self.report.to_string(), path)?])
    }

    /// Draw `draw` as record batches, as [`Fitted::sample`].
    pub fn sample(&self, rows: Option<u64>, draw: u64, progress: &Progress) -> Result<Vec<RecordBatch>> {
        self.draws.sample(rows, draw, progress)
    }

    /// The report of draw `draw` of `rows` rows: the run's report, the rows, and a `sample` section saying
    /// that the draw read this file and spent nothing.
    pub fn draw_report(&self, rows: u64, draw: u64) -> Result<serde_json::Value> {
        let mut report = self.report.clone();
        report["release"]["synthetic_rows"] = rows.into();
        let sample =
            SampleInfo { saved_release: Some(self.path.display().to_string()), ..SampleInfo::post_processing(draw) };
        report["sample"] =
            serde_json::to_value(sample).map_err(|error| Error::internal(format!("serialising a report: {error}")))?;
        Ok(report)
    }

    /// Writes draw 0 (`rows` rows, default the released count) to `outputs.table`, and its report to
    /// `outputs.report`, committed together. Returns the report.
    pub fn write(&self, outputs: &OutputPaths, rows: Option<u64>, progress: &Progress) -> Result<serde_json::Value> {
        check_output_paths(&[NamedPath::new("the saved release", &self.path)], &outputs.named())?;
        let (sink, written) = self.draws.write_table(&outputs.table, rows, progress, &mut Timings::default())?;
        let report = self.draw_report(written, 0)?;
        let mut staged = vec![sink.finish(&self.draws.metadata)?];
        if let Some(path) = outputs.report.as_deref() {
            staged.push(StagedFile::with_bytes(path, to_json(&report)?.as_bytes())?);
        }
        commit_all(staged)?;
        Ok(report)
    }
}

/// Everything a saved release holds. Large arrays are borrowed when writing, so saving copies nothing.
#[derive(Serialize, Deserialize)]
struct Body<'a> {
    /// The publishable run report, as JSON.
    report: Cow<'a, str>,
    columns: SavedColumns,
    measure: SavedMeasure<'a>,
    placement: Placement,
    row_order: RowOrder,
    /// The footer of the tables drawn (key-value pairs: what they are and how they were made).
    metadata: Vec<(String, String)>,
}

#[derive(Serialize, Deserialize)]
enum SavedColumns {
    Numeric(Vec<SavedNumericColumn>),
    Encoded { bits: usize, columns: Vec<SavedEncodedColumn> },
}

#[derive(Serialize, Deserialize)]
struct SavedNumericColumn {
    name: String,
    schema_index: usize,
    /// Arrow's name of the type (`Timestamp(µs, "UTC")`), read back by its parser and checked to round-trip.
    data_type: String,
    integer: bool,
    coding: SavedCoding,
    /// The null slot's value and the edge below which values are null.
    nulls: Option<(f64, f64)>,
    bounds: SavedBounds,
}

#[derive(Serialize, Deserialize)]
enum SavedCoding {
    Number,
    Boolean,
    Categories { names: Vec<String>, other: bool },
}

#[derive(Serialize, Deserialize)]
struct SavedBounds {
    column: String,
    lo: f64,
    hi: f64,
    instants: bool,
}

#[derive(Serialize, Deserialize)]
struct SavedEncodedColumn {
    name: String,
    schema_index: usize,
    data_type: String,
    encoding: SavedColumnEncoding,
    first_bit: usize,
}

#[derive(Serialize, Deserialize)]
enum SavedColumnEncoding {
    Bit,
    Categorical { categories: Vec<String>, other: bool },
    Binned { bounds: SavedBounds, bins: usize },
}

/// [`ReleasedMeasure`], variant by variant.
#[derive(Serialize, Deserialize)]
enum SavedMeasure<'a> {
    Leaves {
        dims: usize,
        depth: u32,
        counts: Cow<'a, [u64]>,
    },
    SparseLeaves {
        dims: usize,
        depth: u32,
        codes: Cow<'a, [u32]>,
        counts: Cow<'a, [u64]>,
    },
    Grid {
        dims: usize,
        cells_per_axis: u32,
        counts: Cow<'a, [u64]>,
    },
    /// The projection's box is recomputed from its mean and basis (d × d', column by column).
    Lifted {
        inner: Box<SavedMeasure<'a>>,
        mean: Cow<'a, [f64]>,
        basis: Vec<f64>,
    },
    Points {
        dims: usize,
        points: Cow<'a, [f64]>,
        rows: u64,
    },
    /// Each map as the cumulative shares of its two CDFs.
    Calibrated {
        inner: Box<SavedMeasure<'a>>,
        maps: Vec<Option<[Cow<'a, [f64]>; 2]>>,
        value_cells: Vec<Option<u64>>,
    },
    PairMapped {
        inner: Box<SavedMeasure<'a>>,
        maps: Vec<SavedPairMap<'a>>,
    },
    Encoded {
        bits: usize,
        weights: Cow<'a, [f64]>,
        points: Cow<'a, [f64]>,
        rows: u64,
    },
}

#[derive(Serialize, Deserialize)]
struct SavedPairMap<'a> {
    parent: usize,
    child: usize,
    quantile: Option<Cow<'a, [f64]>>,
    knots: Cow<'a, [f64]>,
    /// Absent in files written before discrete children took the nearest knot: those interpolate.
    #[serde(default)]
    discrete: bool,
    /// A coded parent's pair cell of each code; absent for a number's equal cells (and in files written
    /// before coded columns had cells of their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_cells: Option<Cow<'a, [u32]>>,
    /// A nullable number parent's null band (its share of the axis); absent for a number without nulls,
    /// a coded parent, and in files written before nulls had a pair cell of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_null_band: Option<f64>,
}

/// A check of a decoded part: `Err` says what is wrong.
type Checked<T> = std::result::Result<T, String>;

impl SavedColumns {
    fn of(columns: &RunColumns) -> SavedColumns {
        match columns {
            RunColumns::Numeric { columns, bounds } => SavedColumns::Numeric(
                columns
                    .iter()
                    .zip(bounds)
                    .map(|(column, bounds)| SavedNumericColumn {
                        name: column.name.clone(),
                        schema_index: column.schema_index,
                        data_type: column.data_type.to_string(),
                        integer: column.kind == ColumnKind::Integer,
                        coding: match &column.coding {
                            Coding::Number => SavedCoding::Number,
                            Coding::Boolean => SavedCoding::Boolean,
                            Coding::Categories(categories) => {
                                SavedCoding::Categories { names: categories.names.clone(), other: categories.other }
                            }
                        },
                        nulls: column.nulls.map(|slot| (slot.value, slot.below)),
                        bounds: SavedBounds::of(bounds),
                    })
                    .collect(),
            ),
            RunColumns::Encoded(encoding) => SavedColumns::Encoded {
                bits: encoding.bits,
                columns: encoding
                    .columns
                    .iter()
                    .map(|column| SavedEncodedColumn {
                        name: column.name.clone(),
                        schema_index: column.schema_index,
                        data_type: column.data_type.to_string(),
                        encoding: match &column.encoding {
                            ColumnEncoding::Bit => SavedColumnEncoding::Bit,
                            ColumnEncoding::Categorical { categories, other } => {
                                SavedColumnEncoding::Categorical { categories: categories.clone(), other: *other }
                            }
                            ColumnEncoding::Binned { bounds, bins } => {
                                SavedColumnEncoding::Binned { bounds: SavedBounds::of(bounds), bins: *bins }
                            }
                        },
                        first_bit: column.first_bit,
                    })
                    .collect(),
            },
        }
    }

    fn into_columns(self) -> Checked<RunColumns> {
        match self {
            SavedColumns::Numeric(saved) => {
                let (mut columns, mut bounds) = (Vec::new(), Vec::new());
                for column in saved {
                    let data_type = data_type(&column.name, &column.data_type)?;
                    let kind = if column.integer { ColumnKind::Integer } else { ColumnKind::Float };
                    let coding = match column.coding {
                        SavedCoding::Number if ColumnKind::of(&data_type) == Some(kind) => Coding::Number,
                        SavedCoding::Boolean if data_type == DataType::Boolean => Coding::Boolean,
                        SavedCoding::Categories { names, other } => {
                            let list = CategoryList { column: column.name.clone(), categories: names };
                            Coding::Categories(Arc::new(
                                Categories::new(&list, other, &data_type)
                                    .map_err(|reason| format!("column '{}': {reason}", column.name))?,
                            ))
                        }
                        _ => return Err(format!("column '{}': its coding does not fit its type", column.name)),
                    };
                    let nulls = column.nulls.map(|(value, below)| NullSlot { value, below });
                    bounds.push(column.bounds.into_bounds()?);
                    columns.push(NumericColumn {
                        name: column.name,
                        schema_index: column.schema_index,
                        kind,
                        data_type,
                        coding,
                        nulls,
                    });
                }
                if columns.is_empty() {
                    return Err("it has no columns".to_string());
                }
                Ok(RunColumns::Numeric { columns, bounds })
            }
            SavedColumns::Encoded { bits, columns: saved } => {
                let mut columns = Vec::new();
                let mut next_bit = 0;
                for column in saved {
                    let data_type = data_type(&column.name, &column.data_type)?;
                    let encoding = match column.encoding {
                        SavedColumnEncoding::Bit => ColumnEncoding::Bit,
                        SavedColumnEncoding::Categorical { categories, other } if !categories.is_empty() => {
                            ColumnEncoding::Categorical { categories, other }
                        }
                        SavedColumnEncoding::Binned { bounds, bins } if bins > 0 => {
                            ColumnEncoding::Binned { bounds: bounds.into_bounds()?, bins }
                        }
                        _ => return Err(format!("column '{}': an empty encoding", column.name)),
                    };
                    if column.first_bit != next_bit {
                        return Err(format!("column '{}': its bits do not follow the column before", column.name));
                    }
                    next_bit += encoding.width();
                    columns.push(EncodedColumn {
                        name: column.name,
                        schema_index: column.schema_index,
                        data_type,
                        encoding,
                        first_bit: column.first_bit,
                    });
                }
                if columns.is_empty() || next_bit != bits {
                    return Err(format!("its encoding's columns hold {next_bit} bits, not {bits}"));
                }
                Ok(RunColumns::Encoded(Encoding { columns, bits }))
            }
        }
    }
}

/// The Arrow type named `name` (as `DataType`'s `Display` writes it); it must read back as itself.
fn data_type(column: &str, name: &str) -> Checked<DataType> {
    DataType::from_str(name)
        .ok()
        .filter(|data_type| data_type.to_string() == name)
        .ok_or_else(|| format!("column '{column}': unknown type {name}"))
}

impl SavedBounds {
    fn of(bounds: &ColumnBounds) -> SavedBounds {
        SavedBounds { column: bounds.column.clone(), lo: bounds.lo, hi: bounds.hi, instants: bounds.instants }
    }

    fn into_bounds(self) -> Checked<ColumnBounds> {
        let bounds = ColumnBounds::new(self.column, self.lo, self.hi).map_err(|error| error.to_string())?;
        Ok(ColumnBounds { instants: self.instants, ..bounds })
    }
}

impl<'a> SavedMeasure<'a> {
    fn of(measure: &'a ReleasedMeasure) -> SavedMeasure<'a> {
        match measure {
            ReleasedMeasure::Leaves { geometry, counts } => {
                SavedMeasure::Leaves { dims: geometry.dims(), depth: geometry.depth(), counts: counts.into() }
            }
            ReleasedMeasure::SparseLeaves { geometry, leaves } => SavedMeasure::SparseLeaves {
                dims: geometry.dims(),
                depth: geometry.depth(),
                codes: (&leaves.codes).into(),
                counts: (&leaves.counts).into(),
            },
            ReleasedMeasure::Grid { grid, counts } => {
                SavedMeasure::Grid { dims: grid.dims(), cells_per_axis: grid.cells_per_axis(), counts: counts.into() }
            }
            ReleasedMeasure::Lifted { inner, projection } => SavedMeasure::Lifted {
                inner: Box::new(SavedMeasure::of(inner)),
                mean: (&projection.mean).into(),
                basis: (0..projection.basis.ncols())
                    .flat_map(|column| projection.basis.col(column).iter().copied().collect::<Vec<_>>())
                    .collect(),
            },
            ReleasedMeasure::Points { dims, points, rows } => {
                SavedMeasure::Points { dims: *dims, points: points.into(), rows: *rows }
            }
            ReleasedMeasure::Calibrated { inner, maps, value_cells } => SavedMeasure::Calibrated {
                inner: Box::new(SavedMeasure::of(inner)),
                maps: maps
                    .iter()
                    .map(|map| map.as_ref().map(|map| [map.from.cumulative().into(), map.to.cumulative().into()]))
                    .collect(),
                value_cells: value_cells.clone(),
            },
            ReleasedMeasure::PairMapped { inner, maps } => SavedMeasure::PairMapped {
                inner: Box::new(SavedMeasure::of(inner)),
                maps: maps
                    .iter()
                    .map(|map| {
                        let (parent, child, parent_axis, quantile, knots, discrete) = map.parts();
                        SavedPairMap {
                            parent,
                            child,
                            quantile: quantile.map(|cdf| cdf.cumulative().into()),
                            knots: knots.into(),
                            discrete,
                            parent_cells: parent_axis.cell_of_code().map(Cow::Borrowed),
                            parent_null_band: match parent_axis {
                                &PairAxis::NullBand(band) => Some(band),
                                _ => None,
                            },
                        }
                    })
                    .collect(),
            },
            ReleasedMeasure::Encoded { points, rows } => SavedMeasure::Encoded {
                bits: points.bits,
                weights: (&points.weights).into(),
                points: (&points.points).into(),
                rows: *rows,
            },
        }
    }

    fn into_measure(self) -> Checked<ReleasedMeasure> {
        Ok(match self {
            SavedMeasure::Leaves { dims, depth, counts } => {
                let geometry = geometry(dims, depth)?;
                expect_len("leaf counts", counts.len(), geometry.leaf_count())?;
                ReleasedMeasure::Leaves { geometry, counts: counts.into_owned() }
            }
            SavedMeasure::SparseLeaves { dims, depth, codes, counts } => {
                let geometry = geometry(dims, depth)?;
                expect_len("leaf counts", counts.len(), codes.len())?;
                let ascending = codes.windows(2).all(|pair| pair[0] < pair[1]);
                if !ascending || codes.last().is_some_and(|&code| code as usize >= geometry.leaf_count()) {
                    return Err("its leaf codes are not ascending codes of the partition".to_string());
                }
                let leaves = SparseLeaves { codes: codes.into_owned(), counts: counts.into_owned() };
                ReleasedMeasure::SparseLeaves { geometry, leaves }
            }
            SavedMeasure::Grid { dims, cells_per_axis, counts } => {
                let grid = RegularGrid::new(dims, cells_per_axis)
                    .ok_or_else(|| format!("a grid of {cells_per_axis}^{dims} cells"))?;
                expect_len("grid counts", counts.len(), grid.cell_count())?;
                ReleasedMeasure::Grid { grid, counts: counts.into_owned() }
            }
            SavedMeasure::Lifted { inner, mean, basis } => {
                let inner = inner.into_measure()?;
                let (dims, target_dims) = (mean.len(), measure_dims(&inner));
                expect_len("projection basis", basis.len(), dims * target_dims)?;
                // A released basis is orthonormal and its mean near the unit cube: anything far from that
                // would overflow the projection's box.
                let unit_columns = basis.chunks(dims.max(1)).all(|column| {
                    let norm = column.iter().map(|value| value * value).sum::<f64>().sqrt();
                    (0.5..=2.0).contains(&norm)
                });
                if dims == 0
                    || target_dims == 0
                    || !unit_columns
                    || mean.iter().any(|value| !value.is_finite() || value.abs() > 1e9)
                {
                    return Err("its projection is not a d × d' basis of unit columns".to_string());
                }
                let basis = Mat::from_fn(dims, target_dims, |row, column| basis[column * dims + row]);
                // The cells only shape the projection's binning, which a saved release never runs.
                let cells = vec![1; target_dims];
                let projection = Projection::new(mean.into_owned(), basis, &cells);
                ReleasedMeasure::Lifted { inner: Box::new(inner), projection }
            }
            SavedMeasure::Points { dims, points, rows } => {
                if dims == 0 || points.is_empty() || points.len() % dims != 0 {
                    return Err(format!("{} values are not points of {dims} coordinates", points.len()));
                }
                ReleasedMeasure::Points { dims, points: points.into_owned(), rows }
            }
            SavedMeasure::Calibrated { inner, maps, value_cells } => {
                let inner = inner.into_measure()?;
                let dims = measure_dims(&inner);
                expect_len("calibration maps", maps.len(), dims)?;
                expect_len("value cells", value_cells.len(), dims)?;
                let maps = maps
                    .into_iter()
                    .map(|map| map.map(|[from, to]| Ok(MonotoneMap { from: cdf(from)?, to: cdf(to)? })).transpose())
                    .collect::<Checked<_>>()?;
                ReleasedMeasure::Calibrated { inner: Box::new(inner), maps, value_cells }
            }
            SavedMeasure::PairMapped { inner, maps } => {
                let inner = inner.into_measure()?;
                let dims = measure_dims(&inner);
                let maps = maps
                    .into_iter()
                    .map(|map| {
                        let quantile = map.quantile.map(cdf).transpose()?;
                        let parent_axis = match (map.parent_cells, map.parent_null_band) {
                            (None, None) => Some(PairAxis::Equal),
                            (None, Some(band)) => (band > 0.0 && band < 1.0).then_some(PairAxis::NullBand(band)),
                            (Some(cells), None) => PairAxis::from_cell_of_code(cells.into_owned()),
                            (Some(_), Some(_)) => None,
                        };
                        let pair = parent_axis.map(|axis| (map.parent, map.child, axis));
                        pair.and_then(|pair| {
                            PairMap::from_parts(pair, quantile, (map.knots.into_owned(), map.discrete), dims)
                        })
                        .ok_or_else(|| format!("a pair map of columns {} and {}", map.parent, map.child))
                    })
                    .collect::<Checked<_>>()?;
                ReleasedMeasure::PairMapped { inner: Box::new(inner), maps }
            }
            SavedMeasure::Encoded { bits, weights, points, rows } => {
                if weights.is_empty() || points.len() != weights.len() * bits {
                    return Err(format!("{} weights of {} values of {bits} bits", weights.len(), points.len()));
                }
                let points = WeightedPoints { bits, weights: weights.into_owned(), points: points.into_owned() };
                ReleasedMeasure::Encoded { points, rows }
            }
        })
    }
}

fn geometry(dims: usize, depth: u32) -> Checked<CellGeometry> {
    if dims == 0 || depth > MAX_DEPTH {
        return Err(format!("a partition of depth {depth} in {dims} dimensions"));
    }
    Ok(CellGeometry::new(dims, depth))
}

fn cdf(cumulative: Cow<'_, [f64]>) -> Checked<CellCdf> {
    CellCdf::from_cumulative(cumulative.into_owned()).ok_or_else(|| "a map's CDF does not rise from 0 to 1".to_string())
}

fn expect_len(what: &str, found: usize, expected: usize) -> Checked<()> {
    match found == expected {
        true => Ok(()),
        false => Err(format!("{found} {what} where {expected} belong")),
    }
}

/// How many coordinates a row of `measure` has (before a lift, in data space after it).
fn measure_dims(measure: &ReleasedMeasure) -> usize {
    match measure {
        ReleasedMeasure::Leaves { geometry, .. } | ReleasedMeasure::SparseLeaves { geometry, .. } => geometry.dims(),
        ReleasedMeasure::Grid { grid, .. } => grid.dims(),
        ReleasedMeasure::Lifted { projection, .. } => projection.data_dims(),
        ReleasedMeasure::Points { dims, .. } => *dims,
        ReleasedMeasure::Calibrated { inner, .. } | ReleasedMeasure::PairMapped { inner, .. } => measure_dims(inner),
        ReleasedMeasure::Encoded { points, .. } => points.bits,
    }
}

/// The measure draws rows of the columns' shape: numbers for numeric columns, encoded bits for an encoding.
fn check_measure_fits(measure: &ReleasedMeasure, columns: &RunColumns) -> Checked<()> {
    match (measure, columns) {
        (ReleasedMeasure::Encoded { points, .. }, RunColumns::Encoded(encoding)) => {
            expect_len("bits of the points", points.bits, encoding.bits)
        }
        (ReleasedMeasure::Encoded { .. }, _) | (_, RunColumns::Encoded(_)) => {
            Err("its measure does not fit its columns".to_string())
        }
        (measure, RunColumns::Numeric { columns, .. }) => expect_len("columns", columns.len(), measure_dims(measure)),
    }
}

/// Writes `draws` and `report` (JSON) into a staged file beside `path`.
fn stage(draws: &Draws, report: &str, path: &Path) -> Result<StagedFile> {
    let staged = StagedFile::new(path)?;
    let failed =
        |error: &dyn std::fmt::Display| Error::in_file(path, format!("cannot write the saved release: {error}"));
    let body = Body {
        report: report.into(),
        columns: SavedColumns::of(&draws.columns),
        measure: SavedMeasure::of(&draws.measure),
        placement: draws.placement,
        row_order: draws.row_order,
        metadata: draws.metadata.clone(),
    };
    let mut file = File::create(staged.temporary()).map_err(|error| failed(&error))?;
    let mut header = Vec::with_capacity(HEADER_BYTES as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    header.extend_from_slice(&[0; 16]);
    file.write_all(&header).map_err(|error| failed(&error))?;
    let mut hashed =
        HashingWriter { inner: BufWriter::with_capacity(BUFFER_BYTES, &mut file), hasher: XxHash3_64::new(), bytes: 0 };
    let encoder = zstd::stream::write::Encoder::new(&mut hashed, ZSTD_LEVEL).map_err(|error| failed(&error))?;
    let mut buffered = BufWriter::with_capacity(BUFFER_BYTES, encoder);
    ciborium::into_writer(&body, &mut buffered).map_err(|error| failed(&error))?;
    let encoder = buffered.into_inner().map_err(|error| failed(&error.into_error()))?;
    encoder.finish().map_err(|error| failed(&error))?;
    hashed.inner.flush().map_err(|error| failed(&error))?;
    let (bytes, checksum) = (hashed.bytes, hashed.hasher.finish());
    drop(hashed);
    let mut trailer = bytes.to_le_bytes().to_vec();
    trailer.extend_from_slice(&checksum.to_le_bytes());
    file.seek(SeekFrom::Start(LENGTH_OFFSET)).and_then(|_| file.write_all(&trailer)).map_err(|error| failed(&error))?;
    file.sync_all().map_err(|error| failed(&error))?;
    Ok(staged)
}

/// Counts and checksums the bytes written through it.
struct HashingWriter<W: Write> {
    inner: W,
    hasher: XxHash3_64,
    bytes: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buffer)?;
        self.hasher.write(&buffer[..written]);
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Reads and checks the envelope of the file at `path` (magic, version, length, checksum), then decodes
/// its body.
fn read_body(path: &Path) -> Result<Body<'static>> {
    let refused = |reason: &dyn std::fmt::Display| Error::in_file(path, reason.to_string());
    let mut file = File::open(path).map_err(|error| refused(&format!("cannot open the saved release: {error}")))?;
    let length = file.metadata().map_err(|error| refused(&format!("cannot read: {error}")))?.len();
    let mut header = Vec::new();
    (&mut file)
        .take(HEADER_BYTES)
        .read_to_end(&mut header)
        .map_err(|error| refused(&format!("cannot read: {error}")))?;
    let magic_seen = header.len().min(MAGIC.len());
    if header[..magic_seen] != MAGIC[..magic_seen] || header.is_empty() {
        return Err(refused(
            &"not a dpsynth saved release (it does not start with DPSYNTH-RELEASE; make one with \
                             `dpsynth synth ... --save-release FILE`)",
        ));
    }
    if header.len() < HEADER_BYTES as usize {
        return Err(refused(&format!("truncated: {length} bytes, shorter than a saved release's header")));
    }
    let word = |range: std::ops::Range<usize>| {
        header[range].iter().rev().fold(0u64, |value, &byte| value << 8 | u64::from(byte))
    };
    let version = word(15..19);
    if version != u64::from(FORMAT_VERSION) {
        return Err(refused(&format!(
            "saved release format version {version}; this dpsynth ({}) reads version {FORMAT_VERSION} only",
            env!("CARGO_PKG_VERSION")
        )));
    }
    let (body_bytes, checksum) = (word(19..27), word(27..35));
    let found = length.saturating_sub(HEADER_BYTES);
    if found < body_bytes {
        return Err(refused(&format!(
            "truncated: its header promises {body_bytes} bytes of body, the file holds {found}"
        )));
    }
    if found > body_bytes {
        return Err(refused(&format!(
            "{} bytes follow the end of its body: not one whole saved release",
            found - body_bytes
        )));
    }
    let mut hasher = XxHash3_64::new();
    let mut buffer = vec![0; BUFFER_BYTES];
    loop {
        let read = file.read(&mut buffer).map_err(|error| refused(&format!("cannot read: {error}")))?;
        if read == 0 {
            break;
        }
        hasher.write(&buffer[..read]);
    }
    if hasher.finish() != checksum {
        return Err(refused(
            &"damaged: its checksum does not match its contents (corrupted in storage or transfer, \
                             or edited); nothing was read from it",
        ));
    }
    file.seek(SeekFrom::Start(HEADER_BYTES)).map_err(|error| refused(&format!("cannot read: {error}")))?;
    let decoder = zstd::stream::read::Decoder::new(BufReader::with_capacity(BUFFER_BYTES, file))
        .map_err(|error| refused(&format!("cannot decompress: {error}")))?;
    ciborium::from_reader(BufReader::with_capacity(BUFFER_BYTES, decoder))
        .map_err(|error| refused(&format!("not a valid saved release: cannot decode its body: {error}")))
}
