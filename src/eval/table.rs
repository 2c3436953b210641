//! Loading the evaluated columns of a Parquet file as points of [0,1]^d, normalised by the public bounds.
//!
//! Columns are read as synth reads them ([`crate::synth::columns::used_columns`] and
//! [`crate::io::domain`]): a number, date or timestamp on its public bounds, a categorical column as the
//! index of its value in the public list (a value outside the list takes the code after it, so eval can
//! count it), a Boolean as 0 or 1. Under `--nulls keep` a null stays NaN here until every table is loaded;
//! [`place_nulls`] then gives each column that has one, in any table, the slot synth gives null (a band
//! below a number's bounds, code −1 for a coded column), the same in every table.
//!
//! Row groups are decoded in parallel on the current rayon pool and concatenated in file order, so the
//! points (and every number computed from them) do not depend on the thread count.

use std::path::{Path, PathBuf};

use arrow::array::Array;
use arrow::datatypes::DataType;
use rayon::prelude::*;

use crate::binner::NullPolicy;
use crate::error::{Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::io::domain::{code_values, coded_axis, number_axis, CategoryList, Coding, Unlisted, Unreadable};
use crate::io::source::column::AsF64;
use crate::io::source::column::{ColumnKind, NumericValues};
use crate::io::source::{NumericColumn, Source};
use crate::options::SynthOptions;

/// The public domains of the evaluated columns: bounds of numbers, dates and timestamps, category lists,
/// and (by name in `columns`) Boolean columns, which need neither.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Domains {
    pub bounds: Vec<ColumnBounds>,
    pub categories: Vec<CategoryList>,
    /// The compared columns in report order; `None`: every column with bounds, then every one with a list.
    pub columns: Option<Vec<String>>,
}

impl Domains {
    pub fn numbers(bounds: &[ColumnBounds]) -> Self {
        Domains { bounds: bounds.to_vec(), ..Domains::default() }
    }

    /// The compared columns in report order.
    pub fn names(&self) -> Vec<String> {
        match &self.columns {
            Some(columns) => columns.clone(),
            None => self
                .bounds
                .iter()
                .map(|bounds| bounds.column.clone())
                .chain(self.categories.iter().map(|list| list.column.clone()))
                .collect(),
        }
    }
}

/// What a column's values are, as the scores read them.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueType {
    /// A number, date or timestamp (`integer`: stored as integers, so values repeat).
    Number {
        integer: bool,
    },
    /// A value of a public list; code `names.len()` is a value outside it.
    Categories {
        names: Vec<String>,
    },
    Boolean,
}

impl ValueType {
    pub fn is_number(&self) -> bool {
        matches!(self, ValueType::Number { .. })
    }

    /// "number", "categorical" or "boolean", as the report names it.
    pub fn name(&self) -> &'static str {
        match self {
            ValueType::Number { .. } => "number",
            ValueType::Categories { .. } => "categorical",
            ValueType::Boolean => "boolean",
        }
    }
}

/// One compared column: its type, public domain and where null sits on its axis.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalColumn {
    pub name: String,
    pub value_type: ValueType,
    /// A number's public bounds, or a coded column's code range (without the null slot), in stored units.
    pub public: ColumnBounds,
    /// The normalised coordinate of null, where a table has one (after [`place_nulls`]).
    pub null_unit: Option<f64>,
}

impl EvalColumn {
    /// The stored value (a number in its unit, or a code) of a normalised coordinate on `axis`.
    pub fn value(&self, axis: &ColumnBounds, unit: f64) -> f64 {
        axis.denormalise(unit)
    }

    /// Whether a coordinate is this column's null.
    pub fn is_null(&self, unit: f64) -> bool {
        self.null_unit == Some(unit)
    }
}

/// The used columns of one file, row-major in normalised units.
#[derive(Clone, Debug)]
pub struct Table {
    pub file: PathBuf,
    /// The axes in the order of `points`' coordinates: a number's public bounds (widened below for its
    /// null band), a coded column's code range.
    pub bounds: Vec<ColumnBounds>,
    /// What each axis holds.
    pub columns: Vec<EvalColumn>,
    /// Nulls per column (`--nulls keep`).
    pub nulls: Vec<u64>,
    /// Row i is `points[i·d .. (i+1)·d]`, each coordinate in [0, 1] (clamped to the bounds).
    pub points: Vec<f64>,
    /// Values outside their column's bounds, clamped, per column (rows kept only).
    pub clamped_values: Vec<u64>,
    /// Rows left out for a null, NaN or infinite value (`NullPolicy::Drop`).
    pub dropped_rows: u64,
}

