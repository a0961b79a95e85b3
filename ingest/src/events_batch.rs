//! Decoded events into the columns of the lake's `events` table ([`lake::tables::EVENTS_SCHEMA`]).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, ArrowPrimitiveType, BooleanBuilder, Float64Builder, Int32Builder, PrimitiveBuilder,
    RecordBatch, StringBuilder, StringDictionaryBuilder, TimestampMillisecondBuilder,
};
use arrow::datatypes::Int32Type;
use lake::tables::EVENTS_SCHEMA;

use crate::event_row::EventRow;

type Dictionary = StringDictionaryBuilder<Int32Type>;

/// Accumulates the rows of one `events` file column by column, so that memory holds the compact
/// Arrow form rather than decoded events. Append rows already in session order.
pub struct EventsBatchBuilder {
    survey_id: Dictionary,
    session_id: Dictionary,
    reference: Dictionary,
    received_at: TimestampMillisecondBuilder,
    event_time: TimestampMillisecondBuilder,
    event_type: Dictionary,
    x: Int32Builder,
    y: Int32Builder,
    pointer_type: Dictionary,
    trusted: BooleanBuilder,
    button: Int32Builder,
    target: Dictionary,
    key_class: Dictionary,
    repeat: BooleanBuilder,
    hold_ms: Float64Builder,
    flight_ms: Float64Builder,
    input_type: Dictionary,
    length_delta: Int32Builder,
    field: Int32Builder,
    length: Int32Builder,
    dx: Float64Builder,
    dy: Float64Builder,
    delta_mode: Int32Builder,
    force: Float64Builder,
    radius: Float64Builder,
    state: Dictionary,
    width: Int32Builder,
    height: Int32Builder,
    payload: StringBuilder,
    rows: usize,
}

impl Default for EventsBatchBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl EventsBatchBuilder {
    pub fn new() -> Self {
        Self {
            survey_id: Dictionary::new(),
            session_id: Dictionary::new(),
            reference: Dictionary::new(),
            received_at: TimestampMillisecondBuilder::new().with_timezone("UTC"),
            event_time: TimestampMillisecondBuilder::new().with_timezone("UTC"),
            event_type: Dictionary::new(),
            x: Int32Builder::new(),
            y: Int32Builder::new(),
            pointer_type: Dictionary::new(),
            trusted: BooleanBuilder::new(),
            button: Int32Builder::new(),
            target: Dictionary::new(),
            key_class: Dictionary::new(),
            repeat: BooleanBuilder::new(),
            hold_ms: Float64Builder::new(),
            flight_ms: Float64Builder::new(),
            input_type: Dictionary::new(),
            length_delta: Int32Builder::new(),
            field: Int32Builder::new(),
            length: Int32Builder::new(),
            dx: Float64Builder::new(),
            dy: Float64Builder::new(),
            delta_mode: Int32Builder::new(),
            force: Float64Builder::new(),
            radius: Float64Builder::new(),
            state: Dictionary::new(),
            width: Int32Builder::new(),
            height: Int32Builder::new(),
            payload: StringBuilder::new(),
            rows: 0,
        }
    }

    /// Rows appended since the last [`finish`](Self::finish).
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends one event.
    pub fn append(
        &mut self,
        survey_id: &str,
        session_id: &str,
        reference: Option<&str>,
        received_at: i64,
        row: &EventRow<'_>,
    ) {
        self.append_batch(
            survey_id,
            session_id,
            reference,
            received_at,
            std::slice::from_ref(row),
        );
    }

