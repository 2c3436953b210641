//! Which input columns a run reads, and the public domain of each (schema and options only, never values):
//! every used column is kept with its domain or the run stops naming it. Nothing is dropped in silence.

use arrow::datatypes::{DataType, Field};

use crate::error::{compact_number, Error, Result};
use crate::geometry::bounds::ColumnBounds;
use crate::io::domain::{coded_axis, is_string_type, number_axis, Categories, Coding, Unlisted};
use crate::io::source::{field_names, no_such_column, unsupported_type, ColumnKind, NumericColumn, Source};
use crate::options::SynthOptions;

/// The used columns in schema order, each with its coding, and the bounds of its axis in the same order.
pub fn used_columns(source: &Source, options: &SynthOptions) -> Result<(Vec<NumericColumn>, Vec<ColumnBounds>)> {
    let names = used_names(source, options)?;
    check_domains_name_columns(source, options)?;
    let mut columns = source.any_columns(&names)?;
    let schema = source.schema();
    let mut axes = Vec::with_capacity(columns.len());
    let mut missing = Vec::new();
    for column in &mut columns {
        let field = schema.field(column.schema_index);
        match domain(source, options, column, field)? {
            Some(axis) => axes.push(axis),
            None => missing.push(field.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(missing_domains(source, &missing, options.private_bounds.is_some()));
    }
    if !options.mechanism.reads_mixed_columns() {
        if let Some(column) = columns.iter().find(|column| !column.is_plain_number()) {
            return Err(Error::in_column(
                source.path(),
                &column.name,
                format!(
                    "type {} is not a number: --mechanism {} reads numbers only; --mechanism auto (the default), pmm \
                     and psmm read categorical, Boolean and null values, or leave it out with --exclude {}",
                    column.data_type,
                    options.mechanism.name(),
                    column.name
                ),
            ));
        }
    }
    Ok((columns, axes))
}

/// The used numbers, dates and timestamps with neither bounds nor a category list, in schema order: the
/// columns whose bounds `--private-bounds` releases.
pub(crate) fn columns_without_bounds(source: &Source, options: &SynthOptions) -> Result<Vec<NumericColumn>> {
    check_domains_name_columns(source, options)?;
    let schema = source.schema();
    let mut unbounded: Vec<(usize, String)> = used_names(source, options)?
        .into_iter()
        .filter(|name| !options.bounds.iter().any(|bounds| &bounds.column == name))
        .filter(|name| !options.categories.iter().any(|list| &list.column == name))
        .filter_map(|name| {
            // A name the input lacks is reported where the run resolves its columns.
            let index = schema.index_of(&name).ok()?;
            ColumnKind::of(schema.field(index).data_type()).map(|_| (index, name))
        })
        .collect();
    unbounded.sort_unstable();
    source.numeric_columns(&unbounded.into_iter().map(|(_, name)| name).collect::<Vec<_>>())
}

/// A domain for a column the input does not have is a mistake (a typo, or the wrong config for this file).
fn check_domains_name_columns(source: &Source, options: &SynthOptions) -> Result<()> {
    let schema = source.schema();
    let named =
        options.bounds.iter().map(|bounds| &bounds.column).chain(options.categories.iter().map(|list| &list.column));
    for name in named {
        if schema.index_of(name).is_err() {
            let why = ", though it has a domain (bounds or categories)";
            return Err(Error::in_column(source.path(), name, no_such_column(name, &field_names(schema), why)));
        }
    }
    Ok(())
}

/// `--columns`, or every column of the input but `--exclude`'s.
fn used_names(source: &Source, options: &SynthOptions) -> Result<Vec<String>> {
    if let Some(columns) = &options.columns {
        return Ok(columns.clone());
    }
    let schema = source.schema();
    let names: Vec<String> = schema.fields().iter().map(|field| field.name().clone()).collect();
    if let Some(unknown) = options.exclude.iter().find(|name| !names.contains(name)) {
        return Err(Error::in_column(source.path(), unknown, no_such_column(unknown, &names, " (named by --exclude)")));
    }
    Ok(names.into_iter().filter(|name| !options.exclude.contains(name)).collect())
}

/// The column's coding (set on `column`) and the bounds of its axis; `None` where it has no public domain.
fn domain(
    source: &Source,
    options: &SynthOptions,
    column: &mut NumericColumn,
    field: &Field,
) -> Result<Option<ColumnBounds>> {
    let path = source.path();
    let name = column.name.as_str();
    let bounds = options.bounds.iter().rev().find(|bounds| bounds.column == name);
    let list = options.categories.iter().rev().find(|list| list.column == name);
    let nullable = field.is_nullable() && options.keeps_nulls();
    let data_type = &column.data_type;
    let axis = match (bounds, list) {
        (Some(_), Some(_)) => {
            return Err(Error::in_column(path, name, "has both bounds and a category list: give it one domain"))
        }
        (Some(bounds), None) => {
            if ColumnKind::of(data_type).is_none() {
                let reason = if is_string_type(data_type) || *data_type == DataType::Boolean {
                    format!("has bounds, but type {data_type} is not a number: give it a category list instead (--categories {name}=A,B,...)")
                } else {
                    unsupported_type(data_type)
                };
                return Err(Error::in_column(path, name, reason));
            }
            let bounds = bounds.in_unit_of(data_type).map_err(|reason| Error::in_column(path, name, reason))?;
            check_bounds_fit_type(source, column, &bounds)?;
            let axis = number_axis(&bounds, column.kind == ColumnKind::Integer, nullable);
            column.nulls = axis.nulls;
            axis.bounds
        }
        (None, Some(list)) => {
            let categories = Categories::new(list, options.unlisted == Unlisted::Other, data_type)
                .map_err(|reason| Error::in_column(path, name, reason))?;
            let axis = coded_axis(name, categories.codes(), nullable);
            column.coding = Coding::Categories(categories.into());
            column.nulls = axis.nulls;
            axis.bounds
        }
        (None, None) if *data_type == DataType::Boolean => {
            let axis = coded_axis(name, 2, nullable);
            column.coding = Coding::Boolean;
            column.nulls = axis.nulls;
            axis.bounds
        }
        (None, None) => return Ok(None),
    };
    Ok(Some(axis))
}

/// Every used column without a public domain, in one message, with a config snippet to fill in; bounds
/// may be released instead (`--private-bounds`, given or not: `bounds_released`), a category list never
/// under pure ε.
fn missing_domains(source: &Source, missing: &[Field], bounds_released: bool) -> Error {
    let names: Vec<&str> = missing.iter().map(|field| field.name().as_str()).collect();
    let snippet = domain_snippet(missing);
    let count = match names.len() {
        1 => "1 column has".to_string(),
        count => format!("{count} columns have"),
    };
    let mut ways = String::new();
    if snippet.contains("[bounds]") && !bounds_released {
        ways += " Numbers, dates and timestamps may instead have their bounds released privately from a share of \
                 epsilon: --private-bounds SHARE (e.g. 0.1).";
    }
    if snippet.contains("[categories]") {
        ways += " A category list cannot be released under pure epsilon-DP: discovering categories privately \
                 (thresholded noisy counts) needs a delta > 0, and this guarantee has none.";
    }
    let (names, excluded) = (names.join(", "), names.join(","));
    Error::in_file(
        source.path(),
        format!(
            "{count} no public domain: {names}. Domains are public knowledge, never read from the data.{ways} Give \
             them in a config file (--config run.toml; fill in the values below), or leave the columns out with \
             --exclude {excluded}\n\n{snippet}"
        ),
    )
}

/// The `[bounds]` and `[categories]` tables of a config file with a placeholder domain for each of
/// `fields`, by its type, to fill in from public knowledge (`LO`, `HI`, `"A", "B"`: not TOML values until
/// they are).
pub fn domain_snippet(fields: &[Field]) -> String {
    let mut bounds = String::new();
    let mut categories = String::new();
    for field in fields {
        let (name, data_type) = (field.name(), field.data_type());
        match data_type {
            DataType::Date32 | DataType::Date64 => {
                bounds += &format!("{name} = [\"YYYY-MM-DD\", \"YYYY-MM-DD\"]  # {data_type}: first and last possible date\n")
            }
            DataType::Timestamp(..) => {
                bounds += &format!(
                    "{name} = [\"YYYY-MM-DDTHH:MM:SSZ\", \"YYYY-MM-DDTHH:MM:SSZ\"]  # {data_type}: first and last possible instant\n"
                )
            }
            _ if ColumnKind::of(data_type).is_some() => bounds += &format!("{name} = [LO, HI]  # {data_type}: the lowest and highest possible value\n"),
            _ => categories += &format!("{name} = [\"A\", \"B\", ...]  # {data_type}: every possible value\n"),
        }
    }
    let mut snippet = String::new();
    if !bounds.is_empty() {
        snippet += &format!("[bounds]\n{bounds}");
    }
    if !categories.is_empty() {
        snippet += &format!("{}[categories]\n{categories}", if bounds.is_empty() { "" } else { "\n" });
    }
    snippet
}

/// Bounds must lie inside the column type's range (so no output value saturates or becomes infinite),
/// and integer columns need an integer inside them.
fn check_bounds_fit_type(source: &Source, column: &NumericColumn, bounds: &ColumnBounds) -> Result<()> {
    if column.kind == ColumnKind::Integer && bounds.lo.ceil() > bounds.hi.floor() {
        return Err(Error::in_column(
            source.path(),
            &column.name,
            format!("bounds {}:{} hold no integer", bounds.lo, bounds.hi),
        ));
    }
    let Some((min, max)) = type_range(&column.data_type) else { return Ok(()) };
    if bounds.lo < min || bounds.hi > max {
        return Err(Error::in_column(
            source.path(),
            &column.name,
            format!(
                "bounds {}:{} exceed the range of type {} ({}:{})",
                compact_number(bounds.lo),
                compact_number(bounds.hi),
                column.data_type,
                compact_number(min),
                compact_number(max)
            ),
        ));
    }
    Ok(())
}

/// The values a number, date or timestamp type can hold, in its stored unit (`None` for float64: any
/// finite value).
pub(crate) fn type_range(data_type: &DataType) -> Option<(f64, f64)> {
    use arrow::datatypes::DataType::*;
    Some(match data_type {
        Float32 => (f32::MIN as f64, f32::MAX as f64),
        Float64 => return None,
        Int8 => (i8::MIN as f64, i8::MAX as f64),
        Int16 => (i16::MIN as f64, i16::MAX as f64),
        Int32 | Date32 => (i32::MIN as f64, i32::MAX as f64),
        UInt8 => (0.0, u8::MAX as f64),
        UInt16 => (0.0, u16::MAX as f64),
        UInt32 => (0.0, u32::MAX as f64),
        UInt64 => (0.0, u64::MAX as f64),
        // A time of day counts its unit from midnight, below a day.
        Time32(unit) | Time64(unit) => (0.0, units_per_day(*unit) - 1.0),
        // Int64, Date64, timestamps and durations are stored as i64.
        _ => (i64::MIN as f64, i64::MAX as f64),
    })
}

fn units_per_day(unit: arrow::datatypes::TimeUnit) -> f64 {
    use arrow::datatypes::TimeUnit::*;
    86_400.0
        * match unit {
            Second => 1.0,
            Millisecond => 1e3,
            Microsecond => 1e6,
            Nanosecond => 1e9,
        }
}
