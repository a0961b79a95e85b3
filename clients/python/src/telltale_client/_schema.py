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
class BandCounts:
    """Scored sessions per band."""

    automation_like: int
    review: int
    human_like: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BandCounts:
        return cls(
            automation_like=int(data["automation-like"]),
            review=int(data["review"]),
            human_like=int(data["human-like"]),
        )


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
class ClusterView:
    """A group of sessions the runs found alike: the same modality and measured features, each
    within 3 percentile points of another member's."""

    # Names the cluster in `cluster` filters and in the list's `cluster` column.
    id: str
    # `pointing`, `typing` or `touch`.
    modality: str
    size: int
    # The members' references, sorted.
    members: Tuple[str, ...]
    features: Tuple[SharedFeatureView, ...]
    # The largest difference between two members on any feature, percentile points.
    widest_percentile: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterView:
        return cls(
            id=data["id"],
            modality=data["modality"],
            size=int(data["size"]),
            members=tuple(data["members"]),
            features=tuple(SharedFeatureView.from_json(item) for item in data["features"]),
            widest_percentile=float(data["widestPercentile"]),
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
class DeskRunView:
    """The latest run of a survey, as the desk shows it."""

    id: str
    # One of "running", "completed", "failed", "canceled".
    status: str
    total: int
    scored: int
    skipped: int
    failed: int
    created_at: datetime
    completed_at: Optional[datetime] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeskRunView:
        return cls(
            id=data["id"],
            status=data["status"],
            total=int(data["total"]),
            scored=int(data["scored"]),
            skipped=int(data["skipped"]),
            failed=int(data["failed"]),
            created_at=_required_time(data.get("createdAt"), "createdAt"),
            completed_at=_time(data.get("completedAt")),
        )


@dataclass(frozen=True)
class DeskSession:
    """One scored session as the desk lists it. (`DeskSessionView` in the document.)"""

    reference: str
    human_score_percent: float
    # One of "automation-like", "review", "human-like".
    score_band: str
    # Why, most important first.
    reasons: Tuple[str, ...]
    event_count: int
    scored_at: datetime
    model_version: str
    # The cluster it is a member of (a summary cluster's `id`), if any.
    cluster: Optional[str] = None
    first_event_at: Optional[datetime] = None
    last_event_at: Optional[datetime] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeskSession:
        return cls(
            reference=data["reference"],
            human_score_percent=float(data["humanScorePercent"]),
            score_band=data["scoreBand"],
            reasons=tuple(data["reasons"]),
            event_count=int(data["eventCount"]),
            scored_at=_required_time(data.get("scoredAt"), "scoredAt"),
            model_version=data["modelVersion"],
            cluster=data.get("cluster"),
            first_event_at=_time(data.get("firstEventAt")),
            last_event_at=_time(data.get("lastEventAt")),
        )


@dataclass(frozen=True)
class SessionsPage:
    """A page of the list. (`DeskSessionsEnvelope` in the document.)"""

    data: Tuple[DeskSession, ...]
    # Pass as `after` for the next page; absent on the last page.
    next: Optional[str] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionsPage:
        return cls(
            data=tuple(DeskSession.from_json(item) for item in data["data"]),
            next=data.get("next"),
        )


@dataclass(frozen=True)
class EnvironmentTells:
    """The environment the embed reported, and the tells the model reads from it."""

    headless_user_agent: bool
    automation_globals: Optional[bool] = None
    automation_stack: Optional[bool] = None
    device_pixel_ratio: Optional[float] = None
    embed_version: Optional[str] = None
    max_touch_points: Optional[float] = None
    software_renderer: Optional[bool] = None
    webdriver: Optional[bool] = None
    webdriver_patched: Optional[bool] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EnvironmentTells:
        return cls(
            headless_user_agent=bool(data["headlessUserAgent"]),
            automation_globals=_optional(bool, data.get("automationGlobals")),
            automation_stack=_optional(bool, data.get("automationStack")),
            device_pixel_ratio=_optional(float, data.get("devicePixelRatio")),
            embed_version=data.get("embedVersion"),
            max_touch_points=_optional(float, data.get("maxTouchPoints")),
            software_renderer=_optional(bool, data.get("softwareRenderer")),
            webdriver=_optional(bool, data.get("webdriver")),
            webdriver_patched=_optional(bool, data.get("webdriverPatched")),
        )


@dataclass(frozen=True)
class ErrorBody:
    """Every error response's body, as the OpenAPI document names it."""

    error: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ErrorBody:
        return cls(
            error=data["error"],
        )


@dataclass(frozen=True)
class EvidenceEnvelope:
    """The document's `EvidenceEnvelope`."""

    data: SessionEvidence

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvidenceEnvelope:
        return cls(
            data=SessionEvidence.from_json(data["data"]),
        )


@dataclass(frozen=True)
class Link:
    """The document's `EvidenceLink`. (`EvidenceLink` in the document.)"""

    # The review page of the session: open it in a browser; it needs no key.
    url: str
    expires_at: datetime

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Link:
        return cls(
            url=data["url"],
            expires_at=_required_time(data.get("expiresAt"), "expiresAt"),
        )


@dataclass(frozen=True)
class EvidenceLinkEnvelope:
    """The document's `EvidenceLinkEnvelope`."""

    data: Link

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvidenceLinkEnvelope:
        return cls(
            data=Link.from_json(data["data"]),
        )


@dataclass(frozen=True)
class FeatureEvidence:
    """One feature of the session as the current model sees it."""

    name: str
    # Its part in the score's log-odds (positive towards human-like); 0 when the model does not
    # read it or it did not count.
    contribution: float
    # Where the value sits among the TRAIN humans (0-100), from the model file's quantiles.
    human_percentile: Optional[float] = None
    # `None`: the session gave no evidence for it (unmeasured).
    value: Optional[float] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FeatureEvidence:
        return cls(
            name=data["name"],
            contribution=float(data["contribution"]),
            human_percentile=_optional(float, data.get("humanPercentile")),
            value=_optional(float, data.get("value")),
        )


@dataclass(frozen=True)
class FocusChange:
    """The document's `FocusChange`."""

    t: int
    # `focus`, `blur` (the window), `field` (a form field, by its index on the page), `hidden`,
    # `visible`, `submit`, `pagehide`.
    kind: str
    field: Optional[int] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FocusChange:
        return cls(
            t=int(data["t"]),
            kind=data["kind"],
            field=_optional(int, data.get("field")),
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
class HistogramBin:
    """One bin of the histogram of scores: sessions with `from <= score < to` (the last bin
    includes 100)."""

    from_: float
    to: float
    sessions: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistogramBin:
        return cls(
            from_=float(data["from"]),
            to=float(data["to"]),
            sessions=int(data["sessions"]),
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
class Key:
    """The document's `Key`."""

    t: int
    # The key's class (`char`, `digit`, `space`, `backspace`, ...), never the key.
    class_: str
    repeat: bool
    # Until the matching key-up of the same class, when there was one.
    hold_ms: Optional[int] = None
    trusted: Optional[bool] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Key:
        return cls(
            t=int(data["t"]),
            class_=data["class"],
            repeat=bool(data["repeat"]),
            hold_ms=_optional(int, data.get("holdMs")),
            trusted=_optional(bool, data.get("trusted")),
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
class LatestScore:
    """A session's latest row of the `scores` table."""

    human_score_percent: float
    score_band: str
    model_version: str
    # Unix milliseconds.
    scored_at: int
    run_id: str
    # Events the score was computed from (more arrived since when the timeline has more).
    event_count: int
    reasons: Tuple[str, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LatestScore:
        return cls(
            human_score_percent=float(data["humanScorePercent"]),
            score_band=data["scoreBand"],
            model_version=data["modelVersion"],
            scored_at=int(data["scoredAt"]),
            run_id=data["runId"],
            event_count=int(data["eventCount"]),
            reasons=tuple(data["reasons"]),
        )


@dataclass(frozen=True)
class LinkRequest:
    """Body of `POST .../evidence-links` (optional)."""

    # How long the link works: 1 to 3600 seconds; 900 when absent.
    expires_in_seconds: Optional[int] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LinkRequest:
        return cls(
            expires_in_seconds=_optional(int, data.get("expiresInSeconds")),
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
class Press:
    """The document's `Press`."""

    t: int
    # `down`, `up`, `click` (pointer), `touchstart`, `touchend`.
    kind: str
    pointer_type: str
    # `Event.isTrusted` as sent; `false` is a script's event.
    trusted: Optional[bool] = None
    x: Optional[int] = None
    y: Optional[int] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Press:
        return cls(
            t=int(data["t"]),
            kind=data["kind"],
            pointer_type=data["pointerType"],
            trusted=_optional(bool, data.get("trusted")),
            x=_optional(int, data.get("x")),
            y=_optional(int, data.get("y")),
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
    # Sessions left for a later run: some of their acknowledged events were not in the lake yet
    # (another instance's log held them). A session is never scored on part of its events.
    deferred: int
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
    # Why sessions were deferred; present when `deferred` is above 0.
    deferred_reason: Optional[str] = None

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
            deferred=int(data["deferred"]),
            created_at=_required_time(data.get("createdAt"), "createdAt"),
            started_at=_required_time(data.get("startedAt"), "startedAt"),
            error=data.get("error"),
            completed_at=_time(data.get("completedAt")),
            updated_at=_time(data.get("updatedAt")),
            cancel_requested_at=_time(data.get("cancelRequestedAt")),
            canceled_at=_time(data.get("canceledAt")),
            canceled_by=data.get("canceledBy"),
            deferred_reason=data.get("deferredReason"),
        )


@dataclass(frozen=True)
class Scroll:
    """The document's `Scroll`."""

    t: int
    # `wheel` (a notch or a touchpad step, `dy` in pixels) or `scroll` (the page's position).
    kind: str
    dy: Optional[float] = None
    y: Optional[int] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Scroll:
        return cls(
            t=int(data["t"]),
            kind=data["kind"],
            dy=_optional(float, data.get("dy")),
            y=_optional(int, data.get("y")),
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
    # While `pending`: why it waits, or null.
    wait_reason: Optional[str] = None
    # While `pending`: what the erasure waits on, as its last attempt found it (`instance <id>`:
    # an instance of the fleet that has not purged its log; `run <id>`: a scoring run writing the
    # survey's scores), or null.
    waiting_on: Optional[str] = None

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
            wait_reason=data.get("waitReason"),
            waiting_on=data.get("waitingOn"),
        )


@dataclass(frozen=True)
class SessionEvidence:
    """Everything the review view shows of one session."""

    timeline: Timeline
    environment: EnvironmentTells
    # The model the features below are weighed by: the one this server scores with.
    model_version: str
    features: Tuple[FeatureEvidence, ...]
    # The latest score the lake holds for the session; `None` before its first scoring run.
    score: Optional[LatestScore] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionEvidence:
        return cls(
            timeline=Timeline.from_json(data["timeline"]),
            environment=EnvironmentTells.from_json(data["environment"]),
            model_version=data["modelVersion"],
            features=tuple(FeatureEvidence.from_json(item) for item in data["features"]),
            score=_optional(LatestScore.from_json, data.get("score")),
        )


@dataclass(frozen=True)
class SharedFeatureView:
    """A feature a cluster's members share: their median percentile among people and how far apart
    they are on it (largest minus smallest, percentile points)."""

    name: str
    median_percentile: float
    range_percentile: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SharedFeatureView:
        return cls(
            name=data["name"],
            median_percentile=float(data["medianPercentile"]),
            range_percentile=float(data["rangePercentile"]),
        )


@dataclass(frozen=True)
class Size:
    """The document's `Size`."""

    width: float
    height: float

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Size:
        return cls(
            width=float(data["width"]),
            height=float(data["height"]),
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


@dataclass(frozen=True)
class Stroke:
    """The document's `Stroke`."""

    # `mouse`, `pen` or `touch`.
    pointer_type: str
    # `[t, x, y]`, simplified (see the module docs).
    points: Tuple[Tuple[int, ...], ...]
    # Moves recorded in the stroke, before simplification.
    recorded: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Stroke:
        return cls(
            pointer_type=data["pointerType"],
            points=tuple(tuple(int(value) for value in item) for item in data["points"]),
            recorded=int(data["recorded"]),
        )


@dataclass(frozen=True)
class SurveySummary:
    """A survey at a glance."""

    survey_id: str
    # Sessions with a score (each its latest), per band below.
    scored: int
    # Sessions captured with a reference and not scored yet.
    unscored: int
    bands: BandCounts
    # 20 bins of 5 points.
    histogram: Tuple[HistogramBin, ...]
    # Largest first.
    clusters: Tuple[ClusterView, ...]
    # The most recently started run; absent before the first.
    latest_run: Optional[DeskRunView] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SurveySummary:
        return cls(
            survey_id=data["surveyId"],
            scored=int(data["scored"]),
            unscored=int(data["unscored"]),
            bands=BandCounts.from_json(data["bands"]),
            histogram=tuple(HistogramBin.from_json(item) for item in data["histogram"]),
            clusters=tuple(ClusterView.from_json(item) for item in data["clusters"]),
            latest_run=_optional(DeskRunView.from_json, data.get("latestRun")),
        )


@dataclass(frozen=True)
class SurveySummaryEnvelope:
    """The document's `SurveySummaryEnvelope`."""

    data: SurveySummary

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SurveySummaryEnvelope:
        return cls(
            data=SurveySummary.from_json(data["data"]),
        )


@dataclass(frozen=True)
class TextChange:
    """The document's `TextChange`."""

    t: int
    # `paste`, `typed` (an insertion right after a key press) or `inserted` (an insertion with no
    # key press or paste behind it: a script or an autofill).
    kind: str
    length: int
    trusted: Optional[bool] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TextChange:
        return cls(
            t=int(data["t"]),
            kind=data["kind"],
            length=int(data["length"]),
            trusted=_optional(bool, data.get("trusted")),
        )


@dataclass(frozen=True)
class Timeline:
    """A session's behaviour in time order. Every `t` is milliseconds after `startedAt`."""

    # Unix milliseconds of the first event.
    started_at: int
    duration_ms: int
    event_count: int
    # Pointer strokes: runs of moves of one pointer type without a pause of a second or more.
    pointer: Tuple[Stroke, ...]
    presses: Tuple[Press, ...]
    keys: Tuple[Key, ...]
    scrolls: Tuple[Scroll, ...]
    # Focus and visibility switches, fields reached, submits and page exits.
    focus: Tuple[FocusChange, ...]
    # Text that arrived in fields: pasted, typed, or inserted with no key or paste behind it.
    text: Tuple[TextChange, ...]
    screen: Optional[Size] = None
    # The page's viewport and the screen, as the embed reported them.
    viewport: Optional[Size] = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Timeline:
        return cls(
            started_at=int(data["startedAt"]),
            duration_ms=int(data["durationMs"]),
            event_count=int(data["eventCount"]),
            pointer=tuple(Stroke.from_json(item) for item in data["pointer"]),
            presses=tuple(Press.from_json(item) for item in data["presses"]),
            keys=tuple(Key.from_json(item) for item in data["keys"]),
            scrolls=tuple(Scroll.from_json(item) for item in data["scrolls"]),
            focus=tuple(FocusChange.from_json(item) for item in data["focus"]),
            text=tuple(TextChange.from_json(item) for item in data["text"]),
            screen=_optional(Size.from_json, data.get("screen")),
            viewport=_optional(Size.from_json, data.get("viewport")),
        )


# The document's names of the classes above that the client names otherwise.
LookupRow = SessionRow
ProvisionResult = ProvisionedSurvey
ScoringFailureView = ScoringFailure
ScoringRunView = ScoringRun
SessionDeletionView = SessionDeletion
DeskSessionView = DeskSession
DeskSessionsEnvelope = SessionsPage
EvidenceLink = Link
