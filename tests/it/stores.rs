//! The stores a test server runs on: the embedded default (a SQLite catalog and a lake folder
//! under the data dir), or, with `TELLTALE_IT_STORES=postgres-s3`, the scale-out configuration:
//! a PostgreSQL catalog (a fresh database per server, on `TELLTALE_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`) and an S3 lake (a fresh bucket per server on one
//! real `moto_server` per test process). `.ci/run` runs the whole suite both ways.
//!
//! Tests reach the stores only through the harness (`catalog_sql`, `lake_dir`, ...), so the
//! same assertions hold on both.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Which configuration this test process runs servers on.
pub(crate) fn scale_out() -> bool {
    match std::env::var("TELLTALE_IT_STORES").as_deref() {
        Ok("postgres-s3") => true,
        Ok("embedded") | Err(_) => false,
        Ok(other) => panic!("TELLTALE_IT_STORES={other:?}: expected embedded or postgres-s3"),
    }
}

pub(crate) fn postgres_admin_url() -> String {
    std::env::var("TELLTALE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A moto S3 server. The process reads its stdin until it closes, so it exits with the test
/// process that started it, even one that is killed.
pub(crate) struct MotoServer {
    child: Child,
    _stdin: ChildStdin,
    pub(crate) endpoint: String,
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const MOTO_UNTIL_STDIN_CLOSES: &str = r#"
import sys
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]))
server.start()
sys.stdin.read()
server.stop()
"#;

/// Starts a moto server on a free port and waits until it accepts connections.
pub(crate) fn start_moto() -> MotoServer {
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("address")
        .port();
    start_moto_on(port)
}

/// The moto server every scale-out test server of this process shares (a bucket each).
fn shared_moto() -> &'static MotoServer {
    static MOTO: OnceLock<MotoServer> = OnceLock::new();
    MOTO.get_or_init(start_moto)
}

/// Creates a bucket (moto accepts unsigned requests).
pub(crate) async fn create_bucket(endpoint: &str, bucket: &str) {
    let client = reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .no_proxy()
        .build()
        .expect("client");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(response) = client.put(format!("{endpoint}/{bucket}")).send().await
            && response.status().is_success()
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "could not create bucket {bucket}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The AWS environment that points object_store at a moto server.
pub(crate) fn aws_env(endpoint: &str) -> Vec<(String, String)> {
    [
        ("AWS_ENDPOINT", endpoint),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.to_owned()))
    .collect()
}

/// One server's PostgreSQL database and S3 bucket, removed when dropped.
pub(crate) struct ScaleOutStores {
    admin_url: String,
    database: String,
    pub(crate) catalog_url: String,
    bucket: String,
    endpoint: String,
    /// Each `lake_dir` call mirrors the bucket into a fresh folder under here.
    mirrors: PathBuf,
    mirror_count: Mutex<u32>,
}

impl ScaleOutStores {
    pub(crate) async fn create(scratch: &Path) -> ScaleOutStores {
        ScaleOutStores::create_on(scratch, &postgres_admin_url()).await
    }

    /// On the PostgreSQL server of `admin_url` (a database URL there) instead of the default.
    pub(crate) async fn create_on(scratch: &Path, admin_url: &str) -> ScaleOutStores {
        ScaleOutStores::create_with(scratch, admin_url, &shared_moto().endpoint).await
    }

