//! The harness: a real `telltale` process on a temporary data dir, an HTTP client for it, and
//! helpers for the command line, the SQLite catalog and DuckDB.
//!
//! A [`TestServer`] spawns `telltale serve --bind 127.0.0.1:0`, learns the port from the line
//! `telltale listening on http://127.0.0.1:PORT`, keeps the bootstrap key printed on the first
//! start, polls `/status/health`, and kills the process on drop. Each process's stderr goes to a
//! file that is printed when the test fails.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::stores::{self, ScaleOutStores};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_telltale");

const START_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
const LISTENING_PREFIX: &str = "telltale listening on ";
const KEY_PREFIX: &str = "TELLTALE_INTEGRATION_KEY=";

/// Environment variables of the binary that must not leak in from the caller's shell.
const TELLTALE_ENV: [&str; 12] = [
    "TELLTALE_DATA_DIR",
    "TELLTALE_CATALOG_URL",
    "TELLTALE_LAKE_URL",
    "TELLTALE_BIND",
    "TELLTALE_PUBLIC_URL",
    "TELLTALE_FLUSH_INTERVAL_MS",
    "TELLTALE_COLLECTOR_IP_RATE",
    "TELLTALE_COLLECTOR_IDENTIFIER_RATE",
    "TELLTALE_API_RATE_PER_MINUTE",
    "LOG_FILTER",
    "LOG_FORMAT",
    "RUST_LOG",
];

fn telltale_command() -> Command {
    let mut command = Command::new(BIN);
    for name in TELLTALE_ENV {
        command.env_remove(name);
    }
    command
}

/// `--flush-interval-ms 500` unless the test chose its own.
fn with_default_flush_interval(extra_args: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = extra_args.iter().map(|arg| (*arg).to_owned()).collect();
    if !args
        .iter()
        .any(|arg| arg.starts_with("--flush-interval-ms"))
    {
        args.extend(["--flush-interval-ms".to_owned(), "500".to_owned()]);
    }
    args
}

/// A running (or stopped) `telltale serve` on its own data dir.
pub(crate) struct TestServer {
    root: tempfile::TempDir,
    data_dir: PathBuf,
    extra_args: Vec<String>,
    child: Option<Child>,
    base_url: String,
    bootstrap_key: Option<String>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr_files: Vec<PathBuf>,
    client: reqwest::Client,
    /// Environment variables set on the next starts.
    env: Vec<(String, String)>,
    /// The PostgreSQL database and S3 bucket of a scale-out run (`stores`); `None` on the
    /// embedded default.
    scale_out: Option<Arc<ScaleOutStores>>,
}

impl TestServer {
    /// Starts a server with the harness defaults (`--flush-interval-ms 500`, default limits).
    pub(crate) async fn start() -> TestServer {
        TestServer::start_with(&[]).await
    }

    /// Starts a server with extra `serve` arguments, kept for restarts.
    pub(crate) async fn start_with(extra_args: &[&str]) -> TestServer {
        TestServer::start_with_env(extra_args, &[]).await
    }

    /// Starts a server with extra `serve` arguments and environment variables, both kept for
    /// restarts and the environment also for `cli`.
    pub(crate) async fn start_with_env(extra_args: &[&str], env: &[(&str, &str)]) -> TestServer {
        let root = new_root();
        let scale_out = if stores::scale_out() {
            Some(Arc::new(ScaleOutStores::create(root.path()).await))
        } else {
            None
        };
        TestServer::start_on(root, scale_out, extra_args, env).await
    }

    /// Starts a server on a PostgreSQL catalog and an S3 lake of its own, whatever
    /// `TELLTALE_IT_STORES` says (the fleet tests).
    pub(crate) async fn start_scale_out(extra_args: &[&str]) -> TestServer {
        let root = new_root();
        let stores = Arc::new(ScaleOutStores::create(root.path()).await);
        TestServer::start_on(root, Some(stores), extra_args, &[]).await
    }

