//! Integration keys.
//!
//! A key reads `tt_<10 hex>_<64 hex>`. The first two parts are the key's public prefix (shown in
//! listings and in the context endpoint); the whole string is the secret. Only the SHA-256 of the
//! secret is stored: the secret carries 256 random bits, so a slow password hash would add nothing.

use sha2::{Digest, Sha256};
use std::fmt;

const PREFIX_TAG: &str = "tt_";
const PREFIX_HEX_LEN: usize = 10;
const SECRET_HEX_LEN: usize = 64;

/// What an integration key may do. Context needs no scope, only a valid key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    SurveysWrite,
    SessionsRead,
    ScoringWrite,
    ScoringRead,
    SessionsDelete,
}

impl Scope {
    pub const ALL: [Scope; 5] = [
        Scope::SurveysWrite,
        Scope::SessionsRead,
        Scope::ScoringWrite,
        Scope::ScoringRead,
        Scope::SessionsDelete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::SurveysWrite => "surveys:write",
            Scope::SessionsRead => "sessions:read",
            Scope::ScoringWrite => "scoring:write",
            Scope::ScoringRead => "scoring:read",
            Scope::SessionsDelete => "sessions:delete",
        }
    }

    pub fn parse(value: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == value)
    }

    /// Parses a comma-separated list, rejecting unknown names.
    pub fn parse_list(value: &str) -> Result<Vec<Scope>, String> {
        let mut scopes = Vec::new();
        for name in value
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
        {
            let scope = Scope::parse(name).ok_or_else(|| format!("unknown scope {name:?}"))?;
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        Ok(scopes)
    }

    pub(crate) fn join(scopes: &[Scope]) -> String {
        scopes
            .iter()
            .map(|scope| scope.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The public part of a key, e.g. `tt_3fa9c01b2e`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyPrefix(String);

impl KeyPrefix {
    pub fn parse(value: &str) -> Option<Self> {
        let hex = value.strip_prefix(PREFIX_TAG)?;
        (hex.len() == PREFIX_HEX_LEN && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A full, well-formed key as presented by a client. Never logged, never stored.
#[derive(Clone, PartialEq, Eq)]
pub struct IntegrationKeySecret {
    secret: String,
    prefix: KeyPrefix,
}

impl fmt::Debug for IntegrationKeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IntegrationKeySecret({}_…)", self.prefix)
    }
}

impl IntegrationKeySecret {
    pub(crate) fn generate() -> Self {
        let prefix_bytes: [u8; PREFIX_HEX_LEN / 2] = rand::random();
        let secret_bytes: [u8; SECRET_HEX_LEN / 2] = rand::random();
        let prefix = format!("{PREFIX_TAG}{}", hex::encode(prefix_bytes));
        let secret = format!("{prefix}_{}", hex::encode(secret_bytes));
        Self {
            secret,
            prefix: KeyPrefix(prefix),
        }
    }

    /// Parses a presented key; `None` when it is not of the key format at all.
    pub fn parse(value: &str) -> Option<Self> {
        let split = PREFIX_TAG.len() + PREFIX_HEX_LEN;
        if value.len() != split + 1 + SECRET_HEX_LEN || !value.is_char_boundary(split) {
            return None;
        }
        let (prefix, rest) = value.split_at(split);
        let prefix = KeyPrefix::parse(prefix)?;
        let secret_hex = rest.strip_prefix('_')?;
        secret_hex
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            .then(|| Self {
                secret: value.to_owned(),
                prefix,
            })
    }

    pub fn prefix(&self) -> &KeyPrefix {
        &self.prefix
    }

    /// The full secret, for showing once at creation.
    pub fn expose(&self) -> &str {
        &self.secret
    }

    pub(crate) fn sha256_hex(&self) -> String {
        hex::encode(Sha256::digest(self.secret.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_back() {
        let key = IntegrationKeySecret::generate();
        let parsed = IntegrationKeySecret::parse(key.expose()).expect("own format");
        assert_eq!(parsed.prefix(), key.prefix());
        assert_eq!(parsed.sha256_hex(), key.sha256_hex());
        assert!(key.prefix().as_str().starts_with("tt_"));
        assert_eq!(key.expose().len(), 3 + 10 + 1 + 64);
    }

    #[test]
    fn malformed_keys_are_rejected() {
        let key = IntegrationKeySecret::generate();
        let good = key.expose().to_owned();
        assert!(IntegrationKeySecret::parse(&good[..good.len() - 1]).is_none());
        assert!(IntegrationKeySecret::parse(&good.to_uppercase()).is_none());
        assert!(IntegrationKeySecret::parse(&good.replacen("tt_", "xx_", 1)).is_none());
        assert!(IntegrationKeySecret::parse("").is_none());
        assert!(IntegrationKeySecret::parse("tt_ééééé_").is_none());
    }

    #[test]
    fn scope_lists_parse_and_reject_unknown_names() {
        assert_eq!(
            Scope::parse_list("sessions:read, surveys:write,sessions:read").expect("known"),
            vec![Scope::SessionsRead, Scope::SurveysWrite]
        );
        assert!(Scope::parse_list("sessions:read,admin").is_err());
        assert_eq!(Scope::join(&Scope::ALL).split(',').count(), 5);
    }
}