    /// On the PostgreSQL server of `admin_url` and the S3 server at `endpoint`.
    pub(crate) async fn create_with(
        scratch: &Path,
        admin_url: &str,
        endpoint: &str,
    ) -> ScaleOutStores {
        let suffix = random_suffix();
        let database = format!("telltale_it_{suffix}");
        psql(admin_url, &format!("CREATE DATABASE {database}"));
        let catalog_url = match admin_url.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{database}"),
            None => panic!("TELLTALE_TEST_POSTGRES_URL needs a database path"),
        };
        let bucket = format!("telltale-it-{suffix}");
        create_bucket(endpoint, &bucket).await;
        ScaleOutStores {
            admin_url: admin_url.to_owned(),
            database,
            catalog_url,
            bucket,
            endpoint: endpoint.to_owned(),
            mirrors: scratch.join("lake-mirrors"),
            mirror_count: Mutex::new(0),
        }
    }

    pub(crate) fn lake_url(&self) -> String {
        format!("s3://{}", self.bucket)
    }

    /// The S3 server's URL (`http://127.0.0.1:<port>`).
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub(crate) fn env(&self) -> Vec<(String, String)> {
        aws_env(&self.endpoint)
    }

    /// Where a Delta reader finds one of the lake's tables, and the storage options it needs.
    pub(crate) fn delta_location(&self, table: &str) -> (String, serde_json::Value) {
        (
            format!("s3://{}/{table}", self.bucket),
            serde_json::json!({
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ALLOW_HTTP": "true",
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_REGION": "us-east-1",
            }),
        )
    }

    /// Runs SQL on the catalog database; rows `|`-separated, as the SQLite helper prints them.
    pub(crate) fn catalog_sql(&self, sql: &str) -> String {
        psql(&self.catalog_url, sql)
    }

    /// Downloads every object of the bucket into a new folder and returns it.
    pub(crate) fn mirror_lake(&self) -> PathBuf {
        let mut count = self.mirror_count.lock().expect("mirror count");
        *count += 1;
        let target = self.mirrors.join(count.to_string());
        std::fs::create_dir_all(&target).expect("create the mirror folder");
        self.s3_script(PYTHON_S3_MIRROR, &[&target.display().to_string()], None);
        target
    }

    /// Overwrites one object of the lake.
    pub(crate) fn put_object(&self, path: &str, bytes: &[u8]) {
        self.s3_script(PYTHON_S3_PUT, &[path], Some(bytes));
    }

    fn s3_script(&self, script: &str, args: &[&str], stdin: Option<&[u8]>) {
        let mut child = Command::new("python3")
            .args(["-c", script, &self.endpoint, &self.bucket])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run python3 with boto3 (installed with moto)");
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(stdin.unwrap_or_default())
                .expect("write the object body");
        }
        let output = child.wait_with_output().expect("wait for python3");
        assert!(
            output.status.success(),
            "S3 helper failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for ScaleOutStores {
    fn drop(&mut self) {
        // Best effort: a database left behind only costs disk space on the test machine.
        let _ = Command::new("psql")
            .args(["-X", "-q", "-d", &self.admin_url, "-c"])
            .arg(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.database
            ))
            .output();
    }
}

const PYTHON_S3_MIRROR: &str = r#"
import os, sys, boto3
endpoint, bucket, target = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="testing", aws_secret_access_key="testing")
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
    for item in page.get("Contents", []):
        path = os.path.join(target, item["Key"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s3.download_file(bucket, item["Key"], path)
"#;

const PYTHON_S3_PUT: &str = r#"
import sys, boto3
endpoint, bucket, key = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="testing", aws_secret_access_key="testing")
s3.put_object(Bucket=bucket, Key=key, Body=sys.stdin.buffer.read())
"#;

/// Loads a `pg_dump` file into a new database on the test server; returns its URL and name.
pub(crate) fn restore_postgres_dump(dump: &Path) -> (String, String) {
    let admin_url = postgres_admin_url();
    let database = format!("telltale_it_{}", random_suffix());
    psql(&admin_url, &format!("CREATE DATABASE {database}"));
    let url = match admin_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{database}"),
        None => panic!("TELLTALE_TEST_POSTGRES_URL needs a database path"),
    };
    let output = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &url, "-f"])
        .arg(dump)
        .output()
        .expect("run psql (PostgreSQL's client)");
    assert!(
        output.status.success(),
        "loading {} failed: {}",
        dump.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    (url, database)
}