impl Table {
    /// A table of float columns on `bounds`, from normalised `points` (for tests and benches).
    pub fn of_numbers(file: &str, bounds: Vec<ColumnBounds>, points: Vec<f64>) -> Table {
        let dims = bounds.len();
        let columns = bounds
            .iter()
            .map(|axis| EvalColumn {
                name: axis.column.clone(),
                value_type: ValueType::Number { integer: false },
                public: axis.clone(),
                null_unit: None,
            })
            .collect();
        Table {
            file: file.into(),
            bounds,
            columns,
            nulls: vec![0; dims],
            points,
            clamped_values: vec![0; dims],
            dropped_rows: 0,
        }
    }

    pub fn dims(&self) -> usize {
        self.bounds.len()
    }

    pub fn rows(&self) -> usize {
        self.points.len() / self.dims()
    }
}

/// Gives null its slot on each column that has one in any of `tables` (loaded with the same domains under
/// `--nulls keep`), the same slot in every table, as synth places null: a band below a number's bounds,
/// code −1 for a coded column. Columns without nulls keep their axes; no NaN is left.
pub fn place_nulls(tables: &mut [&mut Table]) -> Result<()> {
    let Some(first) = tables.first() else { return Ok(()) };
    let (first_file, first_columns) = (first.file.clone(), first.columns.clone());
    for table in tables.iter().skip(1) {
        for (theirs, ours) in table.columns.iter().zip(&first_columns) {
            if theirs.value_type != ours.value_type || theirs.public != ours.public {
                return Err(Error::in_column(
                    &table.file,
                    &theirs.name,
                    format!(
                        "is read as a {} column here but as a {} column in {}: the tables need the same types",
                        theirs.value_type.name(),
                        ours.value_type.name(),
                        first_file.display()
                    ),
                ));
            }
        }
    }
    for (axis, column) in first_columns.iter().enumerate() {
        if tables.iter().all(|table| table.nulls[axis] == 0) {
            continue;
        }
        let public = &column.public;
        let domain = match column.value_type {
            ValueType::Number { integer } => number_axis(public, integer, true),
            _ => coded_axis(&column.name, (public.hi + 0.5).round() as usize, true),
        };
        let (old, new) = (tables[0].bounds[axis].clone(), domain.bounds);
        let slot = domain.nulls.ok_or_else(|| Error::internal("a nullable axis without a null slot"))?;
        let width = new.hi - new.lo;
        let null_unit = (slot.value - new.lo) / width;
        let dims = first_columns.len();
        for table in tables.iter_mut() {
            for unit in table.points[axis..].iter_mut().step_by(dims) {
                *unit =
                    if unit.is_nan() { null_unit } else { ((old.denormalise(*unit) - new.lo) / width).clamp(0.0, 1.0) };
            }
            table.bounds[axis] = new.clone();
            table.columns[axis].null_unit = Some(null_unit);
        }
    }
    Ok(())
}

/// What loading one row group found.
struct PartStats {
    kept_rows: usize,
    clamped_values: Vec<u64>,
    nulls: Vec<u64>,
    dropped_rows: u64,
}

/// Reads the columns named by `bounds` (in that order) from `path`. Every column must exist and be numeric;
/// values outside the bounds are clamped and counted; a null, NaN or infinite value is an error naming the
/// file, column and row (or, with `NullPolicy::Drop`, its row is left out and counted).
/// With `hive_columns`, a directory input's key=value folders are columns too.
pub fn load_table(path: &Path, hive_columns: bool, bounds: &[ColumnBounds], nulls: NullPolicy) -> Result<Table> {
    load_mixed_table(path, hive_columns, &Domains::numbers(bounds), nulls)
}

/// [`load_table`] of columns of any type with a public domain.
pub fn load_mixed_table(path: &Path, hive_columns: bool, domains: &Domains, nulls: NullPolicy) -> Result<Table> {
    if domains.names().is_empty() {
        return Err(no_columns());
    }
    load_source(&Source::open_with(path, hive_columns)?, domains, nulls)
}

