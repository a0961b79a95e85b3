//! `telltale score` and `telltale sql`: scoring runs and SQL over the lake from the shell, and
//! the scorer set-up shared with `serve`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use catalog::{Catalog, RunProgress, RunStatus, SurveyId};
use datafusion::execution::context::SQLOptions;
use lake::Lake;
use lake::TableKind;
use lake::delta::AsOf;
use query::LakeQuery;
use scorer::{RunEnd, ScoringSettings};

use crate::cli::{ScoringArgs, SqlFormat, StorageArgs};

/// How `args` says to score.
pub fn scorer_settings(args: &ScoringArgs) -> instance::scoring::ScorerSettings {
    instance::scoring::ScorerSettings {
        model: args.model.clone(),
        scoring: ScoringSettings {
            chunk_sessions: args.scoring_chunk_sessions,
            max_events_per_pass: args.scoring_max_events_per_pass,
            pause_between_chunks: Duration::from_millis(args.scoring_pause_ms),
            lease: Duration::from_secs(args.scoring_lease_secs),
            instance_lease: Duration::from_secs(args.instance_lease_secs),
            fleet_flush_wait: Duration::from_secs(args.fleet_flush_wait_secs),
        },
    }
}

/// The deployment's stores, for a command-line command (`instance::Stores::open`).
pub(crate) async fn open_storage(
    storage: &StorageArgs,
) -> anyhow::Result<(Arc<dyn Catalog>, Lake)> {
    let stores = instance::Stores::open(&storage.settings()).await?;
    Ok((stores.catalog, stores.lake))
}