    /// Starts a server on `stores` (a database and bucket made with
    /// [`ScaleOutStores::create_with`] on servers of the test's own), with `env` besides the
    /// stores' own.
    pub(crate) async fn start_on_stores(
        scratch: tempfile::TempDir,
        stores: ScaleOutStores,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> TestServer {
        TestServer::start_on(scratch, Some(Arc::new(stores)), extra_args, env).await
    }

    /// Starts a server on a data dir already filled under `root` (`root/data`, as a fixture of
    /// an earlier release left it), with `key`, an integration key its catalog holds: no
    /// bootstrap key is printed on a catalog that has one.
    pub(crate) async fn start_on_existing(
        root: tempfile::TempDir,
        key: &str,
        extra_args: &[&str],
    ) -> TestServer {
        let mut server = TestServer::start_on(root, None, extra_args, &[]).await;
        server.bootstrap_key = Some(key.to_owned());
        server
    }

    /// The catalog's URL, as `--catalog` and `--tombstones-from` take it.
    pub(crate) fn catalog_url(&self) -> String {
        match &self.scale_out {
            Some(stores) => stores.catalog_url.clone(),
            None => format!("sqlite://{}", self.data_dir.join("catalog.db").display()),
        }
    }

    /// The scale-out stores this server runs on, if it does.
    pub(crate) fn scale_out_stores(&self) -> Option<&ScaleOutStores> {
        self.scale_out.as_deref()
    }

    /// Runs `telltale ARGS` on a deployment no server runs on yet: the data dir `root/data`,
    /// and `stores` when given (else the embedded default).
    pub(crate) fn cli_on(
        root: &Path,
        stores: Option<&ScaleOutStores>,
        args: &[&str],
    ) -> std::process::Output {
        let mut command = telltale_command();
        command.args(args).arg("--data-dir").arg(root.join("data"));
        if let Some(stores) = stores {
            command
                .args(["--catalog", &stores.catalog_url])
                .args(["--lake", &stores.lake_url()])
                .envs(stores.env());
        }
        command.output().expect("run telltale")
    }

    /// Starts a server on stores a command already filled (a restore): `root/data`, and
    /// `stores` when given; `key` is an integration key their catalog holds.
    pub(crate) async fn start_restored(
        root: tempfile::TempDir,
        stores: Option<ScaleOutStores>,
        key: &str,
        extra_args: &[&str],
    ) -> TestServer {
        let mut server = TestServer::start_on(root, stores.map(Arc::new), extra_args, &[]).await;
        server.bootstrap_key = Some(key.to_owned());
        server
    }

    /// A temporary folder for a server's data dir and scratch files.
    pub(crate) fn new_root() -> tempfile::TempDir {
        new_root()
    }

    /// Starts another instance, on a data dir (and log) of its own, sharing `first`'s catalog
    /// and lake, as a second server behind a load balancer would. It uses `first`'s key.
    pub(crate) async fn start_sharing(first: &TestServer, extra_args: &[&str]) -> TestServer {
        TestServer::start_sharing_with_env(first, extra_args, &[]).await
    }

    /// [`Self::start_sharing`] with environment variables of its own besides the stores' (an
    /// `AWS_ENDPOINT` through a [`crate::proxy::StallProxy`], say).
    pub(crate) async fn start_sharing_with_env(
        first: &TestServer,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> TestServer {
        let stores = first
            .scale_out
            .clone()
            .expect("sharing needs a server on the scale-out stores");
        let mut server = TestServer::start_on(new_root(), Some(stores), extra_args, env).await;
        server.bootstrap_key = first.bootstrap_key.clone();
        server
    }

    async fn start_on(
        root: tempfile::TempDir,
        scale_out: Option<Arc<ScaleOutStores>>,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> TestServer {
        let data_dir = root.path().join("data");
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60))
            // Under the server's 10 s idle close (`--header-timeout-secs`), as a client should
            // be: a pooled connection the server already closed is never reused.
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .expect("build the http client");
        let mut server = TestServer {
            scale_out,
            root,
            data_dir,
            extra_args: with_default_flush_interval(extra_args),
            child: None,
            base_url: String::new(),
            bootstrap_key: None,
            stdout: Arc::new(Mutex::new(Vec::new())),
            stderr_files: Vec::new(),
            client,
            env: env
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
        };
        server.spawn().await;
        if server.scale_out.is_some() && !server.extra_args.iter().any(|arg| arg == "--lake") {
            // The scale-out stores really are in use: nothing of the embedded default exists.
            for embedded in ["catalog.db", "lake"] {
                assert!(
                    !server.data_dir.join(embedded).exists(),
                    "{embedded} created on a scale-out server"
                );
            }
        }
        server
    }

    /// Starts the process again on the same data dir, after `kill_hard` or `terminate`. The
    /// port changes.
    pub(crate) async fn restart(&mut self) {
        assert!(self.child.is_none(), "restart needs a stopped server");
        self.spawn().await;
    }

    async fn spawn(&mut self) {
        let stderr_path = self
            .root
            .path()
            .join(format!("serve-{}.stderr", self.stderr_files.len() + 1));
        let stderr = File::create(&stderr_path).expect("create the stderr file");
        self.stderr_files.push(stderr_path);
        let mut child = self
            .command(&["serve", "--bind", "127.0.0.1:0"])
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("spawn telltale serve");
        let stdout = child.stdout.take().expect("piped stdout");
        self.child = Some(child);

        // A thread keeps reading stdout for the process's whole life so that it never blocks on
        // a full pipe; lines are kept for `stdout_lines` and sent to the waiting test.
        let lines = Arc::new(Mutex::new(Vec::new()));
        self.stdout = Arc::clone(&lines);
        let (sender, receiver) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                lines.lock().expect("stdout lines").push(line.clone());
                let _ = sender.send(line);
            }
        });
        let listening = tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + START_TIMEOUT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match receiver.recv_timeout(left) {
                    Ok(line) => {
                        if let Some(url) = line.strip_prefix(LISTENING_PREFIX) {
                            return Ok(url.trim().to_owned());
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        return Err("no listening line in time");
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        return Err("stdout closed before the listening line");
                    }
                }
            }
        })
        .await
        .expect("join the stdout waiter");
        let url = match listening {
            Ok(url) => url,
            Err(reason) => panic!("telltale serve did not start: {reason}\n{}", self.logs()),
        };
        assert!(
            url.starts_with("http://127.0.0.1:"),
            "unexpected listening address {url}"
        );
        self.base_url = url;
        if self.bootstrap_key.is_none() {
            self.bootstrap_key = self
                .stdout_lines()
                .iter()
                .find_map(|line| line.strip_prefix(KEY_PREFIX).map(str::to_owned));
        }
        self.wait_healthy().await;
    }

    async fn wait_healthy(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let response = self.client.get(self.url("/status/health")).send().await;
            if let Ok(response) = response
                && response.status() == 200
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server never became healthy\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sets (or with `None` removes) an environment variable for the next starts.
    pub(crate) fn set_env(&mut self, name: &str, value: Option<&str>) {
        self.env.retain(|(existing, _)| existing != name);
        if let Some(value) = value {
            self.env.push((name.to_owned(), value.to_owned()));
        }
    }

    /// Waits until the current process's stderr contains `needle`.
    pub(crate) async fn wait_for_log(&self, needle: &str, within: Duration) {
        let path = self.stderr_files.last().expect("a started server").clone();
        let deadline = Instant::now() + within;
        loop {
            if std::fs::read_to_string(&path).is_ok_and(|text| text.contains(needle)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} not logged within {within:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The server's resident set size in MiB, from `/proc`.
    pub(crate) fn rss_mib(&self) -> u64 {
        let pid = self.child.as_ref().expect("a running server").id();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS");
        kib / 1024
    }

    /// SIGSTOP: the process stays, silent, as a hung instance would; [`Self::resume`] wakes it.
    pub(crate) fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`Self::pause`].
    pub(crate) fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("a running server").id();
        let sent = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill {signal} failed");
    }

    /// Occurrences of `needle` (any letter case) in the files of this instance's write-ahead
    /// log as they are now.
    pub(crate) fn log_occurrences(&self, needle: &str) -> usize {
        let needle = needle.to_ascii_lowercase().into_bytes();
        let Ok(entries) = std::fs::read_dir(self.data_dir.join("wal")) else {
            return 0;
        };
        let mut found = 0;
        for entry in entries.flatten() {
            // A file the log deletes while it is read counts as gone.
            let Ok(mut bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            bytes.make_ascii_lowercase();
            found += bytes
                .windows(needle.len())
                .filter(|window| *window == needle.as_slice())
                .count();
        }
        found
    }

    /// SIGKILL: no shutdown code runs.
    pub(crate) fn kill_hard(&mut self) {
        let mut child = self.child.take().expect("a running server");
        child.kill().expect("SIGKILL the server");
        child.wait().expect("reap the killed server");
    }

    /// SIGTERM, then waits for the process to exit (it flushes buffered events first).
    pub(crate) async fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("a running server");
        let signalled = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill -TERM");
        assert!(signalled.success(), "kill -TERM failed");
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().expect("poll the server") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "server did not exit within {STOP_TIMEOUT:?} of SIGTERM\n{}",
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM and asserts a clean exit.
    pub(crate) async fn terminate_ok(&mut self) {
        let status = self.terminate().await;
        assert!(
            status.success(),
            "server exited with {status} after SIGTERM\n{}",
            self.logs()
        );
    }

    /// Waits (at most `within`) for the process to exit by itself; its status.
    pub(crate) async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            let child = self.child.as_mut().expect("a started server");
            if let Some(status) = child.try_wait().expect("poll the server") {
                self.child = None;
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {within:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => child.try_wait().expect("poll the server").is_none(),
            None => false,
        }
    }

    /// Every stderr file of this server, for failure messages.
    pub(crate) fn logs(&self) -> String {
        let mut out = String::new();
        for path in &self.stderr_files {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(200).collect();
            out.push_str(&format!("--- {} (last 200 lines) ---\n", path.display()));
            for line in tail.into_iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Every stderr line of every start of this server that contains `needle`.
    pub(crate) fn log_lines(&self, needle: &str) -> Vec<String> {
        self.stderr_files
            .iter()
            .flat_map(|path| {
                std::fs::read_to_string(path)
                    .unwrap_or_default()
                    .lines()
                    .filter(|line| line.contains(needle))
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// What the current process printed on stdout so far.
    pub(crate) fn stdout_lines(&self) -> Vec<String> {
        self.stdout.lock().expect("stdout lines").clone()
    }

    pub(crate) fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub(crate) fn base_url(&self) -> &str {
        &self.base_url
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The key printed on the first start (every scope, in the default organization).
    pub(crate) fn key(&self) -> &str {
        self.bootstrap_key
            .as_deref()
            .expect("the first start printed TELLTALE_INTEGRATION_KEY=")
    }

    // --- HTTP ---

    pub(crate) async fn get(&self, path: &str) -> Reply {
        send(self.client.get(self.url(path))).await
    }

    pub(crate) async fn context(&self, key: &str) -> Reply {
        send(
            self.client
                .get(self.url("/integrations/v1/context"))
                .bearer_auth(key),
        )
        .await
    }

    /// `PUT /integrations/v1/surveys/{external}`; `external` is percent-encoded here.
    pub(crate) async fn provision(&self, key: &str, external: &str, body: &str) -> Reply {
        let path = format!("/integrations/v1/surveys/{}", encode_segment(external));
        send(
            self.client
                .put(self.url(&path))
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(body.to_owned()),
        )
        .await
    }

    /// Provisions a survey and returns it; asserts success.
    pub(crate) async fn provision_ok(&self, key: &str, external: &str, name: &str) -> Survey {
        let body = serde_json::json!({ "name": name }).to_string();
        let reply = self.provision(key, external, &body).await;
        assert_eq!(reply.status, 200, "provisioning failed: {}", reply.text);
        let data = &reply.json()["data"];
        Survey {
            survey_id: data["surveyId"].as_str().expect("surveyId").to_owned(),
            tracking_key: data["trackingKey"]
                .as_str()
                .expect("trackingKey")
                .to_owned(),
        }
    }

    /// `POST .../sessions/lookup` with a raw body.
    pub(crate) async fn lookup(&self, key: &str, survey_id: &str, body: &str) -> Reply {
        let path = format!("/integrations/v1/surveys/{survey_id}/sessions/lookup");
        send(
            self.client
                .post(self.url(&path))
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(body.to_owned()),
        )
        .await
    }

    /// Looks references up and returns the rows; asserts success.
    pub(crate) async fn lookup_rows(
        &self,
        key: &str,
        survey_id: &str,
        references: &[String],
    ) -> Vec<Value> {
        let body = serde_json::json!({ "externalReferences": references }).to_string();
        let reply = self.lookup(key, survey_id, &body).await;
        assert_eq!(reply.status, 200, "lookup failed: {}", reply.text);
        reply.json()["data"].as_array().expect("data array").clone()
    }

    /// Starts a scoring run on `survey_id` and polls it until it is no longer `running`;
    /// returns the run as the API last showed it.
    pub(crate) async fn run_scoring_to_end(&self, key: &str, survey_id: &str) -> Value {
        let path = format!("/integrations/v1/surveys/{survey_id}/scoring-runs");
        let started = send(
            self.client
                .post(self.url(&path))
                .bearer_auth(key)
                .json(&serde_json::json!({})),
        )
        .await;
        assert_eq!(started.status, 202, "{}", started.text);
        let run_id = started.json()["data"]["id"]
            .as_str()
            .expect("run id")
            .to_owned();
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            let reply = send(
                self.client
                    .get(self.url(&format!("{path}/{run_id}")))
                    .bearer_auth(key),
            )
            .await;
            let run = reply.json()["data"].clone();
            if run["status"] != "running" {
                return run;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "run still running: {run}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Polls lookup until every reference's `eventCount` is at least its expected count, or
    /// the deadline passes; returns the last rows either way.
    pub(crate) async fn lookup_until_counts(
        &self,
        key: &str,
        survey_id: &str,
        expected: &[(String, u64)],
        within: Duration,
    ) -> Vec<Value> {
        let references: Vec<String> = expected.iter().map(|(r, _)| r.clone()).collect();
        let deadline = Instant::now() + within;
        loop {
            let rows = self.lookup_rows(key, survey_id, &references).await;
            let reached = rows
                .iter()
                .zip(expected)
                .all(|(row, (_, count))| row["eventCount"].as_u64().unwrap_or(0) >= *count);
            if reached || Instant::now() >= deadline {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `POST /event/{tracking_key}/{identifier}`; the identifier is used as given (the caller
    /// percent-encodes what needs it).
    pub(crate) async fn collect(
        &self,
        tracking_key: &str,
        identifier: &str,
        content_type: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> Reply {
        let mut request = self
            .client
            .post(self.url(&format!("/event/{tracking_key}/{identifier}")))
            .body(body);
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        send(request).await
    }

    /// Posts a JSON batch body and asserts `201 {"success":true,"count":N}`.
    pub(crate) async fn collect_ok(
        &self,
        tracking_key: &str,
        identifier: &str,
        body: &str,
        count: usize,
    ) {
        let reply = self
            .collect(
                tracking_key,
                identifier,
                Some("application/json"),
                body.to_owned(),
            )
            .await;
        assert_eq!(
            reply.status, 201,
            "collector refused a batch for {identifier}: {}",
            reply.text
        );
        assert_eq!(
            reply.json(),
            serde_json::json!({ "success": true, "count": count })
        );
    }

    // --- command line ---

    /// `telltale ARGS` on this server's data dir and stores, with its environment.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = telltale_command();
        command.args(args).arg("--data-dir").arg(&self.data_dir);
        if let Some(stores) = &self.scale_out {
            // A test that names its own catalog or lake keeps it.
            let named =
                |flag: &str| self.extra_args.iter().any(|arg| arg == flag) || args.contains(&flag);
            if !named("--catalog") {
                command.args(["--catalog", &stores.catalog_url]);
            }
            if !named("--lake") {
                command.args(["--lake", &stores.lake_url()]);
            }
            command.envs(stores.env());
        }
        command.envs(self.env.iter().map(|(name, value)| (name, value)));
        command
    }

    /// Runs a CLI subcommand against this server's data dir and stores.
    pub(crate) fn cli(&self, args: &[&str]) -> std::process::Output {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run the telltale command line")
    }

    /// Runs a CLI subcommand, asserts success and returns its stdout.
    pub(crate) fn cli_ok(&self, args: &[&str]) -> String {
        let output = self.cli(args);
        assert!(
            output.status.success(),
            "telltale {args:?} failed with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("utf-8 stdout")
    }

    pub(crate) fn cli_json(&self, args: &[&str]) -> Value {
        let stdout = self.cli_ok(args);
        serde_json::from_str(stdout.trim())
            .unwrap_or_else(|error| panic!("telltale {args:?} printed no JSON ({error}): {stdout}"))
    }

    /// `org create --name NAME --json`; returns the organization id.
    pub(crate) fn create_org(&self, name: &str) -> String {
        let org = self.cli_json(&["org", "create", "--name", name, "--json"]);
        org["id"].as_str().expect("org id").to_owned()
    }

    /// `key create --org ORG --label LABEL [--scopes ..] --json`.
    pub(crate) fn create_key(&self, org: &str, label: &str, scopes: Option<&str>) -> CreatedKey {
        let mut args = vec!["key", "create", "--org", org, "--label", label, "--json"];
        if let Some(scopes) = scopes {
            args.extend(["--scopes", scopes]);
        }
        let json = self.cli_json(&args);
        CreatedKey {
            key: json["key"].as_str().expect("key").to_owned(),
            prefix: json["prefix"].as_str().expect("prefix").to_owned(),
            json,
        }
    }

    /// The organization of the bootstrap key, read through the context endpoint.
    pub(crate) async fn default_org(&self) -> String {
        let reply = self.context(self.key()).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        reply.json()["data"]["organization"]["id"]
            .as_str()
            .expect("organization id")
            .to_owned()
    }

    // --- direct access to the stores ---

    pub(crate) fn catalog_path(&self) -> PathBuf {
        self.data_dir.join("catalog.db")
    }

    /// Whether this server runs on the embedded default (SQLite file, lake folder), where
    /// tests may also inspect the stores' own files.
    pub(crate) fn is_embedded(&self) -> bool {
        self.scale_out.is_none()
    }

    /// Runs SQL on the catalog: with the `sqlite3` tool (or Python's sqlite3 module when the
    /// tool is not installed) on the embedded default, with `psql` on PostgreSQL. Returns what
    /// it printed (`|`-separated rows).
    pub(crate) fn catalog_sql(&self, sql: &str) -> String {
        if let Some(stores) = &self.scale_out {
            return stores.catalog_sql(sql);
        }
        let catalog = self.catalog_path();
        let output = match Command::new("sqlite3")
            .arg("-cmd")
            .arg(".timeout 10000")
            .arg(&catalog)
            .arg(sql)
            .output()
        {
            Ok(output) => output,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Command::new("python3")
                .arg("-c")
                .arg(PYTHON_SQLITE)
                .arg(&catalog)
                .arg(sql)
                .output()
                .expect("run python3 for sqlite3"),
            Err(error) => panic!("cannot run sqlite3: {error}"),
        };
        assert!(
            output.status.success(),
            "catalog SQL {sql:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("utf-8 output")
    }

    /// A folder holding the lake as it is now: the lake folder itself on the embedded
    /// default, a fresh download of the bucket with an S3 lake.
    pub(crate) fn lake_dir(&self) -> PathBuf {
        match &self.scale_out {
            Some(stores) => stores.mirror_lake(),
            None => self.data_dir.join("lake"),
        }
    }

    /// Overwrites one object of the lake (a path relative to its root).
    pub(crate) fn write_lake_object(&self, path: &str, bytes: &[u8]) {
        match &self.scale_out {
            Some(stores) => stores.put_object(path, bytes),
            None => std::fs::write(self.data_dir.join("lake").join(path), bytes)
                .expect("write a lake object"),
        }
    }

    /// Where a Delta reader finds one of the lake's tables as the server writes it (the folder,
    /// or the bucket), with the storage options it needs.
    pub(crate) fn delta_location(&self, table: &str) -> (String, Value) {
        match &self.scale_out {
            Some(stores) => stores.delta_location(table),
            None => (
                self.data_dir.join("lake").join(table).display().to_string(),
                serde_json::json!({}),
            ),
        }
    }

    /// The live files of one of the lake's Delta tables (`events`, `features`, `scores`) with
    /// their row counts, as Python's `deltalake` reads the table's log: paths from the lake's
    /// root, sorted.
    pub(crate) fn live_files(&self, table: &str) -> Vec<(String, u64)> {
        live_files_at(&self.lake_dir(), table)
    }

    /// The glob of every events Parquet file in (a copy of) this server's lake: for tests of the
    /// plain-files contract (docs/lake.md), which outside readers of the folders rely on. Counts
    /// of what the table holds go through [`TestServer::events_files`].
    pub(crate) fn events_glob(&self) -> String {
        format!(
            "{}/events/survey_id=*/**/*.parquet",
            self.lake_dir().display()
        )
    }

    /// The `events` table's live files in (a copy of) this server's lake, as a DuckDB list of
    /// paths (`['/.../a.parquet', ...]`): what the table holds, never a file a compaction
    /// replaced (kept for readers of older snapshots) or an upload no commit names.
    pub(crate) fn events_files(&self) -> String {
        let lake = self.lake_dir();
        let paths: Vec<String> = live_files_at(&lake, "events")
            .into_iter()
            .map(|(path, _)| format!("'{}'", lake.join(path).display()))
            .collect();
        assert!(!paths.is_empty(), "the events table has no live file");
        format!("[{}]", paths.join(", "))
    }
}

fn new_root() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("telltale-it-")
        .tempdir()
        .expect("create a temporary directory")
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("server logs of the failed test:\n{}", self.logs());
        }
    }
}

const PYTHON_SQLITE: &str = r#"
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], timeout=10)
for row in connection.execute(sys.argv[2]).fetchall():
    print("|".join("" if value is None else str(value) for value in row))
connection.commit()
"#;

/// [`TestServer::live_files`] of a lake folder (or a copy of a bucket) already at hand, so that
/// the files listed are the files of that copy.
pub(crate) fn live_files_at(lake: &Path, table: &str) -> Vec<(String, u64)> {
    let root = lake.join(table);
    let output = Command::new("python3")
        .arg("-c")
        .arg(PYTHON_DELTA_FILES)
        .arg(&root)
        .output()
        .expect("run python3 (the lake tests need python3 with the deltalake module)");
    assert!(
        output.status.success(),
        "reading the Delta log of {} failed: {}",
        root.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Vec<(String, u64)> = serde_json::from_slice(&output.stdout).expect("files as JSON");
    let mut files: Vec<(String, u64)> = rows
        .into_iter()
        .map(|(path, rows)| (format!("{table}/{path}"), rows))
        .collect();
    files.sort();
    files
}

const PYTHON_DELTA_FILES: &str = r#"
import json, sys
try:
    import deltalake
except ImportError:
    sys.stderr.write("the python deltalake module is missing: pip install deltalake\n")
    sys.exit(3)
actions = deltalake.DeltaTable(sys.argv[1]).get_add_actions(flatten=True)
paths = actions.column("path").to_pylist()
rows = actions.column("num_records").to_pylist()
print(json.dumps([[path, count or 0] for path, count in zip(paths, rows)]))
"#;

const PYTHON_DUCKDB: &str = r#"
import json, sys
try:
    import duckdb
except ImportError:
    sys.stderr.write("the python duckdb module is missing: pip install duckdb\n")
    sys.exit(3)
connection = duckdb.connect()
cursor = connection.execute(sys.argv[1])
columns = [description[0] for description in cursor.description]
rows = [dict(zip(columns, row)) for row in cursor.fetchall()]
print(json.dumps(rows, default=str))
"#;

/// Runs a query with DuckDB (Python module) and returns the rows as JSON objects. Fails, never
/// skips, when DuckDB is missing.
pub(crate) fn duckdb_query(sql: &str) -> Vec<Value> {
    let output = Command::new("python3")
        .arg("-c")
        .arg(PYTHON_DUCKDB)
        .arg(sql)
        .output()
        .expect("run python3 (DuckDB tests need python3 with the duckdb module)");
    assert!(
        output.status.success(),
        "DuckDB query failed: {sql}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Value = serde_json::from_slice(&output.stdout).expect("DuckDB rows as JSON");
    rows.as_array().expect("array of rows").clone()
}

/// A survey as provisioned.
#[derive(Debug, Clone)]
pub(crate) struct Survey {
    pub(crate) survey_id: String,
    pub(crate) tracking_key: String,
}

/// A key as printed by `key create --json`.
#[derive(Debug, Clone)]
pub(crate) struct CreatedKey {
    pub(crate) key: String,
    pub(crate) prefix: String,
    pub(crate) json: Value,
}

/// A response, read in full.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) text: String,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|error| {
            panic!(
                "status {} body is not JSON ({error}): {:?}",
                self.status, self.text
            )
        })
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|value| value.to_str().expect("ascii header"))
    }
}

pub(crate) async fn send(request: reqwest::RequestBuilder) -> Reply {
    let response = request.send().await.expect("send the request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("read the response body");
    Reply {
        status,
        headers,
        text,
    }
}

/// Asserts `status` with a JSON body `{"error": "<non-empty string>"}` and nothing else.
#[track_caller]
pub(crate) fn assert_error(reply: &Reply, status: u16) {
    assert_eq!(
        reply.status, status,
        "expected {status}, got {}: {}",
        reply.status, reply.text
    );
    let content_type = reply.header("content-type").unwrap_or_default();
    assert!(
        content_type.starts_with("application/json"),
        "error content type is {content_type:?}: {}",
        reply.text
    );
    let body = reply.json();
    let object = body
        .as_object()
        .unwrap_or_else(|| panic!("error body is not an object: {}", reply.text));
    assert_eq!(
        object.len(),
        1,
        "error body has other fields: {}",
        reply.text
    );
    let message = object["error"]
        .as_str()
        .unwrap_or_else(|| panic!("`error` is not a string: {}", reply.text));
    assert!(!message.is_empty(), "empty error message");
}

/// Percent-encodes every byte outside the unreserved set of RFC 3986.
pub(crate) fn encode_segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

pub(crate) fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(crate) fn now_millis() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since_epoch.as_millis()).expect("milliseconds fit i64")
}

/// A vocabulary `pointermove` event (held losslessly by the typed columns).
pub(crate) fn pointermove(timestamp: i64, x: i32, y: i32) -> String {
    format!(
        r#"{{"type":"pointermove","timestamp":{timestamp},"data":{{"x":{x},"y":{y},"pointerType":"mouse","trusted":true}}}}"#
    )
}

/// A `session` event naming the external reference.
pub(crate) fn session_event(timestamp: i64, session_id: &str, interview_id: &str) -> String {
    format!(
        r#"{{"type":"session","timestamp":{timestamp},"data":{{"sessionId":"{session_id}","interviewId":"{interview_id}","embedVersion":"1.0.0","webdriver":false}}}}"#
    )
}

/// `count` pointer events whose `x` is a batch's `number` and `y` each event's index: the lake
/// shows which batch a row came from.
pub(crate) fn numbered_batch(number: u64, count: u64) -> String {
    let start = now_millis();
    let events: Vec<String> = (0..count)
        .map(|i| pointermove(start + i as i64, number as i32, i as i32))
        .collect();
    batch(&events)
}

/// `{"events":[...]}` from raw event texts.
pub(crate) fn batch(events: &[String]) -> String {
    format!(r#"{{"events":[{}]}}"#, events.join(","))
}

/// True for 24 hexadecimal characters.
pub(crate) fn is_hex24(value: &str) -> bool {
    value.len() == 24 && value.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Asserts that `value` is an ISO 8601 (RFC 3339) date-time naming the instant `millis`.
#[track_caller]
pub(crate) fn assert_instant(value: &Value, millis: i64) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("{value} is not a date-time string"));
    let parsed = chrono::DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|error| panic!("{text} is not ISO 8601: {error}"));
    assert_eq!(parsed.timestamp_millis(), millis, "{text}");
}