fn no_columns() -> Error {
    Error::bad_input(
        "no columns to evaluate: give --bounds COLUMN=LO:HI or --categories COLUMN=A,B,... for each (or a config \
         file with [bounds] and [categories])",
    )
}

/// The columns of `source` that `domains` names, in its order, each with its coding and axis, as synth
/// resolves them (a value outside a category list is coded "other" rather than refused).
fn resolve(source: &Source, domains: &Domains) -> Result<(Vec<NumericColumn>, Vec<ColumnBounds>, Vec<EvalColumn>)> {
    let names = domains.names();
    let schema = source.schema();
    for name in &names {
        let has_domain = domains.bounds.iter().any(|bounds| &bounds.column == name)
            || domains.categories.iter().any(|list| &list.column == name);
        let boolean = schema.field_with_name(name).is_ok_and(|field| field.data_type() == &DataType::Boolean);
        if !has_domain && !boolean && schema.field_with_name(name).is_ok() {
            return Err(Error::in_column(
                source.path(),
                name,
                format!(
                    "has no public bounds or category list: give --bounds {name}=LO:HI or --categories {name}=A,B,... \
                     (domains are public knowledge, never taken from the data)"
                ),
            ));
        }
    }
    let mut options = SynthOptions::new(1.0, Vec::new());
    options.bounds = domains.bounds.iter().filter(|bounds| names.contains(&bounds.column)).cloned().collect();
    options.categories = domains.categories.iter().filter(|list| names.contains(&list.column)).cloned().collect();
    options.columns = Some(names.clone());
    options.unlisted = Unlisted::Other;
    // Null slots are placed once every table is loaded (`place_nulls`).
    options.nulls = NullPolicy::Error;
    let (columns, axes) = crate::synth::columns::used_columns(source, &options)?;
    let mut ordered = Vec::with_capacity(names.len());
    for name in &names {
        let position = columns
            .iter()
            .position(|column| &column.name == name)
            .ok_or_else(|| Error::internal(format!("column '{name}' was resolved but is missing")))?;
        let column = &columns[position];
        let axis = axes[position].clone();
        let value_type = match &column.coding {
            Coding::Number => ValueType::Number { integer: column.kind == ColumnKind::Integer },
            Coding::Categories(categories) => ValueType::Categories { names: categories.names.clone() },
            Coding::Boolean => ValueType::Boolean,
        };
        let described = EvalColumn { name: name.clone(), value_type, public: axis.clone(), null_unit: None };
        ordered.push((position, axis, described));
    }
    let mut schema_ordered = columns.clone();
    schema_ordered.sort_by_key(|column| column.schema_index);
    let axes = ordered.iter().map(|(_, axis, _)| axis.clone()).collect();
    let described = ordered.into_iter().map(|(_, _, column)| column).collect();
    Ok((schema_ordered, axes, described))
}