    /// Appends the events of one logged batch (one session, one receipt time), column by
    /// column: the batch's constants are looked up once, a column the whole batch leaves null
    /// is filled in one call, and a dictionary column is looked up once per run of equal values.
    pub fn append_batch(
        &mut self,
        survey_id: &str,
        session_id: &str,
        reference: Option<&str>,
        received_at: i64,
        rows: &[EventRow<'_>],
    ) {
        let count = rows.len();
        if count == 0 {
            return;
        }
        self.survey_id.append_values(survey_id, count);
        self.session_id.append_values(session_id, count);
        self.reference.append_options(reference, count);
        self.received_at.append_value_n(received_at, count);
        nullable(&mut self.event_time, rows, |row| row.event_time);
        dictionary_runs(&mut self.event_type, rows, |row| row.event_type.as_deref());
        nullable(&mut self.x, rows, |row| row.data.x);
        nullable(&mut self.y, rows, |row| row.data.y);
        dictionary_runs(&mut self.pointer_type, rows, |row| {
            row.data.pointer_type.as_deref()
        });
        nullable(&mut self.trusted, rows, |row| row.data.trusted);
        nullable(&mut self.button, rows, |row| row.data.button);
        dictionary_runs(&mut self.target, rows, |row| row.data.target.as_deref());
        dictionary_runs(&mut self.key_class, rows, |row| {
            row.data.key_class.as_deref()
        });
        nullable(&mut self.repeat, rows, |row| row.data.repeat);
        nullable(&mut self.hold_ms, rows, |row| row.data.hold_ms);
        nullable(&mut self.flight_ms, rows, |row| row.data.flight_ms);
        dictionary_runs(&mut self.input_type, rows, |row| {
            row.data.input_type.as_deref()
        });
        nullable(&mut self.length_delta, rows, |row| row.data.length_delta);
        nullable(&mut self.field, rows, |row| row.data.field);
        nullable(&mut self.length, rows, |row| row.data.length);
        nullable(&mut self.dx, rows, |row| row.data.dx);
        nullable(&mut self.dy, rows, |row| row.data.dy);
        nullable(&mut self.delta_mode, rows, |row| row.data.delta_mode);
        nullable(&mut self.force, rows, |row| row.data.force);
        nullable(&mut self.radius, rows, |row| row.data.radius);
        dictionary_runs(&mut self.state, rows, |row| row.data.state.as_deref());
        nullable(&mut self.width, rows, |row| row.data.width);
        nullable(&mut self.height, rows, |row| row.data.height);
        if rows.iter().all(|row| row.payload.is_none()) {
            self.payload.append_nulls(count);
        } else {
            for row in rows {
                self.payload.append_option(row.payload);
            }
        }
        self.rows += count;
    }

    /// The rows appended so far as one batch; the builder starts empty again.
    pub fn finish(&mut self) -> Result<RecordBatch, arrow::error::ArrowError> {
        self.rows = 0;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.survey_id.finish()),
            Arc::new(self.session_id.finish()),
            Arc::new(self.reference.finish()),
            Arc::new(self.received_at.finish()),
            Arc::new(self.event_time.finish()),
            Arc::new(self.event_type.finish()),
            Arc::new(self.x.finish()),
            Arc::new(self.y.finish()),
            Arc::new(self.pointer_type.finish()),
            Arc::new(self.trusted.finish()),
            Arc::new(self.button.finish()),
            Arc::new(self.target.finish()),
            Arc::new(self.key_class.finish()),
            Arc::new(self.repeat.finish()),
            Arc::new(self.hold_ms.finish()),
            Arc::new(self.flight_ms.finish()),
            Arc::new(self.input_type.finish()),
            Arc::new(self.length_delta.finish()),
            Arc::new(self.field.finish()),
            Arc::new(self.length.finish()),
            Arc::new(self.dx.finish()),
            Arc::new(self.dy.finish()),
            Arc::new(self.delta_mode.finish()),
            Arc::new(self.force.finish()),
            Arc::new(self.radius.finish()),
            Arc::new(self.state.finish()),
            Arc::new(self.width.finish()),
            Arc::new(self.height.finish()),
            Arc::new(self.payload.finish()),
        ];
        RecordBatch::try_new(Arc::clone(&EVENTS_SCHEMA), columns)
    }
}

/// The two builder kinds of the typed columns, as [`nullable`] uses them.
trait NullableBuilder<T> {
    fn append_option(&mut self, value: Option<T>);
    fn append_nulls(&mut self, count: usize);
}

impl<T: ArrowPrimitiveType> NullableBuilder<T::Native> for PrimitiveBuilder<T> {
    fn append_option(&mut self, value: Option<T::Native>) {
        PrimitiveBuilder::append_option(self, value);
    }
    fn append_nulls(&mut self, count: usize) {
        PrimitiveBuilder::append_nulls(self, count);
    }
}

impl NullableBuilder<bool> for BooleanBuilder {
    fn append_option(&mut self, value: Option<bool>) {
        BooleanBuilder::append_option(self, value);
    }
    fn append_nulls(&mut self, count: usize) {
        BooleanBuilder::append_nulls(self, count);
    }
}

/// Appends one typed column of a batch; a column the whole batch leaves null in one call.
fn nullable<T>(
    builder: &mut impl NullableBuilder<T>,
    rows: &[EventRow<'_>],
    value: impl Fn(&EventRow<'_>) -> Option<T>,
) {
    if rows.iter().all(|row| value(row).is_none()) {
        builder.append_nulls(rows.len());
    } else {
        for row in rows {
            builder.append_option(value(row));
        }
    }
}

/// Appends a dictionary column one run of equal values at a time (a batch's events mostly
/// share their type and pointer type), so each run costs one dictionary lookup.
fn dictionary_runs<'r>(
    builder: &mut Dictionary,
    rows: &'r [EventRow<'_>],
    value: impl Fn(&'r EventRow<'_>) -> Option<&'r str>,
) {
    let mut values = rows.iter().map(value);
    let Some(mut current) = values.next() else {
        return;
    };
    let mut run = 1;
    for next in values {
        if next == current {
            run += 1;
        } else {
            builder.append_options(current, run);
            (current, run) = (next, 1);
        }
    }
    builder.append_options(current, run);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_row::decode_event;
    use bytes::Bytes;
    use lake::TableKind;
    use lake::tables::encode;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use serde_json::value::RawValue;

    #[test]
    fn round_trips_through_parquet() {
        let texts = [
            r#"{"type":"pointermove","timestamp":1700000000000,"data":{"x":1,"y":2,"pointerType":"mouse","trusted":true}}"#,
            r#"{"weird":[1,2,3]}"#,
        ];
        let raws: Vec<Box<RawValue>> = texts
            .iter()
            .map(|text| RawValue::from_string((*text).to_owned()).expect("json"))
            .collect();
        let mut builder = EventsBatchBuilder::new();
        for raw in &raws {
            builder.append(
                "00112233445566778899aabb",
                "s1",
                None,
                1_700_000_000_500,
                &decode_event(raw),
            );
        }
        assert_eq!(builder.len(), 2);
        let batch = builder.finish().expect("batch");
        assert!(builder.is_empty());
        let bytes = encode(TableKind::Events, &batch).expect("encode");
        let reader = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes))
            .expect("reader")
            .build()
            .expect("build");
        let read: Vec<RecordBatch> = reader.collect::<Result<_, _>>().expect("read");
        assert_eq!(read.iter().map(RecordBatch::num_rows).sum::<usize>(), 2);
        assert_eq!(
            read[0].schema().fields().len(),
            EVENTS_SCHEMA.fields().len()
        );
    }
}
