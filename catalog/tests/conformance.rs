//! The catalog's conformance suite: every test runs against both backends, SQLite (a file in
//! a temporary directory) and PostgreSQL (a fresh database on the server named by
//! `TELLTALE_TEST_POSTGRES_URL`, default `postgres://postgres@127.0.0.1:5432/test`). A
//! PostgreSQL that cannot be reached fails the suite; it is never skipped.
//!
//! Tests that need two instances open a second handle on the same store
//! ([`Fixture::second_instance`]): separate pools, as two servers would have.

use std::sync::Arc;
use std::time::Duration;

use catalog::*;

/// One backend's store for one test, removed when the test ends.
struct Fixture {
    catalog: Arc<dyn Catalog>,
    url: String,
    _store: Store,
}

enum Store {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { admin_url: String, database: String },
}

impl Fixture {
    fn catalog(&self) -> &dyn Catalog {
        self.catalog.as_ref()
    }

    /// Another handle on the same store, with its own connections.
    async fn second_instance(&self) -> Arc<dyn Catalog> {
        catalog::open(&self.url).await.expect("second handle")
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let Store::Postgres {
            admin_url,
            database,
        } = self
        else {
            return;
        };
        // Drop runs inside the test's runtime: the database is dropped from a thread of its own.
        let (admin_url, name) = (admin_url.clone(), database.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                use sqlx::Connection;
                let mut admin = sqlx::PgConnection::connect(&admin_url).await?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut admin)
                    .await?;
                Ok::<_, sqlx::Error>(())
            })
        })
        .join();
        if let Ok(Err(error)) = dropped {
            eprintln!("could not drop test database {database}: {error}");
        }
    }
}

async fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("catalog.db").display());
    Fixture {
        catalog: catalog::open(&url).await.expect("open sqlite"),
        url,
        _store: Store::Sqlite(dir),
    }
}

async fn postgres() -> Fixture {
    let (url, store) = postgres_database().await;
    Fixture {
        catalog: catalog::open(&url).await.expect("open postgres"),
        url,
        _store: store,
    }
}

/// A fresh database on the suite's server: its URL, and the store that drops it.
async fn postgres_database() -> (String, Store) {
    use sqlx::Connection;
    let admin_url = std::env::var("TELLTALE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let database = format!("telltale_conformance_{}", ids::random_hex24());
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|error| panic!("PostgreSQL at {admin_url} is required: {error}"));
    sqlx::query(&format!("CREATE DATABASE {database}"))
        .execute(&mut admin)
        .await
        .expect("create database");
    let url = match admin_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{database}"),
        None => panic!("TELLTALE_TEST_POSTGRES_URL needs a database path: {admin_url}"),
    };
    let store = Store::Postgres {
        admin_url,
        database,
    };
    (url, store)
}

/// Runs each named test once per backend, as `sqlite::NAME` and `postgres::NAME`.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::sqlite().await).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::postgres().await).await
                }
            )*
        }
    };
}

conformance!(
    a_catalog_migrated_by_a_newer_release_is_refused,
    keys_authenticate_until_revoked,
    provisioning_is_idempotent_per_organization,
    session_stats_aggregate_per_reference_and_watermark_advances,
    deletions_tombstone_at_once_and_retry_until_they_fail,
    concurrent_starts_on_two_instances_create_one_active_run,
    a_run_is_fenced_to_its_current_owner,
    a_gated_record_commits_only_once_ready,
    the_api_limit_holds_across_instances,
    a_key_and_its_admission_come_in_one_answer,
    tombstones_polled_by_id_miss_none_under_concurrent_requests,
    scores_and_erasure_show_in_lookup,
    an_incremental_plan_reads_the_unscored_and_counts_the_rest,
    a_plan_read_stays_linear_on_statistics_from_before_the_survey_grew,
    the_desk_counts_pages_and_clusters_without_tombstoned_references,
    a_lookup_follows_a_session_that_moves_to_another_reference,
    cohort_points_are_found_by_cell_and_erased_with_their_session,
    a_deletion_is_claimed_by_one_instance,
    a_partition_is_compacted_by_one_instance_at_a_time,
    an_erasure_waits_for_live_instances_that_have_not_purged,
    a_run_asks_the_live_fleet_to_flush,
    a_restore_redoes_every_deletion_and_sqlite_copies_itself,
);

const REFERENCE: &str = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";

async fn new_survey(catalog: &dyn Catalog) -> Survey {
    let org = catalog.create_organization("Acme").await.expect("org");
    catalog
        .provision_survey(&org.id, "s", "S")
        .await
        .expect("survey")
}

fn delta(survey: &Survey, identifier: &str, reference: Option<&str>, count: u64) -> SessionDelta {
    SessionDelta {
        survey_id: survey.id.clone(),
        identifier: identifier.to_owned(),
        reference: reference.map(str::to_owned),
        reference_explicit: reference.is_some(),
        event_count: count,
        first_event_at: 1_000,
        last_event_at: 2_000,
        first_received_at: 1_100,
        last_received_at: 2_100,
    }
}

async fn concurrent_starts_on_two_instances_create_one_active_run(fixture: Fixture) {
    let survey = new_survey(fixture.catalog()).await;
    let other = fixture.second_instance().await;
    let mut starts = Vec::new();
    for attempt in 0..16 {
        let catalog = if attempt % 2 == 0 {
            fixture.catalog.clone()
        } else {
            other.clone()
        };
        let survey = survey.id.clone();
        starts.push(tokio::spawn(async move {
            catalog.start_scoring_run(&survey, false).await
        }));
    }
    let mut created = 0;
    let mut ids = std::collections::BTreeSet::new();
    for start in starts {
        let (run, new) = start.await.expect("task").expect("start");
        created += usize::from(new);
        ids.insert(run.id.to_string());
    }
    assert_eq!(created, 1, "exactly one start creates a run");
    assert_eq!(ids.len(), 1, "every start answers with the one active run");
    assert!(
        fixture
            .catalog()
            .active_scoring_run(&survey.id)
            .await
            .expect("active")
            .is_some()
    );
}

async fn a_run_is_fenced_to_its_current_owner(fixture: Fixture) {
    let catalog = fixture.catalog();
    let survey = new_survey(catalog).await;
    let (run, _) = catalog
        .start_scoring_run(&survey.id, false)
        .await
        .expect("start");
    let other = fixture.second_instance().await;
    assert!(
        catalog
            .claim_scoring_run(&run.id, "a", 50)
            .await
            .expect("claim")
            .is_some()
    );
    assert!(
        other
            .claim_scoring_run(&run.id, "b", 60_000)
            .await
            .expect("claim")
            .is_none(),
        "a held lease is not claimable"
    );
    // `a` stalls past its lease; `b` takes over (what the janitor of a live instance does).
    tokio::time::sleep(Duration::from_millis(80)).await;
    let claimable = other.claimable_scoring_runs("b").await.expect("claimable");
    assert_eq!(claimable.len(), 1);
    let taken = other
        .claim_scoring_run(&run.id, "b", 60_000)
        .await
        .expect("claim")
        .expect("expired lease is claimable");
    assert_eq!(taken.owner.as_deref(), Some("b"));

    let progress = RunProgress {
        total: 1,
        ..RunProgress::default()
    };
    assert_eq!(
        catalog
            .report_run_progress(&run.id, "a", 60_000, &progress)
            .await
            .expect("progress"),
        RunControl::LeaseLost
    );
    let score = NewScore {
        reference: REFERENCE.to_owned(),
        human_score_percent: 12.5,
        score_band: "automation-like".to_owned(),
        scored_at: 5,
        model_version: "m".to_owned(),
        run_id: run.id.clone(),
        cohort: Vec::new(),
        reasons: Vec::new(),
        cluster: None,
        // Scored on more events than any session here has: not grown.
        events: 1_000_000,
    };
    assert!(
        !catalog
            .record_scores(&survey.id, &run.id, "a", std::slice::from_ref(&score))
            .await
            .expect("record"),
        "the fenced-off worker writes nothing"
    );
    assert!(
        !catalog
            .finish_scoring_run(&run.id, "a", &progress, &RunOutcome::Completed)
            .await
            .expect("finish")
    );
    assert_eq!(
        other
            .report_run_progress(&run.id, "b", 60_000, &progress)
            .await
            .expect("progress"),
        RunControl::Continue
    );
    assert!(
        other
            .record_scores(&survey.id, &run.id, "b", &[score])
            .await
            .expect("record")
    );
    // A pause counts only for the owner.
    assert_eq!(
        catalog.note_run_pause(&run.id, "a").await.expect("pause"),
        None
    );
    assert_eq!(
        other.note_run_pause(&run.id, "b").await.expect("pause"),
        Some(1)
    );
    let progress = RunProgress {
        deferred: 1,
        deferred_reason: Some("1 session's events are not all in the lake".to_owned()),
        ..progress
    };
    assert!(
        other
            .finish_scoring_run(&run.id, "b", &progress, &RunOutcome::Completed)
            .await
            .expect("finish")
    );
    let done = catalog
        .scoring_run(&survey.id, &run.id)
        .await
        .expect("run")
        .expect("exists");
    assert_eq!(done.status, RunStatus::Completed);
    assert_eq!(done.owner, None);
    assert_eq!(
        (done.deferred, done.deferred_reason),
        (1, progress.deferred_reason)
    );
    assert!(
        catalog
            .active_scoring_run(&survey.id)
            .await
            .expect("active")
            .is_none()
    );
}