/// Drops a database of the test server (best effort, as the stores' own drop does).
pub(crate) fn drop_database(database: &str) {
    let _ = Command::new("psql")
        .args(["-X", "-q", "-d", &postgres_admin_url(), "-c"])
        .arg(format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
        .output();
}

/// Runs one statement with `psql`; returns unaligned rows separated by `|`.
fn psql(url: &str, sql: &str) -> String {
    let output = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-F",
            "|",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
        ])
        .arg(sql)
        .output()
        .expect("run psql (PostgreSQL's client)");
    assert!(
        output.status.success(),
        "psql {sql:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

fn random_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_owned()
}

/// A PostgreSQL cluster of one test's own (`initdb` into a temporary folder, its own port), for
/// tests that stop and start their database: the shared server must stay up for every other
/// test. Debian's server binaries (`.ci/postgres` installs them) run as the `postgres` user
/// when the tests run as root, as PostgreSQL refuses root.
pub(crate) struct PrivatePostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl PrivatePostgres {
    pub(crate) fn create() -> PrivatePostgres {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL's server binaries under /usr/lib/postgresql (.ci/postgres installs them)")
            .filter_map(Result::ok)
            .map(|entry| entry.path().join("bin"))
            .filter(|bin| bin.join("initdb").exists())
            .max_by_key(|bin| {
                bin.parent()
                    .and_then(|version| version.file_name())
                    .and_then(|name| name.to_str())
                    .and_then(|name| name.parse::<u32>().ok())
                    .unwrap_or(0)
            })
            .expect("an initdb under /usr/lib/postgresql/*/bin");
        let id = Command::new("id").arg("-u").output().expect("id -u");
        let as_postgres = String::from_utf8_lossy(&id.stdout).trim() == "0";
        let dir = tempfile::Builder::new()
            .prefix("telltale-pg-")
            .tempdir_in("/tmp")
            .expect("temporary folder");
        if as_postgres {
            let status = Command::new("chown")
                .arg("postgres:postgres")
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(status.success(), "chown the cluster folder to postgres");
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind a free port")
            .local_addr()
            .expect("address")
            .port();
        let cluster = PrivatePostgres {
            dir,
            bin,
            port,
            as_postgres,
        };
        let data = cluster.data().display().to_string();
        cluster.run(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        );
        cluster.start();
        cluster
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `program` of the server's binaries, as the `postgres` user when the tests run as root.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let binary = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&binary);
            command
        } else {
            Command::new(&binary)
        };
        command.args(args);
        command
    }

