"""Unit tests of pace.py: the embed's batching, replayed (run by .ci/run)."""

import json
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pace


def move(t):
    return {"type": "pointermove", "t": float(t), "data": {"x": 1, "y": 2}}


class EmbedBatchesTest(unittest.TestCase):
    def test_a_timer_of_2_s_from_the_first_event_queued_after_a_send(self):
        events = [move(t) for t in (0, 500, 1500, 2500, 5000)]
        batches = pace.embed_batches(events)
        self.assertEqual([(at, [e["t"] for e in batch]) for at, batch in batches],
                         [(2000, [0, 500, 1500]), (4500, [2500]), (7000, [5000])])

    def test_two_hundred_queued_events_go_at_once(self):
        events = [move(t * 5) for t in range(450)]
        batches = pace.embed_batches(events)
        self.assertEqual([len(batch) for _, batch in batches], [200, 200, 50])
        self.assertEqual(batches[0][0], 199 * 5)
        self.assertEqual(batches[1][0], 399 * 5)
        # Every event leaves at or after its own time, and at most 2 s after it.
        for at, batch in batches:
            self.assertTrue(all(e["t"] <= at <= e["t"] + pace.FLUSH_INTERVAL_MS for e in batch))

    def test_leaving_the_page_sends_everything_queued_at_once(self):
        events = [move(t * 20) for t in range(300)]
        events.append({"type": "visibility", "t": 6000.0, "data": {"state": "hidden"}})
        events.append({"type": "pagehide", "t": 6002.0, "data": {}})
        batches = pace.embed_batches(events)
        self.assertEqual(sum(len(b) for _, b in batches), 302)
        self.assertEqual(batches[-2][0], 6000.0)
        self.assertEqual(batches[-1], (6002.0, [events[-1]]))
        self.assertTrue(all(len(b) <= pace.MAX_BATCH_EVENTS for _, b in batches))

    def test_bulk_is_posted_after_the_last_event_a_thousand_at_a_time(self):
        events = [move(t) for t in range(2500)]
        batches = pace.bulk_batches(events)
        self.assertEqual([(at, len(b)) for at, b in batches], [(2499, 1000), (2499, 1000), (2499, 500)])

    def test_bodies_carry_unix_ms_on_the_browsers_clock(self):
        payload = json.loads(pace.body([move(16.4)], 1_700_000_000_000.0))
        self.assertEqual(payload, {"events": [{"type": "pointermove", "timestamp": 1_700_000_000_016,
                                               "data": {"x": 1, "y": 2}}]})


class PacerTest(unittest.TestCase):
    def test_requests_arrive_when_the_embed_would_send_them(self):
        arrivals = []

        class Collector(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers["Content-Length"])
                events = json.loads(self.rfile.read(length))["events"]
                arrivals.append((self.path, pace.time.time() * 1000, [e["timestamp"] for e in events]))
                self.send_response(201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            # Three sessions of 9 s, two at a time; a session posted in bulk would arrive up to
            # 9 s late by its own clock.
            times = (0, 300, 2600, 6000, 9000)
            sessions = [pace.Paced(f"/event/k/s{i}", pace.embed_batches([move(t) for t in times]),
                                   skew_ms=-5000.0 * (i + 1)) for i in range(3)]
            pacer = pace.Pacer(f"http://127.0.0.1:{server.server_address[1]}", active=2, workers=2)
            pacer.run(sessions)
        finally:
            server.shutdown()
        self.assertEqual(pacer.errors, [])
        self.assertEqual(len(arrivals), 12)
        for path, received, stamps in arrivals:
            index = int(path[-1])
            # Lag by the event's own clock: the skew, plus up to the 2 s timer and (on a loaded
            # machine) scheduling.
            lags = [received - stamp - 5000.0 * (index + 1) for stamp in stamps]
            self.assertTrue(all(-50 <= lag <= 4000 for lag in lags), (path, lags))


if __name__ == "__main__":
    unittest.main()
