//! `inspect`: what a Parquet file or dataset holds (schema, row count, files, row groups), read from the
//! footers alone. Nothing about the values is computed; column statistics are deliberately not shown.

use std::fmt::Write;
use std::path::Path;

use crate::error::Result;
use crate::io::source::{is_numeric, Source};

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
            if is_numeric(field.data_type()) { "usable" } else { "not numeric" },
        );
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
