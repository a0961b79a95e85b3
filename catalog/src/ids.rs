//! Identifier newtypes. Survey ids, tracking keys and organization ids are 24 hexadecimal
//! characters, stored and compared in lowercase.

use std::fmt;

/// Generates a random 24-hex-character identifier (96 bits of entropy).
pub fn random_hex24() -> String {
    let bytes: [u8; 12] = rand::random();
    hex::encode(bytes)
}

/// True when `value` is exactly 24 hexadecimal characters, either case.
pub fn is_hex24(value: &str) -> bool {
    value.len() == 24 && value.bytes().all(|b| b.is_ascii_hexdigit())
}

macro_rules! hex24_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A fresh random identifier.
            pub fn generate() -> Self {
                Self(random_hex24())
            }

            /// Parses 24 hex characters (either case); `None` for anything else.
            pub fn parse(value: &str) -> Option<Self> {
                is_hex24(value).then(|| Self(value.to_ascii_lowercase()))
            }

            /// Wraps a value read back from the catalog, where it was stored already checked.
            pub(crate) fn from_stored(value: String) -> Self {
                Self(value)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

hex24_id!(
    /// The service's id of a survey (`surveyId`).
    SurveyId
);
hex24_id!(
    /// A survey's public tracking key, used in the collector path and the embed.
    TrackingKey
);
hex24_id!(
    /// An organization (a tenant: one integrating survey platform).
    OrganizationId
);
hex24_id!(
    /// A scoring run (`runId`).
    RunId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_24_hex_characters() {
        assert!(SurveyId::parse("0123456789abcdefABCDEF01").is_some());
        assert_eq!(
            SurveyId::parse("0123456789ABCDEF01234567")
                .expect("valid")
                .as_str(),
            "0123456789abcdef01234567"
        );
        assert!(SurveyId::parse("0123456789abcdef0123456").is_none());
        assert!(SurveyId::parse("0123456789abcdef012345678").is_none());
        assert!(SurveyId::parse("0123456789abcdef0123456g").is_none());
        assert!(SurveyId::parse("").is_none());
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let a = TrackingKey::generate();
        let b = TrackingKey::generate();
        assert!(is_hex24(a.as_str()));
        assert_ne!(a, b);
    }
}
