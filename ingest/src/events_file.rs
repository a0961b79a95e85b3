//! The `events` table's Parquet files: schema, Arrow batch building and writer settings.
//!
//! Rows are sorted by session inside a file. Coordinates and times use delta encoding without
//! dictionaries (pointer paths move a few pixels and milliseconds per event), low-cardinality
//! strings are dictionary-encoded, and everything is zstd-compressed with page statistics.

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int32Builder, RecordBatch, StringBuilder,
    StringDictionaryBuilder, TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::event_row::EventRow;

/// One event with the context it was received in, ready to be written.
#[derive(Debug)]
pub struct LakeEvent<'a> {
    pub session_id: &'a str,
    pub reference: Option<Arc<str>>,
    pub received_at: i64,
    pub row: EventRow<'a>,
}

fn dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

fn timestamp() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// The schema of `events` files, in column order. A public contract: see DESIGN.md.
pub static EVENTS_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("survey_id", dictionary(), false),
        Field::new("session_id", dictionary(), false),
        Field::new("reference", dictionary(), true),
        Field::new("received_at", timestamp(), false),
        Field::new("event_time", timestamp(), true),
        Field::new("type", dictionary(), true),
        Field::new("x", DataType::Int32, true),
        Field::new("y", DataType::Int32, true),
        Field::new("pointer_type", dictionary(), true),
        Field::new("trusted", DataType::Boolean, true),
        Field::new("button", DataType::Int32, true),
        Field::new("target", dictionary(), true),
        Field::new("key_class", dictionary(), true),
        Field::new("repeat", DataType::Boolean, true),
        Field::new("hold_ms", DataType::Float64, true),
        Field::new("flight_ms", DataType::Float64, true),
        Field::new("input_type", dictionary(), true),
        Field::new("length_delta", DataType::Int32, true),
        Field::new("field", DataType::Int32, true),
        Field::new("length", DataType::Int32, true),
        Field::new("dx", DataType::Float64, true),
        Field::new("dy", DataType::Float64, true),
        Field::new("delta_mode", DataType::Int32, true),
        Field::new("force", DataType::Float64, true),
        Field::new("radius", DataType::Float64, true),
        Field::new("state", dictionary(), true),
        Field::new("width", DataType::Int32, true),
        Field::new("height", DataType::Int32, true),
        Field::new("payload", DataType::Utf8, true),
    ]))
});

