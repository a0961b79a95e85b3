"""The sync and async clients. Both share one policy (`_Calls`): what to send, what an answer
means, what to retry and how long to wait; only the waiting and the transport differ."""

from __future__ import annotations

import asyncio
import random
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple
from urllib.parse import quote

import httpx

from .models import (
    DeskSession,
    IntegrationContext,
    Link,
    ProvisionedSurvey,
    ScoringRun,
    SessionDeletion,
    SessionEvidence,
    SessionRow,
    SessionsPage,
    SurveySummary,
    rows,
)

#: References per lookup request (the API's limit).
LOOKUP_CHUNK = 100

_HEX24 = re.compile(r"^[a-fA-F0-9]{24}$")


class TelltaleError(Exception):
    """An answer that is not a success: `status` and the service's `error` message. Raised at once
    for 4xx other than 429 (a bug on one side: retrying cannot help), and for 429, 5xx and
    connection failures once the retry budget is spent."""

    def __init__(self, status: Optional[int], message: str):
        super().__init__(f"{status}: {message}" if status is not None else message)
        self.status = status
        self.message = message


class WaitTimeout(TelltaleError):
    """A run or a deletion still unfinished when the caller's deadline passed."""

    def __init__(self, message: str):
        super().__init__(None, message)


@dataclass(frozen=True)
class RetryPolicy:
    """What is retried and for how long.

    - 429: waits the `Retry-After` the service sends (at most `max_retry_after` seconds each
      time), for at most `rate_limited_patience` seconds in all; a rate-limited request does not
      spend `max_attempts`.
    - 5xx, timeouts and connection errors: up to `max_attempts` tries in all, waiting
      `backoff * 2**n` seconds (at most `max_backoff`, with jitter) in between, or the
      `Retry-After` of a 503 when that is longer (at most `max_retry_after`).
    Every request of this API is safe to repeat (the writes are idempotent).
    """

    max_attempts: int = 5
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_retry_after: float = 60.0
    rate_limited_patience: float = 300.0


def _check_survey_id(survey_id: str) -> str:
    if not _HEX24.match(survey_id):
        raise ValueError(f"{survey_id!r} is not a survey id (24 hex characters)")
    return survey_id


def _check_reference(reference: str) -> str:
    try:
        uuid.UUID(reference)
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"{reference!r} is not a UUID") from None
    return reference


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            return body["error"]
    except ValueError:
        pass
    return response.text[:200] or response.reason_phrase


