//! The shared methods of organizations and integration keys.

/// `impl Organizations for $backend`: the methods the backend writes its own way, passed in, then
/// the shared ones below.
macro_rules! impl_organizations {
    ($backend:ty, { $($own:tt)* }) => {
        #[async_trait::async_trait]
        impl $crate::Organizations for $backend {
            $($own)*

            async fn create_organization(&self, name: &str) -> Result<Organization> {
                let organization = Organization {
                    id: OrganizationId::generate(),
                    name: name.to_owned(),
                    created_at: now_millis(),
                };
                sqlx::query("INSERT INTO organizations (id, name, created_at) VALUES ($1, $2, $3)")
                    .bind(organization.id.as_str())
                    .bind(&organization.name)
                    .bind(organization.created_at)
                    .execute(&self.pool)
                    .await?;
                Ok(organization)
            }

            async fn delete_organization(&self, id: &OrganizationId) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE organizations SET deleted_at = $1 WHERE id = $2 AND deleted_at IS NULL",
                )
                .bind(now_millis())
                .bind(id.as_str())
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn count_organizations(&self) -> Result<u64> {
                let count: i64 = sqlx::query_scalar("SELECT count(*) FROM organizations")
                    .fetch_one(&self.pool)
                    .await?;
                Ok(count.max(0) as u64)
            }

            async fn list_organizations(&self) -> Result<Vec<Organization>> {
                let rows = sqlx::query(
                    "SELECT id, name, created_at FROM organizations WHERE deleted_at IS NULL
                     ORDER BY created_at, id",
                )
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::organization).collect()
            }

            async fn create_key(
                &self,
                organization: &OrganizationId,
                label: &str,
                scopes: &[Scope],
            ) -> Result<CreatedKey> {
                let secret = IntegrationKeySecret::generate();
                let info = KeyInfo {
                    prefix: secret.prefix().clone(),
                    organization_id: organization.clone(),
                    label: label.to_owned(),
                    scopes: scopes.to_vec(),
                    created_at: now_millis(),
                    revoked_at: None,
                };
                // One statement: the organization cannot be deleted between the check and the insert.
                let inserted = sqlx::query(
                    "INSERT INTO integration_keys
                         (prefix, organization_id, secret_sha256, label, scopes, created_at)
                     SELECT $1, id, $2, $3, $4, $5 FROM organizations
                     WHERE id = $6 AND deleted_at IS NULL",
                )
                .bind(info.prefix.as_str())
                .bind(secret.sha256_hex())
                .bind(&info.label)
                .bind(Scope::join(&info.scopes))
                .bind(info.created_at)
                .bind(organization.as_str())
                .execute(&self.pool)
                .await?;
                if inserted.rows_affected() == 0 {
                    return Err(Error::OrganizationNotFound(organization.to_string()));
                }
                Ok(CreatedKey { secret, info })
            }

            async fn list_keys(&self, organization: &OrganizationId) -> Result<Vec<KeyInfo>> {
                let rows = sqlx::query(
                    "SELECT prefix, organization_id, label, scopes, created_at, revoked_at
                     FROM integration_keys WHERE organization_id = $1 ORDER BY created_at, prefix",
                )
                .bind(organization.as_str())
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(rows::key_info).collect()
            }

            async fn key_standing(&self, prefix: &KeyPrefix) -> Result<Option<KeyStanding>> {
                let row = sqlx::query(
                    "SELECT k.prefix, k.organization_id, k.label, k.scopes, k.created_at,
                            k.revoked_at, o.deleted_at IS NOT NULL AS organization_deleted
                     FROM integration_keys k JOIN organizations o ON o.id = k.organization_id
                     WHERE k.prefix = $1",
                )
                .bind(prefix.as_str())
                .fetch_optional(&self.pool)
                .await?;
                row.as_ref()
                    .map(|row| {
                        Ok(KeyStanding {
                            key: rows::key_info(row)?,
                            organization_deleted: row.try_get("organization_deleted")?,
                        })
                    })
                    .transpose()
            }

            async fn revoke_key(&self, prefix: &KeyPrefix) -> Result<bool> {
                let done = sqlx::query(
                    "UPDATE integration_keys SET revoked_at = $1 WHERE prefix = $2 AND revoked_at IS NULL",
                )
                .bind(now_millis())
                .bind(prefix.as_str())
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn authenticate(
                &self,
                secret: &IntegrationKeySecret,
            ) -> Result<Option<AuthenticatedKey>> {
                let row = sqlx::query(&format!(
                    "SELECT {} FROM integration_keys k JOIN organizations o ON o.id = k.organization_id
                     WHERE k.prefix = $1",
                    rows::AUTHENTICATED_KEY_COLUMNS
                ))
                .bind(secret.prefix().as_str())
                .fetch_optional(&self.pool)
                .await?;
                match row {
                    Some(row) => rows::authenticated_key(&row, &secret.sha256_hex()),
                    None => Ok(None),
                }
            }
        }
    };
}

pub(crate) use impl_organizations;
