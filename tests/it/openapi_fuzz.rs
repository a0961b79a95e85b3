//! The OpenAPI document against the real binary: openapi-spec-validator checks it against the
//! OpenAPI 3.1 specification, then schemathesis (both from PyPI; `.ci/run` installs them) reads `/integrations/v1/openapi.json` and runs its coverage, fuzzing and stateful phases
//! with every check on: no 5xx, statuses, content types, headers and bodies as documented,
//! schema-valid requests accepted, schema-violating ones refused with a 4xx, links followed
//! from provisioning and run start. `.ci/run` runs it on both store configurations, like the
//! rest of the suite. Settings: `tests/openapi/schemathesis.toml`; the examples per operation
//! come from `TELLTALE_OPENAPI_FUZZ_EXAMPLES` (default 100).

use std::path::Path;
use std::process::Command;

use crate::harness::TestServer;

/// Where pip put schemathesis's `st` for the `python3` on the path.
fn schemathesis_cli() -> std::path::PathBuf {
    let output = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('scripts'))",
        ])
        .output()
        .expect("python3");
    let scripts = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let st = Path::new(&scripts).join("st");
    assert!(
        st.exists(),
        "schemathesis is missing ({} not found): pip install schemathesis (.ci/run does)",
        st.display()
    );
    st
}

#[tokio::test]
async fn the_openapi_document_holds_under_schemathesis() {
    // Limits out of the way: the fuzzer sends thousands of requests with one key and from one
    // address, and a 429 would hide what it wants to see.
    let server = TestServer::start_with(&[
        "--api-rate-per-minute",
        "100000000",
        "--collector-ip-rate",
        "0",
        "--collector-identifier-rate",
        "0",
        "--collector-survey-rate",
        "0",
        "--collector-new-sessions-per-minute",
        "0",
    ])
    .await;
    let examples =
        std::env::var("TELLTALE_OPENAPI_FUZZ_EXAMPLES").unwrap_or_else(|_| "100".to_owned());
    let openapi = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openapi");
    let work = tempfile::tempdir().expect("scratch folder");
    let document = server.url("/integrations/v1/openapi.json");
    // First the document itself, against the OpenAPI 3.1 specification's schema.
    let served = server.get("/integrations/v1/openapi.json").await.text;
    let validation = Command::new("python3")
        .args([
            "-c",
            "import json, sys; from openapi_spec_validator import validate; \
             validate(json.load(sys.stdin)); print('valid')",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(served.as_bytes())?;
            child.wait_with_output()
        })
        .expect("run python3 with openapi-spec-validator (pip install openapi-spec-validator)");
    assert!(
        validation.status.success(),
        "the served document is not valid OpenAPI 3.1: {}",
        String::from_utf8_lossy(&validation.stderr)
    );
    let authorization = format!("Authorization: Bearer {}", server.key());
    let mut command = Command::new(schemathesis_cli());
    command
        .current_dir(work.path())
        .env("SCHEMATHESIS_HOOKS", "hooks")
        .env("PYTHONPATH", &openapi)
        .arg("--config-file")
        .arg(openapi.join("schemathesis.toml"))
        .args(["run", &document, "-H", &authorization])
        .args(["--checks", "all", "--workers", "2"])
        .args(["--max-examples", &examples, "--generation-database", "none"])
        .args(["--request-timeout", "30", "--no-color"]);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("run schemathesis");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary: String = stdout
        .lines()
        .skip_while(|line| !line.contains("SUMMARY"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{stdout}\n{}\nthe server's errors and warnings:\n{}\n{}",
        String::from_utf8_lossy(&output.stderr),
        server.log_lines("ERROR").join("\n"),
        server.log_lines("WARN").join("\n"),
    );
    // It did reach every operation, and followed the documented links.
    let served = server.get("/integrations/v1/openapi.json").await.json();
    let operations: usize = served["paths"]
        .as_object()
        .expect("paths")
        .values()
        .map(|item| item.as_object().map_or(0, |methods| methods.len()))
        .sum();
    assert!(
        summary.contains(&format!("Tested: {operations}")),
        "{operations} operations: {summary}"
    );
    assert!(stdout.contains("API Links:"), "{stdout}");
    println!("{summary}");
}
