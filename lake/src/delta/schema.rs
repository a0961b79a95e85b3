//! Opening a table: its Delta schema from the lake's Arrow schemas, its creation by the first
//! instance, and the columns a table of an older release lacks.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::tables::{EVENTS_SCHEMA, SCORES_SCHEMA};
use crate::{LakeError, Store, TableKind};
use deltalake_core::kernel::transaction::TransactionError;
use deltalake_core::kernel::{ArrayType, DataType as DeltaType, StructField};
use deltalake_core::logstore::{StorageConfig, default_logstore};
use deltalake_core::operations::create::CreateBuilder;
use deltalake_core::protocol::SaveMode;
use deltalake_core::{DeltaTable, DeltaTableError, TableProperty};

use super::Table;

/// The version of the layout of the lake's tables (their columns' meaning, partitioning and
/// the files' encoding), kept in each table's Delta configuration as [`TABLE_FORMAT_PROPERTY`]
/// when the table is created. Raise it with a change an older release would misread; columns
/// added at the end (`add_missing_columns`) are not such a change. A table without the property
/// was created before it existed, in format 1.
pub const TABLE_FORMAT: u32 = 1;

/// The table property that holds [`TABLE_FORMAT`]. Delta readers ignore properties they do not
/// know (the `delta.` prefix is Delta's own).
pub const TABLE_FORMAT_PROPERTY: &str = "telltale.tableFormat";

/// Refuses a table a newer release created in a format this one does not know.
fn check_table_format(kind: TableKind, table: &DeltaTable) -> Result<(), LakeError> {
    let Some(text) = table
        .snapshot()?
        .metadata()
        .configuration()
        .get(TABLE_FORMAT_PROPERTY)
    else {
        return Ok(());
    };
    match text.trim().parse::<u32>() {
        Ok(found) if found <= TABLE_FORMAT => Ok(()),
        Ok(found) => Err(LakeError::NewerTableFormat {
            table: kind.as_str(),
            found,
            known: TABLE_FORMAT,
        }),
        Err(_) => Err(LakeError::Schema(format!(
            "the {} table's {TABLE_FORMAT_PROPERTY} is {text:?}, not a format number",
            kind.as_str()
        ))),
    }
}

/// The partition columns of a table.
pub(super) fn partition_columns(kind: TableKind) -> &'static [&'static str] {
    match kind {
        TableKind::Events => &["survey_id", "date"],
        TableKind::Features | TableKind::Scores => &["survey_id"],
    }
}

/// The Delta type of one of our Arrow column types.
fn delta_type(data_type: &arrow::datatypes::DataType) -> Result<DeltaType, LakeError> {
    use arrow::datatypes::DataType as A;
    Ok(match data_type {
        A::Utf8 | A::LargeUtf8 => DeltaType::STRING,
        A::Dictionary(_, value) if matches!(**value, A::Utf8) => DeltaType::STRING,
        A::Int32 => DeltaType::INTEGER,
        // No unsigned types: a file's column must be what the Delta schema declares.
        A::Int64 => DeltaType::LONG,
        A::Float64 => DeltaType::DOUBLE,
        A::Boolean => DeltaType::BOOLEAN,
        A::Timestamp(_, Some(_)) => DeltaType::TIMESTAMP,
        A::List(item) => DeltaType::Array(Box::new(ArrayType::new(
            delta_type(item.data_type())?,
            item.is_nullable(),
        ))),
        other => return Err(LakeError::Schema(format!("{other:?}"))),
    })
}

/// The Delta columns of a table: the Parquet files' columns, then partition columns the files
/// do not hold (`date`).
fn delta_columns(kind: TableKind, feature_names: &[&str]) -> Result<Vec<StructField>, LakeError> {
    let schema = match kind {
        TableKind::Events => EVENTS_SCHEMA.clone(),
        TableKind::Features => crate::tables::features_schema(feature_names),
        TableKind::Scores => SCORES_SCHEMA.clone(),
    };
    let mut columns = schema
        .fields()
        .iter()
        .map(|field| {
            Ok(StructField::new(
                field.name().clone(),
                delta_type(field.data_type())?,
                field.is_nullable(),
            ))
        })
        .collect::<Result<Vec<_>, LakeError>>()?;
    if kind == TableKind::Events {
        columns.push(StructField::new("date", DeltaType::STRING, false));
    }
    Ok(columns)
}

