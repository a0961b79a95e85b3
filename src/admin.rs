//! `telltale org ...` and `telltale key ...`: administration through the catalog, usable while
//! servers run (they read keys and organizations from the catalog on every request).

use anyhow::{Context, bail};
use catalog::{Catalog, KeyInfo, KeyPrefix, OrganizationId, Scope};
use serde_json::json;

use crate::cli::{KeyCommand, OrgCommand, StorageArgs};

async fn open_catalog(storage: &StorageArgs) -> anyhow::Result<std::sync::Arc<dyn Catalog>> {
    if storage.catalog.is_none() {
        std::fs::create_dir_all(&storage.data_dir)
            .with_context(|| format!("creating data dir {}", storage.data_dir.display()))?;
    }
    Ok(instance::open_catalog(&storage.catalog_url()).await?)
}

fn parse_org(id: &str) -> anyhow::Result<OrganizationId> {
    OrganizationId::parse(id)
        .with_context(|| format!("{id:?} is not an organization id (24 hex characters)"))
}

pub async fn org(storage: &StorageArgs, command: OrgCommand) -> anyhow::Result<()> {
    let catalog = open_catalog(storage).await?;
    match command {
        OrgCommand::Create { name, json } => {
            let name = name.trim();
            if name.is_empty() {
                bail!("organization name must not be blank");
            }
            let organization = catalog.create_organization(name).await?;
            if json {
                println!(
                    "{}",
                    json!({ "id": organization.id, "name": organization.name })
                );
            } else {
                println!(
                    "created organization {} ({})",
                    organization.id, organization.name
                );
            }
        }
        OrgCommand::Delete { id } => {
            let id = parse_org(&id)?;
            if !catalog.delete_organization(&id).await? {
                bail!("no organization {id}");
            }
            println!("deleted organization {id}; its keys no longer work");
        }
        OrgCommand::List { json } => {
            let organizations = catalog.list_organizations().await?;
            if json {
                let list: Vec<_> = organizations
                    .iter()
                    .map(|o| json!({ "id": o.id, "name": o.name }))
                    .collect();
                println!("{}", serde_json::Value::Array(list));
            } else if organizations.is_empty() {
                println!("no organizations");
            } else {
                let mut table = table(&["id", "name", "created"]);
                for organization in organizations {
                    table.add_row([
                        organization.id.to_string(),
                        organization.name,
                        crate::http::format::iso8601(organization.created_at),
                    ]);
                }
                println!("{table}");
            }
        }
    }
    Ok(())
}

/// A table for people (comfy-table): `--json` is the form for scripts.
fn table(header: &[&str]) -> comfy_table::Table {
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(comfy_table::ContentArrangement::Dynamic)
        .set_header(header.iter().copied());
    table
}

fn key_json(info: &KeyInfo) -> serde_json::Value {
    json!({
        "prefix": info.prefix.as_str(),
        "label": info.label,
        "scopes": info.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "organizationId": info.organization_id,
        "createdAt": crate::http::format::iso8601(info.created_at),
        "revokedAt": info.revoked_at.map(crate::http::format::iso8601),
    })
}

pub async fn key(storage: &StorageArgs, command: KeyCommand) -> anyhow::Result<()> {
    let catalog = open_catalog(storage).await?;
    match command {
        KeyCommand::Create {
            organization,
            label,
            scopes,
            json,
        } => {
            let organization = parse_org(&organization)?;
            let scopes = match scopes {
                Some(list) => Scope::parse_list(&list).map_err(anyhow::Error::msg)?,
                None => Scope::ALL.to_vec(),
            };
            let created = catalog.create_key(&organization, &label, &scopes).await?;
            if json {
                let mut value = key_json(&created.info);
                value["key"] = json!(created.secret.expose());
                println!("{value}");
            } else {
                println!(
                    "created key {} for organization {organization}",
                    created.info.prefix
                );
                println!(
                    "secret (shown once, store it now): {}",
                    created.secret.expose()
                );
            }
        }
        KeyCommand::List { organization, json } => {
            let organization = parse_org(&organization)?;
            let keys = catalog.list_keys(&organization).await?;
            if json {
                println!(
                    "{}",
                    serde_json::Value::Array(keys.iter().map(key_json).collect())
                );
            } else if keys.is_empty() {
                println!("no keys for organization {organization}");
            } else {
                let mut table = table(&["prefix", "label", "scopes", "state", "created"]);
                for key in keys {
                    let state = match key.revoked_at {
                        Some(at) => format!("revoked {}", crate::http::format::iso8601(at)),
                        None => "active".to_owned(),
                    };
                    let scopes: Vec<_> = key.scopes.iter().map(|s| s.as_str()).collect();
                    table.add_row([
                        key.prefix.to_string(),
                        key.label,
                        scopes.join(", "),
                        state,
                        crate::http::format::iso8601(key.created_at),
                    ]);
                }
                println!("{table}");
            }
        }
        KeyCommand::Revoke { prefix } => {
            let parsed = KeyPrefix::parse(&prefix)
                .with_context(|| format!("{prefix:?} is not a key prefix"))?;
            if !catalog.revoke_key(&parsed).await? {
                bail!("no active key with prefix {prefix}");
            }
            println!("revoked key {prefix}");
        }
    }
    Ok(())
}
