//! Output paths are checked before anything is read: an output never replaces an input, two outputs
//! never share a file (the publishable report must not become the private diagnostics), and no output
//! is a directory. Files are compared through any path to them: canonical paths (symbolic links and
//! `..` resolved) and, on Unix, the (device, inode) pair (hard links).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::source::dataset::expand_input;

/// A path with the option that named it, for messages (`--report`, `the input`).
#[derive(Clone, Copy, Debug)]
pub struct NamedPath<'a> {
    pub role: &'a str,
    pub path: &'a Path,
}

impl<'a> NamedPath<'a> {
    pub fn new(role: &'a str, path: &'a Path) -> Self {
        NamedPath { role, path }
    }
}

/// Where a run writes. The table, the report and the diagnostics appear together or not at all.
#[derive(Clone, Debug)]
pub struct OutputPaths {
    pub table: PathBuf,
    pub report: Option<PathBuf>,
    pub diagnostics: Option<PathBuf>,
}

impl OutputPaths {
    /// Each output with its flag, for [`check_output_paths`].
    pub fn named(&self) -> Vec<NamedPath<'_>> {
        let mut named = vec![NamedPath::new("--output", &self.table)];
        named.extend(self.report.as_deref().map(|path| NamedPath::new("--report", path)));
        named.extend(self.diagnostics.as_deref().map(|path| NamedPath::new("--diagnostics", path)));
        named
    }
}

/// Refuses outputs that are directories, that are an input (a file, a file a glob matches, or a file
/// anywhere inside an input directory: a dataset's next run would read it), or that are another output.
pub fn check_output_paths(inputs: &[NamedPath], outputs: &[NamedPath]) -> Result<()> {
    for output in outputs {
        refuse_special_file(output.path, output.role)?;
        if output.path.file_name().is_none() {
            return Err(Error::in_file(output.path, format!("{} needs a file name", output.role)));
        }
    }
    for output in outputs {
        if let Some(input) = inputs.iter().find(|input| is_inside_directory(output.path, input.path)) {
            return Err(Error::in_file(
                output.path,
                format!(
                    "{} is inside {} ({}), a directory read as a dataset: a later run would read it as input; \
                     write it elsewhere",
                    output.role,
                    input.role,
                    input.path.display()
                ),
            ));
        }
        let matched = |input: &NamedPath| {
            same_file(output.path, input.path)
                || (!input.path.exists()
                    && (expand_input(input.path)
                        .is_ok_and(|files| files.iter().any(|file| same_file(output.path, file)))
                        || glob_would_match(input.path, output.path)))
        };
        if let Some(input) = inputs.iter().find(|input| matched(input)) {
            return Err(Error::in_file(
                output.path,
                format!(
                    "{} would overwrite {} ({}); choose another output path",
                    output.role,
                    input.role,
                    input.path.display()
                ),
            ));
        }
    }
    for (k, first) in outputs.iter().enumerate() {
        if let Some(second) = outputs[k + 1..].iter().find(|second| same_file(first.path, second.path)) {
            return Err(Error::in_file(
                second.path,
                format!("{} and {} name the same file; each output needs its own path", first.role, second.role),
            ));
        }
    }
    Ok(())
}

