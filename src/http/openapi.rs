//! The OpenAPI 3.1 document, generated from the handlers' annotations and served at
//! `GET /integrations/v1/openapi.json`.

use std::sync::LazyLock;

use axum::Json;
use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::ErrorBody;
use super::rules::{
    EXTERNAL_ID_PATTERN, HEX24_PATTERN, IDENTIFIER_PATTERN, MAX_LOOKUP_REFERENCES, NAME_PATTERN,
    UUID_PATTERN,
};
use super::state::AppState;

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
        super::evidence::get_evidence,
        super::review::create_link,
        super::desk::get_summary,
        super::desk::get_sessions,
        super::desk::get_sessions_csv,
        super::desk::create_desk_link,
        super::status::health,
        super::status::live,
        super::status::ready,
        super::status::status,
        super::status::metrics,
    ),
    components(schemas(ErrorBody)),
    modifiers(&BearerAuth),
    tags(
        (name = "collector", description = "browser event collection (no authentication)"),
        (name = "integration", description = "server-side integration (bearer integration key)"),
        (name = "status", description = "availability, readiness and metrics"),
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

async fn openapi_json() -> Json<&'static Value> {
    Json(&DOCUMENT)
}

/// The served document: utoipa's, from the handlers' annotations, refined by [`refine`].
static DOCUMENT: LazyLock<Value> = LazyLock::new(document);

/// The OpenAPI document as served.
pub fn document() -> Value {
    let mut document = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    refine(&mut document);
    document
}

/// The schema of each path parameter, by name (the same name means the same rule everywhere).
fn parameter_schema(name: &str) -> Option<Value> {
    let hex24 =
        || json!({ "type": "string", "pattern": HEX24_PATTERN, "minLength": 24, "maxLength": 24 });
    Some(match name {
        "surveyId" | "runId" => hex24(),
        "key" => hex24(),
        "reference" => json!({
            "type": "string", "format": "uuid", "pattern": UUID_PATTERN,
            "minLength": 36, "maxLength": 36,
        }),
        "externalSurveyId" => json!({
            "type": "string", "pattern": EXTERNAL_ID_PATTERN, "minLength": 1, "maxLength": 200,
        }),
        "band" => json!({ "type": "string", "enum": ["automation-like", "review", "human-like"] }),
        "order" => json!({ "type": "string", "enum": ["asc", "desc"] }),
        "limit" => json!({
            "type": "integer", "minimum": 1, "maximum": super::desk::MAX_PAGE_ROWS,
        }),
        "identifier" => json!({
            "type": "string", "pattern": IDENTIFIER_PATTERN,
            "minLength": 1, "maxLength": ingest::batch::MAX_IDENTIFIER_LEN,
        }),
        _ => return None,
    })
}