/// A scoring run writes its scores while its lake files are committed, and commits them only
/// once those landed: a record whose gate says no leaves nothing behind.
async fn a_gated_record_commits_only_once_ready(fixture: Fixture) {
    let catalog = fixture.catalog();
    let survey = new_survey(catalog).await;
    let (run, _) = catalog
        .start_scoring_run(&survey.id, false)
        .await
        .expect("start");
    catalog
        .claim_scoring_run(&run.id, "w", 60_000)
        .await
        .expect("claim")
        .expect("claimed");
    let score = NewScore {
        reference: REFERENCE.to_owned(),
        human_score_percent: 40.0,
        score_band: "review".to_owned(),
        scored_at: 7,
        model_version: "m".to_owned(),
        run_id: run.id.clone(),
        cohort: Vec::new(),
        reasons: Vec::new(),
        cluster: None,
        // Scored on more events than any session here has: not grown.
        events: 1_000_000,
    };
    let refused: catalog::Ready<'_> = Box::pin(async { false });
    assert!(
        !catalog
            .record_scores_when(
                &survey.id,
                &run.id,
                "w",
                std::slice::from_ref(&score),
                refused
            )
            .await
            .expect("record"),
        "a gate that says no commits nothing"
    );
    assert!(
        catalog
            .run_references(&survey.id, &run.id)
            .await
            .expect("references")
            .is_empty()
    );
    // The gate opens later, while the rows wait in the transaction.
    let (open, opened) = tokio::sync::oneshot::channel::<bool>();
    let later: catalog::Ready<'_> = Box::pin(async move { opened.await.unwrap_or(false) });
    let opener = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        open.send(true).expect("the record waits");
    });
    assert!(
        catalog
            .record_scores_when(&survey.id, &run.id, "w", &[score], later)
            .await
            .expect("record")
    );
    opener.await.expect("opener");
    assert_eq!(
        catalog
            .run_references(&survey.id, &run.id)
            .await
            .expect("references"),
        vec![REFERENCE.to_owned()]
    );
}

async fn the_api_limit_holds_across_instances(fixture: Fixture) {
    let catalog = fixture.catalog();
    let org = catalog.create_organization("Acme").await.expect("org");
    let key = catalog
        .create_key(&org.id, "k", &Scope::ALL)
        .await
        .expect("key");
    let other = fixture.second_instance().await;
    let mut admissions = Vec::new();
    for request in 0..130 {
        let handle = if request % 2 == 0 {
            fixture.catalog.clone()
        } else {
            other.clone()
        };
        let prefix = key.info.prefix.clone();
        admissions.push(tokio::spawn(async move {
            handle.admit_api_request(&prefix, 120, 60_000).await
        }));
    }
    let mut accepted = 0;
    for admission in admissions {
        match admission.await.expect("task").expect("admit") {
            ApiAdmission::Accepted => accepted += 1,
            ApiAdmission::Refused { wait_ms } => {
                assert!((1..=60_000).contains(&wait_ms), "wait {wait_ms} ms");
            }
        }
    }
    assert_eq!(accepted, 120);
    // Another key has its own minute.
    let second = catalog
        .create_key(&org.id, "k2", &Scope::ALL)
        .await
        .expect("key");
    assert_eq!(
        other
            .admit_api_request(&second.info.prefix, 120, 60_000)
            .await
            .expect("admit"),
        ApiAdmission::Accepted
    );
    // Once the window has passed, the key is admitted again.
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        catalog
            .admit_api_request(&key.info.prefix, 120, 20)
            .await
            .expect("admit"),
        ApiAdmission::Accepted
    );
}

async fn a_key_and_its_admission_come_in_one_answer(fixture: Fixture) {
    let catalog = fixture.catalog();
    let org = catalog.create_organization("Acme").await.expect("org");
    let created = catalog
        .create_key(&org.id, "server", &Scope::ALL)
        .await
        .expect("key");
    let admit = |limit: u32, window_ms: i64| {
        let secret = created.secret.clone();
        async move {
            catalog
                .authenticate_and_admit(&secret, limit, window_ms)
                .await
                .expect("authenticate and admit")
        }
    };
    // A wrong secret of the same prefix is refused and never counted.
    let forged = format!("{}_{}", created.secret.prefix(), "0".repeat(64));
    let forged = IntegrationKeySecret::parse(&forged).expect("well formed");
    for _ in 0..3 {
        assert!(
            catalog
                .authenticate_and_admit(&forged, 3, 60_000)
                .await
                .expect("forged")
                .is_none()
        );
    }
    for _ in 0..3 {
        let (key, admission) = admit(3, 60_000).await.expect("valid");
        assert_eq!(key.key.prefix, created.info.prefix);
        assert_eq!(key.organization_name, "Acme");
        assert_eq!(admission, ApiAdmission::Accepted);
    }
    match admit(3, 60_000).await.expect("valid").1 {
        ApiAdmission::Refused { wait_ms } => assert!((1..=60_000).contains(&wait_ms)),
        ApiAdmission::Accepted => panic!("a fourth request in the minute was accepted"),
    }
    // A sliding window: requests leave it one by one, oldest first, and the count follows.
    let other = catalog
        .create_key(&org.id, "sliding", &Scope::ALL)
        .await
        .expect("key");
    let slide = |limit: u32| {
        let secret = other.secret.clone();
        async move {
            catalog
                .authenticate_and_admit(&secret, limit, 2_000)
                .await
                .expect("authenticate and admit")
                .expect("valid")
                .1
        }
    };
    assert_eq!(slide(2).await, ApiAdmission::Accepted);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(slide(2).await, ApiAdmission::Accepted);
    assert!(matches!(slide(2).await, ApiAdmission::Refused { .. }));
    // The first has left the window, the second has not: one place again, then none.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(slide(2).await, ApiAdmission::Accepted);
    assert!(matches!(slide(2).await, ApiAdmission::Refused { .. }));
    // A revoked key is refused and not counted.
    assert!(
        catalog
            .revoke_key(created.secret.prefix())
            .await
            .expect("revoke")
    );
    assert!(admit(1_000, 60_000).await.is_none());
}

/// PostgreSQL: the tuples of `table`'s heap pages, live or dead and not yet pruned, that hold
/// `needle` (pageinspect reads the pages as they are on disk).
async fn heap_tuples_holding(url: &str, table: &str, needle: &str) -> i64 {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(url).await.expect("connect");
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pageinspect")
        .execute(&mut connection)
        .await
        .expect("pageinspect");
    sqlx::query_scalar(&format!(
        "SELECT count(*)
         FROM generate_series(0, (pg_relation_size('{table}')
                                  / current_setting('block_size')::int)::int - 1) AS page,
              LATERAL heap_page_items(get_raw_page('{table}', page)) AS item
         WHERE item.t_data IS NOT NULL AND position(convert_to($1, 'UTF8') IN item.t_data) > 0"
    ))
    .bind(needle)
    .fetch_one(&mut connection)
    .await
    .expect("read the pages")
}

