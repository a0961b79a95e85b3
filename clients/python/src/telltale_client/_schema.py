"""The integration API's schemas as typed, immutable values (field names in Python style).

Generated from clients/typescript/openapi.json by
`python3 clients/python/scripts/generate_models.py`; do not edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Optional, Tuple


def _required_time(value: Any, field: str) -> datetime:
    time = _time(value)
    if time is None:
        raise ValueError(f"the response lacks {field}")
    return time


def _time(value: Any) -> Optional[datetime]:
    if value is None:
        return None
    # `fromisoformat` accepts a trailing `Z` only from Python 3.11 on.
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text)


def _optional(convert: Any, value: Any) -> Any:
    return None if value is None else convert(value)


@dataclass(frozen=True)
class Checks:
    """What one store answered a readiness check."""

    # `ok`, or why the catalog (SQLite or PostgreSQL) is not usable.
    catalog: str
    # `ok`, or why the lake's object store (folder or S3) is not usable.
    lake: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checks:
        return cls(
            catalog=data["catalog"],
            lake=data["lake"],
        )


@dataclass(frozen=True)
class CollectorBatch:
    """a batch of events of one browser session (at most 1 MiB); each event is any JSON value, the
    embed's are objects with `type`, `timestamp` (Unix ms) and `data`"""

    events: Tuple[Any, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CollectorBatch:
        return cls(
            events=tuple(data["events"]),
        )


@dataclass(frozen=True)
class ContextEnvelope:
    """The document's `ContextEnvelope`."""

    data: IntegrationContext

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ContextEnvelope:
        return cls(
            data=IntegrationContext.from_json(data["data"]),
        )


@dataclass(frozen=True)
class ErrorBody:
    """Every error response."""

    error: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ErrorBody:
        return cls(
            error=data["error"],
        )


@dataclass(frozen=True)
class Health:
    """The document's `Health`."""

    # `ok` when healthy.
    status: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Health:
        return cls(
            status=data["status"],
        )


@dataclass(frozen=True)
class IngestionResult:
    """Ingestion result (the collector's bare response body)."""

    # True on acceptance.
    success: bool
    # Number of events accepted.
    count: int
    # Present, and true, when the session was deleted and the events discarded.
    deleted: Optional[bool] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IngestionResult:
        return cls(
            success=bool(data["success"]),
            count=int(data["count"]),
            deleted=_optional(bool, data.get("deleted")),
        )


@dataclass(frozen=True)
class IntegrationContext:
    """Integration context."""

    organization: OrganizationView
    key: KeyView

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IntegrationContext:
        return cls(
            organization=OrganizationView.from_json(data["organization"]),
            key=KeyView.from_json(data["key"]),
        )


@dataclass(frozen=True)
class KeyView:
    """The document's `KeyView`."""

    prefix: str
    label: str
    scopes: Tuple[str, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeyView:
        return cls(
            prefix=data["prefix"],
            label=data["label"],
            scopes=tuple(data["scopes"]),
        )


@dataclass(frozen=True)
class LookupEnvelope:
    """The document's `LookupEnvelope`."""

    data: Tuple[SessionRow, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LookupEnvelope:
        return cls(
            data=tuple(SessionRow.from_json(item) for item in data["data"]),
        )


@dataclass(frozen=True)
class LookupRequest:
    """Session lookup request."""

    # 1 to 100 UUIDs.
    external_references: Tuple[str, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LookupRequest:
        return cls(
            external_references=tuple(data["externalReferences"]),
        )


@dataclass(frozen=True)
class SessionRow:
    """One row per submitted reference, in input order. (`LookupRow` in the document.)"""

    external_reference: str
    captured: bool
    event_count: int
    first_event_at: Optional[datetime]
    last_event_at: Optional[datetime]
    human_score_percent: Optional[float]
    # One of "automation-like", "review", "human-like".
    score_band: Optional[str]
    scored_at: Optional[datetime]
    model_version: Optional[str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionRow:
        return cls(
            external_reference=data["externalReference"],
            captured=bool(data["captured"]),
            event_count=int(data["eventCount"]),
            first_event_at=_time(data.get("firstEventAt")),
            last_event_at=_time(data.get("lastEventAt")),
            human_score_percent=_optional(float, data.get("humanScorePercent")),
            score_band=data.get("scoreBand"),
            scored_at=_time(data.get("scoredAt")),
            model_version=data.get("modelVersion"),
        )


@dataclass(frozen=True)
class NotReady:
    """The instance cannot serve now: a store did not answer in time or failed."""

    # Which store is down, and why.
    error: str
    checks: Checks

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NotReady:
        return cls(
            error=data["error"],
            checks=Checks.from_json(data["checks"]),
        )


@dataclass(frozen=True)
class OrganizationView:
    """The document's `OrganizationView`."""

    id: str
    name: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OrganizationView:
        return cls(
            id=data["id"],
            name=data["name"],
        )


@dataclass(frozen=True)
class ProvisionEnvelope:
    """The document's `ProvisionEnvelope`."""

    data: ProvisionedSurvey

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProvisionEnvelope:
        return cls(
            data=ProvisionedSurvey.from_json(data["data"]),
        )


@dataclass(frozen=True)
class ProvisionRequest:
    """Survey provisioning request."""

    # Must contain a non-whitespace character; after trimming, 1 to 200 characters.
    name: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProvisionRequest:
        return cls(
            name=data["name"],
        )


@dataclass(frozen=True)
class ProvisionedSurvey:
    """Survey provisioning result. (`ProvisionResult` in the document.)"""

    # The service's survey id (24 hex characters).
    survey_id: str
    # Public tracking key (24 hex characters), used in the collector path and the embed.
    tracking_key: str
    # Address the embed sends events to: `{collectorApiUrl}/{trackingKey}/{identifier}`.
    collector_api_url: str
    # Address of the embed script.
    embed_script_url: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProvisionedSurvey:
        return cls(
            survey_id=data["surveyId"],
            tracking_key=data["trackingKey"],
            collector_api_url=data["collectorApiUrl"],
            embed_script_url=data["embedScriptUrl"],
        )


@dataclass(frozen=True)
class Ready:
    """The instance can serve: both stores answered."""

    # `ready`.
    status: str
    checks: Checks

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Ready:
        return cls(
            status=data["status"],
            checks=Checks.from_json(data["checks"]),
        )


@dataclass(frozen=True)
class ScoringFailure:
    """One session a run could not score. (`ScoringFailureView` in the document.)"""

    session_id: str
    message: str
    code: Optional[str] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScoringFailure:
        return cls(
            session_id=data["sessionId"],
            message=data["message"],
            code=data.get("code"),
        )


@dataclass(frozen=True)
class ScoringRunEnvelope:
    """The document's `ScoringRunEnvelope`."""

    data: ScoringRun

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScoringRunEnvelope:
        return cls(
            data=ScoringRun.from_json(data["data"]),
        )


@dataclass(frozen=True)
class ScoringRun:
    """A scoring run with its current counters. (`ScoringRunView` in the document.)"""

    id: str
    survey_id: str
    force: bool
    # One of "running", "completed", "failed", "canceled".
    status: str
    total: int
    scored: int
    skipped: int
    failed: int
    failures: Tuple[ScoringFailure, ...]
    created_at: datetime
    started_at: datetime
    # Present on a failed run.
    error: Optional[str] = None
    completed_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    cancel_requested_at: Optional[datetime] = None
    canceled_at: Optional[datetime] = None
    # Prefix of the key that asked for the cancel.
    canceled_by: Optional[str] = None

    @property
    def finished(self) -> bool:
        """Whether `status` is final (anything but `running`)."""
        return self.status != "running"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScoringRun:
        return cls(
            id=data["id"],
            survey_id=data["surveyId"],
            force=bool(data["force"]),
            status=data["status"],
            total=int(data["total"]),
            scored=int(data["scored"]),
            skipped=int(data["skipped"]),
            failed=int(data["failed"]),
            failures=tuple(ScoringFailure.from_json(item) for item in data["failures"]),
            created_at=_required_time(data.get("createdAt"), "createdAt"),
            started_at=_required_time(data.get("startedAt"), "startedAt"),
            error=data.get("error"),
            completed_at=_time(data.get("completedAt")),
            updated_at=_time(data.get("updatedAt")),
            cancel_requested_at=_time(data.get("cancelRequestedAt")),
            canceled_at=_time(data.get("canceledAt")),
            canceled_by=data.get("canceledBy"),
        )


@dataclass(frozen=True)
class SessionDeletionEnvelope:
    """The document's `SessionDeletionEnvelope`."""

    data: SessionDeletion

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionDeletionEnvelope:
        return cls(
            data=SessionDeletion.from_json(data["data"]),
        )


@dataclass(frozen=True)
class SessionDeletion:
    """A session deletion. (`SessionDeletionView` in the document.)"""

    # The session's external reference (a UUID, lower case).
    reference: str
    # One of "pending", "completed", "failed".
    status: str
    # Erasure attempts made so far.
    attempts: int
    requested_at: datetime
    updated_at: datetime
    completed_at: Optional[datetime] = None
    # Why the last attempt failed.
    error: Optional[str] = None

    @property
    def finished(self) -> bool:
        """Whether `status` is final (anything but `pending`)."""
        return self.status != "pending"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionDeletion:
        return cls(
            reference=data["reference"],
            status=data["status"],
            attempts=int(data["attempts"]),
            requested_at=_required_time(data.get("requestedAt"), "requestedAt"),
            updated_at=_required_time(data.get("updatedAt"), "updatedAt"),
            completed_at=_time(data.get("completedAt")),
            error=data.get("error"),
        )


@dataclass(frozen=True)
class StartRunRequest:
    """Start scoring run request. Unknown fields are refused, so a misspelt `force` cannot silently
    start a run that skips scored sessions."""

    # true re-scores sessions that already have a score; false (the default) skips them.
    force: Optional[bool] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StartRunRequest:
        return cls(
            force=_optional(bool, data.get("force")),
        )


@dataclass(frozen=True)
class Status:
    """The document's `Status`."""

    status: str
    # The service's current date and time.
    date: datetime
    version: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Status:
        return cls(
            status=data["status"],
            date=_required_time(data.get("date"), "date"),
            version=data["version"],
        )


# The document's names of the classes above that the client names otherwise.
LookupRow = SessionRow
ProvisionResult = ProvisionedSurvey
ScoringFailureView = ScoringFailure
ScoringRunView = ScoringRun
SessionDeletionView = SessionDeletion