/// What utoipa's annotations do not say: the rules of every parameter and body field, the
/// errors every integration operation can answer (and `Retry-After` where it is sent), and
/// links from provisioning, run start and deletion to the operations that take their ids.
fn refine(document: &mut Value) {
    let retry_after = json!({
        "Retry-After": {
            "description": "whole seconds to wait before retrying",
            "required": true,
            "schema": { "type": "integer", "minimum": 1 }
        }
    });
    let error = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } } }
        })
    };
    if let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (method, operation) in item.iter_mut() {
                let Some(operation) = operation.as_object_mut() else {
                    continue;
                };
                if let Some(parameters) = operation
                    .get_mut("parameters")
                    .and_then(Value::as_array_mut)
                {
                    for parameter in parameters {
                        let name = parameter["name"].as_str().unwrap_or_default().to_owned();
                        if let Some(schema) = parameter_schema(&name) {
                            parameter["schema"] = schema;
                        }
                    }
                }
                let integration = path.starts_with("/integrations/v1/");
                let has_body = operation.contains_key("requestBody");
                let Some(responses) = operation
                    .get_mut("responses")
                    .and_then(Value::as_object_mut)
                else {
                    continue;
                };
                if integration {
                    responses.entry("503").or_insert_with(|| {
                        error("the catalog is unavailable (a database restart); retry after `Retry-After`")
                    });
                    if has_body {
                        responses.entry("408").or_insert_with(|| {
                            error("the body did not arrive within the body timeout")
                        });
                        responses
                            .entry("413")
                            .or_insert_with(|| error("body over 1 MiB"));
                        responses
                            .entry("415")
                            .or_insert_with(|| error("the body's Content-Type is not JSON"));
                    }
                    if let Some(unauthorized) = responses.get_mut("401") {
                        unauthorized["headers"] = json!({
                            "WWW-Authenticate": {
                                "description": "the scheme the request must use: `Bearer`",
                                "schema": { "type": "string" }
                            }
                        });
                    }
                }
                for status in ["429", "503"] {
                    if let Some(response) = responses.get_mut(status) {
                        response["headers"] = retry_after.clone();
                    }
                }
                if method == "put" && path == "/integrations/v1/surveys/{externalSurveyId}" {
                    responses["200"]["links"] = provisioning_links();
                }
                if method == "post" && path == "/integrations/v1/surveys/{surveyId}/scoring-runs" {
                    responses["202"]["links"] = json!({
                        "GetRun": {
                            "operationId": "getSurveyScoringRun",
                            "parameters": { "surveyId": "$request.path.surveyId", "runId": "$response.body#/data/id" },
                            "description": "poll the run until its status is no longer running"
                        },
                        "CancelRun": {
                            "operationId": "cancelSurveyScoringRun",
                            "parameters": { "surveyId": "$request.path.surveyId", "runId": "$response.body#/data/id" }
                        }
                    });
                }
                if method == "delete" && path.ends_with("/sessions/by-reference/{reference}") {
                    responses["202"]["links"] = json!({
                        "GetDeletion": {
                            "operationId": "getSessionDeletion",
                            "parameters": { "surveyId": "$request.path.surveyId", "reference": "$request.path.reference" },
                            "description": "poll the deletion until its status is no longer pending"
                        }
                    });
                }
            }
        }
    }
    let schemas = &mut document["components"]["schemas"];
    schemas["ProvisionRequest"]["properties"]["name"]["pattern"] = json!(NAME_PATTERN);
    schemas["ProvisionRequest"]["properties"]["name"]["minLength"] = json!(1);
    let references = &mut schemas["LookupRequest"]["properties"]["externalReferences"];
    references["minItems"] = json!(1);
    references["maxItems"] = json!(MAX_LOOKUP_REFERENCES);
    references["items"] = parameter_schema("reference").unwrap_or_default();
    if let Some(collect) = document
        .pointer_mut("/paths/~1event~1{key}~1{identifier}/post")
        .and_then(Value::as_object_mut)
    {
        collect.insert(
            "requestBody".to_owned(),
            json!({
                "required": true,
                "description": "the batch as JSON; `text/plain` (what `navigator.sendBeacon` sends for a string) carries the same JSON text",
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/CollectorBatch" } } }
            }),
        );
    }
    // Responses: ids, references and the closed sets of values, as the service writes them.
    let hex24 = || parameter_schema("surveyId").unwrap_or_default();
    let answered = [
        ("ProvisionResult", "surveyId", hex24()),
        ("ProvisionResult", "trackingKey", hex24()),
        ("ScoringRunView", "id", hex24()),
        ("ScoringRunView", "surveyId", hex24()),
        (
            "ScoringRunView",
            "status",
            json!({ "type": "string", "enum": ["running", "completed", "failed", "canceled"] }),
        ),
        (
            "SessionDeletionView",
            "status",
            json!({ "type": "string", "enum": ["pending", "completed", "failed"] }),
        ),
        (
            "SessionDeletionView",
            "reference",
            parameter_schema("reference").unwrap_or_default(),
        ),
        (
            "LookupRow",
            "externalReference",
            parameter_schema("reference").unwrap_or_default(),
        ),
        ("SurveySummary", "surveyId", hex24()),
        ("DeskRunView", "id", hex24()),
        (
            "DeskRunView",
            "status",
            json!({ "type": "string", "enum": ["running", "completed", "failed", "canceled"] }),
        ),
        (
            "DeskSessionView",
            "reference",
            parameter_schema("reference").unwrap_or_default(),
        ),
        (
            "DeskSessionView",
            "scoreBand",
            json!({ "type": "string", "enum": ["automation-like", "review", "human-like"] }),
        ),
        (
            "LookupRow",
            "scoreBand",
            json!({ "type": ["string", "null"], "enum": ["automation-like", "review", "human-like", null] }),
        ),
    ];
    for (schema, property, rule) in answered {
        let pointer = format!("/components/schemas/{schema}/properties/{property}");
        if let Some(Value::Object(existing)) = document.pointer_mut(&pointer)
            && let Value::Object(rule) = rule
        {
            existing.extend(rule);
        }
    }
    let schemas = &mut document["components"]["schemas"];
    schemas["CollectorBatch"] = json!({
        "type": "object",
        "description": "a batch of events of one browser session (at most 1 MiB); each event is any JSON value, the embed's are objects with `type`, `timestamp` (Unix ms) and `data`",
        "required": ["events"],
        "properties": {
            "events": { "type": "array", "maxItems": ingest::batch::MAX_EVENTS_PER_BATCH, "items": {} }
        }
    });
}