async fn tombstones_polled_by_id_miss_none_under_concurrent_requests(fixture: Fixture) {
    let survey = new_survey(fixture.catalog()).await;
    let other = fixture.second_instance().await;
    let poller = fixture.second_instance().await;
    let mut requests = Vec::new();
    for index in 0..24 {
        let catalog = if index % 2 == 0 {
            fixture.catalog.clone()
        } else {
            other.clone()
        };
        let survey = survey.id.clone();
        requests.push(tokio::spawn(async move {
            catalog
                .request_session_deletion(&survey, &format!("reference-{index}"))
                .await
        }));
    }
    // Poll the way the collector's tombstone cache does while the requests commit.
    let mut seen = std::collections::BTreeSet::new();
    let mut after = 0;
    loop {
        let all_done = requests.iter().all(|request| request.is_finished());
        for tombstone in poller.tombstones_after(after).await.expect("poll") {
            after = after.max(tombstone.id);
            seen.insert(tombstone.reference);
        }
        if all_done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for tombstone in poller.tombstones_after(after).await.expect("poll") {
        seen.insert(tombstone.reference);
    }
    for request in requests {
        request.await.expect("task").expect("request");
    }
    assert_eq!(seen.len(), 24, "an incremental poller saw every tombstone");
}

/// A run that is not forced plans from the unscored references alone: what it reads equals
/// what the whole survey's sessions and scores say, tombstones and a resumed run included.
async fn a_plan_read_stays_linear_on_statistics_from_before_the_survey_grew(fixture: Fixture) {
    let catalog = fixture.catalog();
    let small = new_survey(catalog).await;
    catalog
        .apply_session_stats("i", 1, 1, &[delta(&small, "tab", Some(REFERENCE), 3)])
        .await
        .expect("stats");
    if matches!(fixture._store, Store::Postgres { .. }) {
        // Statistics taken now know nothing of the survey below: the planner takes it for a
        // few rows. A join it may reorder then scans the survey once per row (20,000 x 20,000
        // index entries: past the 5 s statement timeout).
        use sqlx::Connection;
        let mut connection = sqlx::PgConnection::connect(&fixture.url)
            .await
            .expect("connect");
        sqlx::query("ANALYZE")
            .execute(&mut connection)
            .await
            .expect("analyze");
    }
    let survey = new_survey(catalog).await;
    const SESSIONS: usize = 20_000;
    let deltas: Vec<SessionDelta> = (0..SESSIONS)
        .map(|i| {
            delta(
                &survey,
                &format!("tab-{i}"),
                Some(&format!("00000000-0000-4000-8000-{i:012}")),
                2,
            )
        })
        .collect();
    for (batch, chunk) in deltas.chunks(2_000).enumerate() {
        catalog
            .apply_session_stats("i", 1, 2 + batch as u64, chunk)
            .await
            .expect("stats");
    }
    let (run, _) = catalog
        .start_scoring_run(&survey.id, false)
        .await
        .expect("start");
    let started = std::time::Instant::now();
    let plan = catalog
        .unscored_sessions(&survey.id, &run.id)
        .await
        .expect("the plan read");
    assert_eq!(plan.sessions.len(), SESSIONS);
    assert_eq!((plan.references, plan.scored), (SESSIONS as u64, 0));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the plan read took {:?}",
        started.elapsed()
    );
}

async fn an_incremental_plan_reads_the_unscored_and_counts_the_rest(fixture: Fixture) {
    let catalog = fixture.catalog();
    let survey = new_survey(catalog).await;
    let reference = |i: usize| format!("00000000-0000-4000-8000-{i:012}");
    let mut deltas = Vec::new();
    for i in 0..6 {
        deltas.push(delta(&survey, &format!("tab-{i}"), Some(&reference(i)), 3));
    }
    // Reference 0 has two browser sessions; one session has no reference and is not planned.
    deltas.push(delta(&survey, "tab-0b", Some(&reference(0)), 2));
    deltas.push(delta(&survey, "anonymous", None, 5));
    catalog
        .apply_session_stats("i", 1, 1, &deltas)
        .await
        .expect("stats");
    // A later batch of tab-1 widens its received range.
    let mut later = delta(&survey, "tab-1", Some(&reference(1)), 1);
    later.first_received_at = 5_000;
    later.last_received_at = 9_000;
    catalog
        .apply_session_stats("i", 1, 2, &[later])
        .await
        .expect("stats");

    let (earlier, _) = catalog
        .start_scoring_run(&survey.id, false)
        .await
        .expect("start");
    catalog
        .claim_scoring_run(&earlier.id, "w", 60_000)
        .await
        .expect("claim")
        .expect("claimed");
    let score = |i: usize, run: &RunId| NewScore {
        reference: reference(i),
        human_score_percent: 50.0,
        score_band: "review".to_owned(),
        scored_at: 1,
        model_version: "telltale-v2".to_owned(),
        run_id: run.clone(),
        cohort: Vec::new(),
        reasons: Vec::new(),
        cluster: None,
        // Reference 3 was scored on 2 of the 3 events it has now: it is due again.
        events: if i == 3 { 2 } else { 3 },
    };
    assert!(
        catalog
            .record_scores(
                &survey.id,
                &earlier.id,
                "w",
                &[score(2, &earlier.id), score(3, &earlier.id)]
            )
            .await
            .expect("record")
    );
    catalog
        .finish_scoring_run(
            &earlier.id,
            "w",
            &RunProgress::default(),
            &RunOutcome::Completed,
        )
        .await
        .expect("finish");
    // Reference 5 is erased: it leaves the plan and the counts.
    catalog
        .request_session_deletion(&survey.id, &reference(5))
        .await
        .expect("erase");

    let (run, _) = catalog
        .start_scoring_run(&survey.id, false)
        .await
        .expect("start");
    catalog
        .claim_scoring_run(&run.id, "w", 60_000)
        .await
        .expect("claim")
        .expect("claimed");
    // The run scored reference 4 before it was interrupted (a resumed run).
    assert!(
        catalog
            .record_scores(&survey.id, &run.id, "w", &[score(4, &run.id)])
            .await
            .expect("record")
    );

    let plan = catalog
        .unscored_sessions(&survey.id, &run.id)
        .await
        .expect("plan");
    let whole: Vec<SessionIdentity> = catalog
        .survey_sessions(&survey.id)
        .await
        .expect("sessions")
        .into_iter()
        .filter(|s| s.reference.is_some())
        .collect();
    let references: std::collections::BTreeSet<_> =
        whole.iter().filter_map(|s| s.reference.clone()).collect();
    assert_eq!(plan.references, references.len() as u64);
    assert_eq!(
        (plan.references, plan.scored, plan.scored_by_run),
        (5, 3, 1)
    );
    // (identifier, reference, events, received range)
    type Unscored = (String, String, u64, Option<(i64, i64)>);
    let mut unscored: Vec<Unscored> = plan
        .sessions
        .iter()
        .map(|s| {
            (
                s.identifier.clone(),
                s.reference.clone().expect("reference"),
                s.event_count,
                s.received,
            )
        })
        .collect();
    unscored.sort();
    assert_eq!(
        unscored,
        [
            ("tab-0".to_owned(), reference(0), 3, Some((1_100, 2_100))),
            ("tab-0b".to_owned(), reference(0), 2, Some((1_100, 2_100))),
            ("tab-1".to_owned(), reference(1), 4, Some((1_100, 9_000))),
        ]
    );

    let grown: Vec<&str> = plan.grown.iter().map(|s| s.identifier.as_str()).collect();
    assert_eq!(grown, ["tab-3"], "scored on fewer events than it has now");

    let mut again = catalog
        .reference_sessions(
            &survey.id,
            &[reference(0), reference(2), "missing".to_owned()],
        )
        .await
        .expect("sessions of references");
    again.sort_by(|a, b| a.identifier.cmp(&b.identifier));
    let identifiers: Vec<&str> = again.iter().map(|s| s.identifier.as_str()).collect();
    assert_eq!(identifiers, ["tab-0", "tab-0b", "tab-2"]);
    assert_eq!(
        catalog
            .run_references(&survey.id, &run.id)
            .await
            .expect("run's references"),
        [reference(4)]
    );
    let mut earlier_references = catalog
        .run_references(&survey.id, &earlier.id)
        .await
        .expect("run's references");
    earlier_references.sort();
    assert_eq!(earlier_references, [reference(2), reference(3)]);
}

