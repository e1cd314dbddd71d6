//! Certificates from a directory, the cert-manager mode: a serving pair
//! mounted from a Secret that cert-manager (or anything else) keeps,
//! reloaded when the files change.
//!
//! [`CertDir::run`] polls the files' modification times and sizes on an
//! interval (tokio's clock) and loads a changed pair into the
//! [`CertResolver`]; a pair that does not load (a half-written file, a key
//! that does not match) is logged and the pair already served stays until
//! the next good one. Kubernetes updates a mounted Secret by swapping a
//! symlink, so both files change together.
//!
//! Part of the serving certificates ([`crate::tls`]); uses only the filesystem.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::listener::{CertResolver, TlsError};

/// Why the pair could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertDirError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The files do not hold a usable pair.
    #[error("loading the pair from {dir}: {source}")]
    Load {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: TlsError,
    },
}

/// A serving pair read from `dir/tls.crt` and `dir/tls.key` (the keys of
/// a `kubernetes.io/tls` Secret, as cert-manager writes them).
///
/// ```no_run
/// use controller_runtime::tls::{CertDir, CertResolver};
/// # async fn run(stop: tokio_util::sync::CancellationToken) -> Result<(), Box<dyn std::error::Error>> {
/// let resolver = CertResolver::new();
/// let certs = CertDir::new("/tmp/k8s-webhook-server/serving-certs", resolver.clone());
/// certs.load()?;
/// tokio::spawn(certs.run(stop));
/// # Ok(()) }
/// ```
#[must_use]
#[derive(Debug, Clone)]
pub struct CertDir {
    dir: PathBuf,
    cert: String,
    key: String,
    interval: Duration,
    resolver: CertResolver,
}

/// What the poll compares: modification time and size of both files.
type Stamp = [Option<(SystemTime, u64)>; 2];

impl CertDir {
    /// The pair in `dir` (`tls.crt`, `tls.key`), checked every 10 seconds.
    pub fn new(dir: impl Into<PathBuf>, resolver: CertResolver) -> Self {
        CertDir {
            dir: dir.into(),
            cert: "tls.crt".into(),
            key: "tls.key".into(),
            interval: Duration::from_secs(10),
            resolver,
        }
    }

    /// Other file names in the directory.
    pub fn file_names(mut self, cert: impl Into<String>, key: impl Into<String>) -> Self {
        self.cert = cert.into();
        self.key = key.into();
        self
    }

    /// How often the files are checked.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    fn paths(&self) -> [PathBuf; 2] {
        [self.dir.join(&self.cert), self.dir.join(&self.key)]
    }

    fn stamp(&self) -> Stamp {
        let of = |p: &Path| {
            let m = std::fs::metadata(p).ok()?;
            Some((m.modified().ok()?, m.len()))
        };
        let [c, k] = self.paths();
        [of(&c), of(&k)]
    }

    /// Reads the pair and serves it.
    pub fn load(&self) -> Result<(), CertDirError> {
        let [c, k] = self.paths();
        let read =
            |p: PathBuf| std::fs::read(&p).map_err(|source| CertDirError::Read { path: p, source });
        let (cert, key) = (read(c)?, read(k)?);
        self.resolver
            .load_pem(&cert, &key)
            .map_err(|source| CertDirError::Load {
                dir: self.dir.clone(),
                source,
            })
    }

    /// Reloads the pair whenever the files change, until `stop` fires.
    pub async fn run(self, stop: CancellationToken) {
        let mut seen = self.stamp();
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let now = self.stamp();
            if now == seen {
                continue;
            }
            match self.load() {
                Ok(()) => {
                    tracing::info!(dir = %self.dir.display(), "reloaded the webhook serving certificate");
                    seen = now;
                }
                // Retried at the next tick (the stamp is not recorded).
                Err(e) => {
                    tracing::warn!(error = %e, "the changed webhook certificate does not load; keeping the one served")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::tls::SelfSigned;

    fn pair() -> SelfSigned {
        SelfSigned::generate_for(
            &["localhost".into()],
            SystemTime::now(),
            Duration::from_secs(3600),
        )
        .unwrap()
    }

    fn write(dir: &Path, p: &SelfSigned, at: SystemTime) {
        for (name, text) in [("tls.crt", p.cert_pem()), ("tls.key", p.key_pem())] {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(at)
                .unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_pair_is_reloaded_at_the_next_poll_and_a_broken_one_is_not() {
        let dir = std::env::temp_dir().join(format!("certdir-{}", uuid_like()));
        std::fs::create_dir_all(&dir).unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let (a, b) = (pair(), pair());
        write(&dir, &a, t0);
        let resolver = CertResolver::new();
        let certs = CertDir::new(&dir, resolver.clone()).poll_interval(Duration::from_secs(10));
        certs.load().unwrap();
        let first = resolver.current_leaf().unwrap();
        let stop = CancellationToken::new();
        let task = tokio::spawn(certs.run(stop.clone()));
        tokio::task::yield_now().await;

        // A half-written key: the old pair stays.
        write(&dir, &b, t0 + Duration::from_secs(5));
        std::fs::write(dir.join("tls.key"), "-----BEGIN PRIVATE KEY-----\ngarbage").unwrap();
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(resolver.current_leaf().unwrap(), first);

        // The whole new pair: served after the next poll, not before.
        write(&dir, &b, t0 + Duration::from_secs(20));
        assert_eq!(resolver.current_leaf().unwrap(), first);
        tokio::time::sleep(Duration::from_secs(10)).await;
        let second = resolver.current_leaf().unwrap();
        let expected = CertResolver::new();
        expected
            .load_pem(b.cert_pem().as_bytes(), b.key_pem().as_bytes())
            .unwrap();
        assert_eq!(Some(second), expected.current_leaf());

        stop.cancel();
        task.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn uuid_like() -> String {
        format!("{}-{}", std::process::id(), rand::random::<u64>())
    }
}
