//! The one outage policy of a deployment: what an error says about the store behind it, and
//! how long each store may take to answer.
//!
//! Every caller that must tell "the store is down, retry shortly" (503 with `Retry-After`, a
//! scoring run paused, an erasure retried) from "this request cannot work" (4xx) and "we have a
//! bug" (500) asks [`classify`], or [`is_store_down`]: no other code reads driver error codes.
//! The classification walks the error's chain of causes, so a store's error wrapped in any of
//! our error types is read the same way.
//!
//! What counts as down: the connection is refused, reset, timed out or lost; the client gave up
//! after its retries; the server is starting, shutting down, read-only after a failover,
//! out of connections, memory or disk; a statement outlived its timeout or was cancelled; a
//! transaction lost a serialization race or a deadlock (worth one more try); SQLite is busy or
//! locked (every extended code of both). A timeout the caller applied ([`tokio::time::error::Elapsed`])
//! is one too.

use std::error::Error;
use std::time::Duration;

/// What an error says about the store behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The store cannot answer now; the same request is worth making again shortly.
    Unavailable,
    /// The store refused what was asked (a constraint, a malformed value): the caller's request
    /// cannot work as sent.
    Client,
    /// Anything else: a defect of ours, to be logged in full.
    Bug,
}

/// How long a statement of the catalog may run before the database cancels it (PostgreSQL's
/// `statement_timeout`): a hung or overloaded database holds no request longer than this.
pub const CATALOG_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// The same bound for the statements whose work grows with a survey and that no request waits
/// on: a scoring run's reads of every session of a survey, and PostgreSQL's vacuums after a run
/// or an erasure. A million-session survey's plan read took 8 s on a slow machine, and was
/// cancelled at 5 s on every retry, so that the run never ended.
pub const CATALOG_BULK_STATEMENT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a request waits for a catalog connection, including the driver's retries of a
/// refused one (PostgreSQL's pool; SQLite's busy timeout is the same bound).
pub const CATALOG_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one read of the lake a request waits on may take (object-store requests, after
/// their own retries, are bounded by this where a request waits for them).
pub const LAKE_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a probe of a store (readiness, a run deciding whether it failed for an outage) may
/// take before the store counts as down.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether a store answers `probe` (a ping of the catalog, a request of the object store) within
/// [`PROBE_TIMEOUT`]: `Ok`, or why not. The one place a store counts as down for not answering:
/// readiness, a run deciding whether it failed for an outage, a read whose error alone does not
/// say.
pub async fn probe<E: std::fmt::Display>(
    probe: impl std::future::Future<Output = Result<(), E>>,
) -> Result<(), String> {
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!(
            "no answer within {} s",
            PROBE_TIMEOUT.as_secs_f32()
        )),
    }
}

/// What both stores of a deployment answered a probe ([`probe_stores`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoresProbe {
    /// `Ok`, or why the catalog did not answer.
    pub catalog: Result<(), String>,
    /// `Ok`, or why the lake's object store did not answer.
    pub lake: Result<(), String>,
}

impl StoresProbe {
    /// The store that is down, the catalog first; `None` when both answered.
    pub fn down(&self) -> Option<&'static str> {
        if self.catalog.is_err() {
            return Some("catalog");
        }
        if self.lake.is_err() {
            return Some("lake");
        }
        None
    }
}

/// Probes the catalog and the lake side by side, each within [`PROBE_TIMEOUT`]: the one answer
/// to "is a store down" for readiness, a paused run and a start waiting for its stores.
pub async fn probe_stores<C: std::fmt::Display, L: std::fmt::Display>(
    catalog: impl std::future::Future<Output = Result<(), C>>,
    lake: impl std::future::Future<Output = Result<(), L>>,
) -> StoresProbe {
    let (catalog, lake) = tokio::join!(probe(catalog), probe(lake));
    StoresProbe { catalog, lake }
}

/// What `error`, or the first cause of it that a store raised, says about that store.
pub fn classify(error: &(dyn Error + 'static)) -> Fault {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(fault) = classify_one(error) {
            return fault;
        }
        cause = error.source();
    }
    Fault::Bug
}

