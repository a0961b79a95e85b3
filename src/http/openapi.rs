//! The OpenAPI 3.1 document, generated from the handlers' annotations and served at
//! `GET /integrations/v1/openapi.json`.

use axum::Json;
use axum::Router;
use axum::routing::get;
use serde::Serialize;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use super::AppState;

/// Every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Telltale: survey integration and behavioural scoring",
        version = "1.0.0",
        description = "Collects behavioural signals from survey pages and reports a human-likeness score per session."
    ),
    paths(
        super::collector::collect,
        super::integrations::get_context,
        super::integrations::provision_survey,
        super::integrations::lookup_sessions,
        super::scoring::start_run,
        super::scoring::get_run,
        super::scoring::cancel_run,
        super::deletions::request_deletion,
        super::deletions::get_deletion,
        super::status::health,
        super::status::status,
    ),
    components(schemas(ErrorBody)),
    modifiers(&BearerAuth),
    tags(
        (name = "collector", description = "browser event collection (no authentication)"),
        (name = "integration", description = "server-side integration (bearer integration key)"),
        (name = "status", description = "availability"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/integrations/v1/openapi.json", get(openapi_json))
}

async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
