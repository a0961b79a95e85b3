//! The browser embed, served at the versioned address provisioning hands out
//! (`/embed/v1/telltale.js`).
//!
//! The script is compiled into the binary, so every instance serves the same bytes; its ETag is
//! derived from them. Cached for an hour (a new embed version gets a new path), CORS open since
//! survey pages live on integrators' domains. Served brotli- or gzip-compressed when the browser
//! accepts it (`Vary: Accept-Encoding`); both forms are compressed once per process, at their
//! highest levels, since every page view of every survey fetches the same bytes.

use std::io::Write as _;
use std::sync::LazyLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::state::AppState;

/// The embed's source (`ingest/embed/telltale.js`).
pub const EMBED_SCRIPT: &str = include_str!("../../ingest/embed/telltale.js");

/// A strong validator of the script's bytes: the first 64 bits of its SHA-256, in hex.
static EMBED_HASH: LazyLock<String> = LazyLock::new(|| {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(EMBED_SCRIPT.as_bytes())[..8])
});

/// The script compressed with brotli (quality 11), or `None` if compression failed.
static BROTLI: LazyLock<Option<Vec<u8>>> = LazyLock::new(|| {
    let mut writer = brotli::CompressorWriter::new(Vec::new(), 4096, 11, 22);
    writer.write_all(EMBED_SCRIPT.as_bytes()).ok()?;
    writer.flush().ok()?;
    Some(writer.into_inner())
});

/// The script compressed with gzip (level 9), or `None` if compression failed.
static GZIP: LazyLock<Option<Vec<u8>>> = LazyLock::new(|| {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(EMBED_SCRIPT.as_bytes()).ok()?;
    encoder.finish().ok()
});

pub fn routes() -> Router<AppState> {
    Router::new().route("/embed/v1/telltale.js", get(embed_script))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Brotli,
    Gzip,
    Identity,
}

impl Encoding {
    fn token(self) -> Option<&'static str> {
        match self {
            Encoding::Brotli => Some("br"),
            Encoding::Gzip => Some("gzip"),
            Encoding::Identity => None,
        }
    }
}

/// The best encoding `Accept-Encoding` allows: brotli, then gzip, then the bytes as they are.
/// A coding counts as accepted when it is listed (or `*` is) with a q-value above zero.
fn negotiate(headers: &HeaderMap) -> Encoding {
    let accepted = |wanted: &str| {
        headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .filter_map(|item| {
                let mut parts = item.split(';');
                let coding = parts.next()?.trim();
                let quality = parts
                    .filter_map(|parameter| parameter.trim().strip_prefix("q="))
                    .find_map(|q| q.trim().parse::<f32>().ok())
                    .unwrap_or(1.0);
                Some((coding.to_ascii_lowercase(), quality))
            })
            .any(|(coding, quality)| (coding == wanted || coding == "*") && quality > 0.0)
    };
    if accepted("br") && BROTLI.is_some() {
        Encoding::Brotli
    } else if accepted("gzip") && GZIP.is_some() {
        Encoding::Gzip
    } else {
        Encoding::Identity
    }
}

/// Each encoding's representation gets its own strong tag (RFC 9110 8.8.3).
fn etag(encoding: Encoding) -> String {
    match encoding.token() {
        Some(token) => format!("\"{}-{token}\"", EMBED_HASH.as_str()),
        None => format!("\"{}\"", EMBED_HASH.as_str()),
    }
}

async fn embed_script(request_headers: HeaderMap) -> Response {
    let encoding = negotiate(&request_headers);
    let etag = etag(encoding);
    let matches = request_headers
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .split(',')
                .any(|tag| tag.trim() == etag || tag.trim() == "*")
        });
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if matches {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/javascript; charset=utf-8"),
    );
    let body: &'static [u8] = match encoding {
        Encoding::Brotli => BROTLI.as_deref().unwrap_or_default(),
        Encoding::Gzip => GZIP.as_deref().unwrap_or_default(),
        Encoding::Identity => EMBED_SCRIPT.as_bytes(),
    };
    if let Some(token) = encoding.token() {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(token));
    }
    (StatusCode::OK, headers, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, value.parse().expect("value"));
        headers
    }

    #[test]
    fn negotiation_prefers_brotli_then_gzip_and_honours_zero_quality() {
        assert_eq!(negotiate(&HeaderMap::new()), Encoding::Identity);
        assert_eq!(
            negotiate(&accept("gzip, deflate, br, zstd")),
            Encoding::Brotli
        );
        assert_eq!(negotiate(&accept("gzip")), Encoding::Gzip);
        assert_eq!(negotiate(&accept("br;q=0, gzip;q=0.5")), Encoding::Gzip);
        assert_eq!(negotiate(&accept("*")), Encoding::Brotli);
        assert_eq!(negotiate(&accept("identity")), Encoding::Identity);
        assert_eq!(negotiate(&accept("GZIP;Q=1")), Encoding::Gzip);
    }

    #[test]
    fn compressed_forms_decode_to_the_script() {
        let mut decoded = Vec::new();
        brotli::Decompressor::new(BROTLI.as_deref().expect("brotli"), 4096)
            .read_to_end(&mut decoded)
            .expect("brotli decodes");
        assert_eq!(decoded, EMBED_SCRIPT.as_bytes());
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(GZIP.as_deref().expect("gzip"))
            .read_to_end(&mut decoded)
            .expect("gzip decodes");
        assert_eq!(decoded, EMBED_SCRIPT.as_bytes());
        assert!(BROTLI.as_ref().expect("brotli").len() < EMBED_SCRIPT.len() / 3);
    }
}