/// The desk's reads on both backends: counts per band and bin, pages in score order either way
/// with ties broken by reference, the clustered places, and a tombstone taking a reference off
/// all of them at once.
async fn the_desk_counts_pages_and_clusters_without_tombstoned_references(fixture: Fixture) {
    let catalog = fixture.catalog();
    let survey = new_survey(catalog).await;
    let reference = |i: usize| format!("00000000-0000-4000-8000-{i:012}");
    let deltas: Vec<SessionDelta> = (0..7)
        .map(|i| {
            delta(
                &survey,
                &format!("tab-{i}"),
                Some(&reference(i)),
                3 + i as u64,
            )
        })
        .collect();
    catalog
        .apply_session_stats("i", 1, 1, &deltas)
        .await
        .expect("stats");
    let (run, _) = catalog
        .start_scoring_run(&survey.id, false)
        .await
        .expect("start");
    catalog
        .claim_scoring_run(&run.id, "w", 60_000)
        .await
        .expect("claim")
        .expect("claimed");
    let point = |v: u16| CohortPoint {
        modality: 0,
        mask: 0b11,
        cell: 1,
        values: vec![v, v],
    };
    // Reference 6 stays unscored.
    let scored = [
        (0, 10.0, "automation-like"),
        (1, 10.0, "automation-like"),
        (2, 55.0, "review"),
        (3, 90.0, "human-like"),
        (4, 99.5, "human-like"),
        (5, 100.0, "human-like"),
    ];
    let scores: Vec<NewScore> = scored
        .iter()
        .map(|&(i, percent, band)| NewScore {
            reference: reference(i),
            human_score_percent: percent,
            score_band: band.to_owned(),
            scored_at: 1_000 + i as i64,
            model_version: "m".to_owned(),
            run_id: run.id.clone(),
            cohort: if i < 2 {
                vec![point(100 * i as u16)]
            } else {
                Vec::new()
            },
            reasons: vec![
                format!("reason {i}, first"),
                "second | with a bar".to_owned(),
            ],
            cluster: (i < 2).then_some((0, 7)),
            // Scored on more events than any session here has: not grown.
            events: 1_000_000,
        })
        .collect();
    assert!(
        catalog
            .record_scores(&survey.id, &run.id, "w", &scores)
            .await
            .expect("record")
    );

    let counts = catalog.desk_counts(&survey.id).await.expect("counts");
    assert_eq!(
        counts.bands,
        [
            ("automation-like".to_owned(), 2),
            ("human-like".to_owned(), 3),
            ("review".to_owned(), 1)
        ]
    );
    let mut histogram = vec![0u64; DESK_HISTOGRAM_BINS];
    histogram[2] = 2;
    histogram[11] = 1;
    histogram[18] = 1;
    histogram[19] = 2;
    assert_eq!(counts.histogram, histogram);
    assert_eq!(counts.unscored, 1);

    let page = |order: DeskOrder, after: Option<(f64, String)>, limit: u32| DeskQuery {
        band: None,
        references: None,
        order,
        after,
        limit,
    };
    let first = catalog
        .desk_page(&survey.id, &page(DeskOrder::Ascending, None, 4))
        .await
        .expect("page");
    let order =
        |rows: &[DeskRow]| -> Vec<String> { rows.iter().map(|r| r.reference.clone()).collect() };
    assert_eq!(
        order(&first),
        [reference(0), reference(1), reference(2), reference(3)]
    );
    assert_eq!(first[0].reasons, ["reason 0, first", "second | with a bar"]);
    assert_eq!(first[0].cluster, Some((0, 7)));
    assert_eq!(first[2].cluster, None);
    assert_eq!(first[0].event_count, 3);
    assert_eq!(
        (first[0].first_event_at, first[0].last_event_at),
        (Some(1_000), Some(2_000))
    );
    assert_eq!(first[3].scored_at, 1_003);
    let last = first.last().expect("row");
    let rest = catalog
        .desk_page(
            &survey.id,
            &page(
                DeskOrder::Ascending,
                Some((last.human_score_percent, last.reference.clone())),
                4,
            ),
        )
        .await
        .expect("page");
    assert_eq!(order(&rest), [reference(4), reference(5)]);
    // Ties are broken by reference in both orders: the page after the first of two equal
    // scores holds the second.
    let tie = catalog
        .desk_page(
            &survey.id,
            &page(DeskOrder::Ascending, Some((10.0, reference(0))), 1),
        )
        .await
        .expect("page");
    assert_eq!(order(&tie), [reference(1)]);
    let descending = catalog
        .desk_page(&survey.id, &page(DeskOrder::Descending, None, 10))
        .await
        .expect("page");
    let mut reversed = order(&descending);
    reversed.reverse();
    assert_eq!(
        reversed,
        (0..6).map(reference).collect::<Vec<_>>(),
        "descending is ascending reversed"
    );
    let human = catalog
        .desk_page(
            &survey.id,
            &DeskQuery {
                band: Some("human-like".to_owned()),
                ..page(DeskOrder::Ascending, None, 10)
            },
        )
        .await
        .expect("page");
    assert_eq!(order(&human), [reference(3), reference(4), reference(5)]);
    let members = catalog
        .desk_page(
            &survey.id,
            &DeskQuery {
                references: Some(vec![reference(5), reference(1), "missing".to_owned()]),
                ..page(DeskOrder::Descending, None, 10)
            },
        )
        .await
        .expect("page");
    assert_eq!(order(&members), [reference(5), reference(1)]);

    let mut places = catalog.clustered_places(&survey.id).await.expect("places");
    places.sort_by(|a, b| a.reference.cmp(&b.reference));
    assert_eq!(places.len(), 2);
    assert_eq!(places[1].reference, reference(1));
    assert_eq!(places[1].point.values, [100, 100]);
    assert_eq!(
        catalog
            .latest_scoring_run(&survey.id)
            .await
            .expect("run")
            .map(|r| r.id),
        Some(run.id.clone())
    );

    // A deletion request takes reference 1 off the desk at once.
    catalog
        .request_session_deletion(&survey.id, &reference(1))
        .await
        .expect("erase");
    let counts = catalog.desk_counts(&survey.id).await.expect("counts");
    assert_eq!(counts.bands[0], ("automation-like".to_owned(), 1));
    assert_eq!(counts.histogram[2], 1);
    let all = catalog
        .desk_page(&survey.id, &page(DeskOrder::Ascending, None, 10))
        .await
        .expect("page");
    assert!(!order(&all).contains(&reference(1)));
    assert_eq!(
        catalog
            .clustered_places(&survey.id)
            .await
            .expect("places")
            .len(),
        1
    );
}

async fn scores_and_erasure_show_in_lookup(fixture: Fixture) {
    let catalog = fixture.catalog();
    let survey = new_survey(catalog).await;
    catalog
        .apply_session_stats(
            "i",
            1,
            3,
            &[
                delta(&survey, "tab-1", Some(REFERENCE), 4),
                delta(&survey, "tab-2", Some(REFERENCE), 6),
                // The same identifier twice in one batch adds up.
                delta(&survey, "tab-2", Some(REFERENCE), 1),
                delta(&survey, "other", Some("other-reference"), 2),
            ],
        )
        .await
        .expect("stats");
    let (run, _) = catalog
        .start_scoring_run(&survey.id, false)
        .await
        .expect("start");
    catalog
        .claim_scoring_run(&run.id, "w", 60_000)
        .await
        .expect("claim")
        .expect("claimed");
    let score = NewScore {
        reference: REFERENCE.to_owned(),
        human_score_percent: 87.5,
        score_band: "human-like".to_owned(),
        scored_at: 1_234,
        model_version: "telltale-v2".to_owned(),
        run_id: run.id.clone(),
        cohort: Vec::new(),
        reasons: Vec::new(),
        cluster: None,
        // Scored on more events than any session here has: not grown.
        events: 1_000_000,
    };
    assert!(
        catalog
            .record_scores(&survey.id, &run.id, "w", &[score])
            .await
            .expect("record")
    );
    // The run could not score three sessions: one by the reference (in upper case), one by a
    // linked identifier, one of another session.
    let failure = |session_id: &str| ScoringFailure {
        session_id: session_id.to_owned(),
        code: Some("no_events".to_owned()),
        message: "nothing to score".to_owned(),
    };
    let progress = RunProgress {
        total: 4,
        scored: 1,
        skipped: 0,
        failed: 3,
        failures: vec![
            failure(&REFERENCE.to_uppercase()),
            failure("tab-2"),
            failure("other-reference"),
        ],
        ..RunProgress::default()
    };
    catalog
        .report_run_progress(&run.id, "w", 60_000, &progress)
        .await
        .expect("progress");
    let references = vec![
        REFERENCE.to_owned(),
        REFERENCE.to_owned(),
        "missing".to_owned(),
    ];
    let found = catalog
        .lookup_sessions(&survey.id, &references)
        .await
        .expect("lookup");
    assert_eq!(
        found.len(),
        1,
        "duplicates collapse; unknown references are absent"
    );
    assert_eq!(found[0].event_count, 11);
    assert_eq!(
        (found[0].first_event_at, found[0].last_event_at),
        (Some(1_000), Some(2_000))
    );
    let score = found[0].score.as_ref().expect("scored");
    assert_eq!(score.human_score_percent, 87.5);
    assert_eq!(score.score_band, "human-like");
    assert_eq!(
        catalog
            .scored_references(&survey.id)
            .await
            .expect("scored")
            .len(),
        1
    );
    let mut identifiers = catalog
        .reference_identifiers(&survey.id, REFERENCE)
        .await
        .expect("identifiers");
    identifiers.sort();
    assert_eq!(identifiers, ["tab-1", "tab-2"]);
    let linked = catalog
        .session_references(&survey.id, &["tab-1".to_owned(), "nope".to_owned()])
        .await
        .expect("references");
    assert_eq!(linked, [("tab-1".to_owned(), REFERENCE.to_owned())]);

    let hashes: Vec<String> = identifiers
        .iter()
        .map(|identifier| identifier_tombstone_hash(&survey.id, identifier))
        .collect();
    let erasure = SessionErasure {
        survey_id: survey.id.clone(),
        reference: REFERENCE.to_owned(),
        identifiers,
        identifier_hashes: hashes,
    };
    catalog.erase_session_rows(&erasure).await.expect("erase");
    // Repeatable: a retried erasure finds nothing more to do.
    catalog
        .erase_session_rows(&erasure)
        .await
        .expect("erase again");
    catalog.scrub().await.expect("scrub");
    if matches!(fixture._store, Store::Postgres { .. }) {
        // The scrub's vacuum pruned every old version of the session's rows: no heap page of
        // the tables the erasure wrote holds the reference any more (the tombstone does).
        for table in [
            "sessions",
            "session_scores",
            "reference_summaries",
            "cohort_points",
        ] {
            assert_eq!(
                heap_tuples_holding(&fixture.url, table, REFERENCE).await,
                0,
                "{table} still holds the erased reference"
            );
        }
    }
    assert!(
        catalog
            .lookup_sessions(&survey.id, &references)
            .await
            .expect("lookup")
            .is_empty(),
        "nothing of the erased session is left to look up"
    );
    let tombstoned = catalog
        .tombstoned_identifiers_after(0)
        .await
        .expect("tombstoned");
    assert_eq!(tombstoned.len(), 2);
    let still = catalog
        .lookup_sessions(&survey.id, &["other-reference".to_owned()])
        .await
        .expect("lookup");
    assert_eq!(still.len(), 1, "other sessions are untouched");
    // The run's failures no longer name the erased session; its counters stay.
    let run = catalog
        .scoring_run(&survey.id, &run.id)
        .await
        .expect("run")
        .expect("exists");
    assert_eq!(run.failures, [failure("other-reference")]);
    assert_eq!(run.failed, 3);
}