class _Calls:
    """What the two clients share: requests, the meaning of answers, the retry decisions."""

    def __init__(self, policy: RetryPolicy, sleep_jitter: Callable[[], float] = random.random):
        self.policy = policy
        self.jitter = sleep_jitter

    def retry_wait(
        self, outcome: "httpx.Response | Exception", attempt: int, rate_limited_for: float
    ) -> Optional[float]:
        """How long to wait before the next try, or None to give up (the caller raises)."""
        policy = self.policy
        if isinstance(outcome, httpx.Response) and outcome.status_code == 429:
            wait = self._retry_after(outcome, 1.0)
            if rate_limited_for + wait > policy.rate_limited_patience:
                return None
            return wait
        if attempt >= policy.max_attempts:
            return None
        if isinstance(outcome, httpx.Response) and outcome.status_code < 500:
            return None
        base = min(policy.backoff * 2 ** (attempt - 1), policy.max_backoff)
        wait = base * (0.5 + self.jitter() / 2)
        if isinstance(outcome, httpx.Response):
            # A 503 says when the service expects to be back (a catalog restart, a collector
            # catching up): sooner would only fail again.
            wait = max(wait, self._retry_after(outcome, 0.0))
        return wait

    def _retry_after(self, response: httpx.Response, default: float) -> float:
        """The response's `Retry-After` in seconds (the delay form), within the policy's cap."""
        try:
            wait = float(response.headers.get("Retry-After", default))
        except ValueError:
            wait = default
        return min(max(wait, 0.0), self.policy.max_retry_after)

    @staticmethod
    def result(response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise TelltaleError(response.status_code, _error_message(response))
        try:
            return response.json()["data"]
        except (ValueError, KeyError, TypeError):
            raise TelltaleError(response.status_code, "the answer is not a {\"data\": ...} envelope") from None

    @staticmethod
    def page(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise TelltaleError(response.status_code, "the answer is not a page of sessions") from None

    @staticmethod
    def text(response: httpx.Response) -> Any:
        return response.text

    @staticmethod
    def failed(outcome: "httpx.Response | Exception") -> TelltaleError:
        if isinstance(outcome, httpx.Response):
            return TelltaleError(outcome.status_code, _error_message(outcome))
        return TelltaleError(None, f"{type(outcome).__name__}: {outcome}")

    @staticmethod
    def chunks(references: Sequence[str]) -> List[List[str]]:
        checked = [_check_reference(reference) for reference in references]
        return [checked[i : i + LOOKUP_CHUNK] for i in range(0, len(checked), LOOKUP_CHUNK)]


class _Attempts:
    """One call's tries: counts them (a 429 spends no attempt, only rate-limited patience) and
    says how long to wait after a failed one, or raises when the budget is spent."""

    def __init__(self, calls: _Calls):
        self.calls = calls
        self.attempt = 0
        self.rate_limited_for = 0.0

    def wait_after(self, outcome: "httpx.Response | Exception") -> float:
        rate_limited = isinstance(outcome, httpx.Response) and outcome.status_code == 429
        if not rate_limited:
            self.attempt += 1
        wait = self.calls.retry_wait(outcome, max(self.attempt, 1), self.rate_limited_for)
        if wait is None:
            raise self.calls.failed(outcome)
        if rate_limited:
            self.rate_limited_for += wait
        return wait


def _headers(key: str) -> dict:
    if not key.startswith("tt_"):
        raise ValueError("an integration key starts with tt_")
    return {"Authorization": f"Bearer {key}", "Accept": "application/json"}


def _list_params(
    band: Optional[str], cluster: Optional[str], order: Optional[str], limit: Optional[int], after: Optional[str]
) -> dict:
    """The desk list's query parameters, those given."""
    given = {"band": band, "cluster": cluster, "order": order, "limit": limit, "after": after}
    return {name: value for name, value in given.items() if value is not None}


def _paths(survey_id: str) -> str:
    return f"/integrations/v1/surveys/{_check_survey_id(survey_id)}"


class Client:
    """Telltale's integration API, for a survey platform's server (the key is a secret: never
    ship it to a browser). Thread-safe; close it (or use `with`) to release its connections.

    Every call has a timeout (`timeout` seconds, connect and read) and retries only what is
    transient (see `RetryPolicy`)."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        transport: Optional[httpx.BaseTransport] = None,
        event_hooks: Optional[dict] = None,
    ):
        self._calls = _Calls(retry)
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=_headers(key),
            timeout=timeout,
            transport=transport,
            event_hooks=event_hooks or {},
        )

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(
        self, method: str, path: str, body: Any = None, *, params: Any = None, read: Any = None
    ) -> Any:
        attempts = _Attempts(self._calls)
        while True:
            outcome: "httpx.Response | Exception"
            try:
                outcome = self._http.request(method, path, json=body, params=params)
                if outcome.status_code < 400:
                    return (read or self._calls.result)(outcome)
            except (httpx.TimeoutException, httpx.TransportError) as error:
                outcome = error
            time.sleep(attempts.wait_after(outcome))

    def context(self) -> IntegrationContext:
        """The key's organization, prefix, label and scopes (the check that a key works)."""
        return IntegrationContext.from_json(self._call("GET", "/integrations/v1/context"))

    def provision_survey(self, external_survey_id: str, name: str) -> ProvisionedSurvey:
        """Creates the survey for your own id, or renames it: the same id gives the same survey."""
        if not 1 <= len(external_survey_id) <= 200:
            raise ValueError("an external survey id has 1 to 200 characters")
        path = "/integrations/v1/surveys/" + quote(external_survey_id, safe="")
        return ProvisionedSurvey.from_json(self._call("PUT", path, {"name": name}))

    def lookup(self, survey_id: str, references: Iterable[str]) -> List[SessionRow]:
        """One row per reference, in order, however many (sent 100 per request)."""
        found: List[SessionRow] = []
        for chunk in self._calls.chunks(list(references)):
            data = self._call("POST", _paths(survey_id) + "/sessions/lookup", {"externalReferences": chunk})
            found.extend(rows(data))
        return found

    def start_scoring_run(self, survey_id: str, *, force: bool = False) -> ScoringRun:
        """Starts a run, or returns the survey's active one; returns at once."""
        data = self._call("POST", _paths(survey_id) + "/scoring-runs", {"force": force})
        return ScoringRun.from_json(data)

    def scoring_run(self, survey_id: str, run_id: str) -> ScoringRun:
        path = f"{_paths(survey_id)}/scoring-runs/{_check_survey_id(run_id)}"
        return ScoringRun.from_json(self._call("GET", path))

    def score_and_wait(
        self, survey_id: str, *, force: bool = False, poll_interval: float = 1.0, timeout: float = 600.0
    ) -> ScoringRun:
        """Starts a run and polls it every `poll_interval` seconds until it is no longer running;
        raises `WaitTimeout` after `timeout` seconds. A failed run is returned, not raised: its
        `error` and `failures` say why."""
        run = self.start_scoring_run(survey_id, force=force)
        deadline = time.monotonic() + timeout
        while not run.finished:
            if time.monotonic() + poll_interval > deadline:
                raise WaitTimeout(f"scoring run {run.id} still running after {timeout} s")
            time.sleep(poll_interval)
            run = self.scoring_run(survey_id, run.id)
        return run

    def evidence(self, survey_id: str, reference: str) -> SessionEvidence:
        """A session's behaviour and the evidence behind its score: its timeline, environment,
        latest score with its reasons, and every feature with its contribution and its place
        among the model's TRAIN humans."""
        path = f"{_paths(survey_id)}/sessions/by-reference/{_check_reference(reference)}/evidence"
        return SessionEvidence.from_json(self._call("GET", path))

    def request_deletion(self, survey_id: str, reference: str) -> SessionDeletion:
        """Asks for a session's erasure (idempotent); it is `pending` until done."""
        path = f"{_paths(survey_id)}/sessions/by-reference/{_check_reference(reference)}"
        return SessionDeletion.from_json(self._call("DELETE", path))

    def deletion(self, survey_id: str, reference: str) -> SessionDeletion:
        path = f"{_paths(survey_id)}/session-deletions/{_check_reference(reference)}"
        return SessionDeletion.from_json(self._call("GET", path))

    def summary(self, survey_id: str) -> SurveySummary:
        """The survey at a glance: the latest run, counts per band, a histogram of scores,
        sessions not scored yet, and the clusters of sessions that behaved alike."""
        return SurveySummary.from_json(self._call("GET", _paths(survey_id) + "/summary"))

    def sessions_page(
        self,
        survey_id: str,
        *,
        band: Optional[str] = None,
        cluster: Optional[str] = None,
        order: Optional[str] = None,
        limit: Optional[int] = None,
        after: Optional[str] = None,
    ) -> SessionsPage:
        """One page of the survey's scored sessions in score order (lowest first unless
        `order="desc"`); pass the page's `next` as `after` for the one after it."""
        params = _list_params(band, cluster, order, limit, after)
        page = self._call("GET", _paths(survey_id) + "/summary/sessions", params=params, read=_Calls.page)
        return SessionsPage.from_json(page)

    def sessions(
        self, survey_id: str, *, band: Optional[str] = None, cluster: Optional[str] = None, order: Optional[str] = None
    ) -> Iterator[DeskSession]:
        """Every scored session the filters select, page after page (1000 a request)."""
        after: Optional[str] = None
        while True:
            page = self.sessions_page(survey_id, band=band, cluster=cluster, order=order, limit=1000, after=after)
            yield from page.data
            if page.next is None:
                return
            after = page.next

    def sessions_csv(
        self, survey_id: str, *, band: Optional[str] = None, cluster: Optional[str] = None, order: Optional[str] = None
    ) -> str:
        """The list as CSV: every session the filters select, with the list's fields."""
        params = _list_params(band, cluster, order, None, None)
        return self._call("GET", _paths(survey_id) + "/summary/sessions.csv", params=params, read=_Calls.text)

    def desk_link(self, survey_id: str, *, expires_in_seconds: Optional[int] = None) -> Link:
        """A link to the survey's desk page for a person's browser (1 to 3600 s; 900 by
        default). It stops working when it expires or when this key is revoked."""
        body = {} if expires_in_seconds is None else {"expiresInSeconds": expires_in_seconds}
        return Link.from_json(self._call("POST", _paths(survey_id) + "/desk-links", body))

    def delete_and_wait(
        self, survey_id: str, reference: str, *, poll_interval: float = 0.5, timeout: float = 300.0
    ) -> SessionDeletion:
        """Requests the erasure and polls it until it is no longer pending."""
        deletion = self.request_deletion(survey_id, reference)
        deadline = time.monotonic() + timeout
        while not deletion.finished:
            if time.monotonic() + poll_interval > deadline:
                raise WaitTimeout(f"deletion of {reference} still pending after {timeout} s")
            time.sleep(poll_interval)
            deletion = self.deletion(survey_id, reference)
        return deletion


class AsyncClient:
    """`Client`'s async twin (asyncio), with the same methods as coroutines."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        timeout: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        transport: Optional[httpx.AsyncBaseTransport] = None,
        event_hooks: Optional[dict] = None,
    ):
        self._calls = _Calls(retry)
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers=_headers(key),
            timeout=timeout,
            transport=transport,
            event_hooks=event_hooks or {},
        )

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(
        self, method: str, path: str, body: Any = None, *, params: Any = None, read: Any = None
    ) -> Any:
        attempts = _Attempts(self._calls)
        while True:
            outcome: "httpx.Response | Exception"
            try:
                outcome = await self._http.request(method, path, json=body, params=params)
                if outcome.status_code < 400:
                    return (read or self._calls.result)(outcome)
            except (httpx.TimeoutException, httpx.TransportError) as error:
                outcome = error
            await asyncio.sleep(attempts.wait_after(outcome))

    async def context(self) -> IntegrationContext:
        return IntegrationContext.from_json(await self._call("GET", "/integrations/v1/context"))

    async def provision_survey(self, external_survey_id: str, name: str) -> ProvisionedSurvey:
        if not 1 <= len(external_survey_id) <= 200:
            raise ValueError("an external survey id has 1 to 200 characters")
        path = "/integrations/v1/surveys/" + quote(external_survey_id, safe="")
        return ProvisionedSurvey.from_json(await self._call("PUT", path, {"name": name}))

    async def lookup(self, survey_id: str, references: Iterable[str]) -> List[SessionRow]:
        found: List[SessionRow] = []
        for chunk in self._calls.chunks(list(references)):
            data = await self._call(
                "POST", _paths(survey_id) + "/sessions/lookup", {"externalReferences": chunk}
            )
            found.extend(rows(data))
        return found

    async def start_scoring_run(self, survey_id: str, *, force: bool = False) -> ScoringRun:
        data = await self._call("POST", _paths(survey_id) + "/scoring-runs", {"force": force})
        return ScoringRun.from_json(data)

    async def scoring_run(self, survey_id: str, run_id: str) -> ScoringRun:
        path = f"{_paths(survey_id)}/scoring-runs/{_check_survey_id(run_id)}"
        return ScoringRun.from_json(await self._call("GET", path))

    async def score_and_wait(
        self, survey_id: str, *, force: bool = False, poll_interval: float = 1.0, timeout: float = 600.0
    ) -> ScoringRun:
        run = await self.start_scoring_run(survey_id, force=force)
        deadline = time.monotonic() + timeout
        while not run.finished:
            if time.monotonic() + poll_interval > deadline:
                raise WaitTimeout(f"scoring run {run.id} still running after {timeout} s")
            await asyncio.sleep(poll_interval)
            run = await self.scoring_run(survey_id, run.id)
        return run

    async def evidence(self, survey_id: str, reference: str) -> SessionEvidence:
        path = f"{_paths(survey_id)}/sessions/by-reference/{_check_reference(reference)}/evidence"
        return SessionEvidence.from_json(await self._call("GET", path))

    async def request_deletion(self, survey_id: str, reference: str) -> SessionDeletion:
        path = f"{_paths(survey_id)}/sessions/by-reference/{_check_reference(reference)}"
        return SessionDeletion.from_json(await self._call("DELETE", path))

    async def deletion(self, survey_id: str, reference: str) -> SessionDeletion:
        path = f"{_paths(survey_id)}/session-deletions/{_check_reference(reference)}"
        return SessionDeletion.from_json(await self._call("GET", path))

    async def summary(self, survey_id: str) -> SurveySummary:
        return SurveySummary.from_json(await self._call("GET", _paths(survey_id) + "/summary"))

    async def sessions_page(
        self,
        survey_id: str,
        *,
        band: Optional[str] = None,
        cluster: Optional[str] = None,
        order: Optional[str] = None,
        limit: Optional[int] = None,
        after: Optional[str] = None,
    ) -> SessionsPage:
        params = _list_params(band, cluster, order, limit, after)
        page = await self._call("GET", _paths(survey_id) + "/summary/sessions", params=params, read=_Calls.page)
        return SessionsPage.from_json(page)

    async def sessions(
        self, survey_id: str, *, band: Optional[str] = None, cluster: Optional[str] = None, order: Optional[str] = None
    ) -> AsyncIterator[DeskSession]:
        after: Optional[str] = None
        while True:
            page = await self.sessions_page(
                survey_id, band=band, cluster=cluster, order=order, limit=1000, after=after
            )
            for session in page.data:
                yield session
            if page.next is None:
                return
            after = page.next

    async def sessions_csv(
        self, survey_id: str, *, band: Optional[str] = None, cluster: Optional[str] = None, order: Optional[str] = None
    ) -> str:
        params = _list_params(band, cluster, order, None, None)
        return await self._call("GET", _paths(survey_id) + "/summary/sessions.csv", params=params, read=_Calls.text)

    async def desk_link(self, survey_id: str, *, expires_in_seconds: Optional[int] = None) -> Link:
        body = {} if expires_in_seconds is None else {"expiresInSeconds": expires_in_seconds}
        return Link.from_json(await self._call("POST", _paths(survey_id) + "/desk-links", body))

    async def delete_and_wait(
        self, survey_id: str, reference: str, *, poll_interval: float = 0.5, timeout: float = 300.0
    ) -> SessionDeletion:
        deletion = await self.request_deletion(survey_id, reference)
        deadline = time.monotonic() + timeout
        while not deletion.finished:
            if time.monotonic() + poll_interval > deadline:
                raise WaitTimeout(f"deletion of {reference} still pending after {timeout} s")
            await asyncio.sleep(poll_interval)
            deletion = await self.deletion(survey_id, reference)
        return deletion


__all__: Tuple[str, ...] = (
    "AsyncClient",
    "Client",
    "LOOKUP_CHUNK",
    "RetryPolicy",
    "TelltaleError",
    "WaitTimeout",
)
