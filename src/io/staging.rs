//! Output files appear whole or not at all (docs/design.md).
//!
//! Every output is first written to a temporary file beside its target, named `.NAME.dpsynth-PID.tmp`, and
//! a run's outputs are then renamed into place together ([`commit_all`]): until that moment the old files
//! are untouched, and if one rename fails the ones already done are undone. Temporary files are removed
//! when dropped uncommitted (every error path), by the SIGINT/SIGTERM handler ([`remove_temporaries_on_signal`]),
//! and, after a SIGKILL, by the next run that writes beside them (the name says whose they were).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::io::paths::refuse_special_file;

/// Temporary files of this process that still exist: what a signal handler, or the out-of-memory exit
/// ([`remove_temporaries_without_allocating`]), must remove.
static LIVE_TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

const TEMPORARY_SUFFIX: &str = ".tmp";
const BACKUP_SUFFIX: &str = ".old";

fn register(path: &Path) {
    // The copy is made before the lock is taken: an allocation that fails while the list is held leaves
    // the out-of-memory exit unable to read it.
    let path = path.to_path_buf();
    live_temporaries().push(path);
}

fn unregister(path: &Path) {
    live_temporaries().retain(|live| live != path);
}

fn live_temporaries() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic while the list was held leaves it usable: it is only a list of paths.
    LIVE_TEMPORARIES.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `.NAME.dpsynth-PID` + `suffix`, beside `target` (same directory, so the rename is atomic).
fn sibling(target: &Path, pid: u32, suffix: &str) -> Result<PathBuf> {
    let name = target.file_name().ok_or_else(|| Error::in_file(target, "needs a file name"))?;
    let mut sibling = OsString::from(".");
    sibling.push(name);
    sibling.push(format!(".dpsynth-{pid}{suffix}"));
    Ok(target.with_file_name(sibling))
}

/// A file being written to a temporary path, renamed onto its target by [`commit_all`]; dropped
/// uncommitted, it removes its temporary file.
pub struct StagedFile {
    target: PathBuf,
    temporary: PathBuf,
}

impl StagedFile {
    /// Reserves the temporary path of `target` (creating nothing), after removing the temporaries that
    /// dead dpsynth processes left beside it.
    pub fn new(target: &Path) -> Result<Self> {
        refuse_special_file(target, "the output")?;
        remove_stale_temporaries(target);
        let temporary = sibling(target, std::process::id(), TEMPORARY_SUFFIX)?;
        register(&temporary);
        Ok(StagedFile { target: target.to_path_buf(), temporary })
    }

    /// A staged file holding `bytes`.
    pub fn with_bytes(target: &Path, bytes: &[u8]) -> Result<Self> {
        let staged = StagedFile::new(target)?;
        std::fs::write(&staged.temporary, bytes)
            .map_err(|error| Error::in_file(target, format!("cannot write: {error}")))?;
        Ok(staged)
    }

    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Where to write the contents.
    pub fn temporary(&self) -> &Path {
        &self.temporary
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.temporary);
        unregister(&self.temporary);
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    commit_all(vec![StagedFile::with_bytes(path, bytes)?])
}

/// Puts every staged file in place of its target, as one unit: if any step fails, the targets already
/// replaced get their old contents back (or are removed when they are new), so the outputs are all new
/// or all as before. An existing target never goes missing: its contents are swapped with the staged
/// file's in one step where the file system can ([`exchange`]), else it is first linked to a backup
/// (`.NAME.dpsynth-PID.old`) and the staged file renamed over it. The old contents are removed last.
pub fn commit_all(files: Vec<StagedFile>) -> Result<()> {
    let mut committed: Vec<Committed> = Vec::with_capacity(files.len());
    for file in &files {
        match put_in_place(file) {
            Ok(done) => committed.push(done),
            Err(error) => {
                for done in committed.iter().rev() {
                    done.undo();
                }
                return Err(error);
            }
        }
    }
    for done in committed {
        done.remove_old_contents();
    }
    Ok(())
}

/// What committing one file did, so that it can be undone.
enum Committed {
    /// The target did not exist; the staged file was renamed onto it.
    Created { target: PathBuf },
    /// The target's old contents are at `old`: the staged file's path after an exchange, or a backup.
    Replaced { target: PathBuf, old: PathBuf },
}

impl Committed {
    fn undo(&self) {
        let _ = match self {
            Committed::Created { target } => std::fs::remove_file(target),
            Committed::Replaced { target, old } => std::fs::rename(old, target),
        };
    }

