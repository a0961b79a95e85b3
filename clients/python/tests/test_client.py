"""The Python client against the real `telltale` binary (TELLTALE_BIN, default the debug build
in CARGO_TARGET_DIR): provisioning, lookup in chunks, runs started and waited for, erasure,
errors that must not be retried, and a storm of 429s ridden out under a lowered limit."""

import asyncio
import os
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from telltale_client import (  # noqa: E402
    LOOKUP_CHUNK,
    AsyncClient,
    Client,
    RetryPolicy,
    TelltaleError,
)
from telltale_client.client import _Calls  # noqa: E402


def binary() -> str:
    if os.environ.get("TELLTALE_BIN"):
        return os.environ["TELLTALE_BIN"]
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/telltale-target"))
    return os.path.join(target, "debug", "telltale")


class Server:
    """A real `telltale serve` on a free port and a fresh data dir; its first start's key."""

    def __init__(self, *args: str):
        self.dir = tempfile.mkdtemp(prefix="telltale-pyclient-")
        self.process = subprocess.Popen(
            [binary(), "serve", "--bind", "127.0.0.1:0", "--data-dir", self.dir, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, args=(lines,), daemon=True).start()
        self.url = self.key = None
        deadline = time.monotonic() + 120
        while self.url is None or self.key is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                raise RuntimeError("telltale serve did not start within 120 s")
            if line.startswith("telltale listening on "):
                self.url = line.split()[-1]
            elif line.startswith("TELLTALE_INTEGRATION_KEY="):
                self.key = line.split("=", 1)[1]

    def _read(self, lines: "queue.Queue[str]") -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            lines.put(line.strip())

    def collect(self, tracking_key: str, identifier: str, events: int) -> None:
        """Posts a browser session's pointer events to the collector (no key)."""
        t0 = 1_763_800_000_000
        batch = {
            "events": [
                {
                    "type": "pointermove",
                    "timestamp": t0 + 16 * i + random.randint(0, 5),
                    "data": {"x": 100 + i * 3 + random.randint(-2, 2), "y": 200 + i, "pointerType": "mouse", "trusted": True},
                }
                for i in range(events)
            ]
        }
        response = httpx.post(f"{self.url}/event/{tracking_key}/{identifier}", json=batch, timeout=10)
        assert response.status_code == 201, response.text

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_captured(client: Client, survey_id: str, reference: str) -> None:
    deadline = time.monotonic() + 30
    while not client.lookup(survey_id, [reference])[0].captured:
        if time.monotonic() > deadline:
            raise AssertionError(f"{reference} not captured after 30 s")
        time.sleep(0.2)


class AgainstTheService(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--api-rate-per-minute", "100000")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def client(self, **kwargs) -> Client:
        return Client(self.server.url, self.server.key, **kwargs)

    def test_context_and_idempotent_provisioning(self):
        with self.client() as client:
            context = client.context()
            self.assertTrue(self.server.key.startswith(context.key_prefix + "_"))
            self.assertEqual(len(context.key_scopes), 5)
            first = client.provision_survey("panel/2026 spring", "Spring panel")
            again = client.provision_survey("panel/2026 spring", "Spring panel, renamed")
            self.assertEqual(first.survey_id, again.survey_id)
            self.assertEqual(first.tracking_key, again.tracking_key)
            self.assertRegex(first.survey_id, r"^[0-9a-f]{24}$")
            self.assertTrue(first.embed_script_url.startswith(self.server.url))

    def test_lookup_of_many_references_in_chunks_keeps_their_order(self):
        sent = []
        hooks = {"request": [lambda request: sent.append(request.url.path)]}
        with self.client(event_hooks=hooks) as client:
            survey = client.provision_survey("lookup-chunks", "Lookup")
            captured = str(uuid.uuid4())
            self.server.collect(survey.tracking_key, captured, 20)
            wait_captured(client, survey.survey_id, captured)
            references = [str(uuid.uuid4()) for _ in range(2 * LOOKUP_CHUNK + 50)]
            references[137] = captured
            sent.clear()
            found = client.lookup(survey.survey_id, references)
            self.assertEqual(len(sent), 3)
            self.assertEqual([row.external_reference for row in found], references)
            for index, row in enumerate(found):
                if index == 137:
                    self.assertTrue(row.captured)
                    self.assertEqual(row.event_count, 20)
                    self.assertIsNotNone(row.first_event_at)
                else:
                    self.assertFalse(row.captured)
                    self.assertEqual(row.event_count, 0)
                    self.assertIsNone(row.human_score_percent)

    def test_score_and_wait_then_read_the_scores(self):
        with self.client() as client:
            survey = client.provision_survey("scoring", "Scoring")
            references = [str(uuid.uuid4()) for _ in range(3)]
            for reference in references:
                self.server.collect(survey.tracking_key, reference, 60)
            for reference in references:
                wait_captured(client, survey.survey_id, reference)
            run = client.score_and_wait(survey.survey_id, poll_interval=0.2, timeout=120)
            self.assertEqual(run.status, "completed", run)
            self.assertEqual(run.total, 3)
            self.assertEqual(run.scored + run.skipped + run.failed, run.total)
            self.assertEqual(run.scored, 3)
            for row in client.lookup(survey.survey_id, references):
                self.assertIsNotNone(row.human_score_percent)
                self.assertTrue(0 <= row.human_score_percent <= 100)
                self.assertIn(row.score_band, ("automation-like", "review", "human-like"))
                self.assertIsNotNone(row.model_version)
            row = client.lookup(survey.survey_id, references[:1])[0]
            evidence = client.evidence(survey.survey_id, references[0])
            self.assertEqual(evidence.score.score_band, row.score_band)
            self.assertEqual(evidence.score.human_score_percent, row.human_score_percent)
            self.assertEqual(evidence.timeline.event_count, 60)
            self.assertGreater(len(evidence.features), 50)
            again = client.score_and_wait(survey.survey_id, poll_interval=0.2, timeout=120)
            self.assertEqual((again.scored, again.skipped), (0, 3))

    def test_the_surveys_summary_list_csv_and_desk_link(self):
        with self.client() as client:
            survey = client.provision_survey("desk", "Desk")
            references = [str(uuid.uuid4()) for _ in range(3)]
            for reference in references:
                self.server.collect(survey.tracking_key, reference, 60)
            for reference in references:
                wait_captured(client, survey.survey_id, reference)
            client.score_and_wait(survey.survey_id, poll_interval=0.2, timeout=120)
            summary = client.summary(survey.survey_id)
            self.assertEqual(summary.scored, 3)
            bands = summary.bands
            self.assertEqual(bands.automation_like + bands.review + bands.human_like, 3)
            self.assertEqual(len(summary.histogram), 20)
            page = client.sessions_page(survey.survey_id, limit=2, order="desc")
            self.assertEqual(len(page.data), 2)
            self.assertIsNotNone(page.next)
            self.assertGreaterEqual(page.data[0].human_score_percent, page.data[1].human_score_percent)
            listed = [session.reference for session in client.sessions(survey.survey_id)]
            self.assertEqual(sorted(listed), sorted(references))
            csv = client.sessions_csv(survey.survey_id)
            self.assertTrue(csv.startswith("reference,human_score_percent,score_band,"))
            self.assertEqual(len(csv.strip().splitlines()), 4)
            with self.assertRaises(TelltaleError) as refused:
                client.sessions_page(survey.survey_id, band="bogus")
            self.assertEqual(refused.exception.status, 400)
            link = client.desk_link(survey.survey_id, expires_in_seconds=60)
            self.assertTrue(link.url.startswith(f"{self.server.url}/desk/{survey.survey_id}?"))
            self.assertEqual(httpx.get(link.url, timeout=10).status_code, 200)

    def test_deletion_waits_for_completion_and_the_session_is_gone(self):
        with self.client() as client:
            survey = client.provision_survey("deletion", "Deletion")
            reference = str(uuid.uuid4())
            self.server.collect(survey.tracking_key, reference, 10)
            wait_captured(client, survey.survey_id, reference)
            deletion = client.delete_and_wait(survey.survey_id, reference, poll_interval=0.1, timeout=120)
            self.assertEqual(deletion.status, "completed", deletion)
            self.assertIsNotNone(deletion.completed_at)
            self.assertEqual(client.deletion(survey.survey_id, reference).status, "completed")
            self.assertFalse(client.lookup(survey.survey_id, [reference])[0].captured)

    def test_client_errors_are_raised_at_once_not_retried(self):
        sent = []
        hooks = {"request": [lambda request: sent.append(request.url.path)]}
        with self.client(event_hooks=hooks) as client:
            with self.assertRaises(TelltaleError) as missing:
                client.start_scoring_run("0" * 24)
            self.assertEqual(missing.exception.status, 404)
            self.assertEqual(len(sent), 1)
            with self.assertRaises(TelltaleError) as missing:
                client.deletion("0" * 24, str(uuid.uuid4()))
            self.assertEqual(missing.exception.status, 404)
            with self.assertRaises(ValueError):
                client.lookup("0" * 24, ["not-a-uuid"])
            self.assertEqual(len(sent), 2)
        with Client(self.server.url, "tt_" + "0" * 40) as client:
            with self.assertRaises(TelltaleError) as unauthorized:
                client.context()
            self.assertEqual(unauthorized.exception.status, 401)

    def test_connection_failures_are_retried_a_bounded_number_of_times(self):
        # A port nothing listens on: connection refused every time.
        policy = RetryPolicy(max_attempts=3, backoff=0.05, max_backoff=0.1)
        started = time.monotonic()
        with Client("http://127.0.0.1:9", self.server.key, retry=policy, timeout=2) as client:
            with self.assertRaises(TelltaleError) as failed:
                client.context()
        self.assertIsNone(failed.exception.status)
        self.assertLess(time.monotonic() - started, 5)

    def test_async_client_provisions_looks_up_scores_and_erases(self):
        async def scenario():
            async with AsyncClient(self.server.url, self.server.key) as client:
                survey = await client.provision_survey("async", "Async")
                reference = str(uuid.uuid4())
                self.server.collect(survey.tracking_key, reference, 40)
                deadline = time.monotonic() + 30
                while not (await client.lookup(survey.survey_id, [reference]))[0].captured:
                    self.assertLess(time.monotonic(), deadline)
                    await asyncio.sleep(0.2)
                run = await client.score_and_wait(survey.survey_id, poll_interval=0.2, timeout=120)
                self.assertEqual((run.status, run.scored), ("completed", 1))
                rows = await asyncio.gather(
                    *(client.lookup(survey.survey_id, [reference]) for _ in range(5))
                )
                self.assertTrue(all(found[0].human_score_percent is not None for found in rows))
                deletion = await client.delete_and_wait(survey.survey_id, reference, poll_interval=0.1)
                self.assertEqual(deletion.status, "completed")

        asyncio.run(scenario())


class RateLimitStorm(unittest.TestCase):
    """60 requests a minute allowed, 80 made (70 one after the other, then 10 at once) as fast as the client may: every call succeeds, the
    client waits what `Retry-After` says, and no minute sees more than 60 accepted."""

    LIMIT = 60

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--api-rate-per-minute", str(cls.LIMIT))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_sync_and_async_clients_ride_out_429s_within_the_limit(self):
        accepted, refused = [], []

        def record(response):
            (refused if response.status_code == 429 else accepted).append(time.monotonic())

        with Client(self.server.url, self.server.key, event_hooks={"response": [record]}) as client:
            for _ in range(self.LIMIT + 10):
                client.context()

        async def more():
            async def arecord(response):
                record(response)

            async with AsyncClient(self.server.url, self.server.key, event_hooks={"response": [arecord]}) as client:
                await asyncio.gather(*(client.context() for _ in range(10)))

        asyncio.run(more())
        self.assertEqual(len(accepted), self.LIMIT + 20)
        self.assertGreater(len(refused), 0)
        # A client that honours Retry-After is refused about once per request past the limit.
        self.assertLessEqual(len(refused), 2 * 20 + 10)
        for index, start in enumerate(accepted):
            # Client-side times lag the server's by each response's latency: 0.1 s of slack.
            in_window = sum(1 for t in accepted[index:] if t < start + 59.9)
            self.assertLessEqual(in_window, self.LIMIT)


class Policy(unittest.TestCase):
    def test_what_is_retried(self):
        calls = _Calls(RetryPolicy(max_attempts=3, backoff=1, max_backoff=8), sleep_jitter=lambda: 1.0)
        request = httpx.Request("GET", "http://x/")

        def response(status, **headers):
            return httpx.Response(status, headers=headers, request=request)

        self.assertEqual(calls.retry_wait(response(429, **{"Retry-After": "7"}), 1, 0), 7)
        self.assertEqual(calls.retry_wait(response(429, **{"Retry-After": "7"}), 9, 0), 7)
        self.assertIsNone(calls.retry_wait(response(429, **{"Retry-After": "7"}), 1, 299))
        self.assertEqual(calls.retry_wait(response(503), 1, 0), 1)
        # A 503's Retry-After is waited out when longer than the backoff, and spends an attempt.
        self.assertEqual(calls.retry_wait(response(503, **{"Retry-After": "5"}), 1, 0), 5)
        self.assertEqual(calls.retry_wait(response(503, **{"Retry-After": "0"}), 2, 0), 2)
        self.assertEqual(calls.retry_wait(response(503, **{"Retry-After": "999"}), 1, 0), 60)
        self.assertIsNone(calls.retry_wait(response(503, **{"Retry-After": "5"}), 3, 0))
        self.assertEqual(calls.retry_wait(response(500), 2, 0), 2)
        self.assertIsNone(calls.retry_wait(response(502), 3, 0))
        for status in (400, 401, 404, 409, 413):
            self.assertIsNone(calls.retry_wait(response(status), 1, 0))
        self.assertEqual(calls.retry_wait(httpx.ConnectError("refused"), 1, 0), 1)


if __name__ == "__main__":
    unittest.main()
