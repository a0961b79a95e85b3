"""The integration API's resources as typed, immutable values (field names in Python style)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, List, Mapping, Optional, Tuple


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


@dataclass(frozen=True)
class IntegrationContext:
    """Who a key is: `GET /integrations/v1/context`."""

    organization_id: str
    organization_name: str
    key_prefix: str
    key_label: str
    key_scopes: Tuple[str, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "IntegrationContext":
        organization, key = data["organization"], data["key"]
        return cls(
            organization_id=organization["id"],
            organization_name=organization["name"],
            key_prefix=key["prefix"],
            key_label=key["label"],
            key_scopes=tuple(key["scopes"]),
        )


@dataclass(frozen=True)
class ProvisionedSurvey:
    """A provisioned survey: what the embed on its pages needs."""

    survey_id: str
    tracking_key: str
    collector_api_url: str
    embed_script_url: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ProvisionedSurvey":
        return cls(
            survey_id=data["surveyId"],
            tracking_key=data["trackingKey"],
            collector_api_url=data["collectorApiUrl"],
            embed_script_url=data["embedScriptUrl"],
        )


@dataclass(frozen=True)
class SessionRow:
    """One row of a lookup: one per submitted reference, in the order submitted."""

    external_reference: str
    captured: bool
    event_count: int
    first_event_at: Optional[datetime]
    last_event_at: Optional[datetime]
    human_score_percent: Optional[float]
    score_band: Optional[str]
    scored_at: Optional[datetime]
    model_version: Optional[str]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SessionRow":
        score = data.get("humanScorePercent")
        return cls(
            external_reference=data["externalReference"],
            captured=bool(data["captured"]),
            event_count=int(data["eventCount"]),
            first_event_at=_time(data.get("firstEventAt")),
            last_event_at=_time(data.get("lastEventAt")),
            human_score_percent=None if score is None else float(score),
            score_band=data.get("scoreBand"),
            scored_at=_time(data.get("scoredAt")),
            model_version=data.get("modelVersion"),
        )


@dataclass(frozen=True)
class ScoringFailure:
    session_id: str
    message: str
    code: Optional[str] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ScoringFailure":
        return cls(session_id=data["sessionId"], message=data["message"], code=data.get("code"))


@dataclass(frozen=True)
class ScoringRun:
    """A scoring run and its counters. `status` is `running`, `completed`, `failed` or
    `canceled`; every status but `running` is final."""

    id: str
    survey_id: str
    force: bool
    status: str
    total: int
    scored: int
    skipped: int
    failed: int
    failures: Tuple[ScoringFailure, ...]
    created_at: datetime
    started_at: datetime
    error: Optional[str] = None
    completed_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    cancel_requested_at: Optional[datetime] = None
    canceled_at: Optional[datetime] = None
    canceled_by: Optional[str] = None

    @property
    def finished(self) -> bool:
        return self.status != "running"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ScoringRun":
        started = _required_time(data.get("startedAt"), "startedAt")
        created = _required_time(data.get("createdAt"), "createdAt")
        return cls(
            id=data["id"],
            survey_id=data["surveyId"],
            force=bool(data["force"]),
            status=data["status"],
            total=int(data["total"]),
            scored=int(data["scored"]),
            skipped=int(data["skipped"]),
            failed=int(data["failed"]),
            failures=tuple(ScoringFailure.from_json(f) for f in data.get("failures", [])),
            created_at=created,
            started_at=started,
            error=data.get("error"),
            completed_at=_time(data.get("completedAt")),
            updated_at=_time(data.get("updatedAt")),
            cancel_requested_at=_time(data.get("cancelRequestedAt")),
            canceled_at=_time(data.get("canceledAt")),
            canceled_by=data.get("canceledBy"),
        )


@dataclass(frozen=True)
class SessionDeletion:
    """An erasure request. `status` is `pending`, `completed` or `failed`."""

    reference: str
    status: str
    attempts: int
    requested_at: datetime
    updated_at: datetime
    completed_at: Optional[datetime]
    error: Optional[str]

    @property
    def finished(self) -> bool:
        return self.status != "pending"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SessionDeletion":
        requested = _required_time(data.get("requestedAt"), "requestedAt")
        updated = _required_time(data.get("updatedAt"), "updatedAt")
        return cls(
            reference=data["reference"],
            status=data["status"],
            attempts=int(data["attempts"]),
            requested_at=requested,
            updated_at=updated,
            completed_at=_time(data.get("completedAt")),
            error=data.get("error"),
        )


def rows(data: Any) -> List[SessionRow]:
    return [SessionRow.from_json(row) for row in data]