/// What a lookup answers of a reference follows its sessions: a session linked to another
/// reference leaves the first one's sums, a reference left with no session and no score is
/// absent, and erasing a reference refreshes every other reference it shared a session with.
async fn a_lookup_follows_a_session_that_moves_to_another_reference(fixture: Fixture) {
    let catalog = fixture.catalog();
    let survey = new_survey(catalog).await;
    let (first, second) = (REFERENCE, "second-reference");
    let lookup = |references: &[&str]| {
        let references: Vec<String> = references.iter().map(|r| (*r).to_owned()).collect();
        let survey = survey.id.clone();
        async move {
            let mut found = catalog
                .lookup_sessions(&survey, &references)
                .await
                .expect("lookup");
            found.sort_by(|a, b| a.reference.cmp(&b.reference));
            found
                .into_iter()
                .map(|s| (s.reference, s.event_count))
                .collect::<Vec<_>>()
        }
    };
    catalog
        .apply_session_stats(
            "i",
            1,
            1,
            &[
                delta(&survey, "tab-1", Some(first), 3),
                delta(&survey, "tab-2", Some(first), 2),
            ],
        )
        .await
        .expect("stats");
    assert_eq!(lookup(&[first]).await, [(first.to_owned(), 5)]);

    // tab-1 is linked to the second reference: its events (3 + 4) go with it.
    catalog
        .apply_session_stats("i", 1, 2, &[delta(&survey, "tab-1", Some(second), 4)])
        .await
        .expect("stats");
    assert_eq!(
        lookup(&[first, second]).await,
        [(first.to_owned(), 2), (second.to_owned(), 7)]
    );
    // A batch without a reference keeps the session's link.
    catalog
        .apply_session_stats("i", 1, 3, &[delta(&survey, "tab-1", None, 1)])
        .await
        .expect("stats");
    assert_eq!(lookup(&[second]).await, [(second.to_owned(), 8)]);

    // tab-2 follows: the first reference has no session and no score left.
    catalog
        .apply_session_stats("i", 1, 4, &[delta(&survey, "tab-2", Some(second), 1)])
        .await
        .expect("stats");
    assert_eq!(lookup(&[first, second]).await, [(second.to_owned(), 11)]);

    // Erasing the first reference with tab-2 among its identifiers (a session it once had)
    // takes tab-2 from the second reference too.
    let identifiers = vec!["tab-2".to_owned()];
    let erasure = SessionErasure {
        survey_id: survey.id.clone(),
        reference: first.to_owned(),
        identifier_hashes: identifiers
            .iter()
            .map(|identifier| identifier_tombstone_hash(&survey.id, identifier))
            .collect(),
        identifiers,
    };
    catalog.erase_session_rows(&erasure).await.expect("erase");
    assert_eq!(lookup(&[first, second]).await, [(second.to_owned(), 8)]);
}

/// The survey's cohort kept across runs: a score's points replace the reference's earlier
/// ones, a probe finds the points of its (modality, mask) in its cell range, the bins count
/// every current point, and erasure takes a reference's points and counts.
async fn cohort_points_are_found_by_cell_and_erased_with_their_session(fixture: Fixture) {
    let catalog = fixture.catalog();
    let survey = new_survey(catalog).await;
    let (run, _) = catalog
        .start_scoring_run(&survey.id, false)
        .await
        .expect("start");
    catalog
        .claim_scoring_run(&run.id, "w", 60_000)
        .await
        .expect("claim")
        .expect("claimed");
    let point = |modality: u8, cell: i64, values: &[u16]| CohortPoint {
        modality,
        mask: 0b111,
        cell,
        values: values.to_vec(),
    };
    let score = |reference: &str, cohort: Vec<CohortPoint>| NewScore {
        reference: reference.to_owned(),
        human_score_percent: 50.0,
        score_band: "review".to_owned(),
        scored_at: 1,
        model_version: "m".to_owned(),
        run_id: run.id.clone(),
        cohort,
        reasons: Vec::new(),
        cluster: None,
        // Scored on more events than any session here has: not grown.
        events: 1_000_000,
    };
    let record = |scores: Vec<NewScore>| {
        let (survey, run) = (survey.id.clone(), run.id.clone());
        async move {
            assert!(
                catalog
                    .record_scores(&survey, &run, "w", &scores)
                    .await
                    .expect("record")
            );
        }
    };
    record(vec![
        score(
            "a",
            vec![
                point(0, 10, &[100, 200, 300]),
                point(1, 7, &[150, 250, 9_999]),
            ],
        ),
        score("b", vec![point(0, 11, &[120, 220, 320])]),
        score("c", vec![point(0, 50, &[5_000, 5_000, 5_000])]),
    ])
    .await;
    // "a" scored again: its pointing place moves, its typing one goes.
    record(vec![score("a", vec![point(0, 12, &[110, 210, 310])])]).await;

    let probe = |modality: u8, cells: (i64, i64)| CohortProbe {
        modality,
        mask: 0b111,
        cells,
    };
    let found = |probes: Vec<CohortProbe>| {
        let survey = survey.id.clone();
        async move {
            let mut found: Vec<(String, i64)> = catalog
                .probe_cohort(&survey, &probes)
                .await
                .expect("probe")
                .into_iter()
                .map(|s| (s.reference, s.point.cell))
                .collect();
            found.sort();
            found
        }
    };
    assert_eq!(
        found(vec![probe(0, (9, 12))]).await,
        [("a".to_owned(), 12), ("b".to_owned(), 11)]
    );
    assert_eq!(found(vec![probe(1, (0, 100))]).await, []);
    let stored = catalog
        .probe_cohort(&survey.id, &[probe(0, (12, 12))])
        .await
        .expect("probe");
    assert_eq!(stored[0].point.values, [110, 210, 310]);

    let bins = |bins: Vec<CohortBin>| {
        let mut bins: Vec<(u8, u8, u16, i64)> = bins
            .into_iter()
            .map(|b| (b.modality, b.axis, b.bin, b.sessions))
            .collect();
        bins.sort();
        bins
    };
    assert_eq!(
        bins(catalog.cohort_bins(&survey.id).await.expect("bins")),
        [
            (0, 0, 1, 2),
            (0, 0, 50, 1),
            (0, 1, 2, 2),
            (0, 1, 50, 1),
            (0, 2, 3, 2),
            (0, 2, 50, 1)
        ]
    );

    let erasure = SessionErasure {
        survey_id: survey.id.clone(),
        reference: "a".to_owned(),
        identifiers: Vec::new(),
        identifier_hashes: Vec::new(),
    };
    catalog.erase_session_rows(&erasure).await.expect("erase");
    assert_eq!(
        found(vec![probe(0, (0, 100))]).await,
        [("b".to_owned(), 11), ("c".to_owned(), 50)]
    );
    assert_eq!(
        bins(catalog.cohort_bins(&survey.id).await.expect("bins")),
        [
            (0, 0, 1, 1),
            (0, 0, 50, 1),
            (0, 1, 2, 1),
            (0, 1, 50, 1),
            (0, 2, 3, 1),
            (0, 2, 50, 1)
        ]
    );
}

