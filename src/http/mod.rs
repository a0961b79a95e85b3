//! The HTTP layer: routes, shared state and request extractors. The only code that knows HTTP
//! and JSON.
//!
//! - `routes`: the whole application ([`app`]): every route group, the integration API's body
//!   limit and store deadline, the request span.
//! - `collector`: `POST /event/{key}/{identifier}` for browsers (no authentication, CORS open).
//! - `embed`: the browser script at `/embed/v1/telltale.js`; `demo`: a demo survey page.
//! - `integrations`: `/integrations/v1/...` for integrators' servers (bearer keys, scopes,
//!   rate limit).
//! - `scoring`: scoring runs (start, poll, cancel).
//! - `deletions`: session deletion (request, poll).
//! - `evidence`, `review`, `desk`: a session's evidence, its review page, a survey's desk.
//! - `status`: liveness, readiness, status and Prometheus metrics.
//! - `observe`: the request span, its log line and the request metrics.
//! - `openapi`: the OpenAPI 3.1 document, generated from the handlers.
//! - `rules`: the inputs' rules (patterns, bounds, checks) the handlers enforce and the
//!   document states.
//! - `auth`: bearer authentication and the per-key rate limit.
//! - `error`: [`ApiError`], the only way errors leave, and its body's schema.
//! - `extract`: the extractors every handler shares; `format`: how times are written.
//! - `links`: the signed review and desk links.
//! - `state`: [`AppState`], what every handler shares (the running deployment, the edge's
//!   limiters, the site), built once at start.
//!
//! Imports point one way: every module names the siblings it uses (`super::error`,
//! `super::state`, ...), never this file, which only declares them and hands the binary what it
//! needs; `openapi` names the handlers it documents, the handlers never name `openapi` (unit
//! tests check both).

pub mod auth;
pub mod collector;
pub mod deletions;
pub mod demo;
pub mod desk;
pub mod embed;
pub mod error;
pub mod evidence;
pub mod extract;
pub mod format;
pub mod integrations;
pub mod links;
pub mod observe;
pub mod openapi;
pub mod review;
pub mod routes;
pub mod rules;
pub mod scoring;
pub mod state;
pub mod status;

pub use error::ApiError;
pub use routes::app;
pub use state::{AppState, Limits};

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    /// Every module of the HTTP layer, as its source (a folder's `mod.rs` for a folder).
    const SOURCES: &[(&str, &str)] = &[
        ("auth", include_str!("auth.rs")),
        ("collector", include_str!("collector.rs")),
        ("deletions", include_str!("deletions.rs")),
        ("demo", include_str!("demo.rs")),
        ("desk", include_str!("desk/mod.rs")),
        ("embed", include_str!("embed.rs")),
        ("error", include_str!("error.rs")),
        ("evidence", include_str!("evidence.rs")),
        ("extract", include_str!("extract.rs")),
        ("format", include_str!("format.rs")),
        ("integrations", include_str!("integrations.rs")),
        ("links", include_str!("links.rs")),
        ("observe", include_str!("observe.rs")),
        ("openapi", include_str!("openapi.rs")),
        ("review", include_str!("review/mod.rs")),
        ("routes", include_str!("routes.rs")),
        ("rules", include_str!("rules.rs")),
        ("scoring", include_str!("scoring.rs")),
        ("state", include_str!("state.rs")),
        ("status", include_str!("status.rs")),
    ];

    /// The paths a module's production code reaches through `super::`: `super::a::B` and each
    /// item of `super::{a::B, c}`, as written.
    fn super_paths(text: &str) -> Vec<String> {
        let code = text.split("#[cfg(test)]").next().unwrap_or(text);
        let mut paths = Vec::new();
        for (index, _) in code.match_indices("super::") {
            // `super::super::` names something above this layer: not a sibling.
            if code[..index].ends_with("super::") {
                continue;
            }
            let rest = &code[index + "super::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                paths.extend(group.split(',').map(|item| item.trim().to_owned()));
            } else {
                let path: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                paths.push(path);
            }
        }
        paths.retain(|path| !path.is_empty());
        paths
    }

    /// No module reaches up into this file: whatever it uses of a sibling it names through that
    /// sibling (`super::error::ApiError`, not a re-export here).
    #[test]
    fn no_module_imports_from_the_layers_mod_rs() {
        let names: BTreeSet<&str> = SOURCES.iter().map(|(name, _)| *name).collect();
        let mut upward = Vec::new();
        for (module, text) in SOURCES {
            for path in super_paths(text) {
                let first = path.split("::").next().unwrap_or_default();
                if !names.contains(first) {
                    upward.push(format!("{module}: super::{path}"));
                }
            }
        }
        assert!(upward.is_empty(), "imports from http/mod.rs: {upward:#?}");
        let scanned: usize = SOURCES
            .iter()
            .map(|(_, text)| super_paths(text).len())
            .sum();
        assert!(scanned > 40, "the check reads the imports: {scanned}");
    }

    /// The HTTP layer's modules form no import cycle: each names its siblings through
    /// `super::<module>`, and following those references never leads back. (`openapi` names
    /// every handler it documents; the handlers name `error` and `rules`, never `openapi`.)
    #[test]
    fn the_http_modules_import_no_cycle() {
        let sources = SOURCES;
        let names: BTreeSet<&str> = sources.iter().map(|(name, _)| *name).collect();
        let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (module, text) in sources {
            // Production code only: a module's tests may look anywhere.
            let code = text.split("#[cfg(test)]").next().unwrap_or(text);
            for (index, _) in code.match_indices("super::") {
                let rest = &code[index + "super::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if names.contains(name.as_str()) && name != *module {
                    let target = names.get(name.as_str()).copied().unwrap_or_default();
                    edges.entry(module).or_default().insert(target);
                }
            }
            // `use super::{a::X, b::Y}`.
            for (index, _) in code.match_indices("super::{") {
                let group = &code[index..];
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for name in &names {
                    if group.contains(&format!("{name}::")) && name != module {
                        edges.entry(module).or_default().insert(name);
                    }
                }
            }
        }
        fn visit<'a>(
            node: &'a str,
            edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
            path: &mut Vec<&'a str>,
        ) {
            if let Some(start) = path.iter().position(|seen| *seen == node) {
                panic!("import cycle: {} -> {node}", path[start..].join(" -> "));
            }
            path.push(node);
            for next in edges.get(node).into_iter().flatten() {
                visit(next, edges, path);
            }
            path.pop();
        }
        for name in &names {
            visit(name, &edges, &mut Vec::new());
        }
        assert!(
            edges["openapi"].contains("integrations"),
            "the check reads the imports: {edges:?}"
        );
    }
}