/// Adds the columns a table lacks (nullable, at the end): a `features` table created by an
/// older release has no column for a feature added since, and its new files' values would be
/// invisible to readers, which read the columns the table's schema names. Instances opening
/// the table together may race: the loser reloads and finds the columns there.
async fn add_missing_columns(
    lake: &Store,
    kind: TableKind,
    feature_names: &[&str],
    mut table: DeltaTable,
) -> Result<DeltaTable, LakeError> {
    for _attempt in 0..5 {
        let schema = table.snapshot()?.schema();
        let missing: Vec<StructField> = delta_columns(kind, feature_names)?
            .into_iter()
            .filter(|column| schema.field(column.name()).is_none())
            .collect();
        if missing.is_empty() {
            return Ok(table);
        }
        tracing::info!(
            table = kind.as_str(),
            columns = missing.len(),
            "adding columns to an older table"
        );
        match table.clone().add_columns().with_fields(missing).await {
            Ok(evolved) => {
                let version = evolved.version().unwrap_or(0);
                lake.sync_delta_log(kind.as_str(), version).await?;
                table = evolved;
            }
            // Another instance changed the schema first: look again.
            Err(DeltaTableError::VersionAlreadyExists(_))
            | Err(DeltaTableError::Transaction {
                source:
                    TransactionError::VersionAlreadyExists(_) | TransactionError::CommitConflict(_),
            }) => table.load().await?,
            Err(error) => return Err(error.into()),
        }
    }
    Err(LakeError::Schema(format!(
        "could not add the missing columns of {}",
        kind.as_str()
    )))
}

impl Table {
    /// Opens the table of `kind`, creating it when the lake has none yet (instances starting
    /// together may race: one creates it, the others load it). `feature_names` are the columns
    /// of the `features` table past its keys (unused for the other tables).
    pub async fn open(
        lake: &Store,
        kind: TableKind,
        feature_names: &[&str],
        log_retention_ms: Arc<AtomicU64>,
    ) -> Result<Table, LakeError> {
        let (prefixed, root) = lake.table_stores(kind.as_str());
        let location = lake.table_url(kind.as_str())?;
        // The kernel reads a local table's folder before there is a log in it.
        lake.create_folder(kind.as_str()).await?;
        // Looked for first: the kernel logs an error when it loads a table without a log.
        let has_log = {
            use futures::StreamExt;
            let log = object_store::path::Path::from("_delta_log");
            prefixed
                .list(Some(&log))
                .next()
                .await
                .transpose()?
                .is_some()
        };
        let log_store = default_logstore(prefixed, root, &location, &StorageConfig::default());
        let mut table = DeltaTable::new(Arc::clone(&log_store));
        let exists = has_log
            && match table.load().await {
                Ok(()) => true,
                Err(DeltaTableError::NotATable(_)) => false,
                Err(error) => return Err(error.into()),
            };
        if !exists {
            let created = CreateBuilder::new()
                .with_log_store(Arc::clone(&log_store))
                .with_table_name(kind.as_str())
                .with_columns(delta_columns(kind, feature_names)?)
                .with_partition_columns(partition_columns(kind).iter().copied())
                // Old commit files go only after a checkpoint we have synced (`checkpoint`).
                .with_configuration_property(TableProperty::EnableExpiredLogCleanup, Some("false"))
                .with_configuration([(TABLE_FORMAT_PROPERTY, Some(TABLE_FORMAT.to_string()))])
                .with_raise_if_key_not_exists(false)
                .with_save_mode(SaveMode::ErrorIfExists)
                .await;
            match created {
                Ok(created) => {
                    tracing::debug!(version = ?created.version(), "created a delta table");
                }
                // Another instance created it first.
                Err(DeltaTableError::VersionAlreadyExists(_))
                | Err(DeltaTableError::Transaction {
                    source: TransactionError::VersionAlreadyExists(_),
                }) => {}
                Err(error) => return Err(error.into()),
            }
            lake.sync_delta_log(kind.as_str(), 0).await?;
            table.load().await?;
        }
        // Before anything is written to it: a newer release's table is not evolved here.
        check_table_format(kind, &table)?;
        let table = add_missing_columns(lake, kind, feature_names, table).await?;
        Ok(Table {
            kind,
            store: lake.clone(),
            log_store,
            log_retention_ms,
            state: Arc::new(tokio::sync::Mutex::new(table)),
            app_versions: Arc::default(),
        })
    }
}
