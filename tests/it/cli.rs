//! The operator's command line: `org` and `key` subcommands against a running server's
//! catalog, and the first-start bootstrap of `serve`.

use serde_json::{Value, json};

use crate::harness::{TestServer, is_hex24};

fn sorted_keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("{value} is not an object"))
        .keys()
        .cloned()
        .collect();
    keys.sort_unstable();
    keys
}

#[tokio::test]
async fn org_and_key_commands_print_the_documented_json() {
    let server = TestServer::start().await;

    let org = server.cli_json(&["org", "create", "--name", "Panel Co", "--json"]);
    assert_eq!(sorted_keys(&org), ["id", "name"]);
    let org_id = org["id"].as_str().expect("id").to_owned();
    assert!(is_hex24(&org_id), "{org_id}");
    assert_eq!(org["name"], json!("Panel Co"));
    let listed = server.cli_json(&["org", "list", "--json"]);
    assert!(
        listed
            .as_array()
            .expect("array")
            .contains(&json!({ "id": org_id, "name": "Panel Co" })),
        "{listed}"
    );

    let created = server.cli_json(&[
        "key", "create", "--org", &org_id, "--label", "primary", "--json",
    ]);
    for field in ["key", "prefix", "label", "scopes", "organizationId"] {
        assert!(created.get(field).is_some(), "{field} missing: {created}");
    }
    let secret = created["key"].as_str().expect("key").to_owned();
    let prefix = created["prefix"].as_str().expect("prefix").to_owned();
    assert!(
        secret.starts_with(&format!("{prefix}_")),
        "{secret} does not start with {prefix}"
    );
    assert_eq!(created["label"], json!("primary"));
    assert_eq!(created["organizationId"], json!(org_id));
    assert_eq!(
        created["scopes"],
        json!([
            "surveys:write",
            "sessions:read",
            "scoring:write",
            "scoring:read",
            "sessions:delete"
        ])
    );
    // The printed key works against the running server at once.
    let context = server.context(&secret).await;
    assert_eq!(context.status, 200, "{}", context.text);
    assert_eq!(context.json()["data"]["organization"]["id"], json!(org_id));

    let scoped = server.create_key(&org_id, "reader", Some("sessions:read"));
    assert_eq!(scoped.json["scopes"], json!(["sessions:read"]));

    // Listing shows prefixes and labels, never a secret.
    let listing = server.cli_ok(&["key", "list", "--org", &org_id, "--json"]);
    let keys: Value = serde_json::from_str(listing.trim()).expect("JSON listing");
    let keys = keys.as_array().expect("array");
    assert_eq!(keys.len(), 2, "{listing}");
    let prefixes: Vec<&str> = keys
        .iter()
        .map(|key| key["prefix"].as_str().expect("prefix"))
        .collect();
    assert!(prefixes.contains(&prefix.as_str()), "{listing}");
    assert!(prefixes.contains(&scoped.prefix.as_str()), "{listing}");
    for secret in [&secret, &scoped.key] {
        let (_, tail) = secret.rsplit_once('_').expect("secret part");
        assert!(
            !listing.contains(tail),
            "key list shows a secret: {listing}"
        );
    }
    for key in keys {
        assert!(key.get("key").is_none(), "{key}");
    }
    let plain = server.cli_ok(&["key", "list", "--org", &org_id]);
    for secret in [&secret, &scoped.key] {
        let (_, tail) = secret.rsplit_once('_').expect("secret part");
        assert!(!plain.contains(tail), "key list shows a secret: {plain}");
    }

    // Mistakes are refused with a failing exit status.
    for args in [
        vec![
            "key",
            "create",
            "--org",
            "0123456789abcdef01234567",
            "--label",
            "x",
        ],
        vec!["key", "create", "--org", "not-an-org", "--label", "x"],
        vec![
            "key", "create", "--org", &org_id, "--label", "x", "--scopes", "admin",
        ],
        vec!["key", "revoke", "tt_0000000000"],
        vec!["org", "delete", "0123456789abcdef01234567"],
        vec!["org", "create", "--name", "   "],
    ] {
        let output = server.cli(&args);
        assert!(!output.status.success(), "telltale {args:?} succeeded");
    }
}

