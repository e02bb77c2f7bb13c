//! One process drives the fabric at a time.
//!
//! `fabricd serve` and `fabricd generate` both reset the rings when they
//! attach, which would pull the rug from under another one. They take an
//! exclusive `flock` on `<root>/run/fabricd.lock` first; the kernel drops it
//! when the process dies, so a crash never leaves a stale lock.

use std::fs::File;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("creating {path}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is held by another process: a fabricd is already driving this fabric (stop it, or talk to it over HTTP)")]
    Held { path: PathBuf },
    #[error("locking {path}: {errno}")]
    Lock {
        path: PathBuf,
        errno: nix::errno::Errno,
    },
}

/// The held lock; released on drop.
#[derive(Debug)]
pub struct FabricLock {
    _lock: Flock<File>,
}

/// The lock file under a root.
pub fn lock_path(root: &Path) -> PathBuf {
    root.join("run/fabricd.lock")
}

impl FabricLock {
    /// Takes the lock or says who holds it.
    pub fn take(root: &Path) -> Result<FabricLock, LockError> {
        let path = lock_path(root);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| LockError::Create {
                path: path.clone(),
                source,
            })?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| LockError::Create {
                path: path.clone(),
                source,
            })?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Ok(FabricLock { _lock: lock }),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(LockError::Held { path }),
            Err((_, errno)) => Err(LockError::Lock { path, errno }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_taker_is_told_who_holds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = FabricLock::take(dir.path()).expect("first");
        let err = FabricLock::take(dir.path()).expect_err("held");
        assert!(err.to_string().contains("already driving"), "{err}");
        drop(first);
        FabricLock::take(dir.path()).expect("free again");
    }
}