/// `telltale compact`: one compaction pass, safe beside a running server.
pub async fn compact(
    storage: &StorageArgs,
    survey: Option<&str>,
    target_rows: u64,
    json: bool,
) -> anyhow::Result<()> {
    let survey = survey
        .map(|survey| {
            SurveyId::parse(survey)
                .with_context(|| format!("{survey:?} is not a survey id (24 hex characters)"))
        })
        .transpose()?;
    let (catalog, lake) = open_storage(storage).await?;
    if let Some(survey) = &survey
        && catalog.survey_by_id(survey).await?.is_none()
    {
        bail!("no survey {survey} in this catalog");
    }
    let owner = lake::rewrite::command_line_owner();
    let config = lake::operations::compact::CompactionConfig { target_rows };
    let report =
        instance::compaction::compact(&catalog, &lake, &owner, survey.as_ref(), &config).await?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "compacted {} files into {} ({} rows, {} -> {} bytes){}",
            report.files_in,
            report.files_out,
            report.rows,
            report.bytes_in,
            report.bytes_out,
            if report.conflicts > 0 {
                format!("; {} groups skipped (changed meanwhile)", report.conflicts)
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

/// `telltale vacuum`: the lake's tables vacuumed once (see the subcommand's help).
pub async fn vacuum(storage: &StorageArgs, retention_secs: u64, json: bool) -> anyhow::Result<()> {
    let (_catalog, lake) = open_storage(storage).await?;
    let retention = Duration::from_secs(retention_secs);
    let mut deleted = serde_json::Map::new();
    for kind in TableKind::ALL {
        let count = lake
            .table(kind)
            .vacuum(retention)
            .await
            .with_context(|| format!("vacuuming the {} table", kind.as_str()))?;
        deleted.insert(kind.as_str().to_owned(), count.into());
    }
    if json {
        println!("{}", serde_json::json!({ "deleted": deleted }));
    } else {
        for (table, count) in &deleted {
            println!("{table}: {count} files deleted");
        }
    }
    Ok(())
}

/// `telltale score --survey ID [--force]`.
pub async fn score(
    storage: &StorageArgs,
    survey: &str,
    force: bool,
    json: bool,
    args: &ScoringArgs,
) -> anyhow::Result<()> {
    let survey = SurveyId::parse(survey)
        .with_context(|| format!("{survey:?} is not a survey id (24 hex characters)"))?;
    let settings = scorer_settings(args);
    let model = instance::scoring::load_model(&settings)?;
    let stores = instance::Stores::open(&storage.settings()).await?;
    let catalog = stores.catalog.clone();
    if catalog.survey_by_id(&survey).await?.is_none() {
        bail!("no survey {survey} in this catalog");
    }
    let owner = format!("cli-{}", &catalog::ids::random_hex24()[..12]);
    let scorer = instance::scoring::build_scorer(&stores, model, settings.scoring, None, owner)?;
    let (run, created) = catalog.start_scoring_run(&survey, force).await?;
    if !created {
        eprintln!(
            "run {} is already active for this survey; following it{}",
            run.id,
            if run.force == force {
                ""
            } else {
                " (its force setting differs)"
            }
        );
    }
    let bar = ProgressBar::new();
    let end = scorer
        .execute(&run.id, &|progress| bar.show(progress))
        .await?;
    if end == RunEnd::Abandoned {
        // Another worker (a server) holds the run: follow it until it ends.
        loop {
            let current = catalog
                .scoring_run(&survey, &run.id)
                .await?
                .context("the run disappeared")?;
            bar.show(&RunProgress {
                total: current.total,
                scored: current.scored,
                skipped: current.skipped,
                failed: current.failed,
                deferred: current.deferred,
                ..RunProgress::default()
            });
            if current.status != RunStatus::Running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    bar.finish();
    let done = catalog
        .scoring_run(&survey, &run.id)
        .await?
        .context("the run disappeared")?;
    if json {
        let view = crate::http::scoring::ScoringRunView::from(done.clone());
        println!("{}", serde_json::to_string(&view)?);
    } else {
        println!(
            "run {} {}: {} sessions, {} scored, {} skipped, {} failed, {} deferred (model {})",
            done.id,
            done.status.as_str(),
            done.total,
            done.scored,
            done.skipped,
            done.failed,
            done.deferred,
            scorer.model.version
        );
        if let Some(reason) = &done.deferred_reason {
            println!("  deferred: {reason}");
        }
        for failure in &done.failures {
            println!("  failed {}: {}", failure.session_id, failure.message);
        }
        if let Some(error) = &done.error {
            println!("  error: {error}");
        }
    }
    match done.status {
        RunStatus::Completed => Ok(()),
        status => bail!("the run ended {}", status.as_str()),
    }
}

/// A progress bar on stderr (indicatif), drawn only when stderr is a terminal: redirected to
/// a file or a pipe it writes nothing, and the summary printed at the end says how it went.
#[derive(Debug)]
struct ProgressBar(indicatif::ProgressBar);

impl ProgressBar {
    fn new() -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(0),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "[{bar:30}] {pos}/{len} sessions ({msg}) {elapsed}",
        ) {
            bar.set_style(style.progress_chars("#>-"));
        }
        ProgressBar(bar)
    }

    fn show(&self, progress: &RunProgress) {
        self.0.set_length(progress.total);
        self.0
            .set_position(progress.scored + progress.skipped + progress.failed);
        self.0.set_message(format!(
            "scored {}, skipped {}, failed {}",
            progress.scored, progress.skipped, progress.failed
        ));
    }

    fn finish(&self) {
        self.0.finish();
    }
}

/// Registers the lake's tables (`events`, `features`, `scores`) over the files of their Delta
/// snapshots: the newest, or those as of `as_of`.
pub async fn register_lake_tables(
    query: &LakeQuery,
    lake: &Lake,
    as_of: Option<&str>,
) -> anyhow::Result<()> {
    let at = match as_of {
        None => None,
        Some(text) => Some(match text.trim().parse::<u64>() {
            Ok(version) => {
                let events = lake.table(TableKind::Events);
                let newest = events.refresh().await?;
                anyhow::ensure!(
                    version <= newest,
                    "--as-of {version}: the events table's newest version is {newest}"
                );
                let time = events.version_time(version).await.with_context(|| {
                    format!("the events table's version {version} cannot be read")
                })?;
                (Some(version), time)
            }
            Err(_) => (None, as_of_time(text.trim())?),
        }),
    };
    let tables = [
        (TableKind::Events, lake::tables::EVENTS_SCHEMA.clone()),
        (TableKind::Features, scorer::tables::FEATURES_SCHEMA.clone()),
        (TableKind::Scores, scorer::tables::SCORES_SCHEMA.clone()),
    ];
    for (kind, schema) in tables {
        let table = lake.table(kind);
        let files = match at {
            None => table.live_files(None).await?,
            Some((Some(version), _)) if kind == TableKind::Events => {
                table.files_as_of(AsOf::Version(version)).await?.1
            }
            Some((_, time)) => match table.files_as_of(AsOf::Time(time)).await {
                Ok((_, files)) => files,
                // Created after that time: it had no rows then.
                Err(error) if table.created_after(time).await? => {
                    tracing::debug!(%error, table = kind.as_str(), "no snapshot that old");
                    Vec::new()
                }
                Err(error) => return Err(error.into()),
            },
        };
        let paths: Vec<String> = files.into_iter().map(|file| file.path).collect();
        if at.is_some() {
            // An earlier snapshot may list files an erasure removed on purpose (or the vacuum,
            // past the retention): reading it must fail, not answer without their rows.
            let store = lake.store();
            for path in &paths {
                if object_store::ObjectStoreExt::head(
                    store.as_ref(),
                    &object_store::path::Path::from(path.as_str()),
                )
                .await
                .is_err()
                {
                    anyhow::bail!(
                        "--as-of {}: the {} table's snapshot then lists {path}, which is gone \
                         (an erasure removes a deleted session's rows from every file, and the \
                         vacuum removes replaced files past the lake retention); read a later \
                         version",
                        as_of.unwrap_or_default(),
                        kind.as_str()
                    );
                }
            }
        }
        query.register(kind.as_str(), schema, &paths)?;
    }
    Ok(())
}

/// An `--as-of` time: RFC 3339 (`2026-11-25T10:00:00Z`), a time without a zone (UTC,
/// `2026-11-25 10:00:00` or with a `T`), or a date alone (its first instant, UTC).
fn as_of_time(text: &str) -> anyhow::Result<chrono::DateTime<chrono::Utc>> {
    use chrono::{NaiveDate, NaiveDateTime, TimeZone, Utc};
    if let Ok(time) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(time.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(time) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(Utc.from_utc_datetime(&time));
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(Utc.from_utc_datetime(&date.and_time(chrono::NaiveTime::MIN)));
    }
    anyhow::bail!(
        "--as-of {text:?} is neither a version number, a date (2026-11-25) nor a time \
         (2026-11-25T10:00:00Z; UTC when no zone is given)"
    )
}

/// `telltale sql "..."`: read-only SQL over the lake.
pub async fn sql(
    storage: &StorageArgs,
    text: &str,
    format: SqlFormat,
    as_of: Option<&str>,
) -> anyhow::Result<()> {
    let (_catalog, lake) = open_storage(storage).await?;
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let query = LakeQuery::new(lake.store().clone(), threads)?;
    register_lake_tables(&query, &lake, as_of).await?;
    // Queries only: no DDL (external tables over arbitrary paths), no DML, no `SET`.
    let options = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let frame = query.context().sql_with_options(text, options).await?;
    let schema = std::sync::Arc::new(frame.schema().as_arrow().clone());
    let mut batches = frame.collect().await?;
    if batches.is_empty() {
        // No rows still has columns: the table prints its header, CSV its header line.
        batches.push(arrow::array::RecordBatch::new_empty(schema));
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match format {
        SqlFormat::Table => {
            writeln!(
                out,
                "{}",
                arrow::util::pretty::pretty_format_batches(&batches)?
            )?;
        }
        SqlFormat::Csv => {
            let mut writer = arrow::csv::Writer::new(&mut out);
            for batch in &batches {
                writer.write(batch)?;
            }
        }
        SqlFormat::Json => {
            let mut writer = arrow::json::ArrayWriter::new(&mut out);
            for batch in &batches {
                writer.write(batch)?;
            }
            writer.finish()?;
            writeln!(out)?;
        }
    }
    Ok(())
}

/// One session's feature row, as `telltale score-features` reads it: the `features` table's
/// columns by name, a missing or null value unmeasured.
#[derive(Debug, serde::Deserialize)]
struct FeatureRow {
    reference: String,
    features: serde_json::Map<String, serde_json::Value>,
}

/// `telltale score-features`: scores sessions from their feature rows (JSON lines, read from
/// `file` or standard input) as one survey's scoring run would score them: the cohort of all of
/// them first (`scorer::cohort`), then the model, each with the product's own code. Prints one
/// JSON line a session: reference, score, band, reasons and the cohort's counts and modality.
pub fn score_features(file: Option<&std::path::Path>, scoring: &ScoringArgs) -> anyhow::Result<()> {
    let model = instance::scoring::load_model(&scorer_settings(scoring))?;
    let reader: Box<dyn std::io::BufRead> = match file {
        Some(path) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        )),
        None => Box::new(std::io::stdin().lock()),
    };
    let mut references = Vec::new();
    let mut sessions = Vec::new();
    for (number, line) in std::io::BufRead::lines(reader).enumerate() {
        let line = line.context("reading feature rows")?;
        if line.trim().is_empty() {
            continue;
        }
        let row: FeatureRow = serde_json::from_str(&line)
            .with_context(|| format!("feature row on line {}", number + 1))?;
        let mut features = scorer::Features::unmeasured();
        for (name, value) in &row.features {
            let value = match value {
                serde_json::Value::Null => f64::NAN,
                serde_json::Value::Number(number) => number.as_f64().unwrap_or(f64::NAN),
                other => bail!(
                    "line {}: feature {name} is {other}, not a number",
                    number + 1
                ),
            };
            if !features.set(name, value) {
                bail!("line {}: no feature called {name}", number + 1);
            }
        }
        references.push(row.reference);
        sessions.push(features);
    }
    let placed: Vec<&scorer::Features> = sessions.iter().collect();
    let standings = scorer::cohort::standings(&model, &placed);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for ((reference, mut features), standing) in references.into_iter().zip(sessions).zip(standings)
    {
        // What a run records before it scores (scorer/src/run/pipeline.rs, `featurize`).
        features.cohort_alike = standing.map_or(f64::NAN, |s| f64::from(s.alike));
        let score = scorer::cohort::adjust(&model, model.score(&features), standing);
        let reasons: Vec<String> = score.reasons.iter().map(|r| r.describe()).collect();
        serde_json::to_writer(
            &mut out,
            &serde_json::json!({
                "reference": reference,
                "humanScorePercent": score.human_score_percent,
                "scoreBand": score.band,
                "reasons": reasons,
                "cohortAlike": standing.map(|s| s.alike),
                "clustered": standing.is_some_and(|s| s.clustered()),
                // Where the session stands out most, and the people test's count there, so an
                // evaluation can say in which modality and by which test a session was found.
                "cohortModality": standing
                    .and_then(|s| scorer::cohort::MODALITIES.get(s.modality))
                    .map(|m| m.name),
                "cohortAlikePeople": standing.map(|s| s.alike_people),
                "cohortExpectedPeople": standing
                    .map(|s| s.expected_people)
                    .filter(|e| e.is_finite()),
            }),
        )?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