/// Builds the Arrow batch of one file. `events` must already be sorted by session.
pub fn build_batch(
    survey_id: &str,
    events: &[LakeEvent<'_>],
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let n = events.len();
    let mut survey = StringDictionaryBuilder::<Int32Type>::new();
    let mut session = StringDictionaryBuilder::<Int32Type>::new();
    let mut reference = StringDictionaryBuilder::<Int32Type>::new();
    let mut received_at = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut event_time = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut event_type = StringDictionaryBuilder::<Int32Type>::new();
    let mut x = Int32Builder::with_capacity(n);
    let mut y = Int32Builder::with_capacity(n);
    let mut pointer_type = StringDictionaryBuilder::<Int32Type>::new();
    let mut trusted = BooleanBuilder::with_capacity(n);
    let mut button = Int32Builder::with_capacity(n);
    let mut target = StringDictionaryBuilder::<Int32Type>::new();
    let mut key_class = StringDictionaryBuilder::<Int32Type>::new();
    let mut repeat = BooleanBuilder::with_capacity(n);
    let mut hold_ms = Float64Builder::with_capacity(n);
    let mut flight_ms = Float64Builder::with_capacity(n);
    let mut input_type = StringDictionaryBuilder::<Int32Type>::new();
    let mut length_delta = Int32Builder::with_capacity(n);
    let mut field = Int32Builder::with_capacity(n);
    let mut length = Int32Builder::with_capacity(n);
    let mut dx = Float64Builder::with_capacity(n);
    let mut dy = Float64Builder::with_capacity(n);
    let mut delta_mode = Int32Builder::with_capacity(n);
    let mut force = Float64Builder::with_capacity(n);
    let mut radius = Float64Builder::with_capacity(n);
    let mut state = StringDictionaryBuilder::<Int32Type>::new();
    let mut width = Int32Builder::with_capacity(n);
    let mut height = Int32Builder::with_capacity(n);
    let mut payload = StringBuilder::new();

    for event in events {
        let data = &event.row.data;
        survey.append_value(survey_id);
        session.append_value(event.session_id);
        reference.append_option(event.reference.as_deref());
        received_at.append_value(event.received_at);
        event_time.append_option(event.row.event_time);
        event_type.append_option(event.row.event_type.as_deref());
        x.append_option(data.x);
        y.append_option(data.y);
        pointer_type.append_option(data.pointer_type.as_deref());
        trusted.append_option(data.trusted);
        button.append_option(data.button);
        target.append_option(data.target.as_deref());
        key_class.append_option(data.key_class.as_deref());
        repeat.append_option(data.repeat);
        hold_ms.append_option(data.hold_ms);
        flight_ms.append_option(data.flight_ms);
        input_type.append_option(data.input_type.as_deref());
        length_delta.append_option(data.length_delta);
        field.append_option(data.field);
        length.append_option(data.length);
        dx.append_option(data.dx);
        dy.append_option(data.dy);
        delta_mode.append_option(data.delta_mode);
        force.append_option(data.force);
        radius.append_option(data.radius);
        state.append_option(data.state.as_deref());
        width.append_option(data.width);
        height.append_option(data.height);
        payload.append_option(event.row.payload);
    }

    let columns: Vec<ArrayRef> = vec![
        Arc::new(survey.finish()),
        Arc::new(session.finish()),
        Arc::new(reference.finish()),
        Arc::new(received_at.finish()),
        Arc::new(event_time.finish()),
        Arc::new(event_type.finish()),
        Arc::new(x.finish()),
        Arc::new(y.finish()),
        Arc::new(pointer_type.finish()),
        Arc::new(trusted.finish()),
        Arc::new(button.finish()),
        Arc::new(target.finish()),
        Arc::new(key_class.finish()),
        Arc::new(repeat.finish()),
        Arc::new(hold_ms.finish()),
        Arc::new(flight_ms.finish()),
        Arc::new(input_type.finish()),
        Arc::new(length_delta.finish()),
        Arc::new(field.finish()),
        Arc::new(length.finish()),
        Arc::new(dx.finish()),
        Arc::new(dy.finish()),
        Arc::new(delta_mode.finish()),
        Arc::new(force.finish()),
        Arc::new(radius.finish()),
        Arc::new(state.finish()),
        Arc::new(width.finish()),
        Arc::new(height.finish()),
        Arc::new(payload.finish()),
    ];
    RecordBatch::try_new(Arc::clone(&EVENTS_SCHEMA), columns)
}

/// Writer settings of `events` files.
pub fn writer_properties() -> WriterProperties {
    let mut builder = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(6).unwrap_or_default()))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_sorting_columns(Some(vec![SortingColumn {
            column_idx: 1,
            descending: false,
            nulls_first: false,
        }]))
        .set_max_row_group_row_count(Some(1024 * 1024));
    for column in ["received_at", "event_time", "x", "y"] {
        let path = ColumnPath::from(column);
        builder = builder
            .set_column_dictionary_enabled(path.clone(), false)
            .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
    }
    builder.build()
}

/// Encodes one sorted batch as a complete Parquet file.
pub fn encode_parquet(batch: &RecordBatch) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let mut buffer = Vec::with_capacity(batch.get_array_memory_size() / 4 + 1024);
    let mut writer = ArrowWriter::try_new(&mut buffer, batch.schema(), Some(writer_properties()))?;
    writer.write(batch)?;
    writer.close()?;
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_row::decode_event;
    use bytes::Bytes;
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
        let events: Vec<LakeEvent<'_>> = raws
            .iter()
            .map(|raw| LakeEvent {
                session_id: "s1",
                reference: None,
                received_at: 1_700_000_000_500,
                row: decode_event(raw),
            })
            .collect();
        let batch = build_batch("00112233445566778899aabb", &events).expect("batch");
        let bytes = encode_parquet(&batch).expect("encode");
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
