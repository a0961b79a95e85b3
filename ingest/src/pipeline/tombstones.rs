//! Deleted sessions as the collector sees them: the tombstones loaded from the catalog, and
//! whether a batch belongs to a deleted session.

use super::*;

impl Ingestor {
    /// Whether the batch belongs to a deleted session: its identifier is a deleted reference,
    /// is linked to one (learned from the stream, else from the catalog, so a restart does not
    /// forget links), or the batch's own `session` event names one.
    pub(super) async fn is_deleted(
        &self,
        survey_id: &SurveyId,
        identifier: &str,
        body: &[u8],
    ) -> Result<bool, IngestError> {
        let tombstoned = |reference: &str| {
            self.inner
                .tombstones
                .read()
                .has_reference(survey_id, reference)
        };
        {
            let tombstones = self.inner.tombstones.read();
            if !tombstones.has_survey(survey_id) {
                return Ok(false);
            }
            if tombstones.has_identifier(survey_id, identifier) {
                return Ok(true);
            }
        }
        if batch::normalize_reference(identifier).is_some_and(|reference| tombstoned(&reference)) {
            return Ok(true);
        }
        let key = (survey_id.clone(), identifier.to_owned());
        let mut linked = self.inner.references.lock().get(&key).cloned();
        if linked.is_none() && !self.inner.unlinked.lock().contains(&key) {
            let stored = self
                .inner
                .catalog
                .session_references(survey_id, std::slice::from_ref(&key.1))
                .await?;
            if let Some((_, reference)) = stored.into_iter().next() {
                self.inner
                    .references
                    .lock()
                    .entry(key.clone())
                    .or_insert_with(|| reference.clone());
                linked = Some(reference);
            } else {
                let mut unlinked = self.inner.unlinked.lock();
                if unlinked.len() > MAX_REMEMBERED_REFERENCES {
                    *unlinked = HashSet::new();
                }
                unlinked.insert(key.clone());
            }
        }
        if linked.is_some_and(|reference| tombstoned(&reference)) {
            return Ok(true);
        }
        let named = event_row::stats_events(body)?
            .into_iter()
            .find_map(|event| {
                event
                    .interview_id
                    .as_deref()
                    .and_then(batch::normalize_reference)
                    .filter(|reference| tombstoned(reference))
            });
        let Some(reference) = named else {
            return Ok(false);
        };
        // The discarded batch never reaches the statistics, so the link is known nowhere
        // else: add the identifier to the tombstone, so its later batches (on any instance,
        // after any restart) are discarded too.
        let hash = catalog::identifier_tombstone_hash(survey_id, identifier);
        self.inner
            .catalog
            .tombstone_identifiers(survey_id, std::slice::from_ref(&hash))
            .await?;
        self.inner
            .tombstones
            .write()
            .add_identifier_hash(survey_id.clone(), hash);
        self.inner.references.lock().insert(key, reference);
        Ok(true)
    }

    /// Loads tombstones created since the last call (on any instance).
    pub async fn refresh_tombstones(&self) -> Result<(), IngestError> {
        let (after_reference, after_identifier) = {
            let tombstones = self.inner.tombstones.read();
            (tombstones.last_reference_id, tombstones.last_identifier_id)
        };
        let references = self.inner.catalog.tombstones_after(after_reference).await?;
        let identifiers = self
            .inner
            .catalog
            .tombstoned_identifiers_after(after_identifier)
            .await?;
        if references.is_empty() && identifiers.is_empty() {
            return Ok(());
        }
        // A link the catalog did not know may exist now.
        *self.inner.unlinked.lock() = HashSet::new();
        let mut tombstones = self.inner.tombstones.write();
        for tombstone in references {
            tombstones.last_reference_id = tombstones.last_reference_id.max(tombstone.id);
            tombstones
                .references
                .entry(tombstone.survey_id)
                .or_default()
                .insert(tombstone.reference);
        }
        for identifier in identifiers {
            tombstones.last_identifier_id = tombstones.last_identifier_id.max(identifier.id);
            tombstones.add_identifier_hash(identifier.survey_id, identifier.identifier_sha256);
        }
        Ok(())
    }

    /// The id of the newest reference tombstone loaded so far: a purge after this call covers
    /// every session tombstoned up to it.
    pub fn loaded_tombstone_id(&self) -> i64 {
        self.inner.tombstones.read().last_reference_id
    }

    /// The tombstones of the given surveys, `None` when none of them has any (the usual case).
    pub(super) fn tombstones_of<'a>(
        &self,
        surveys: impl Iterator<Item = &'a SurveyId>,
    ) -> Option<Tombstones> {
        let tombstones = self.inner.tombstones.read();
        if tombstones.references.is_empty() && tombstones.identifiers.is_empty() {
            return None;
        }
        let mut subset = Tombstones::default();
        for survey in surveys {
            if subset.has_survey(survey) || !tombstones.has_survey(survey) {
                continue;
            }
            if let Some(references) = tombstones.references.get(survey) {
                subset.references.insert(survey.clone(), references.clone());
            }
            if let Some(identifiers) = tombstones.identifiers.get(survey) {
                subset
                    .identifiers
                    .insert(survey.clone(), identifiers.clone());
            }
        }
        (!subset.references.is_empty() || !subset.identifiers.is_empty()).then_some(subset)
    }
}

/// Deleted sessions: references, and the identifiers that were linked to them (as hashes).
#[derive(Debug, Default, Clone)]
pub(super) struct Tombstones {
    pub(super) references: HashMap<SurveyId, HashSet<String>>,
    pub(super) identifiers: HashMap<SurveyId, HashSet<String>>,
    pub(super) last_reference_id: i64,
    pub(super) last_identifier_id: i64,
}

impl Tombstones {
    pub(super) fn has_survey(&self, survey: &SurveyId) -> bool {
        self.references.contains_key(survey) || self.identifiers.contains_key(survey)
    }

    pub(super) fn has_reference(&self, survey: &SurveyId, reference: &str) -> bool {
        self.references
            .get(survey)
            .is_some_and(|references| references.contains(reference))
    }

    pub(super) fn has_identifier(&self, survey: &SurveyId, identifier: &str) -> bool {
        self.identifiers.get(survey).is_some_and(|hashes| {
            hashes.contains(&catalog::identifier_tombstone_hash(survey, identifier))
        })
    }

    pub(super) fn add_identifier_hash(&mut self, survey: SurveyId, hash: String) {
        self.identifiers.entry(survey).or_default().insert(hash);
    }

    /// Whether data of `identifier`, linked to `reference`, belongs to a deleted session.
    pub(super) fn erases(
        &self,
        survey: &SurveyId,
        identifier: &str,
        reference: Option<&str>,
    ) -> bool {
        reference.is_some_and(|reference| self.has_reference(survey, reference))
            || self.has_identifier(survey, identifier)
    }
}

/// Whether `needle` occurs in `haystack` (SIMD substring search: this runs over every body).
pub(super) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}