    fn run(&self, program: &str, args: &[&str]) {
        let output = self
            .command(program, args)
            .output()
            .unwrap_or_else(|error| panic!("run {program}: {error}"));
        assert!(
            output.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts the server and waits until it accepts connections.
    pub(crate) fn start(&self) {
        let data = self.data().display().to_string();
        let log = self.dir.path().join("server.log").display().to_string();
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        self.run(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-o", &options, "-w", "start"],
        );
    }

    /// Stops the server (fast shutdown: open sessions are disconnected).
    pub(crate) fn stop(&self) {
        let data = self.data().display().to_string();
        self.run("pg_ctl", &["-D", &data, "-m", "fast", "-w", "stop"]);
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) every process of the cluster: the postmaster and
    /// every backend. A frozen database takes connections into its listen queue and answers
    /// nothing, as a hung host does.
    pub(crate) fn freeze(&self, frozen: bool) {
        let pid = std::fs::read_to_string(self.data().join("postmaster.pid"))
            .expect("postmaster.pid")
            .lines()
            .next()
            .expect("the postmaster's pid")
            .trim()
            .to_owned();
        let children = Command::new("pgrep")
            .args(["-P", &pid])
            .output()
            .expect("pgrep");
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let mut pids = vec![pid.clone()];
        pids.extend(
            String::from_utf8_lossy(&children.stdout)
                .lines()
                .map(str::to_owned),
        );
        // Thawed in the other order: backends first would wait on a stopped postmaster.
        if !frozen {
            pids.reverse();
        }
        let status = Command::new("kill")
            .arg(signal)
            .args(&pids)
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal} {pids:?}");
    }

    /// Makes every new transaction read-only (as a replica promoted the other way round, or a
    /// primary after a failover that demoted it, refuses writes: 25006), or writable again.
    pub(crate) fn set_read_only(&self, read_only: bool) {
        let value = if read_only { "on" } else { "off" };
        let url = self.url();
        for sql in [
            format!("ALTER SYSTEM SET default_transaction_read_only = {value}"),
            "SELECT pg_reload_conf()".to_owned(),
        ] {
            let output = Command::new("psql")
                .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &url, "-c", &sql])
                .output()
                .expect("psql");
            assert!(
                output.status.success(),
                "psql {sql}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data().display().to_string();
        let _ = self
            .command("pg_ctl", &["-D", &data, "-m", "immediate", "stop"])
            .output();
    }
}

/// Starts a moto server on `port` (another one stopped there before).
pub(crate) fn start_moto_on(port: u16) -> MotoServer {
    let mut child = Command::new("python3")
        .args(["-c", MOTO_UNTIL_STDIN_CLOSES, &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto's server (pip install 'moto[server]'; .ci/run does)");
    let stdin = child.stdin.take().expect("piped stdin");
    let moto = MotoServer {
        child,
        _stdin: stdin,
        endpoint: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "moto's server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    moto
}

/// A moto S3 server whose HTTP server can be stopped and started again on the same port while
/// its process, and so every bucket and object, lives on: an S3 endpoint going away (connections
/// refused) and coming back with its data, as a real one does. Exits with the test process.
pub(crate) struct RestartableMoto {
    child: Child,
    stdin: ChildStdin,
    port: u16,
    pub(crate) endpoint: String,
}

const MOTO_RESTARTABLE: &str = r#"
import sys
from moto.server import ThreadedMotoServer
port = int(sys.argv[1])
def serve():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    return server
server = serve()
for line in sys.stdin:
    if line.strip() == "stop" and server is not None:
        server.stop()
        server = None
    elif line.strip() == "start" and server is None:
        server = serve()
if server is not None:
    server.stop()
"#;

impl RestartableMoto {
    pub(crate) fn start() -> RestartableMoto {
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind a free port")
            .local_addr()
            .expect("address")
            .port();
        let mut child = Command::new("python3")
            .args(["-c", MOTO_RESTARTABLE, &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto's server (pip install 'moto[server]'; .ci/run does)");
        let stdin = child.stdin.take().expect("piped stdin");
        let moto = RestartableMoto {
            child,
            stdin,
            port,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        moto.wait_until(true);
        moto
    }

    /// Freezes (SIGSTOP) or thaws (SIGCONT) the server's process: connections are accepted by
    /// the kernel and never answered.
    pub(crate) fn freeze(&self, frozen: bool) {
        let status = Command::new("kill")
            .arg(if frozen { "-STOP" } else { "-CONT" })
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success(), "signal moto");
    }

    /// Stops the HTTP server: from the return on, connections are refused.
    pub(crate) fn stop(&mut self) {
        self.command("stop");
        self.wait_until(false);
    }

    /// Starts the HTTP server again, with every bucket as it was.
    pub(crate) fn resume(&mut self) {
        self.command("start");
        self.wait_until(true);
    }

    fn command(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").expect("write to moto's stdin");
        self.stdin.flush().expect("flush moto's stdin");
    }

    fn wait_until(&self, accepting: bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() != accepting {
            assert!(
                Instant::now() < deadline,
                "moto's server did not {}",
                if accepting { "start" } else { "stop" }
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for RestartableMoto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
