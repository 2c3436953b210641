//! `inspect`: what a Parquet file or dataset holds (schema, row count, files, row groups, and what a
//! synthetic file says of itself), read from the footers alone; and a config template for its columns.
//! Nothing about the values is computed; column statistics are deliberately not shown.

use std::fmt::Write;
use std::path::Path;

use arrow::datatypes::{DataType, Field};

use crate::error::Result;
use crate::io::domain::is_string_type;
use crate::io::source::{is_numeric, Source};
use crate::synth::columns::domain_snippet;
use crate::synth::report::METADATA_PREFIX;

pub fn describe(path: &Path, hive_columns: bool) -> Result<String> {
    let source = Source::open_with(path, hive_columns)?;
    let files = source.files();
    let metadata = files[0].parquet_metadata();
    let mut text = String::new();
    if files.len() == 1 && files[0].path() == path {
        let _ = writeln!(text, "file: {}", path.display());
    } else {
        let _ = writeln!(text, "dataset: {} ({} files)", path.display(), files.len());
    }
    let _ = writeln!(text, "rows: {}", source.row_count());
    let _ = writeln!(text, "row groups: {}", source.row_group_count());
    let _ = writeln!(
        text,
        "page checksums: {}",
        if source.has_page_checksums() { "yes (verified when read)" } else { "none" }
    );
    let _ = writeln!(text, "columns{}:", if files.len() > 1 { " (of the first file)" } else { "" });
    for (index, field) in source.schema().fields().iter().enumerate() {
        let compression = metadata
            .row_groups()
            .first()
            .and_then(|group| group.columns().get(index))
            .map(|column| format!("{:?}", column.compression()))
            .unwrap_or_else(|| "-".to_string());
        let _ = writeln!(
            text,
            "  {:<24} {:<28} {:<9} {:<11} {}",
            field.name(),
            field.data_type().to_string(),
            if field.is_nullable() { "nullable" } else { "required" },
            compression,
            domain_kind(field.data_type()),
        );
    }
    let synthetic: Vec<_> = metadata
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .filter(|pair| pair.key.starts_with(METADATA_PREFIX))
        .collect();
    if !synthetic.is_empty() {
        let _ = writeln!(text, "synthetic table (its footer's {METADATA_PREFIX}* keys):");
        for pair in synthetic {
            let _ = writeln!(text, "  {:<24} {}", pair.key, pair.value.as_deref().unwrap_or(""));
        }
    }
    if files.len() > 1 {
        let _ = writeln!(text, "files (rows, row groups, compressed bytes):");
        for file in files {
            let groups = file.parquet_metadata().row_groups();
            let _ = writeln!(
                text,
                "  {:>12} rows {:>6} groups {:>14} bytes  {}",
                file.row_count(),
                groups.len(),
                groups.iter().map(|group| group.compressed_size()).sum::<i64>(),
                file.path().display()
            );
        }
        return Ok(text);
    }
    let _ = writeln!(text, "row groups (rows, compressed bytes):");
    for (index, group) in metadata.row_groups().iter().enumerate() {
        let _ = writeln!(text, "  {index:>5}: {:>12} rows {:>14} bytes", group.num_rows(), group.compressed_size());
    }
    Ok(text)
}

/// The domain a column of `data_type` needs before synth can read it.
fn domain_kind(data_type: &DataType) -> &'static str {
    match data_type {
        DataType::Boolean => "needs no domain",
        _ if is_numeric(data_type) => "needs bounds (or a category list)",
        _ if is_string_type(data_type) => "needs a category list",
        _ => "not readable",
    }
}

/// A config file for `synth` on `path`: every column with its type and a placeholder domain to fill in
/// from public knowledge. Written from the schema alone, never from values (docs/usage.md).
pub fn config_template(path: &Path, hive_columns: bool) -> Result<String> {
    let source = Source::open_with(path, hive_columns)?;
    let schema = source.schema();
    let fields: Vec<Field> = schema.fields().iter().map(|field| field.as_ref().clone()).collect();
    let (booleans, needing): (Vec<Field>, Vec<Field>) =
        fields.iter().cloned().partition(|field| *field.data_type() == DataType::Boolean);
    let (readable, unreadable): (Vec<Field>, Vec<Field>) =
        needing.into_iter().partition(|field| is_numeric(field.data_type()) || is_string_type(field.data_type()));
    let names =
        |fields: &[Field]| fields.iter().map(|field| format!("{:?}", field.name())).collect::<Vec<_>>().join(", ");
    let mut text = format!(
        "# A config file for `dpsynth synth {input} --config THIS_FILE --epsilon E --output OUT.parquet`,\n\
         # written by `dpsynth inspect --config-template` from the table's schema alone (names, types,\n\
         # nullability): nothing in it was read from the values.\n\
         #\n\
         # Fill in every domain below from PUBLIC knowledge: a data dictionary, the definition of the measurement,\n\
         # a published code list. Never from the data itself: bounds or categories read from the table are not\n\
         # covered by the privacy guarantee. A value outside its bounds is clamped to them; a value outside its\n\
         # category list stops the run (or becomes 'other' with `unlisted = \"other\"`). A number, date or\n\
         # timestamp without public bounds may have them released privately instead (`private-bounds = 0.1`\n\
         # spends that share of ε on them); a category list never can be, under pure ε-DP.\n\
         #\n\
         # Each domain line below is commented out: uncomment it once its placeholder (LO, HI, \"A\", ...) is\n\
         # replaced. Until every used column has one, synth stops and lists the columns still without a domain.\n\
         #\n\
         # Nullable columns keep null as a value of their domain (`nulls = \"keep\"`, the default).\n",
        input = path.display()
    );
    if !booleans.is_empty() {
        let _ = writeln!(text, "# Boolean columns need no domain: {}.", names(&booleans));
    }
    if !unreadable.is_empty() {
        let _ = writeln!(
            text,
            "# Columns of types dpsynth cannot read are left out of `columns`: {}.",
            unreadable
                .iter()
                .map(|field| format!("{} ({})", field.name(), field.data_type()))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let used: Vec<Field> = fields.into_iter().filter(|field| !unreadable.contains(field)).collect();
    let _ = writeln!(text, "\ncolumns = [{}]", names(&used));
    let snippet = domain_snippet(&readable);
    if !snippet.is_empty() {
        let _ = writeln!(text);
    }
    for line in snippet.lines() {
        match line.starts_with('[') || line.is_empty() {
            true => text += &format!("{line}\n"),
            false => text += &format!("# {line}\n"),
        }
    }
    Ok(text)
}
