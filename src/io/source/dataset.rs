//! What files an INPUT names: a Parquet file; a directory, whose `*.parquet` files are found recursively
//! and read in path order (hidden entries, such as dpsynth's own temporaries `.NAME.dpsynth-PID.tmp`,
//! skipped, and so is anything but a regular file); or a glob (`*`, `?`, `[...]`), whose matches (regular
//! files) are read in path order.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The files of `input`, in reading order; never empty.
pub fn expand_input(input: &Path) -> Result<Vec<PathBuf>> {
    let text = input.to_string_lossy();
    if !input.exists() && text.contains(['*', '?', '[']) {
        return expand_glob(input, &text);
    }
    let metadata = std::fs::metadata(input).map_err(|error| Error::in_file(input, format!("cannot open: {error}")))?;
    if metadata.is_file() {
        return Ok(vec![input.to_path_buf()]);
    }
    if !metadata.is_dir() {
        return Err(Error::in_file(
            input,
            "is not a regular file (a FIFO, a device or a socket): Parquet is read by position, so give a file, \
             a directory of them or a glob",
        ));
    }
    let mut files = Vec::new();
    let mut visited = Vec::new();
    collect_parquet_files(input, &mut files, &mut visited)?;
    if files.is_empty() {
        return Err(Error::in_file(
            input,
            "the directory holds no *.parquet files (searched recursively, hidden entries skipped)",
        ));
    }
    files.sort();
    Ok(files)
}

/// The `*.parquet` files under `directory`, at any depth, hidden entries skipped. A directory reached
/// twice (through a symbolic link, possibly a loop) is read once.
fn collect_parquet_files(directory: &Path, files: &mut Vec<PathBuf>, visited: &mut Vec<PathBuf>) -> Result<()> {
    let canonical =
        directory.canonicalize().map_err(|error| Error::in_file(directory, format!("cannot open: {error}")))?;
    if visited.contains(&canonical) {
        return Ok(());
    }
    visited.push(canonical);
    let entries = std::fs::read_dir(directory)
        .map_err(|error| Error::in_file(directory, format!("cannot list the directory: {error}")))?;
    for entry in entries {
        let entry = entry.map_err(|error| Error::in_file(directory, format!("cannot list the directory: {error}")))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let kind = std::fs::metadata(&path).map_err(|error| Error::in_file(&path, format!("cannot open: {error}")))?;
        if kind.is_dir() {
            collect_parquet_files(&path, files, visited)?;
        } else if kind.is_file() && path.extension().is_some_and(|extension| extension == "parquet") {
            // A FIFO or a device named *.parquet is skipped, as a glob skips it: reading it would block.
            files.push(path);
        }
    }
    Ok(())
}

/// The Hive-style `key=value` folders between `root` and `file`, outermost first (`year=2024/month=3/`
/// gives ("year", "2024"), ("month", "3")); folders without `=` are skipped.
pub fn hive_partitions(root: &Path, file: &Path) -> Vec<(String, String)> {
    let relative = file.strip_prefix(root).unwrap_or(file);
    relative
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .filter_map(|component| {
            let (key, value) = component.as_os_str().to_str()?.split_once('=')?;
            Some((key.to_string(), value.to_string()))
        })
        .collect()
}

fn expand_glob(input: &Path, pattern: &str) -> Result<Vec<PathBuf>> {
    let matches = glob::glob(pattern).map_err(|error| Error::in_file(input, format!("not a valid glob: {error}")))?;
    let mut files = Vec::new();
    for found in matches {
        let path = found.map_err(|error| Error::in_file(error.path(), format!("cannot read: {}", error.error())))?;
        if path.is_file() {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(Error::in_file(input, "the glob matches no files"));
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }

    #[test]
    fn directories_are_searched_recursively_in_path_order_without_hidden_or_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in [
            "b.parquet",
            "a/2.parquet",
            "a/10.parquet",
            "year=2024/x.parquet",
            "notes.txt",
            ".b.parquet.dpsynth-7.tmp",
            ".hidden/c.parquet",
        ] {
            touch(&root.join(name));
        }
        let files = expand_input(root).unwrap();
        let relative: Vec<String> =
            files.iter().map(|path| path.strip_prefix(root).unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(relative, ["a/10.parquet", "a/2.parquet", "b.parquet", "year=2024/x.parquet"]);
    }

    /// A FIFO named *.parquet would block the run that opened it: a directory input skips it, as a glob does.
    #[cfg(unix)]
    #[test]
    fn special_files_in_a_directory_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(&root.join("a.parquet"));
        let made = std::process::Command::new("mkfifo").arg(root.join("b.parquet")).status().unwrap();
        assert!(made.success());
        let files = expand_input(root).unwrap();
        assert_eq!(files, [root.join("a.parquet")]);
        let pattern = root.join("*.parquet");
        assert_eq!(expand_input(&pattern).unwrap(), [root.join("a.parquet")]);
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_loop_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        touch(&root.join("a/1.parquet"));
        std::os::unix::fs::symlink(root, root.join("a/up")).unwrap();
        let files = expand_input(root).unwrap();
        assert_eq!(files, [root.join("a/1.parquet")]);
    }

    #[test]
    fn globs_match_in_path_order_and_an_empty_match_or_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in ["p1.parquet", "p0.parquet", "q.parquet"] {
            touch(&root.join(name));
        }
        let files = expand_input(&root.join("p*.parquet")).unwrap();
        assert_eq!(files, [root.join("p0.parquet"), root.join("p1.parquet")]);
        let none = expand_input(&root.join("z*.parquet")).unwrap_err().to_string();
        assert!(none.contains("matches no files"), "{none}");
        let empty = root.join("empty");
        std::fs::create_dir(&empty).unwrap();
        let error = expand_input(&empty).unwrap_err().to_string();
        assert!(error.contains("no *.parquet files") && error.contains("empty"), "{error}");
        assert_eq!(expand_input(&root.join("q.parquet")).unwrap(), [root.join("q.parquet")]);
    }
}