async fn an_erasure_waits_for_live_instances_that_have_not_purged(fixture: Fixture) {
    let catalog = fixture.catalog();
    let survey = new_survey(catalog).await;
    const LEASE: i64 = 60_000;
    let blockers = || async {
        catalog
            .fleet_blockers(&survey.id, REFERENCE, LEASE)
            .await
            .expect("blockers")
            .into_iter()
            .map(|member| member.instance)
            .collect::<Vec<_>>()
    };
    // No tombstone yet: nothing to wait for; then instances report as they purge.
    assert!(blockers().await.is_empty());
    let a = catalog.join_fleet("a").await.expect("join");
    let b = catalog.join_fleet("b").await.expect("join");
    assert_eq!((a, b), (1, 1), "a first join is epoch 1");
    catalog
        .request_session_deletion(&survey.id, REFERENCE)
        .await
        .expect("delete");
    let tombstone = catalog
        .tombstones_after(0)
        .await
        .expect("tombstones")
        .into_iter()
        .find(|tombstone| tombstone.reference == REFERENCE)
        .expect("tombstoned")
        .id;
    assert_eq!(blockers().await, ["a", "b"]);
    catalog
        .report_instance("a", a, tombstone, None)
        .await
        .expect("report");
    assert_eq!(blockers().await, ["b"]);
    // Reports never lower what an instance has purged through.
    catalog
        .report_instance("a", a, 0, None)
        .await
        .expect("report");
    assert_eq!(blockers().await, ["b"]);
    // A purge that fails is reported, with its reason, and the instance stays live.
    catalog
        .report_instance("b", b, 0, Some("disk full"))
        .await
        .expect("report");
    let members = catalog
        .fleet_blockers(&survey.id, REFERENCE, LEASE)
        .await
        .expect("blockers");
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].purge_error.as_deref(), Some("disk full"));
    assert!(members[0].live && !members[0].fenced && !members[0].lake_fenced);
    assert!((0..LEASE).contains(&members[0].silent_ms));
    // A live instance is not fenced; one silent past the lease is (lease 0: everyone is).
    assert!(!catalog.fence_instance("b", b, LEASE).await.expect("fence"));
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    assert!(catalog.fence_instance("b", b, 0).await.expect("fence"));
    let fenced = |error: catalog::Error| matches!(error, catalog::Error::Fenced { .. });
    assert!(fenced(
        catalog
            .report_instance("b", b, tombstone, None)
            .await
            .expect_err("fenced")
    ));
    assert!(fenced(
        catalog.check_epoch("b", b).await.expect_err("fenced")
    ));
    assert!(fenced(
        catalog
            .apply_session_stats("b", b, 1, &[])
            .await
            .expect_err("fenced")
    ));
    let member = &catalog
        .fleet_blockers(&survey.id, REFERENCE, LEASE)
        .await
        .expect("blockers")[0];
    assert!(member.fenced && !member.lake_fenced, "{member:?}");
    catalog.mark_lake_fenced("b", b).await.expect("lake fence");
    // Back, it joins under a new epoch, and its writes go through again.
    let again = catalog.join_fleet("b").await.expect("join");
    assert_eq!(again, b + 1);
    catalog.check_epoch("b", again).await.expect("not fenced");
    catalog
        .report_instance("b", again, tombstone + 5, None)
        .await
        .expect("report");
    assert!(blockers().await.is_empty());
    // Joining again ends the epoch before, fenced or not: nothing a previous process of the
    // instance still had in flight lands.
    let c = catalog.join_fleet("c").await.expect("join");
    let c_again = catalog.join_fleet("c").await.expect("join");
    assert_eq!(c_again, c + 1);
    assert!(fenced(
        catalog.check_epoch("c", c).await.expect_err("fenced")
    ));
    catalog.check_epoch("c", c_again).await.expect("not fenced");
    // Stopping cleanly fences the instance, in the lake too.
    catalog.leave_fleet("a", a).await.expect("leave");
    assert!(fenced(
        catalog.check_epoch("a", a).await.expect_err("fenced")
    ));
}

/// A run asks the other live instances to flush and waits for their answers.
async fn a_run_asks_the_live_fleet_to_flush(fixture: Fixture) {
    let catalog = fixture.catalog();
    let a = catalog.join_fleet("a").await.expect("join");
    let b = catalog.join_fleet("b").await.expect("join");
    let c = catalog.join_fleet("c").await.expect("join");
    catalog.leave_fleet("c", c).await.expect("leave");
    assert_eq!(catalog.flush_wanted("b").await.expect("wanted"), (0, true));
    let request = catalog
        .request_fleet_flush("a", 60_000)
        .await
        .expect("request");
    assert_eq!(request.asked, ["b"], "the live ones but the requester");
    assert!(request.token > 0);
    assert_eq!(
        catalog
            .fleet_flush_pending(request.token, 60_000)
            .await
            .expect("pending"),
        ["b"]
    );
    assert_eq!(
        catalog.flush_wanted("b").await.expect("wanted"),
        (request.token, false)
    );
    catalog
        .flush_answered("b", b, request.token)
        .await
        .expect("answered");
    assert!(
        catalog
            .fleet_flush_pending(request.token, 60_000)
            .await
            .expect("pending")
            .is_empty()
    );
    assert_eq!(
        catalog.flush_wanted("b").await.expect("wanted"),
        (request.token, true)
    );
    let _ = a;
}

async fn a_partition_is_compacted_by_one_instance_at_a_time(fixture: Fixture) {
    let survey = new_survey(fixture.catalog()).await;
    let other = fixture.second_instance().await;
    let mut claims = Vec::new();
    for attempt in 0..8 {
        let catalog = if attempt % 2 == 0 {
            fixture.catalog.clone()
        } else {
            other.clone()
        };
        let survey = survey.id.clone();
        claims.push(tokio::spawn(async move {
            let owner = format!("worker-{attempt}");
            let claim = catalog
                .claim_compaction(&survey, "2026-11-23", &owner, 60_000)
                .await?;
            Ok::<_, Error>((claim == CompactionClaim::Claimed).then_some(owner))
        }));
    }
    let mut winners = Vec::new();
    for claim in claims {
        winners.extend(claim.await.expect("task").expect("claim"));
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    let winner = &winners[0];
    assert_eq!(
        other
            .claim_compaction(&survey.id, "", "anyone", 60_000)
            .await
            .expect("claim"),
        CompactionClaim::Claimed,
        "another partition is free"
    );
    // Released by someone else: nothing changes; by the holder: free again.
    other
        .release_compaction(&survey.id, "2026-11-23", "not-the-holder")
        .await
        .expect("release");
    assert_eq!(
        other
            .claim_compaction(&survey.id, "2026-11-23", "late", 60_000)
            .await
            .expect("claim"),
        CompactionClaim::HeldBy(winner.clone()),
        "the holder is named"
    );
    fixture
        .catalog()
        .release_compaction(&survey.id, "2026-11-23", winner)
        .await
        .expect("release");
    assert_eq!(
        other
            .claim_compaction(&survey.id, "2026-11-23", "late", 1)
            .await
            .expect("claim"),
        CompactionClaim::Claimed
    );
    // A lapsed lease is claimable.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        fixture
            .catalog()
            .claim_compaction(&survey.id, "2026-11-23", "next", 60_000)
            .await
            .expect("claim"),
        CompactionClaim::Claimed
    );
}

async fn a_deletion_is_claimed_by_one_instance(fixture: Fixture) {
    let survey = new_survey(fixture.catalog()).await;
    fixture
        .catalog()
        .request_session_deletion(&survey.id, REFERENCE)
        .await
        .expect("request");
    let other = fixture.second_instance().await;
    let mut claims = Vec::new();
    for attempt in 0..8 {
        let catalog = if attempt % 2 == 0 {
            fixture.catalog.clone()
        } else {
            other.clone()
        };
        let survey = survey.id.clone();
        claims.push(tokio::spawn(async move {
            catalog
                .claim_deletion(&survey, REFERENCE, &format!("worker-{attempt}"), 60_000)
                .await
        }));
    }
    let mut won = 0;
    for claim in claims {
        won += usize::from(claim.await.expect("task").expect("claim"));
    }
    assert_eq!(won, 1, "one worker holds the deletion");
    let held = fixture
        .catalog()
        .session_deletion(&survey.id, REFERENCE)
        .await
        .expect("deletion")
        .expect("exists");
    let owner = held.owner.expect("owned");
    assert!(
        other
            .complete_deletion(&survey.id, REFERENCE, "somebody-else")
            .await
            .is_ok_and(|completed| !completed)
    );
    assert!(
        other
            .complete_deletion(&survey.id, REFERENCE, &owner)
            .await
            .expect("complete")
    );
}

