//! The secret that signs the links a deployment hands out (review and desk links): one for the
//! whole fleet, so a link made on one instance opens on every other.
//!
//! Where it comes from, first match wins:
//!
//! 1. `--review-secret` (at least [`MIN_SECRET_BYTES`] characters): the operator's, used as
//!    given on this instance (every instance must then be given the same);
//! 2. the catalog (`Fleet::fleet_value`): made once by the first instance that needs it;
//! 3. on a catalog that has none yet, the data dir's `review-secret` file an earlier release
//!    made is taken over, so links it signed keep working.
//!
//! A secret that is there but unusable (a file too short, or not text) is an error that names
//! it: replacing it silently would void every link handed out.

use catalog::Catalog;

use crate::DataDir;

/// The shortest secret accepted.
pub const MIN_SECRET_BYTES: usize = 32;

/// The name of the review-link secret among the fleet's secrets.
const REVIEW: &str = "review-links";

/// Why the link secret could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("--review-secret must have at least {MIN_SECRET_BYTES} characters")]
    TooShort,
    #[error(
        "the review secret file {path} is not a usable secret ({why}): fix it, or remove it to \
         use the fleet's (links it signed stop working)"
    )]
    BadFile { path: String, why: String },
    #[error("reading the review secret file {path}: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the catalog's review secret is {0} characters, fewer than {MIN_SECRET_BYTES}")]
    BadStored(usize),
    #[error(transparent)]
    Catalog(#[from] catalog::Error),
}

/// The secret's bytes. Its `Debug` shows none of them.
#[derive(Clone)]
pub struct LinkSecret(Vec<u8>);

impl std::fmt::Debug for LinkSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkSecret(..)")
    }
}

impl LinkSecret {
    /// See the module docs.
    pub async fn load(
        configured: Option<&str>,
        catalog: &dyn Catalog,
        data_dir: &DataDir,
    ) -> Result<LinkSecret, SecretError> {
        if let Some(secret) = configured {
            if secret.len() < MIN_SECRET_BYTES {
                return Err(SecretError::TooShort);
            }
            return Ok(LinkSecret(secret.as_bytes().to_vec()));
        }
        let candidate = match earlier_file(data_dir)? {
            Some(kept) => kept,
            None => format!(
                "{}{}{}",
                catalog::ids::random_hex24(),
                catalog::ids::random_hex24(),
                catalog::ids::random_hex24()
            ),
        };
        let stored = catalog.fleet_value(REVIEW, &candidate).await?;
        if stored.len() < MIN_SECRET_BYTES {
            return Err(SecretError::BadStored(stored.len()));
        }
        Ok(LinkSecret(stored.into_bytes()))
    }

    /// A secret of these bytes (tests).
    pub fn from_bytes(bytes: &[u8]) -> LinkSecret {
        LinkSecret(bytes.to_vec())
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The secret an earlier release kept in the data dir, if the file is there.
fn earlier_file(data_dir: &DataDir) -> Result<Option<String>, SecretError> {
    let path = data_dir.review_secret();
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(SecretError::File {
                path: path.display().to_string(),
                source,
            });
        }
    };
    let bad = |why: String| SecretError::BadFile {
        path: path.display().to_string(),
        why,
    };
    let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text".to_owned()))?;
    let secret = text.trim();
    if secret.len() < MIN_SECRET_BYTES {
        return Err(bad(format!(
            "{} characters, fewer than {MIN_SECRET_BYTES}",
            secret.len()
        )));
    }
    Ok(Some(secret.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn catalog(dir: &std::path::Path) -> std::sync::Arc<dyn Catalog> {
        catalog::open(&format!("sqlite://{}", dir.join("catalog.db").display()))
            .await
            .expect("catalog")
    }

    #[tokio::test]
    async fn one_secret_is_made_for_the_fleet_and_kept_in_the_catalog() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = catalog(dir.path()).await;
        let (a, b) = (
            DataDir::new(dir.path().join("a")),
            DataDir::new(dir.path().join("b")),
        );
        let first = LinkSecret::load(None, catalog.as_ref(), &a)
            .await
            .expect("made");
        let other = LinkSecret::load(None, catalog.as_ref(), &b)
            .await
            .expect("read");
        assert_eq!(
            first.bytes(),
            other.bytes(),
            "one secret for both instances"
        );
        assert!(first.bytes().len() >= MIN_SECRET_BYTES);
        let given = "x".repeat(MIN_SECRET_BYTES);
        let flag = LinkSecret::load(Some(&given), catalog.as_ref(), &a)
            .await
            .expect("flag");
        assert_eq!(flag.bytes(), given.as_bytes());
        assert!(matches!(
            LinkSecret::load(Some("short"), catalog.as_ref(), &a).await,
            Err(SecretError::TooShort)
        ));
    }

    #[tokio::test]
    async fn an_earlier_releases_file_is_taken_over_and_a_bad_one_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = DataDir::new(dir.path().join("data"));
        data.create().expect("data dir");
        let kept = "k".repeat(48);
        std::fs::write(data.review_secret(), format!("{kept}\n")).expect("file");
        let catalog = catalog(dir.path()).await;
        let secret = LinkSecret::load(None, catalog.as_ref(), &data)
            .await
            .expect("taken over");
        assert_eq!(secret.bytes(), kept.as_bytes(), "its links keep working");

        let fresh = tempfile::tempdir().expect("tempdir");
        let data = DataDir::new(fresh.path().join("data"));
        data.create().expect("data dir");
        std::fs::write(data.review_secret(), "short").expect("file");
        let catalog = self::catalog(fresh.path()).await;
        let error = LinkSecret::load(None, catalog.as_ref(), &data)
            .await
            .expect_err("a short file is refused");
        assert!(error.to_string().contains("5 characters"), "{error}");
        std::fs::write(data.review_secret(), [0xff, 0xfe, 0x00]).expect("file");
        assert!(matches!(
            LinkSecret::load(None, catalog.as_ref(), &data).await,
            Err(SecretError::BadFile { .. })
        ));
    }
}
