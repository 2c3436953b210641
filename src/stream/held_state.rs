//! One run at a time on a stream's state. Two runs that both read a state start from the same noise key
//! (their releases would share noise) and the later save loses the other's rows, which a third run would
//! then accept again. So a run holds an advisory lock on a file beside the state for as long as it runs,
//! and before each save it checks that the state on disk is still the one it read or last wrote (a
//! filesystem that ignores advisory locks still cannot lose a run's rows in silence).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::mechanism::online::state::OnlineState;

/// The state file of one run, locked against other runs.
pub struct HeldState {
    path: PathBuf,
    /// Held open: the lock lasts until the run ends (the file is closed on drop).
    _lock: File,
    /// The state file as this run last saw it (`None`: there was none).
    seen: Option<FileVersion>,
}

/// What tells two versions of a file apart without reading it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileVersion {
    inode: (u64, u64),
    length: u64,
    modified: Option<SystemTime>,
}

impl FileVersion {
    fn of(path: &Path) -> Result<Option<Self>> {
        match std::fs::metadata(path) {
            Ok(metadata) => Ok(Some(FileVersion {
                inode: inode(&metadata),
                length: metadata.len(),
                modified: metadata.modified().ok(),
            })),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(Error::in_file(path, format!("cannot read the state: {error}"))),
        }
    }
}

#[cfg(unix)]
fn inode(metadata: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (metadata.dev(), metadata.ino())
}

#[cfg(not(unix))]
fn inode(_metadata: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// The lock file of the state at `state`: hidden beside it (a directory read as a dataset skips it).
pub fn lock_path(state: &Path) -> PathBuf {
    let name = state.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    state.with_file_name(format!(".{name}.lock"))
}

impl HeldState {
    /// Locks the state at `path` for this run, or refuses when another run holds it.
    pub fn lock(path: &Path) -> Result<Self> {
        let lock_file = lock_path(path);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_file)
            .map_err(|error| Error::in_file(&lock_file, format!("cannot open the state's lock file: {error}")))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::in_file(
                    path,
                    format!(
                        "another dpsynth stream run is using this state (it holds {}): wait for it to end; two \
                         runs on one state would share their noise and lose one run's rows",
                        lock_file.display()
                    ),
                ))
            }
            Err(TryLockError::Error(error)) => {
                return Err(Error::in_file(&lock_file, format!("cannot lock the state's lock file: {error}")))
            }
        }
        Ok(HeldState { path: path.to_path_buf(), _lock: lock, seen: None })
    }

    /// The state as it is on disk (`None`: no stream yet), remembered for [`HeldState::save`]'s check.
    pub fn load(&mut self) -> Result<Option<OnlineState>> {
        let before = FileVersion::of(&self.path)?;
        let state = OnlineState::load(&self.path)?;
        if FileVersion::of(&self.path)? != before {
            return Err(self.changed());
        }
        self.seen = before;
        Ok(state)
    }

    /// Saves `state` atomically, after checking that the file is still the version this run read or wrote.
    pub fn save(&mut self, state: &OnlineState) -> Result<()> {
        if FileVersion::of(&self.path)? != self.seen {
            return Err(self.changed());
        }
        state.save(&self.path)?;
        self.seen = FileVersion::of(&self.path)?;
        Ok(())
    }

    fn changed(&self) -> Error {
        Error::in_file(
            &self.path,
            "the state changed on disk while this run used it (another run on the same state?): nothing more \
             was saved; run again to continue from the state as it is now",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::online::state::StreamParameters;
    use crate::mechanism::online::{OnlinePlan, OnlineTree};

    fn empty_state() -> OnlineState {
        OnlineState {
            parameters: StreamParameters { epsilon: 1.0, columns: Vec::new(), seed: Some(1) },
            noise_key: [0; 32],
            consistency_seed: 1,
            placement_seed: 2,
            consumed: Vec::new(),
            tree: OnlineTree::new(OnlinePlan::new(1.0, 1).unwrap()),
        }
    }

    #[test]
    fn a_second_holder_is_refused_until_the_first_ends() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("stream.state");
        let first = HeldState::lock(&state).unwrap();
        let refused = HeldState::lock(&state).err().expect("the state is held").to_string();
        assert!(refused.contains("another dpsynth stream run is using this state"), "{refused}");
        drop(first);
        HeldState::lock(&state).expect("the lock ends with its run");
        assert!(lock_path(&state).file_name().unwrap().to_string_lossy().starts_with('.'));
    }

    #[test]
    fn a_state_changed_under_the_run_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("stream.state");
        let mut held = HeldState::lock(&state).unwrap();
        assert!(held.load().unwrap().is_none());
        std::fs::write(&state, b"written by someone else").unwrap();
        let error = held.save(&empty_state()).unwrap_err().to_string();
        assert!(error.contains("changed on disk"), "{error}");
        assert_eq!(std::fs::read(&state).unwrap(), b"written by someone else", "the other write is kept");
    }
}