    fn remove_old_contents(self) {
        if let Committed::Replaced { old, .. } = self {
            let _ = std::fs::remove_file(&old);
            unregister(&old);
        }
    }
}

fn put_in_place(file: &StagedFile) -> Result<Committed> {
    let cannot_move = |error: std::io::Error| {
        Error::in_file(
            &file.target,
            format!("cannot move the finished output into place (no output was changed): {error}"),
        )
    };
    let Ok(existing) = std::fs::symlink_metadata(&file.target) else {
        std::fs::rename(&file.temporary, &file.target).map_err(cannot_move)?;
        unregister(&file.temporary);
        return Ok(Committed::Created { target: file.target.clone() });
    };
    // A directory would be swapped too, and then be in the way: the backup below refuses it.
    if !existing.is_dir() && exchange(&file.temporary, &file.target).is_ok() {
        return Ok(Committed::Replaced { target: file.target.clone(), old: file.temporary.clone() });
    }
    let backup = sibling(&file.target, std::process::id(), BACKUP_SUFFIX)?;
    let _ = std::fs::remove_file(&backup);
    register(&backup);
    // A hard link keeps the old contents reachable without ever leaving the target missing; a copy
    // where the file system has no hard links.
    std::fs::hard_link(&file.target, &backup).or_else(|_| std::fs::copy(&file.target, &backup).map(|_| ())).map_err(
        |error| {
            unregister(&backup);
            Error::in_file(&file.target, format!("cannot keep the old file while replacing it: {error}"))
        },
    )?;
    if let Err(error) = std::fs::rename(&file.temporary, &file.target) {
        let _ = std::fs::remove_file(&backup);
        unregister(&backup);
        return Err(cannot_move(error));
    }
    unregister(&file.temporary);
    Ok(Committed::Replaced { target: file.target.clone(), old: backup })
}

/// Swaps the contents of two existing paths in one step (Linux's `renameat2` with `RENAME_EXCHANGE`).
/// Besides never leaving the target missing, it spares ext4 the flush it starts when a rename replaces a
/// file (`auto_da_alloc`): 0.7 s of a 10^8-row run's commit here (2-core VM, 1.6 GB output).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let path = |path: &Path| {
        CString::new(path.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (a, b) = (path(a)?, path(b)?);
    // SAFETY: both are NUL-terminated strings that live across the call; the call reads nothing else.
    let status = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if status == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Elsewhere a replacing rename, after a hard-link backup, does the job.
#[cfg(not(target_os = "linux"))]
fn exchange(_: &Path, _: &Path) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Removes `.NAME.dpsynth-PID.tmp` / `.old` files beside `target` whose process is gone (after a SIGKILL
/// or a power loss). Files of live processes, and any other file, are left alone.
fn remove_stale_temporaries(target: &Path) {
    let (Some(name), Some(directory)) = (target.file_name(), target.parent()) else {
        return;
    };
    let directory = if directory.as_os_str().is_empty() { Path::new(".") } else { directory };
    let prefix = format!(".{}.dpsynth-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|text| text.strip_prefix(&prefix)) else {
            continue;
        };
        let pid = rest
            .strip_suffix(TEMPORARY_SUFFIX)
            .or_else(|| rest.strip_suffix(BACKUP_SUFFIX))
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid {
            if pid != std::process::id() && process_is_gone(pid) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Whether no process `pid` exists. Where that cannot be known (no /proc), the file is kept.
fn process_is_gone(pid: u32) -> bool {
    let proc = Path::new("/proc");
    proc.join("self").exists() && !proc.join(pid.to_string()).exists()
}

/// Installs the SIGINT/SIGTERM handler of the CLI: it removes this process's temporary files, then exits
/// with 128 + the signal's number (130, 143), as a shell does. Without it the default action would leave
/// a partly written table of any size behind.
///
/// SIGXFSZ (a write past `ulimit -f`) is caught and does nothing, so the write fails with EFBIG instead of
/// killing the process: the error path then removes the temporaries and exits 2 with the file's name.
pub fn remove_temporaries_on_signal() -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGXFSZ};
    let file_size_limit_reached = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(SIGXFSZ, file_size_limit_reached)
        .map_err(|error| Error::internal(format!("cannot install the SIGXFSZ handler: {error}")))?;
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|error| Error::internal(format!("cannot install the signal handler: {error}")))?;
    std::thread::Builder::new()
        .name("dpsynth-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                for path in live_temporaries().iter() {
                    let _ = std::fs::remove_file(path);
                }
                eprintln!("dpsynth: interrupted; temporary files removed, no output written");
                std::process::exit(128 + signal);
            }
        })
        .map_err(|error| Error::internal(format!("cannot start the signal thread: {error}")))?;
    Ok(())
}

