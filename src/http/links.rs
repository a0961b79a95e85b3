//! The links the service hands out, signed with HMAC-SHA-256 under the deployment's one link
//! secret (`instance::links`): review links (a session's evidence page) and desk links (a
//! survey's desk). Each kind signs a message of its own tag, so no signature of one is ever one
//! of the other.

use hmac::{Hmac, Mac};
use instance::links::LinkSecret;
use sha2::Sha256;

/// Signs and checks the links the service hands out, under the deployment's link secret.
#[derive(Clone)]
pub struct Links(Vec<u8>);

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Links(..)")
    }
}

impl Links {
    pub fn new(secret: &LinkSecret) -> Links {
        Links(secret.bytes().to_vec())
    }

    #[cfg(test)]
    pub fn from_bytes(bytes: &[u8]) -> Links {
        Links(bytes.to_vec())
    }

    fn mac_of(&self, message: &str) -> Hmac<Sha256> {
        // A key of any length is accepted by HMAC.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(message.as_bytes());
        mac
    }

    fn signed(mac: Hmac<Sha256>) -> String {
        hex::encode(mac.finalize().into_bytes())
    }

    /// Whether `signature` (hex) is `mac`'s, in constant time.
    fn verified(mac: Hmac<Sha256>, signature: &str) -> bool {
        hex::decode(signature).is_ok_and(|bytes| mac.verify_slice(&bytes).is_ok())
    }

    /// A review link's message: the survey, the reference, the prefix of the key that asked
    /// for it (the link dies with the key) and the expiry. (Version 1 named no key: its links
    /// no longer open.)
    fn review_mac(&self, survey: &str, reference: &str, key: &str, expires: u64) -> Hmac<Sha256> {
        self.mac_of(&format!(
            "telltale-review-v2\n{survey}\n{reference}\n{key}\n{expires}"
        ))
    }

    /// A survey desk link's message: its own tag, so that no review link's signature is ever
    /// a desk link's.
    fn desk_mac(&self, survey: &str, key: &str, expires: u64) -> Hmac<Sha256> {
        self.mac_of(&format!("telltale-desk-v1\n{survey}\n{key}\n{expires}"))
    }

    /// A desk link's signature of the survey, the key prefix that asked and the expiry.
    pub fn sign_desk(&self, survey: &str, key: &str, expires: u64) -> String {
        Self::signed(self.desk_mac(survey, key, expires))
    }

    /// Whether `signature` signs exactly this desk link.
    pub fn verify_desk(&self, survey: &str, key: &str, expires: u64, signature: &str) -> bool {
        Self::verified(self.desk_mac(survey, key, expires), signature)
    }

    /// A review link's signature, lower-case hex.
    pub fn sign(&self, survey: &str, reference: &str, key: &str, expires: u64) -> String {
        Self::signed(self.review_mac(survey, reference, key, expires))
    }

    /// Whether `signature` signs exactly this survey, reference, key and expiry.
    pub fn verify(
        &self,
        survey: &str,
        reference: &str,
        key: &str,
        expires: u64,
        signature: &str,
    ) -> bool {
        Self::verified(self.review_mac(survey, reference, key, expires), signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_only_for_its_survey_reference_key_and_expiry() {
        let secret = Links::from_bytes(&[7; 32]);
        let (survey, reference, key) = (
            "0123456789abcdef01234567",
            "6f1c9b3e-0000-4000-8000-000000000001",
            "0a1b2c3d4e",
        );
        let signature = secret.sign(survey, reference, key, 1_900_000_000);
        assert_eq!(signature.len(), 64);
        assert!(secret.verify(survey, reference, key, 1_900_000_000, &signature));
        assert!(!secret.verify(survey, reference, key, 1_900_000_001, &signature));
        assert!(!secret.verify(survey, reference, "0a1b2c3d4f", 1_900_000_000, &signature));
        assert!(!secret.verify(
            "0123456789abcdef01234568",
            reference,
            key,
            1_900_000_000,
            &signature
        ));
        assert!(!secret.verify(
            survey,
            "6f1c9b3e-0000-4000-8000-000000000002",
            key,
            1_900_000_000,
            &signature
        ));
        assert!(!secret.verify(survey, reference, key, 1_900_000_000, "zz"));
        let other = Links::from_bytes(&[8; 32]);
        assert!(!other.verify(survey, reference, key, 1_900_000_000, &signature));
        // No review link's signature is a desk link's.
        assert!(!secret.verify_desk(survey, key, 1_900_000_000, &signature));
    }
}
