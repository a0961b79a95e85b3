//! What a flush writes: the logged batches of a flush, ordered by partition and identifier,
//! decoded into column builders and encoded as one `events` file per partition.

use super::*;

pub(super) const MILLIS_PER_DAY: i64 = 86_400_000;

/// UTC calendar date of a day number (days since 1970-01-01), `YYYY-MM-DD`.
pub(super) fn utc_date(day: i64) -> String {
    chrono::DateTime::from_timestamp_millis(day.saturating_mul(MILLIS_PER_DAY))
        .unwrap_or_default()
        .format("%Y-%m-%d")
        .to_string()
}

/// The browser sessions a flush's files hold: (survey, identifier, the reference it was written
/// with). A flush's guard checks them against tombstones loaded after the build.
pub(super) type Written = HashSet<(SurveyId, String, Option<String>)>;

/// Records are ordered by partition, identifier and log position, then decoded one batch at a
/// time straight into column builders: memory holds the compact columnar form, never every
/// decoded event of the flush at once. Returns the files and the sessions they hold.
pub(super) fn build_event_files(
    records: &[Arc<WalRecord>],
    references: &HashMap<(SurveyId, String), String>,
    tombstones: Option<&Tombstones>,
    instance: &str,
    first_lsn: u64,
    through_lsn: u64,
) -> Result<(Vec<lake::Upload>, Written), IngestError> {
    // Partitioned by UTC day number; the date text is formatted once per partition.
    let mut ordered: Vec<(i64, &Arc<WalRecord>)> = records
        .iter()
        .map(|record| (record.received_at.div_euclid(MILLIS_PER_DAY), record))
        .collect();
    ordered.sort_unstable_by(|(day_a, a), (day_b, b)| {
        a.survey_id
            .cmp(&b.survey_id)
            .then_with(|| day_a.cmp(day_b))
            .then_with(|| a.identifier.cmp(&b.identifier))
            .then_with(|| a.lsn.cmp(&b.lsn))
    });

    // References named by `session` events anywhere in this range, so a batch logged before
    // its session's `session` event was applied to the statistics still gets the reference
    // lookup will report.
    let mut named: HashMap<(&SurveyId, &str), String> = HashMap::new();
    for record in records {
        if !contains(&record.body, b"session") {
            continue;
        }
        let Ok(events) = event_row::stats_events(&record.body) else {
            continue;
        };
        for event in events {
            if let Some(reference) = event
                .interview_id
                .as_deref()
                .and_then(batch::normalize_reference)
            {
                named.insert((&record.survey_id, record.identifier.as_str()), reference);
            }
        }
    }

    let mut files = Vec::new();
    let mut written = Written::new();
    let mut builder = EventsBatchBuilder::new();
    let mut start = 0;
    while start < ordered.len() {
        let (day, first) = &ordered[start];
        let survey_id = &first.survey_id;
        let date = utc_date(*day);
        let end = start
            + ordered[start..]
                .iter()
                .take_while(|(other_day, other)| other_day == day && &other.survey_id == survey_id)
                .count();
        let mut received: Option<(i64, i64)> = None;
        // Rows go to the encoder a row group at a time, so a flush holds one row group's
        // columns however large the flush.
        let mut encoder: Option<tables::FileEncoder> = None;
        let mut row_count = 0u64;
        for (_, record) in &ordered[start..end] {
            // Bodies in the log were validated before they were logged.
            let Ok(rows) = event_row::decode_batch(&record.body) else {
                continue;
            };
            if rows.is_empty() {
                continue;
            }
            // A session event in the batch names the reference; else what the stream or the
            // catalog linked to the identifier; else the identifier itself when it is a UUID.
            let reference = rows
                .iter()
                .find_map(|row| {
                    row.interview_id
                        .as_deref()
                        .and_then(batch::normalize_reference)
                })
                .or_else(|| {
                    named
                        .get(&(&record.survey_id, record.identifier.as_str()))
                        .cloned()
                })
                .or_else(|| {
                    references
                        .get(&(record.survey_id.clone(), record.identifier.clone()))
                        .cloned()
                })
                .or_else(|| batch::normalize_reference(&record.identifier));
            // Acknowledged before its session was deleted, and still in the log: dropped,
            // never written.
            if tombstones.is_some_and(|tombstones| {
                tombstones.erases(survey_id, &record.identifier, reference.as_deref())
            }) {
                continue;
            }
            builder.append_batch(
                survey_id.as_str(),
                &record.identifier,
                reference.as_deref(),
                record.received_at,
                &rows,
            );
            written.insert((survey_id.clone(), record.identifier.clone(), reference));
            received = Some(match received {
                None => (record.received_at, record.received_at),
                Some((min, max)) => (min.min(record.received_at), max.max(record.received_at)),
            });
            if builder.len() >= tables::EVENTS_ROW_GROUP_ROWS {
                row_count += encode_rows(&mut builder, &mut encoder)?;
            }
        }
        if !builder.is_empty() {
            row_count += encode_rows(&mut builder, &mut encoder)?;
        }
        if let Some(encoder) = encoder {
            let bytes = encoder.finish().map_err(encode_error)?;
            let file = NewFile {
                path: tables::events_file_path(
                    survey_id.as_str(),
                    &date,
                    instance,
                    first_lsn,
                    through_lsn,
                ),
                survey_id: survey_id.as_str().to_owned(),
                date: Some(date),
                size: bytes.len() as u64,
                rows: row_count,
                received,
            };
            files.push((bytes, file));
        }
        start = end;
    }
    Ok((files, written))
}

/// Hands what `builder` holds to `encoder`, started on the first rows of a file; returns the
/// rows handed over.
fn encode_rows(
    builder: &mut EventsBatchBuilder,
    encoder: &mut Option<tables::FileEncoder>,
) -> Result<u64, IngestError> {
    let batch = builder.finish().map_err(encode_error)?;
    let encoder = match encoder {
        Some(encoder) => encoder,
        None => encoder.insert(
            tables::FileEncoder::new(TableKind::Events, batch.schema()).map_err(encode_error)?,
        ),
    };
    encoder.write(&batch).map_err(encode_error)?;
    Ok(batch.num_rows() as u64)
}

fn encode_error(error: impl std::fmt::Display) -> IngestError {
    IngestError::Encode(error.to_string())
}