/// Removes this process's temporary files without allocating, for the out-of-memory exit
/// ([`crate::out_of_memory`]), which runs where the allocator has just failed. Returns whether the list of
/// them could be read: it cannot when another thread holds it past a few tries, or when the failed
/// allocation was the list's own growth (this thread then holds the lock further down its stack, and
/// waiting would never end); the files then stay for the next run to remove as stale.
#[cfg(target_os = "linux")]
pub(crate) fn remove_temporaries_without_allocating() -> bool {
    use std::os::unix::ffi::OsStrExt;
    use std::sync::TryLockError;
    for _ in 0..100 {
        let live = match LIVE_TEMPORARIES.try_lock() {
            Ok(live) => live,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                // SAFETY: usleep takes a number and only waits.
                unsafe { libc::usleep(1000) };
                continue;
            }
        };
        for path in live.iter() {
            // unlink(2) wants a NUL-terminated string; a path too long for the stack buffer is too long
            // for the kernel as well (ENAMETOOLONG).
            let mut name = [0u8; libc::PATH_MAX as usize];
            let bytes = path.as_os_str().as_bytes();
            if bytes.len() < name.len() && !bytes.contains(&0) {
                name[..bytes.len()].copy_from_slice(bytes);
                // SAFETY: `name` is NUL-terminated (its bytes after the path are zero) and outlives the call.
                unsafe { libc::unlink(name.as_ptr().cast()) };
            }
        }
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(directory: &Path) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(directory)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn exchange_swaps_the_contents_of_two_paths() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, "first").unwrap();
        std::fs::write(&b, "second").unwrap();
        exchange(&a, &b).unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "second");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "first");
        assert!(exchange(&a, &dir.path().join("missing")).is_err());
    }

    #[test]
    fn replacing_commits_leave_only_the_new_files() {
        let dir = tempfile::tempdir().unwrap();
        let (table, report) = (dir.path().join("table.parquet"), dir.path().join("report.json"));
        std::fs::write(&table, "old table").unwrap();
        let staged = vec![
            StagedFile::with_bytes(&table, b"new table").unwrap(),
            StagedFile::with_bytes(&report, b"new report").unwrap(),
        ];
        commit_all(staged).unwrap();
        assert_eq!(std::fs::read_to_string(&table).unwrap(), "new table");
        assert_eq!(std::fs::read_to_string(&report).unwrap(), "new report");
        assert_eq!(names_in(dir.path()), ["report.json", "table.parquet"]);
        assert!(
            !live_temporaries().iter().any(|path| path.starts_with(dir.path())),
            "committed files are still registered"
        );
    }

    #[test]
    fn a_failed_commit_restores_every_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report.json");
        std::fs::write(&report, "old report").unwrap();
        let blocked = dir.path().join("table.parquet");
        std::fs::create_dir(&blocked).unwrap();
        let staged_report = StagedFile::with_bytes(&report, b"new report").unwrap();
        // The table's target becomes a directory after staging: its rename fails.
        let staged_table = {
            std::fs::remove_dir(&blocked).unwrap();
            let staged = StagedFile::with_bytes(&blocked, b"table").unwrap();
            std::fs::create_dir(&blocked).unwrap();
            std::fs::write(blocked.join("keep"), "x").unwrap();
            staged
        };
        assert!(commit_all(vec![staged_report, staged_table]).is_err());
        assert_eq!(std::fs::read_to_string(&report).unwrap(), "old report");
        assert_eq!(names_in(dir.path()), ["report.json", "table.parquet"]);
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.parquet");
        // A PID above any kernel's pid_max has no /proc entry.
        let dead = sibling(&target, u32::MAX - 1, TEMPORARY_SUFFIX).unwrap();
        let ours_unrelated = dir.path().join(".other.parquet.dpsynth-1.tmp");
        std::fs::write(&dead, "stale").unwrap();
        std::fs::write(&ours_unrelated, "not ours to judge").unwrap();
        let staged = StagedFile::new(&target).unwrap();
        assert!(!dead.exists(), "a dead process's temporary stays");
        assert!(ours_unrelated.exists(), "another target's file was touched");
        assert_eq!(
            staged.temporary().file_name().unwrap().to_str().unwrap(),
            format!(".out.parquet.dpsynth-{}.tmp", std::process::id())
        );
    }
}