/// Whether `error` says its store is down for now (see [`classify`]).
pub fn is_store_down(error: &(dyn Error + 'static)) -> bool {
    classify(error) == Fault::Unavailable
}

/// The fault `error` itself names, when it is a store's error this policy reads.
fn classify_one(error: &(dyn Error + 'static)) -> Option<Fault> {
    if let Some(error) = error.downcast_ref::<sqlx::Error>() {
        return Some(database(error));
    }
    if error
        .downcast_ref::<tokio::time::error::Elapsed>()
        .is_some()
    {
        return Some(Fault::Unavailable);
    }
    if let Some(http) = error.downcast_ref::<object_store::client::HttpError>() {
        use object_store::client::HttpErrorKind;
        return matches!(
            http.kind(),
            HttpErrorKind::Connect
                | HttpErrorKind::Request
                | HttpErrorKind::Timeout
                | HttpErrorKind::Interrupted
        )
        .then_some(Fault::Unavailable);
    }
    // The Delta kernel's object-store error names no source: look inside it.
    if let Some(buoyant_kernel::Error::ObjectStore(store)) =
        error.downcast_ref::<buoyant_kernel::Error>()
    {
        return Some(classify(store));
    }
    if let Some(io) = error.downcast_ref::<std::io::Error>() {
        use std::io::ErrorKind;
        return matches!(
            io.kind(),
            ErrorKind::ConnectionRefused
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::NotConnected
                | ErrorKind::BrokenPipe
                | ErrorKind::TimedOut
                | ErrorKind::StorageFull
                | ErrorKind::QuotaExceeded
        )
        .then_some(Fault::Unavailable);
    }
    None
}

fn database(error: &sqlx::Error) -> Fault {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => Fault::Unavailable,
        sqlx::Error::Database(database) => match database.code() {
            Some(code) => database_code(&code),
            None => Fault::Bug,
        },
        _ => Fault::Bug,
    }
}

/// A SQLSTATE (PostgreSQL: always five characters, often digits only) or a result code
/// (SQLite: digits, at most four) by what it says.
fn database_code(code: &str) -> Fault {
    if code.len() < 5
        && let Ok(sqlite) = code.parse::<u32>()
    {
        // The primary code is the low byte of an extended one (SQLITE_BUSY_SNAPSHOT is 517).
        return match sqlite & 0xff {
            // BUSY, LOCKED, IOERR, FULL, CANTOPEN, PROTOCOL
            5 | 6 | 10 | 13 | 14 | 15 => Fault::Unavailable,
            // CONSTRAINT, MISMATCH, RANGE, TOOBIG
            19 | 20 | 25 | 18 => Fault::Client,
            _ => Fault::Bug,
        };
    }
    match code {
        // Connection exceptions; insufficient resources (disk full, out of memory, too many
        // connections); operator intervention (a cancelled statement, shutdown, start-up);
        // read-only after a failover; serialization failure and deadlock.
        _ if code.starts_with("08") || code.starts_with("53") => Fault::Unavailable,
        "57014" | "57P01" | "57P02" | "57P03" | "57P05" | "25006" | "40001" | "40P01" => {
            Fault::Unavailable
        }
        // Data exceptions and integrity constraints: what was sent cannot be stored.
        _ if code.starts_with("22") || code.starts_with("23") => Fault::Client,
        _ => Fault::Bug,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapped(Box<dyn Error + 'static>);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "wrapped: {}", self.0)
        }
    }
    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self.0.as_ref())
        }
    }

    #[test]
    fn postgres_codes_read_by_class() {
        for down in [
            "08006", "08001", "53100", "53200", "53300", "57014", "57P01", "57P03", "25006",
            "40001", "40P01",
        ] {
            assert_eq!(database_code(down), Fault::Unavailable, "{down}");
        }
        for client in ["23505", "22001", "22P02"] {
            assert_eq!(database_code(client), Fault::Client, "{client}");
        }
        for bug in ["42P01", "42703", "XX000"] {
            assert_eq!(database_code(bug), Fault::Bug, "{bug}");
        }
    }

    #[test]
    fn sqlite_extended_codes_read_by_their_primary_code() {
        for down in ["5", "6", "261", "517", "773", "262", "13"] {
            assert_eq!(database_code(down), Fault::Unavailable, "{down}");
        }
        assert_eq!(database_code("2067"), Fault::Client); // SQLITE_CONSTRAINT_UNIQUE
        assert_eq!(database_code("1"), Fault::Bug);
    }

    #[test]
    fn a_store_error_is_found_under_any_wrapping() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let wrapped = Wrapped(Box::new(Wrapped(Box::new(refused))));
        assert!(is_store_down(&wrapped));
        assert_eq!(classify(&sqlx::Error::PoolTimedOut), Fault::Unavailable);
        assert_eq!(classify(&sqlx::Error::RowNotFound), Fault::Bug);
        let plain = std::io::Error::other("a parse failure");
        assert_eq!(classify(&Wrapped(Box::new(plain))), Fault::Bug);
    }

    #[tokio::test]
    async fn a_probe_that_does_not_answer_in_time_says_so() {
        assert_eq!(probe(async { Ok::<(), String>(()) }).await, Ok(()));
        assert_eq!(
            probe(async { Err::<(), _>("refused") }).await,
            Err("refused".to_owned())
        );
        let hung = probe(std::future::pending::<Result<(), String>>());
        let why = hung.await.expect_err("hung");
        assert!(why.starts_with("no answer within 2"), "{why}");
    }

    #[tokio::test]
    async fn a_timeout_the_caller_applied_is_an_outage() {
        let elapsed = tokio::time::timeout(Duration::from_millis(1), std::future::pending::<()>())
            .await
            .expect_err("times out");
        assert!(is_store_down(&elapsed));
    }
}
