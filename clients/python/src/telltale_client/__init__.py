"""Telltale's integration API from a survey platform's server: provisioning, lookup of sessions
by response UUID (any number, 100 per request), scoring runs started and polled to the end,
session erasure and its status, a session's evidence for review, and a survey's summary, list
and desk link. Sync (`Client`) and async (`AsyncClient`), on httpx, with
timeouts on every call and retries of transient failures only (429 after its `Retry-After`,
5xx, connection errors)."""

from .client import LOOKUP_CHUNK, AsyncClient, Client, RetryPolicy, TelltaleError, WaitTimeout
from .models import (
    DeskSession,
    IntegrationContext,
    Link,
    ProvisionedSurvey,
    ScoringFailure,
    ScoringRun,
    SessionDeletion,
    SessionEvidence,
    SessionRow,
    SessionsPage,
    SurveySummary,
)

__all__ = [
    "AsyncClient",
    "Client",
    "DeskSession",
    "IntegrationContext",
    "LOOKUP_CHUNK",
    "Link",
    "ProvisionedSurvey",
    "RetryPolicy",
    "ScoringFailure",
    "ScoringRun",
    "SessionDeletion",
    "SessionEvidence",
    "SessionRow",
    "SessionsPage",
    "SurveySummary",
    "TelltaleError",
    "WaitTimeout",
]