#[tokio::test]
async fn the_first_start_prints_a_key_once_and_a_restart_prints_none() {
    let mut server = TestServer::start().await;
    let first_lines = server.stdout_lines();
    let printed: Vec<&String> = first_lines
        .iter()
        .filter(|line| line.starts_with("TELLTALE_INTEGRATION_KEY="))
        .collect();
    assert_eq!(printed.len(), 1, "{first_lines:?}");
    let key = server.key().to_owned();
    let context = server.context(&key).await;
    assert_eq!(context.status, 200, "{}", context.text);
    let organizations = server.cli_json(&["org", "list", "--json"]);
    assert_eq!(organizations.as_array().expect("array").len(), 1);

    server.terminate_ok().await;
    server.restart().await;
    let second_lines = server.stdout_lines();
    assert!(
        second_lines
            .iter()
            .any(|line| line.starts_with("telltale listening on ")),
        "{second_lines:?}"
    );
    assert!(
        second_lines
            .iter()
            .all(|line| !line.contains("TELLTALE_INTEGRATION_KEY") && !line.contains("tt_")),
        "a restart printed a key: {second_lines:?}"
    );
    // The first key still works; no second organization was created.
    let context = server.context(&key).await;
    assert_eq!(context.status, 200, "{}", context.text);
    let organizations = server.cli_json(&["org", "list", "--json"]);
    assert_eq!(
        organizations.as_array().expect("array").len(),
        1,
        "{organizations}"
    );
}

#[tokio::test]
async fn a_first_start_that_cannot_bind_shows_no_key_and_the_next_start_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().to_str().expect("utf-8 path").to_owned();
    // The port is taken: the start fails before the bootstrap.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = taken.local_addr().expect("address").to_string();
    let failed = std::process::Command::new(crate::harness::BIN)
        .args(["serve", "--bind", &address, "--data-dir", &data_dir])
        .output()
        .expect("run telltale serve");
    assert!(!failed.status.success());
    let stdout = String::from_utf8_lossy(&failed.stdout);
    assert!(!stdout.contains("TELLTALE_INTEGRATION_KEY"), "{stdout}");
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains(&address),
        "the error names the address"
    );
    let organizations = std::process::Command::new(crate::harness::BIN)
        .args(["org", "list", "--json", "--data-dir", &data_dir])
        .output()
        .expect("run telltale org list");
    let listed: serde_json::Value =
        serde_json::from_slice(&organizations.stdout).expect("org list --json");
    assert_eq!(listed, serde_json::json!([]), "no organization was created");
    drop(taken);
    // The next start, on a free port, creates the organization and shows its key.
    let mut next = std::process::Command::new(crate::harness::BIN)
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir", &data_dir])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start telltale serve");
    let stdout = next.stdout.take().expect("stdout");
    let lines = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        let mut seen = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.expect("a line");
            let done = line.starts_with("telltale listening on ");
            seen.push(line);
            if done {
                break;
            }
        }
        seen
    })
    .await
    .expect("read stdout");
    let _ = next.kill();
    let _ = next.wait();
    assert!(
        lines
            .iter()
            .any(|line| line.starts_with("TELLTALE_INTEGRATION_KEY=tt_")),
        "{lines:?}"
    );
}

#[test]
fn settings_below_their_minimum_are_refused_when_parsed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().to_str().expect("utf-8 path").to_owned();
    for (flag, value, range) in [
        ("--flush-interval-ms", "50", "100.."),
        ("--flush-bytes", "1000", "65536.."),
        ("--body-timeout-secs", "0", "1.."),
        ("--header-timeout-secs", "0", "1.."),
        ("--instance-lease-secs", "0", "1.."),
        ("--compaction-target-rows", "1", "2.."),
        ("--scoring-chunk-sessions", "0", "1.."),
        ("--scoring-max-events-per-pass", "0", "1.."),
        ("--scoring-lease-secs", "0", "1.."),
    ] {
        let output = std::process::Command::new(crate::harness::BIN)
            .args([
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--data-dir",
                &data_dir,
                flag,
                value,
            ])
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("run telltale serve");
        assert_eq!(output.status.code(), Some(2), "{flag} {value}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(flag) && stderr.contains(range),
            "{flag} {value}: {stderr}"
        );
    }
    // Nothing was started or created.
    assert!(!dir.path().join("catalog.db").exists());
}

#[test]
fn version_names_the_release_and_the_commit() {
    let output = std::process::Command::new(crate::harness::BIN)
        .arg("--version")
        .output()
        .expect("run telltale --version");
    assert!(output.status.success());
    let printed = String::from_utf8(output.stdout).expect("utf-8");
    let expected_release = format!("telltale {} (commit ", env!("CARGO_PKG_VERSION"));
    let commit = printed
        .trim_end()
        .strip_prefix(&expected_release)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("unexpected --version output: {printed:?}"));
    // Built from this checkout: the commit is its HEAD.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    // (build.rs reruns when HEAD or its branch moves, so the test's build is HEAD's.)
    assert_eq!(commit, head.as_deref().unwrap_or("unknown"));
}
