//! What every handler shares: the running deployment (stores, collector, scoring, deletions;
//! `instance::deployment`), the edge's limits, the site's address and link signer, and the
//! process's metrics recorder. Built once by `server`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use catalog::{Catalog, OrganizationId, SurveyId};
use ingest::Ingestor;
use instance::deployment::Deployment;
use instance::erasure::DeletionService;

use super::links::Links;
use crate::rate_limit::{NewSessions, SlidingWindow, TokenBuckets};

/// Limits of the HTTP edge.
#[derive(Debug, Clone)]
pub struct Limits {
    pub api_requests_per_minute: u32,
    /// 0 disables the limit.
    pub collector_ip_rate: u32,
    /// 0 disables the limit.
    pub collector_identifier_rate: u32,
    /// Collector requests per second for one survey (tracking key); 0 disables the limit.
    pub collector_survey_rate: u32,
    /// New browser-session identifiers one survey may start per minute; 0 disables the cap.
    pub collector_new_sessions_per_minute: u32,
    /// Collector request bodies (declared bytes) being read or logged at once; past it a
    /// request is answered 503 with `Retry-After` before its body is read.
    pub collector_bytes_in_flight: usize,
    /// Time a client has to send a whole request body.
    pub body_timeout: Duration,
    /// Take the client address for the per-IP limits from `X-Forwarded-For` (behind a proxy).
    pub trust_forwarded_for: bool,
    /// Failed authentications per client address per minute before it gets 429 unasked; 0: off.
    pub failed_auth_per_minute: u32,
    /// Signed-link requests per second per client address; 0: off.
    pub signed_link_rate: u32,
}

/// State shared by every handler.
#[derive(Clone)]
pub struct AppState(Arc<StateInner>);

pub struct StateInner {
    /// The running deployment.
    pub deployment: Arc<Deployment>,
    /// The edge's limiters and budgets.
    pub edge: Edge,
    /// Where the service is reached, and what signs its links.
    pub site: Site,
    /// The process's Prometheus recorder, rendered by `GET /metrics`.
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// The organization each survey belongs to, as seen so far. A survey never changes
    /// organization and is never removed, so a cached entry never goes stale; it spares every
    /// survey-scoped request a catalog round trip.
    pub survey_owners: parking_lot::RwLock<HashMap<SurveyId, OrganizationId>>,
}

/// The edge's limiters and budgets, from [`Limits`].
pub struct Edge {
    pub api_limiter: SlidingWindow,
    /// The integration API's requests per key per rolling minute (for a catalog that counts
    /// them for the fleet, see `Organizations::counts_api_requests`).
    pub api_requests_per_minute: u32,
    pub ip_limiter: Option<TokenBuckets<IpAddr>>,
    /// Keyed by (tracking key, identifier).
    pub identifier_limiter: Option<TokenBuckets<(String, String)>>,
    pub survey_limiter: Option<TokenBuckets<SurveyId>>,
    pub new_sessions: Option<NewSessions<SurveyId>>,
    /// One permit per body byte a collector request declares, held until its batch is logged
    /// (or refused): what the collector holds in request bodies at once.
    pub body_bytes: Arc<tokio::sync::Semaphore>,
    pub body_budget: u32,
    pub body_timeout: Duration,
    pub trust_forwarded_for: bool,
    /// Well-formed keys that failed authentication, per client address (`auth`): checked before
    /// a key is looked up, so a flood of guesses costs the catalog nothing.
    pub failed_auth: Option<SlidingWindow>,
    /// Requests to signed review and desk links, per client address (`routes`): checked before
    /// a link's key is looked up.
    pub signed_links: Option<TokenBuckets<IpAddr>>,
}

/// Where the service is reached, and what signs the links it hands out.
#[derive(Debug)]
pub struct Site {
    /// Base URL without a trailing slash, for addresses handed to integrators.
    pub public_url: String,
    pub links: Links,
}

/// Bound on [`StateInner::survey_owners`]; the cache starts over when it is reached.
pub const MAX_CACHED_SURVEY_OWNERS: usize = 100_000;

impl StateInner {
    pub fn catalog(&self) -> &Arc<dyn Catalog> {
        &self.deployment.stores().catalog
    }

    pub fn ingestor(&self) -> &Ingestor {
        &self.deployment.instance.ingestor
    }

    pub fn scoring(&self) -> &scorer::ScoringService {
        &self.deployment.scoring
    }

    pub fn deletions(&self) -> &DeletionService {
        &self.deployment.deletions
    }

    /// Which store is down now, if any (`instance::Stores::down`: each probed within the outage
    /// policy's probe time).
    pub async fn store_down(&self) -> Option<&'static str> {
        self.deployment.stores().down().await
    }
}

impl std::ops::Deref for AppState {
    type Target = StateInner;
    fn deref(&self) -> &StateInner {
        &self.0
    }
}

impl AppState {
    pub fn new(
        deployment: Arc<Deployment>,
        public_url: &str,
        limits: &Limits,
        metrics: metrics_exporter_prometheus::PrometheusHandle,
    ) -> Self {
        let rate = |per_second: u32| (per_second > 0).then_some(per_second);
        // At least one largest body, and within what a semaphore counts in one acquire.
        let body_budget = u32::try_from(limits.collector_bytes_in_flight)
            .unwrap_or(u32::MAX)
            .max(ingest::batch::MAX_BODY_BYTES as u32);
        let site = Site {
            public_url: public_url.trim_end_matches('/').to_owned(),
            links: Links::new(&deployment.link_secret),
        };
        AppState(Arc::new(StateInner {
            deployment,
            edge: Edge {
                api_limiter: SlidingWindow::new(
                    limits.api_requests_per_minute,
                    Duration::from_secs(60),
                ),
                api_requests_per_minute: limits.api_requests_per_minute,
                ip_limiter: rate(limits.collector_ip_rate)
                    .map(|r| TokenBuckets::new(r, r.saturating_mul(2))),
                identifier_limiter: rate(limits.collector_identifier_rate)
                    .map(|r| TokenBuckets::new(r, r.saturating_mul(3))),
                survey_limiter: rate(limits.collector_survey_rate)
                    .map(|r| TokenBuckets::new(r, r.saturating_mul(2))),
                new_sessions: rate(limits.collector_new_sessions_per_minute).map(NewSessions::new),
                body_bytes: Arc::new(tokio::sync::Semaphore::new(body_budget as usize)),
                body_budget,
                body_timeout: limits.body_timeout,
                trust_forwarded_for: limits.trust_forwarded_for,
                failed_auth: rate(limits.failed_auth_per_minute)
                    .map(|limit| SlidingWindow::new(limit, Duration::from_secs(60))),
                signed_links: rate(limits.signed_link_rate)
                    .map(|r| TokenBuckets::new(r, r.saturating_mul(4))),
            },
            site,
            metrics,
            survey_owners: parking_lot::RwLock::new(HashMap::new()),
        }))
    }
}
