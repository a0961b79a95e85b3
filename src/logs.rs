//! `telltale log export` and `telltale log import`: a data dir's write-ahead log read out as JSON
//! lines, and batches another deployment's collector received logged here through the
//! collector's own path, each with the time it arrived there.
//!
//! A line is `{"lsn": N, "receivedAt": <Unix ms>, "surveyId": "...", "identifier": "...",
//! "body": "<the request body, exactly as received>"}`; import reads `receivedAt`, `identifier`
//! and `body` and assigns every batch to the survey it is given. The lab's corpus (lab/corpus/)
//! keeps automation's sessions this way: recorded once, loaded into a fresh deployment and scored
//! again with every arrival time as it was.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use catalog::SurveyId;
use futures::StreamExt;
use ingest::{Accepted, IngestError, Ingestor};
use serde::Deserialize;

use crate::cli::StorageArgs;

/// Batches logged at once, each session's in its order: enough for the log's group commit to
/// share one sync among many.
const IMPORT_CONCURRENCY: usize = 64;

/// Writes every record of the data dir's log to `out` (standard output when `None`). Fails while
/// a server or a drain holds the log.
pub fn export(storage: &StorageArgs, out: Option<&Path>) -> anyhow::Result<()> {
    let dir = storage.settings().data_dir.wal();
    let records = ingest::wal::read_records(&dir)
        .with_context(|| format!("reading the write-ahead log in {}", dir.display()))?;
    let sink: Box<dyn Write> = match out {
        Some(path) => Box::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut writer = BufWriter::new(sink);
    for record in &records {
        // The collector logs only bodies that parsed as JSON, so every body is UTF-8.
        let body = std::str::from_utf8(&record.body)
            .with_context(|| format!("the body of record {} is not UTF-8", record.lsn))?;
        serde_json::to_writer(
            &mut writer,
            &serde_json::json!({
                "lsn": record.lsn,
                "receivedAt": record.received_at,
                "surveyId": record.survey_id.as_str(),
                "identifier": record.identifier,
                "body": body,
            }),
        )?;
        writer.write_all(b"\n")?;
    }
    writer.flush()?;
    Ok(())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecordedBatch {
    received_at: i64,
    identifier: String,
    body: String,
}

/// Logs every batch of `file` (JSON lines as `export` writes them; gzip-compressed when its
/// name ends in `.gz`) for `survey` through the collector's path, then flushes the log into the
/// lake and the session statistics, as `telltale drain` does. Fails while a server holds the log.
pub async fn import(
    storage: &StorageArgs,
    survey: &str,
    file: &Path,
    json: bool,
) -> anyhow::Result<()> {
    let survey_id = SurveyId::parse(survey)
        .with_context(|| format!("{survey:?} is not a survey id (24 hex characters)"))?;
    let batches = read_batches(file)?;
    let settings = storage.settings();
    let stores = instance::Stores::open(&settings).await?;
    if stores.catalog.survey_by_id(&survey_id).await?.is_none() {
        bail!("no survey {survey} in the catalog: provision it first");
    }
    let ingestor = instance::Instance::start_on(settings, stores, None)
        .await
        .context("opening the write-ahead log (is a server still running on this data dir?)")?
        .ingestor;
    // Each session's batches in their recorded order; sessions side by side.
    let mut sessions: Vec<Vec<RecordedBatch>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for batch in batches {
        let slot = *index.entry(batch.identifier.clone()).or_insert_with(|| {
            sessions.push(Vec::new());
            sessions.len() - 1
        });
        sessions[slot].push(batch);
    }
    let session_count = sessions.len();
    let outcomes: Vec<anyhow::Result<(u64, u64, u64)>> = futures::stream::iter(sessions)
        .map(|batches| {
            let ingestor = ingestor.clone();
            let survey_id = survey_id.clone();
            async move {
                let (mut logged, mut events, mut discarded) = (0, 0, 0);
                for batch in batches {
                    match log_one(&ingestor, &survey_id, batch).await? {
                        Accepted::Stored { count } => {
                            logged += 1;
                            events += count as u64;
                        }
                        Accepted::Deleted { .. } => discarded += 1,
                    }
                }
                Ok::<_, anyhow::Error>((logged, events, discarded))
            }
        })
        .buffer_unordered(IMPORT_CONCURRENCY)
        .collect()
        .await;
    let flushed = ingestor.shutdown().await.context("flushing the log");
    let (mut logged, mut events, mut discarded) = (0, 0, 0);
    for outcome in outcomes {
        let (l, e, d) = outcome?;
        logged += l;
        events += e;
        discarded += d;
    }
    flushed?;
    let position = ingestor.log_position();
    if !position.is_drained() {
        bail!("records remain only in the write-ahead log; run `telltale drain`");
    }
    if json {
        println!(
            "{}",
            serde_json::json!({
                "surveyId": survey_id.as_str(),
                "sessions": session_count,
                "batches": logged,
                "events": events,
                "discarded": discarded,
            })
        );
    } else {
        println!(
            "{logged} batches ({events} events) of {session_count} browser sessions logged for \
             survey {survey_id} and flushed to the lake; {discarded} discarded (deleted sessions)"
        );
    }
    Ok(())
}

/// Logs one batch, waiting while the lake is too far behind (the collector would answer 503).
async fn log_one(
    ingestor: &Ingestor,
    survey_id: &SurveyId,
    batch: RecordedBatch,
) -> anyhow::Result<Accepted> {
    let body = Bytes::from(batch.body);
    loop {
        match ingestor
            .accept_recorded(
                survey_id.clone(),
                &batch.identifier,
                body.clone(),
                batch.received_at,
            )
            .await
        {
            Err(IngestError::Overloaded) => tokio::time::sleep(Duration::from_millis(50)).await,
            outcome => {
                return outcome.with_context(|| {
                    format!(
                        "a batch of browser session {:?} (received at {})",
                        batch.identifier, batch.received_at
                    )
                });
            }
        }
    }
}

fn read_batches(file: &Path) -> anyhow::Result<Vec<RecordedBatch>> {
    let opened =
        std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
    let reader: Box<dyn Read> = if file.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(opened))
    } else {
        Box::new(opened)
    };
    let mut batches = Vec::new();
    for (number, line) in BufReader::new(reader).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", file.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let batch: RecordedBatch = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}", file.display(), number + 1))?;
        batches.push(batch);
    }
    Ok(batches)
}