/// Refuses an output path where something other than a regular file stands: a directory, or a FIFO, a
/// device (`/dev/null`) or a socket, which the output's rename would replace with a regular file. A link is
/// followed; a path where nothing stands is fine.
pub fn refuse_special_file(path: &Path, role: &str) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.is_dir() => {
            Err(Error::in_file(path, format!("{role} is a directory; give a file path")))
        }
        Ok(metadata) if !metadata.is_file() => Err(Error::in_file(
            path,
            format!(
                "{role} is not a regular file (a FIFO, a device or a socket): writing it would replace that with a \
                 regular file; give another path"
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether `path` is (or, once written, would be) somewhere under the directory `directory`.
pub fn is_inside_directory(path: &Path, directory: &Path) -> bool {
    let Ok(directory) = directory.canonicalize() else {
        return false;
    };
    directory.is_dir() && FileIdentity::of(path).canonical.is_some_and(|canonical| canonical.starts_with(&directory))
}

/// Whether the glob `pattern` (an input not yet expanded) would match `path` once it is written: a later
/// run with the same input would read it. Compared as given and with both made absolute.
fn glob_would_match(pattern: &Path, path: &Path) -> bool {
    let Ok(glob) = glob::Pattern::new(&pattern.to_string_lossy()) else {
        return false;
    };
    let absolute_pattern =
        std::path::absolute(pattern).ok().and_then(|absolute| glob::Pattern::new(&absolute.to_string_lossy()).ok());
    let canonical = FileIdentity::of(path).canonical;
    glob.matches_path(path)
        || absolute_pattern.is_some_and(|absolute| {
            std::path::absolute(path).is_ok_and(|path| absolute.matches_path(&path))
                || canonical.is_some_and(|canonical| absolute.matches_path(&canonical))
        })
}

/// Whether `a` and `b` are (or, once written, would be) the same file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (a, b) = (FileIdentity::of(a), FileIdentity::of(b));
    let same_path = matches!((&a.canonical, &b.canonical), (Some(x), Some(y)) if x == y);
    let same_inode = matches!((a.inode, b.inode), (Some(x), Some(y)) if x == y);
    same_path || same_inode
}

struct FileIdentity {
    /// The canonical path; for a file that does not exist yet, its canonical directory and its name.
    canonical: Option<PathBuf>,
    /// (device, inode) of an existing file.
    inode: Option<(u64, u64)>,
}

impl FileIdentity {
    fn of(path: &Path) -> Self {
        if let Ok(canonical) = path.canonicalize() {
            return FileIdentity { inode: inode(&canonical), canonical: Some(canonical) };
        }
        let directory = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        // A directory not created yet has no canonical form: its absolute path still tells two
        // spellings of one new file apart from two files.
        let directory = directory.canonicalize().or_else(|_| std::path::absolute(directory)).ok();
        FileIdentity {
            canonical: directory.zip(path.file_name()).map(|(directory, name)| directory.join(name)),
            inode: None,
        }
    }
}

#[cfg(unix)]
fn inode(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|metadata| (metadata.dev(), metadata.ino()))
}

#[cfg(not(unix))]
fn inode(_path: &Path) -> Option<(u64, u64)> {
    None
}

/// dpsynth writes Parquet: an output named for another format (`out.csv`) is refused rather than written as
/// Parquet under that name. A name without an extension (an MPI run's directory of parts) is taken as it is.
pub fn check_parquet_extension(path: &Path, flag: &str) -> Result<()> {
    match path.extension().and_then(|extension| extension.to_str()) {
        None => Ok(()),
        Some(extension) if ["parquet", "parq", "pq"].contains(&extension.to_ascii_lowercase().as_str()) => Ok(()),
        Some(extension) => Err(Error::in_file(
            path,
            format!(
                "{flag} names a .{extension} file, but dpsynth writes Parquet: name it .parquet (convert it \
                 afterwards with any Parquet reader, e.g. pyarrow or DuckDB, if you need .{extension})"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_file_through_any_path_or_link() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("real.parquet");
        std::fs::write(&input, b"x").unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert!(same_file(&sub.join("..").join("real.parquet"), &input));
        assert!(same_file(&input, &input));
        assert!(!same_file(&dir.path().join("out.json"), &input));
        assert!(!same_file(&dir.path().join("missing").join("real.parquet"), &input));
        let hard = dir.path().join("hard.parquet");
        std::fs::hard_link(&input, &hard).unwrap();
        assert!(same_file(&hard, &input), "hard link");
        #[cfg(unix)]
        {
            let soft = sub.join("soft.parquet");
            std::os::unix::fs::symlink(&input, &soft).unwrap();
            assert!(same_file(&soft, &input), "symbolic link");
        }
        let new = dir.path().join("new.json");
        assert!(same_file(&new, &sub.join("..").join("new.json")), "two paths to a file not yet written");
        let unborn = dir.path().join("not-yet").join("eval.json");
        assert!(same_file(&unborn, &unborn), "a file in a directory not yet created");
    }

    #[test]
    fn outputs_clash_with_inputs_and_with_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.parquet");
        std::fs::write(&input, b"x").unwrap();
        let report = dir.path().join("r.json");
        let inputs = [NamedPath::new("the input", &input)];
        let error = check_output_paths(
            &inputs,
            &[NamedPath::new("--report", &report), NamedPath::new("--diagnostics", &report)],
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("--report and --diagnostics name the same file"), "{error}");
        let error = check_output_paths(&inputs, &[NamedPath::new("--json", &input)]).unwrap_err().to_string();
        assert!(error.contains("--json would overwrite the input"), "{error}");
        let error = check_output_paths(&inputs, &[NamedPath::new("--output", dir.path())]).unwrap_err().to_string();
        assert!(error.contains("is a directory"), "{error}");
        assert!(check_output_paths(&inputs, &[NamedPath::new("--report", &report)]).is_ok());
    }
}