async fn keys_authenticate_until_revoked(fixture: Fixture) {
    let catalog = fixture.catalog();
    let org = catalog.create_organization("Acme").await.expect("org");
    let created = catalog
        .create_key(&org.id, "server", &Scope::ALL)
        .await
        .expect("key");
    let found = catalog
        .authenticate(&created.secret)
        .await
        .expect("auth")
        .expect("valid");
    assert_eq!(found.key.prefix, created.info.prefix);
    assert_eq!(found.organization_name, "Acme");

    let forged = format!("{}_{}", created.secret.prefix(), "0".repeat(64));
    let forged = IntegrationKeySecret::parse(&forged).expect("well formed");
    assert!(catalog.authenticate(&forged).await.expect("auth").is_none());

    assert!(
        catalog
            .revoke_key(created.secret.prefix())
            .await
            .expect("revoke")
    );
    assert!(
        !catalog
            .revoke_key(created.secret.prefix())
            .await
            .expect("revoke twice")
    );
    assert!(
        catalog
            .authenticate(&created.secret)
            .await
            .expect("auth")
            .is_none()
    );
}

async fn provisioning_is_idempotent_per_organization(fixture: Fixture) {
    let catalog = fixture.catalog();
    let org = catalog.create_organization("Acme").await.expect("org");
    let other = catalog.create_organization("Other").await.expect("org");
    let first = catalog
        .provision_survey(&org.id, "ext-1", "First")
        .await
        .expect("first");
    let again = catalog
        .provision_survey(&org.id, "ext-1", "Renamed")
        .await
        .expect("again");
    assert_eq!(first.id, again.id);
    assert_eq!(first.tracking_key, again.tracking_key);
    assert_eq!(again.name, "Renamed");
    let foreign = catalog
        .provision_survey(&other.id, "ext-1", "Theirs")
        .await
        .expect("other");
    assert_ne!(foreign.id, first.id);
    assert!(
        catalog
            .survey(&other.id, &first.id)
            .await
            .expect("get")
            .is_none()
    );
}

async fn session_stats_aggregate_per_reference_and_watermark_advances(fixture: Fixture) {
    let catalog = fixture.catalog();
    let org = catalog.create_organization("Acme").await.expect("org");
    let survey = catalog
        .provision_survey(&org.id, "s", "S")
        .await
        .expect("survey");
    let reference = "1b4e28ba-2fa1-11d2-883f-0016d3cca427".to_owned();
    let delta = |identifier: &str, count, first, last| SessionDelta {
        survey_id: survey.id.clone(),
        identifier: identifier.to_owned(),
        reference: Some(reference.clone()),
        reference_explicit: true,
        event_count: count,
        first_event_at: first,
        last_event_at: last,
        first_received_at: first + 1,
        last_received_at: last + 1,
    };
    catalog
        .apply_session_stats(
            "i",
            1,
            5,
            &[delta("a", 3, 100, 200), delta("b", 2, 50, 150)],
        )
        .await
        .expect("apply");
    catalog
        .apply_session_stats("i", 1, 9, &[delta("a", 4, 120, 400)])
        .await
        .expect("apply");
    assert_eq!(
        catalog
            .wal_watermark("i", WalConsumer::Stats)
            .await
            .expect("wm"),
        9
    );

    let summaries = catalog
        .lookup_sessions(&survey.id, &[reference.clone(), "missing".to_owned()])
        .await
        .expect("lookup");
    assert_eq!(summaries.len(), 1);
    assert_eq!(summaries[0].event_count, 9);
    assert_eq!(summaries[0].first_event_at, Some(50));
    assert_eq!(summaries[0].last_event_at, Some(400));
}

async fn deletions_tombstone_at_once_and_retry_until_they_fail(fixture: Fixture) {
    let catalog = fixture.catalog();
    let org = catalog.create_organization("Acme").await.expect("org");
    let survey = catalog
        .provision_survey(&org.id, "s", "S")
        .await
        .expect("survey");
    let reference = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
    catalog
        .apply_session_stats(
            "i",
            1,
            1,
            &[SessionDelta {
                survey_id: survey.id.clone(),
                identifier: "tab".to_owned(),
                reference: Some(reference.to_owned()),
                reference_explicit: true,
                event_count: 3,
                first_event_at: 1,
                last_event_at: 2,
                first_received_at: 1,
                last_received_at: 2,
            }],
        )
        .await
        .expect("stats");
    assert_eq!(
        catalog
            .survey_sessions(&survey.id)
            .await
            .expect("plan")
            .len(),
        1
    );

    let first = catalog
        .request_session_deletion(&survey.id, reference)
        .await
        .expect("request");
    assert_eq!(first.status, DeletionStatus::Pending);
    assert_eq!(first.attempts, 0);
    let tombstones = catalog.tombstones_after(0).await.expect("tombstones");
    assert_eq!(tombstones.len(), 1);
    assert!(
        catalog
            .survey_sessions(&survey.id)
            .await
            .expect("plan")
            .is_empty(),
        "a scoring run never plans a tombstoned session"
    );
    let again = catalog
        .request_session_deletion(&survey.id, reference)
        .await
        .expect("again");
    assert_eq!(again, first, "a repeated request changes nothing");

    // Five failed attempts make it `failed`; a deferral does not count.
    assert!(
        catalog
            .claim_deletion(&survey.id, reference, "w", 60_000)
            .await
            .expect("claim")
    );
    let deferred = catalog
        .set_back_deletion(
            &survey.id,
            reference,
            "w",
            &DeletionSetback::Deferred {
                retry_at: 0,
                waiting_on: Some("run r".to_owned()),
                reason: "a scoring run is active on the survey".to_owned(),
            },
        )
        .await
        .expect("defer")
        .expect("owned");
    assert_eq!(deferred.attempts, 0);
    for attempt in 1..=5u32 {
        assert!(
            catalog
                .claim_deletion(&survey.id, reference, "w", 60_000)
                .await
                .expect("claim")
        );
        assert!(
            !catalog
                .claim_deletion(&survey.id, reference, "other", 60_000)
                .await
                .expect("claim"),
            "another worker cannot take a held deletion"
        );
        let after = catalog
            .set_back_deletion(
                &survey.id,
                reference,
                "w",
                &DeletionSetback::Failed {
                    error: format!("boom {attempt}"),
                    retry_at: 0,
                    max_attempts: 5,
                },
            )
            .await
            .expect("fail")
            .expect("owned");
        assert_eq!(after.attempts, attempt);
        let expected = if attempt < 5 {
            DeletionStatus::Pending
        } else {
            DeletionStatus::Failed
        };
        assert_eq!(after.status, expected);
    }
    assert!(
        catalog
            .claimable_deletions("w", now_millis())
            .await
            .expect("due")
            .is_empty()
    );
    // Requested again, a failed deletion starts over.
    let restarted = catalog
        .request_session_deletion(&survey.id, reference)
        .await
        .expect("restart");
    assert_eq!(
        (restarted.status, restarted.attempts),
        (DeletionStatus::Pending, 0)
    );
    assert_eq!(restarted.error, None);
}

/// A catalog that a newer release migrated (a migration this binary does not know) is refused
/// on open with an error that says so, not read (CHANGELOG.md: no downgrade over a migration).
async fn a_catalog_migrated_by_a_newer_release_is_refused(fixture: Fixture) {
    use sqlx::Connection;
    if fixture.url.starts_with("sqlite:") {
        let mut connection = sqlx::SqliteConnection::connect(&fixture.url)
            .await
            .expect("connect");
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (99999, 'from a newer release', TRUE, X'00', 0)",
        )
        .execute(&mut connection)
        .await
        .expect("insert");
    } else {
        let mut connection = sqlx::PgConnection::connect(&fixture.url)
            .await
            .expect("connect");
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (99999, 'from a newer release', TRUE, '\\x00'::bytea, 0)",
        )
        .execute(&mut connection)
        .await
        .expect("insert");
    }
    let refused = catalog::open(&fixture.url).await;
    match refused {
        Err(Error::NewerCatalog { applied, known }) => {
            assert_eq!(applied, 99999);
            assert!((1..99999).contains(&known), "{known}");
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a catalog migrated by a newer release was opened"),
    }
    let message = catalog::open(&fixture.url)
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(message.contains("newer release"), "{message}");
}