/// [`load_mixed_table`] from an opened input (a Parquet dataset, or a table in memory).
pub fn load_source(source: &Source, domains: &Domains, nulls: NullPolicy) -> Result<Table> {
    if domains.names().is_empty() {
        return Err(no_columns());
    }
    let path = source.path();
    let (columns, bounds, described) = resolve(source, domains)?;
    let bounds = &bounds[..];
    let names: Vec<String> = bounds.iter().map(|b| b.column.clone()).collect();
    // `columns` is in schema order, the reader's batch order; axis k of the points is `bounds[k]`.
    let batch_position: Vec<usize> = names
        .iter()
        .map(|name| {
            columns
                .iter()
                .position(|column| &column.name == name)
                .ok_or_else(|| Error::internal(format!("column '{name}' was resolved but is missing")))
        })
        .collect::<Result<_>>()?;
    let dims = bounds.len();
    // Each row group decodes straight into its own slice of the table (sizes from the footer).
    let group_rows: Vec<usize> =
        (0..source.row_group_count()).map(|row_group| source.row_group_rows(row_group) as usize).collect();
    let mut points = vec![0.0; group_rows.iter().sum::<usize>() * dims];
    let mut slices = Vec::with_capacity(group_rows.len());
    let mut rest = points.as_mut_slice();
    for &rows in &group_rows {
        let (slice, tail) = rest.split_at_mut(rows * dims);
        slices.push(slice);
        rest = tail;
    }
    let codings: Vec<&Coding> = batch_position.iter().map(|&position| &columns[position].coding).collect();
    let parts: Vec<PartStats> = slices
        .into_par_iter()
        .enumerate()
        .map(|(row_group, out)| {
            load_row_group(source, row_group, &columns, &codings, &batch_position, bounds, nulls, out)
        })
        .collect::<Result<_>>()?;
    let mut table = Table {
        file: path.to_path_buf(),
        bounds: bounds.to_vec(),
        columns: described,
        nulls: vec![0; dims],
        points: Vec::new(),
        clamped_values: vec![0; dims],
        dropped_rows: 0,
    };
    // Close the gaps that dropped rows left at the end of their row groups' slices.
    let (mut read, mut write) = (0, 0);
    for (part, rows) in parts.iter().zip(&group_rows) {
        let kept = part.kept_rows * dims;
        points.copy_within(read..read + kept, write);
        write += kept;
        read += rows * dims;
        for (total, clamped) in table.clamped_values.iter_mut().zip(&part.clamped_values) {
            *total += clamped;
        }
        for (total, nulls) in table.nulls.iter_mut().zip(&part.nulls) {
            *total += nulls;
        }
        table.dropped_rows += part.dropped_rows;
    }
    points.truncate(write);
    table.points = points;
    if table.points.is_empty() {
        return Err(Error::in_file(
            path,
            if table.dropped_rows > 0 {
                "every row has a null, NaN or infinite value in an evaluated column"
            } else {
                "has no rows"
            },
        ));
    }
    Ok(table)
}

/// Decodes one row group into `out` (its rows × d slots); kept rows come first. Under `NullPolicy::Keep`
/// a null is left NaN (a NaN or infinite value is still an error).
#[allow(clippy::too_many_arguments)]
fn load_row_group(
    source: &Source,
    row_group: usize,
    columns: &[NumericColumn],
    codings: &[&Coding],
    batch_position: &[usize],
    bounds: &[ColumnBounds],
    nulls: NullPolicy,
    out: &mut [f64],
) -> Result<PartStats> {
    let dims = bounds.len();
    let mut stats = PartStats { kept_rows: 0, clamped_values: vec![0; dims], nulls: vec![0; dims], dropped_rows: 0 };
    let mut first_row = 0usize;
    for batch in source.row_group_reader(row_group, columns)? {
        let batch = batch.map_err(|error| {
            let (file, group) = source.row_group_place(row_group);
            Error::in_file(file, format!("row group {group} cannot be decoded: {error}"))
        })?;
        let rows = batch.num_rows();
        let start = stats.kept_rows * dims;
        let units = out.get_mut(start..start + rows * dims).ok_or_else(|| {
            let (file, group) = source.row_group_place(row_group);
            Error::in_file(file, format!("row group {group} has more rows than its footer says"))
        })?;
        // Unclamped normalised values, NaN for a null: clamping and validity are decided below.
        for (axis, column_bounds) in bounds.iter().enumerate() {
            let array = batch.column(batch_position[axis]);
            let coded = match codings[axis] {
                Coding::Number => array.clone(),
                coding => code_values(coding, None, array).map_err(|unreadable| {
                    let reason = match unreadable {
                        Unreadable::Cast(reason) => reason,
                        Unreadable::Unlisted { value, .. } => format!("value '{value}' is outside its list"),
                    };
                    let (file, group) = source.row_group_place(row_group);
                    Error::in_column(file, &column_bounds.column, format!("row group {group}: {reason}"))
                })?,
            };
            let values = NumericValues::of(coded.as_ref()).ok_or_else(|| {
                Error::internal(format!("column '{}' decoded as {}", column_bounds.column, array.data_type()))
            })?;
            normalise_values(&values, column_bounds, &mut units[axis..], dims);
            if let Some(validity) = coded.logical_nulls() {
                for row in (0..rows).filter(|&row| validity.is_null(row)) {
                    if nulls == NullPolicy::Keep {
                        stats.nulls[axis] += 1;
                    }
                    units[row * dims + axis] = f64::NAN;
                }
                if nulls == NullPolicy::Keep {
                    // A NaN or infinite value (not a null) is still an error.
                    let bad = (0..rows).find(|&row| validity.is_valid(row) && !units[row * dims + axis].is_finite());
                    if let Some(row) = bad {
                        let position = batch_position[axis];
                        let column = &column_bounds.column;
                        return Err(invalid_value_error(
                            source,
                            row_group,
                            first_row + row,
                            &batch,
                            position,
                            column,
                            row,
                        ));
                    }
                }
            } else if nulls == NullPolicy::Keep {
                if let Some(row) = (0..rows).find(|&row| !units[row * dims + axis].is_finite()) {
                    let position = batch_position[axis];
                    let column = &column_bounds.column;
                    return Err(invalid_value_error(source, row_group, first_row + row, &batch, position, column, row));
                }
            }
        }
        let mut kept = 0;
        let all_valid = nulls == NullPolicy::Keep || units.iter().all(|unit| unit.is_finite());
        for row in 0..rows {
            let values = row * dims..(row + 1) * dims;
            if !all_valid {
                if let Some(axis) = units[values.clone()].iter().position(|unit| !unit.is_finite()) {
                    match nulls {
                        NullPolicy::Error => {
                            return Err(invalid_value_error(
                                source,
                                row_group,
                                first_row + row,
                                &batch,
                                batch_position[axis],
                                &bounds[axis].column,
                                row,
                            ))
                        }
                        NullPolicy::Drop => {
                            stats.dropped_rows += 1;
                            continue;
                        }
                        NullPolicy::Keep => unreachable!("kept nulls are not checked here"),
                    }
                }
                units.copy_within(values.clone(), kept * dims);
            }
            for (unit, clamped) in units[kept * dims..(kept + 1) * dims].iter_mut().zip(&mut stats.clamped_values) {
                // Rounding is monotone, so lo ≤ v ≤ hi gives a unit in [0, 1]: only values outside count. A
                // kept null (NaN) stays NaN for `place_nulls`.
                if !unit.is_nan() {
                    *clamped += u64::from(!(0.0..=1.0).contains(unit));
                    *unit = unit.clamp(0.0, 1.0);
                }
            }
            kept += 1;
        }
        stats.kept_rows += kept;
        first_row += rows;
    }
    Ok(stats)
}