fn provisioning_links() -> Value {
    let survey = json!({ "surveyId": "$response.body#/data/surveyId" });
    json!({
        "LookupSessions": { "operationId": "lookupSurveySessions", "parameters": survey },
        "StartScoringRun": { "operationId": "startSurveyScoringRun", "parameters": survey },
        "RequestSessionDeletion": { "operationId": "requestSessionDeletion", "parameters": survey },
        "GetSessionDeletion": { "operationId": "getSessionDeletion", "parameters": survey },
        "CollectEvents": {
            "operationId": "collectEvents",
            "parameters": { "key": "$response.body#/data/trackingKey" },
            "description": "the embed sends the survey's events to the collector with its tracking key"
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every parameter and body rule the handlers enforce is in the served document.
    #[test]
    fn the_document_carries_the_rules() {
        let document = document();
        let lookup =
            &document["components"]["schemas"]["LookupRequest"]["properties"]["externalReferences"];
        assert_eq!(lookup["minItems"], 1);
        assert_eq!(lookup["maxItems"], 100);
        assert_eq!(lookup["items"]["format"], "uuid");
        let parameters = document
            .pointer("/paths/~1integrations~1v1~1surveys~1{surveyId}~1scoring-runs~1{runId}/get/parameters")
            .and_then(Value::as_array)
            .expect("parameters");
        for parameter in parameters {
            assert_eq!(parameter["schema"]["maxLength"], 24, "{parameter}");
        }
        let responses = document
            .pointer(
                "/paths/~1integrations~1v1~1surveys~1{surveyId}~1sessions~1lookup/post/responses",
            )
            .expect("responses");
        for status in [
            "400", "401", "403", "404", "408", "413", "415", "429", "503",
        ] {
            assert!(responses.get(status).is_some(), "{status}");
        }
        assert!(responses["401"]["headers"]["WWW-Authenticate"].is_object());
        assert!(responses["429"]["headers"]["Retry-After"].is_object());
        let links = document
            .pointer(
                "/paths/~1integrations~1v1~1surveys~1{externalSurveyId}/put/responses/200/links",
            )
            .expect("links");
        assert_eq!(
            links["StartScoringRun"]["operationId"],
            "startSurveyScoringRun"
        );
    }
}