/// What a restore relies on (`telltale restore`, docs/backup.md): every deletion, completed or
/// not, goes back to pending with its tombstone kept; SQLite writes a copy of itself that opens
/// as a catalog with the same rows, and PostgreSQL leaves the copy to `pg_dump`.
async fn a_restore_redoes_every_deletion_and_sqlite_copies_itself(fixture: Fixture) {
    let catalog = fixture.catalog();
    let survey = new_survey(catalog).await;
    catalog
        .request_session_deletion(&survey.id, REFERENCE)
        .await
        .expect("request");
    assert!(
        catalog
            .claim_deletion(&survey.id, REFERENCE, "w", 60_000)
            .await
            .expect("claim")
    );
    assert!(
        catalog
            .complete_deletion(&survey.id, REFERENCE, "w")
            .await
            .expect("complete")
    );
    assert_eq!(catalog.redo_deletions().await.expect("redo"), 1);
    let deletion = catalog
        .session_deletion(&survey.id, REFERENCE)
        .await
        .expect("deletion")
        .expect("exists");
    assert_eq!(
        (deletion.status, deletion.attempts, deletion.owner),
        (DeletionStatus::Pending, 0, None)
    );
    assert_eq!(
        catalog.tombstones_after(0).await.expect("tombstones").len(),
        1
    );

    let folder = tempfile::tempdir().expect("temp dir");
    let copy = folder.path().join("copy.db");
    let copied = catalog.copy_into(&copy).await.expect("copy");
    assert_eq!(copied, fixture.url.starts_with("sqlite:"));
    if copied {
        let reopened = catalog::open(&format!("sqlite://{}", copy.display()))
            .await
            .expect("the copy opens");
        assert!(
            reopened
                .survey_by_id(&survey.id)
                .await
                .expect("survey")
                .is_some()
        );
        assert_eq!(
            reopened
                .tombstones_after(0)
                .await
                .expect("tombstones")
                .len(),
            1
        );
    }
}

/// A catalog migrated before `reference_summaries.cohort_cells` (SQLite's 0013, PostgreSQL's
/// 0010) had its places found by an index by reference; the migration writes each scored
/// reference's keys, so that a score that replaces them and an erasure still take them all.
mod places_stored_before_cohort_cells {
    use super::*;

    const SURVEY: &str = "0123456789abcdef01234567";
    /// The catalog as an older release left it: a survey with two scored references, "a" with a pointing
    /// and a typing place, "b" with a pointing one, and the bins of the three.
    const SEED: &[&str] = &[
        "INSERT INTO organizations (id, name, created_at)
         VALUES ('fedcba9876543210fedcba98', 'o', 1)",
        "INSERT INTO surveys (id, organization_id, external_survey_id, name, tracking_key,
                              created_at, updated_at)
         VALUES ('0123456789abcdef01234567', 'fedcba9876543210fedcba98', 's', 'S',
                 'aaaaaaaaaaaaaaaaaaaaaaaa', 1, 1)",
        "INSERT INTO reference_summaries (survey_id, reference, human_score_percent, score_band,
                                          scored_at, model_version, cluster_modality, cohort_alike)
         VALUES ('0123456789abcdef01234567', 'a', 10, 'automation-like', 1, 'm', 0, 6),
                ('0123456789abcdef01234567', 'b', 90, 'human-like', 1, 'm', NULL, NULL)",
        "INSERT INTO cohort_points (survey_id, modality, mask, cell, reference, point)
         VALUES ('0123456789abcdef01234567', 0, 7, 10, 'a', '\\x6400c8002c01'),
                ('0123456789abcdef01234567', 1, 7, 4, 'a', '\\x9600fa000f27'),
                ('0123456789abcdef01234567', 0, 7, 11, 'b', '\\x7800dc004001')",
        "INSERT INTO cohort_bins (survey_id, modality, mask, axis, bin, sessions)
         VALUES ('0123456789abcdef01234567', 0, 7, 0, 1, 2),
                ('0123456789abcdef01234567', 0, 7, 1, 2, 2),
                ('0123456789abcdef01234567', 0, 7, 2, 3, 2),
                ('0123456789abcdef01234567', 1, 7, 0, 1, 1),
                ('0123456789abcdef01234567', 1, 7, 1, 2, 1)",
    ];

    /// The migrations of `folder` numbered below `below`, as the older release had them (a
    /// copy of those files, which the release's own migrator later finds applied, checksums
    /// and all).
    async fn older_migrator(
        folder: &str,
        below: i64,
    ) -> (sqlx::migrate::Migrator, tempfile::TempDir) {
        let copy = tempfile::tempdir().expect("tempdir");
        let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
        for entry in std::fs::read_dir(&source).expect("migrations folder") {
            let path = entry.expect("migration file").path();
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .expect("a file name")
                .to_owned();
            let version: i64 = name
                .split('_')
                .next()
                .and_then(|number| number.parse().ok())
                .expect("a numbered migration");
            if version < below {
                std::fs::copy(&path, copy.path().join(&name)).expect("copy");
            }
        }
        let migrator = sqlx::migrate::Migrator::new(copy.path())
            .await
            .expect("older migrations");
        (migrator, copy)
    }

    async fn check(catalog: &dyn Catalog) {
        let survey = SurveyId::parse(SURVEY).expect("survey id");
        let everything = |modality| CohortProbe {
            modality,
            mask: 7,
            cells: (i64::MIN, i64::MAX),
        };
        let found = || async {
            let mut found: Vec<(String, u8, i64)> = catalog
                .probe_cohort(&survey, &[everything(0), everything(1)])
                .await
                .expect("probe")
                .into_iter()
                .map(|s| (s.reference, s.point.modality, s.point.cell))
                .collect();
            found.sort();
            found
        };
        assert_eq!(found().await.len(), 3);
        // The desk finds the clustered reference's place through its keys.
        let clustered = catalog.clustered_places(&survey).await.expect("desk");
        assert_eq!(
            clustered
                .iter()
                .map(|p| (p.reference.as_str(), p.point.cell))
                .collect::<Vec<_>>(),
            [("a", 10)]
        );
        // "b" scored again with a place elsewhere: its old one goes.
        let (run, _) = catalog
            .start_scoring_run(&survey, false)
            .await
            .expect("start");
        catalog
            .claim_scoring_run(&run.id, "w", 60_000)
            .await
            .expect("claim")
            .expect("claimed");
        let score = NewScore {
            reference: "b".to_owned(),
            human_score_percent: 80.0,
            score_band: "human-like".to_owned(),
            scored_at: 2,
            model_version: "m".to_owned(),
            run_id: run.id.clone(),
            cohort: vec![CohortPoint {
                modality: 0,
                mask: 7,
                cell: 30,
                values: vec![3_000, 3_000, 3_000],
            }],
            reasons: Vec::new(),
            cluster: None,
            // Scored on more events than any session here has: not grown.
            events: 1_000_000,
        };
        assert!(
            catalog
                .record_scores(&survey, &run.id, "w", &[score])
                .await
                .expect("record")
        );
        // "a" erased: both its places and their counts go.
        let erasure = SessionErasure {
            survey_id: survey.clone(),
            reference: "a".to_owned(),
            identifiers: Vec::new(),
            identifier_hashes: Vec::new(),
        };
        catalog.erase_session_rows(&erasure).await.expect("erase");
        assert_eq!(found().await, [("b".to_owned(), 0, 30)]);
        let bins: i64 = catalog
            .cohort_bins(&survey)
            .await
            .expect("bins")
            .iter()
            .map(|b| b.sessions)
            .sum();
        assert_eq!(bins, 3, "one place of three axes is left");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("catalog.db");
        {
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&path)
                .create_if_missing(true);
            let pool = sqlx::SqlitePool::connect_with(options).await.expect("pool");
            let (older, _folder) = older_migrator("migrations/sqlite", 13).await;
            older.run(&pool).await.expect("older migrations");
            for statement in SEED {
                // SQLite reads the points' bytes from hex literals.
                let statement = statement.replace("'\\x", "x'");
                sqlx::query(&statement).execute(&pool).await.expect("seed");
            }
            pool.close().await;
        }
        let catalog = catalog::open(&format!("sqlite://{}", path.display()))
            .await
            .expect("open migrates");
        check(catalog.as_ref()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let fixture_url = {
            // A fresh database, as the suite's fixture makes, migrated by the older release.
            let fixture = super::postgres_database().await;
            let pool = sqlx::PgPool::connect(&fixture.0).await.expect("pool");
            let (older, _folder) = older_migrator("migrations/postgres", 10).await;
            older.run(&pool).await.expect("older migrations");
            for statement in SEED {
                sqlx::query(statement).execute(&pool).await.expect("seed");
            }
            pool.close().await;
            fixture
        };
        let catalog = catalog::open(&fixture_url.0).await.expect("open migrates");
        check(catalog.as_ref()).await;
    }
}
