//! The review page and its signed links (docs/review.md).
//!
//! An integrator's server asks for a link (`POST .../evidence-links`, scope `sessions:read`);
//! the link names the survey, the reference and an expiry at most an hour ahead, signed with
//! HMAC-SHA-256 under the server's review secret. Whoever holds the link sees that one session's
//! evidence until it expires, and nothing else: no key ever reaches the browser. A tampered,
//! expired or other session's link, and any link of a session whose deletion was requested, is
//! 404. Every answer under `/review/` is `no-store`, sends no referrer and allows only its own
//! script and the evidence request (Content-Security-Policy).

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use catalog::Scope;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use utoipa::ToSchema;

use super::auth::Authenticated;
use super::error::ErrorBody;
use super::evidence::{EvidenceEnvelope, captured_session, session_evidence};
use super::integrations::owned_survey;
use super::{ApiError, ApiPath, AppState, JsonBytes, iso8601, parse_json};

/// The longest a link may live.
pub const MAX_LINK_SECS: u64 = 3600;
/// A link's life when the request names none.
pub const DEFAULT_LINK_SECS: u64 = 900;
/// The shortest secret `--review-secret` accepts.
pub const MIN_SECRET_BYTES: usize = 32;

const PAGE: &str = include_str!("review.html");
const SCRIPT: &str = include_str!("review.js");
const PATHS: &str = include_str!("paths.js");
const STYLE: &str = include_str!("review.css");

const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'";

/// The secret review links are signed with.
#[derive(Clone)]
pub struct ReviewSecret(Vec<u8>);

impl std::fmt::Debug for ReviewSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReviewSecret(..)")
    }
}

impl ReviewSecret {
    /// The configured secret, or the one kept in `data_dir/review-secret`, made at first start
    /// (readable by the owner only). Instances of a fleet must be given the same one.
    pub fn load(
        configured: Option<&str>,
        data_dir: &instance::DataDir,
    ) -> anyhow::Result<ReviewSecret> {
        if let Some(secret) = configured {
            anyhow::ensure!(
                secret.len() >= MIN_SECRET_BYTES,
                "--review-secret must have at least {MIN_SECRET_BYTES} characters"
            );
            return Ok(ReviewSecret(secret.as_bytes().to_vec()));
        }
        let path = data_dir.review_secret();
        match std::fs::read_to_string(&path) {
            Ok(secret) if secret.trim().len() >= MIN_SECRET_BYTES => {
                Ok(ReviewSecret(secret.trim().as_bytes().to_vec()))
            }
            _ => {
                let secret = format!(
                    "{}{}{}",
                    catalog::ids::random_hex24(),
                    catalog::ids::random_hex24(),
                    catalog::ids::random_hex24()
                );
                instance::data_dir::write_durably_private(&path, secret.as_bytes())?;
                Ok(ReviewSecret(secret.into_bytes()))
            }
        }
    }

    #[cfg(test)]
    pub fn from_bytes(bytes: &[u8]) -> ReviewSecret {
        ReviewSecret(bytes.to_vec())
    }

    fn mac(&self, survey: &str, reference: &str, expires: u64) -> Hmac<Sha256> {
        self.mac_of(&format!(
            "telltale-review-v1\n{survey}\n{reference}\n{expires}"
        ))
    }

    fn mac_of(&self, message: &str) -> Hmac<Sha256> {
        // A key of any length is accepted by HMAC.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        mac.update(message.as_bytes());
        mac
    }

    /// A survey desk link's message: its own tag, so that no review link's signature is ever
    /// a desk link's.
    fn desk_mac(&self, survey: &str, key: &str, expires: u64) -> Hmac<Sha256> {
        self.mac_of(&format!("telltale-desk-v1\n{survey}\n{key}\n{expires}"))
    }

    /// A desk link's signature of the survey, the key prefix that asked and the expiry.
    pub fn sign_desk(&self, survey: &str, key: &str, expires: u64) -> String {
        hex::encode(self.desk_mac(survey, key, expires).finalize().into_bytes())
    }

    /// Whether `signature` signs exactly this desk link (constant time).
    pub fn verify_desk(&self, survey: &str, key: &str, expires: u64, signature: &str) -> bool {
        let Ok(bytes) = hex::decode(signature) else {
            return false;
        };
        self.desk_mac(survey, key, expires)
            .verify_slice(&bytes)
            .is_ok()
    }