/// Names the bad value of `row` in the batch column `position` (file, column, row group, row).
fn invalid_value_error(
    source: &Source,
    row_group: usize,
    group_row: usize,
    batch: &arrow::record_batch::RecordBatch,
    position: usize,
    column: &str,
    row: usize,
) -> Error {
    let array = batch.column(position);
    let what = if array.is_null(row) {
        "a null"
    } else if crate::io::source::column::value_as_f64(array.as_ref(), row).is_nan() {
        "NaN"
    } else {
        "an infinite value"
    };
    let (file, place) = source.row_place(row_group, group_row as u64);
    Error::in_column(
        file,
        column,
        format!(
            "{what} in {place}; pass --nulls keep to compare null as a value, or --nulls drop to leave such rows out"
        ),
    )
}

/// Writes (v − lo)/(hi − lo) of every value to `out[row·stride]` (non-finite stays non-finite).
fn normalise_values(values: &NumericValues, bounds: &ColumnBounds, out: &mut [f64], stride: usize) {
    fn each<T: AsF64>(values: &[T], bounds: &ColumnBounds, out: &mut [f64], stride: usize) {
        let width = bounds.hi - bounds.lo;
        for (value, unit) in values.iter().zip(out.iter_mut().step_by(stride)) {
            *unit = (value.as_f64() - bounds.lo) / width;
        }
    }
    match values {
        NumericValues::F32(values) => each(values, bounds, out, stride),
        NumericValues::F64(values) => each(values, bounds, out, stride),
        NumericValues::I8(values) => each(values, bounds, out, stride),
        NumericValues::I16(values) => each(values, bounds, out, stride),
        NumericValues::I32(values) => each(values, bounds, out, stride),
        NumericValues::I64(values) => each(values, bounds, out, stride),
        NumericValues::U8(values) => each(values, bounds, out, stride),
        NumericValues::U16(values) => each(values, bounds, out, stride),
        NumericValues::U32(values) => each(values, bounds, out, stride),
        NumericValues::U64(values) => each(values, bounds, out, stride),
    }
}