    /// The link's signature, lower-case hex.
    pub fn sign(&self, survey: &str, reference: &str, expires: u64) -> String {
        hex::encode(self.mac(survey, reference, expires).finalize().into_bytes())
    }

    /// Whether `signature` signs exactly this survey, reference and expiry (constant time).
    pub fn verify(&self, survey: &str, reference: &str, expires: u64, signature: &str) -> bool {
        let Ok(bytes) = hex::decode(signature) else {
            return false;
        };
        self.mac(survey, reference, expires)
            .verify_slice(&bytes)
            .is_ok()
    }
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/integrations/v1/surveys/{surveyId}/sessions/by-reference/{reference}/evidence-links",
            post(create_link),
        )
        .route("/review/assets/review.js", get(script))
        .route("/review/assets/paths.js", get(paths))
        .route("/review/assets/review.css", get(style))
        .route("/review/{surveyId}/{reference}", get(page))
        .route(
            "/review/{surveyId}/{reference}/evidence",
            get(page_evidence),
        )
}

/// Body of `POST .../evidence-links` (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkRequest {
    /// How long the link works: 1 to 3600 seconds; 900 when absent.
    #[schema(minimum = 1, maximum = 3600)]
    pub expires_in_seconds: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceLink {
    /// The review page of the session: open it in a browser; it needs no key.
    pub url: String,
    #[schema(format = DateTime)]
    pub expires_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EvidenceLinkEnvelope {
    pub data: EvidenceLink,
}

/// A short-lived signed link to the session's review page, for a person to open in a browser.
#[utoipa::path(
    post,
    path = "/integrations/v1/surveys/{surveyId}/sessions/by-reference/{reference}/evidence-links",
    tag = "integration",
    operation_id = "createEvidenceLink",
    security(("bearer" = [])),
    params(
        ("surveyId" = String, Path, description = "24 hexadecimal characters"),
        ("reference" = String, Path, description = "the session's external reference (UUID)"),
    ),
    request_body(content = Option<LinkRequest>, description = "optional; `{}` or no body for 900 s"),
    responses(
        (status = 201, body = EvidenceLinkEnvelope),
        (status = 400, description = "expiresInSeconds outside 1 to 3600", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "key lacks sessions:read", body = ErrorBody),
        (status = 404, description = "survey missing or another organization's, no session captured for the reference, or its deletion requested", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn create_link(
    State(state): State<AppState>,
    auth: Authenticated,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
    JsonBytes(body): JsonBytes,
) -> Result<(StatusCode, Json<EvidenceLinkEnvelope>), ApiError> {
    auth.require(Scope::SessionsRead)?;
    let survey = owned_survey(&state, &auth, &survey_id).await?;
    let seconds = link_seconds(&body)?;
    let (reference, _) = captured_session(&state, &survey, &reference).await?;
    let expires = now_secs() + seconds;
    let signature = state
        .review_secret
        .sign(survey.as_str(), &reference, expires);
    let url = format!(
        "{}/review/{}/{reference}?expires={expires}&sig={signature}",
        state.public_url,
        survey.as_str()
    );
    Ok((
        StatusCode::CREATED,
        Json(EvidenceLinkEnvelope {
            data: EvidenceLink {
                url,
                expires_at: iso8601(secs_to_millis(expires)),
            },
        }),
    ))
}

/// How long a link asked for with `body` (a [`LinkRequest`], or nothing) lives, in seconds.
pub(super) fn link_seconds(body: &[u8]) -> Result<u64, ApiError> {
    let request: LinkRequest = if body.is_empty() {
        LinkRequest::default()
    } else {
        parse_json(body)?
    };
    let seconds = request.expires_in_seconds.unwrap_or(DEFAULT_LINK_SECS);
    if !(1..=MAX_LINK_SECS).contains(&seconds) {
        return Err(ApiError::BadRequest(format!(
            "expiresInSeconds must be 1 to {MAX_LINK_SECS}, not {seconds}"
        )));
    }
    Ok(seconds)
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Unix seconds as Unix milliseconds, saturated.
pub fn secs_to_millis(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// The query of a signed link.
#[derive(Debug, Deserialize)]
pub struct Signed {
    expires: Option<u64>,
    sig: Option<String>,
}

/// The survey of a link that is signed for exactly this survey and reference and has not
/// expired; 404 otherwise (a wrong link names nothing).
fn check_link(
    state: &AppState,
    survey_id: &str,
    reference: &str,
    signed: &Signed,
) -> Result<catalog::SurveyId, ApiError> {
    let not_found =
        || ApiError::NotFound("this review link is not valid or has expired".to_owned());
    let (Some(expires), Some(signature)) = (signed.expires, signed.sig.as_deref()) else {
        return Err(not_found());
    };
    if expires < now_secs() || expires > now_secs() + MAX_LINK_SECS {
        return Err(not_found());
    }
    let survey = catalog::SurveyId::parse(survey_id).ok_or_else(not_found)?;
    if !state
        .review_secret
        .verify(survey.as_str(), reference, expires, signature)
    {
        return Err(not_found());
    }
    Ok(survey)
}

/// Headers every answer under `/review/` carries.
fn private(response: Response) -> Response {
    private_with(response, CONTENT_SECURITY_POLICY)
}

/// The review page's private headers (`no-store`, `no-referrer`, `nosniff`) under `policy`:
/// the survey desk's answers carry them with a policy of their own.
pub(super) fn private_with(mut response: Response, policy: &'static str) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(policy),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    private(([(header::CONTENT_TYPE, content_type)], body).into_response())
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// The path drawing the review page and the survey desk share.
async fn paths() -> Response {
    asset("text/javascript; charset=utf-8", PATHS)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// The page of a valid link: the page itself holds nothing of the session; its script asks
/// for the evidence with the same signed query.
async fn page(
    State(state): State<AppState>,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
    Query(signed): Query<Signed>,
) -> Response {
    let checked = match check_link(&state, &survey_id, &reference, &signed) {
        Ok(survey) => captured_session(&state, &survey, &reference)
            .await
            .map(|_| ()),
        Err(error) => Err(error),
    };
    match checked {
        Ok(()) => asset("text/html; charset=utf-8", PAGE),
        Err(error) => private(error.into_response()),
    }
}

async fn page_evidence(
    State(state): State<AppState>,
    ApiPath((survey_id, reference)): ApiPath<(String, String)>,
    Query(signed): Query<Signed>,
) -> Response {
    let evidence = match check_link(&state, &survey_id, &reference, &signed) {
        Ok(survey) => session_evidence(&state, &survey, &reference).await,
        Err(error) => Err(error),
    };
    match evidence {
        Ok(data) => private(Json(EvidenceEnvelope { data }).into_response()),
        Err(error) => private(error.into_response()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_only_for_its_survey_reference_and_expiry() {
        let secret = ReviewSecret::from_bytes(&[7; 32]);
        let (survey, reference) = (
            "0123456789abcdef01234567",
            "6f1c9b3e-0000-4000-8000-000000000001",
        );
        let signature = secret.sign(survey, reference, 1_900_000_000);
        assert_eq!(signature.len(), 64);
        assert!(secret.verify(survey, reference, 1_900_000_000, &signature));
        assert!(!secret.verify(survey, reference, 1_900_000_001, &signature));
        assert!(!secret.verify(
            "0123456789abcdef01234568",
            reference,
            1_900_000_000,
            &signature
        ));
        assert!(!secret.verify(
            survey,
            "6f1c9b3e-0000-4000-8000-000000000002",
            1_900_000_000,
            &signature
        ));
        assert!(!secret.verify(survey, reference, 1_900_000_000, "zz"));
        let other = ReviewSecret::from_bytes(&[8; 32]);
        assert!(!other.verify(survey, reference, 1_900_000_000, &signature));
    }

    #[test]
    fn a_secret_is_kept_in_the_data_dir_or_taken_from_the_flag() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = instance::DataDir::new(dir.path());
        let first = ReviewSecret::load(None, &data).expect("made");
        let again = ReviewSecret::load(None, &data).expect("kept");
        assert_eq!(first.0, again.0);
        assert!(first.0.len() >= MIN_SECRET_BYTES);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(data.review_secret())
                .expect("secret")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "the secret is the owner's alone");
        }
        assert!(ReviewSecret::load(Some("short"), &data).is_err());
        let given = "x".repeat(MIN_SECRET_BYTES);
        assert_eq!(
            ReviewSecret::load(Some(&given), &data).expect("flag").0,
            given.as_bytes()
        );
    }
}
