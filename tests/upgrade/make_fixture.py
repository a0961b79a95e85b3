#!/usr/bin/env python3
"""Writes the upgrade fixtures of one release, with that release's own binary.

    python3 tests/upgrade/make_fixture.py --binary OLD/telltale --out tests/upgrade/fixtures/0.1.0 \
        --postgres postgres://postgres@127.0.0.1:5432/test

tests/upgrade/README.md says how to build OLD from the release's tag. For each store
configuration (`embedded`: SQLite and a lake folder; `postgres`: a PostgreSQL catalog, dumped with
pg_dump, and a lake folder) it starts the old server, provisions a survey, collects six sessions,
scores them with a run, erases one, then collects more batches with the lake's flush held off and
SIGKILLs the server: the log keeps records no flush has written. It writes the data folder (log
segments cut after their last record) and `expected.json`: the key, the survey, what the old
release answered for the lookups, the run and the deletion, and the events each session holds.
The upgrade test (tests/it/upgrade.rs) opens every fixture folder with the current binary.
"""

import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid


class Server:
    """`telltale serve` of the old release on a data folder."""

    def __init__(self, binary, data_dir, extra):
        self.process = subprocess.Popen(
            [binary, "serve", "--data-dir", data_dir, "--bind", "127.0.0.1:0",
             "--api-rate-per-minute", "100000", "--collector-ip-rate", "0",
             "--collector-identifier-rate", "0", *extra],
            stdout=subprocess.PIPE, stderr=open(os.path.join(data_dir, "..", "serve.log"), "a"),
            text=True, env={k: v for k, v in os.environ.items() if not k.startswith("TELLTALE_")})
        self.key = None
        self.url = None
        deadline = time.time() + 60
        for line in self.process.stdout:
            if line.startswith("TELLTALE_INTEGRATION_KEY="):
                self.key = line.strip().split("=", 1)[1]
            if line.startswith("telltale listening on "):
                self.url = line.strip().split(" ")[-1]
                break
            if time.time() > deadline:
                break
        if self.url is None:
            raise SystemExit("the old server did not start; see serve.log")
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def request(self, method, path, key=None, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if key:
            request.add_header("authorization", f"Bearer {key}")
        if data is not None:
            request.add_header("content-type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


def session_events(rng, identifier, reference, start):
    """A person-like session: pointer strokes, clicks, typing and scrolling."""
    events = []
    t = start
    x, y = 400.0, 300.0

    def push(kind, data):
        events.append({"type": kind, "timestamp": int(t), "data": data})

    def pointer(kind, **extra):
        push(kind, {"x": round(x), "y": round(y), "pointerType": "mouse", "trusted": True, **extra})

    push("session", {"sessionId": identifier, "interviewId": reference, "embedVersion": "1.0.0",
                     "origin": "https://survey.example", "path": "/s/1",
                     "userAgent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0.0.0",
                     "languages": ["en-US"], "timezoneOffset": -60, "screenWidth": 1920,
                     "screenHeight": 1080, "viewportWidth": 1280, "viewportHeight": 720,
                     "devicePixelRatio": 1, "maxTouchPoints": 0, "hardwareConcurrency": 8,
                     "webdriver": False})
    for question in range(4):
        tx, ty = rng.uniform(100, 1100), rng.uniform(100, 650)
        sx, sy = x, y
        duration = 250 + 40 * math.log2(1 + math.hypot(tx - sx, ty - sy) / 20)
        elapsed = 0.0
        while elapsed < duration:
            step = rng.uniform(8, 24)
            elapsed = min(duration, elapsed + step)
            s = elapsed / duration
            s = 10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5
            x = sx + (tx - sx) * s + rng.gauss(0, 0.6)
            y = sy + (ty - sy) * s + rng.gauss(0, 0.6)
            t += step
            pointer("pointermove")
        t += rng.lognormvariate(math.log(120), 0.4)
        pointer("pointerdown", button=0)
        t += rng.lognormvariate(math.log(95), 0.3)
        pointer("pointerup", button=0)
        t += rng.uniform(0, 3)
        pointer("click", button=0, target="text")
        for index in range(8):
            key_class = "space" if index % 6 == 5 else "char"
            t += rng.lognormvariate(math.log(170), 0.45)
            push("keydown", {"keyClass": key_class, "trusted": True, "repeat": False})
            t += rng.uniform(1, 4)
            push("input", {"inputType": "insertText", "lengthDelta": 1, "field": question})
            t += rng.lognormvariate(math.log(85), 0.3)
            push("keyup", {"keyClass": key_class, "trusted": True, "repeat": False})
        for _ in range(3):
            t += rng.uniform(30, 120)
            push("wheel", {"dx": 0, "dy": 100, "deltaMode": 0, "trusted": True})
            t += rng.uniform(5, 20)
            push("scroll", {"x": 0, "y": int(t) % 4000})
    return events


def post(server, tracking_key, identifier, events):
    for start in range(0, len(events), 40):
        chunk = events[start:start + 40]
        status, body = server.request("POST", f"/event/{tracking_key}/{identifier}",
                                      body={"events": chunk})
        if status != 201 or body.get("count") != len(chunk):
            raise SystemExit(f"the collector answered {status} {body}")


def wait_for(what, check, within=60):
    deadline = time.time() + within
    while True:
        value = check()
        if value is not None:
            return value
        if time.time() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def write_fixture(binary, out, config, postgres_admin):
    rng = random.Random(45)
    scratch = tempfile.mkdtemp(prefix="telltale-fixture-")
    data_dir = os.path.join(scratch, "data")
    os.makedirs(data_dir)
    extra = ["--flush-interval-ms", "500"]
    database = None
    if config == "postgres":
        database = "telltale_fixture_" + uuid.uuid4().hex[:12]
        subprocess.run(["psql", "-X", "-q", "-d", postgres_admin, "-c", f"CREATE DATABASE {database}"],
                       check=True)
        catalog_url = postgres_admin.rsplit("/", 1)[0] + "/" + database
        extra += ["--catalog", catalog_url]
    server = Server(binary, data_dir, extra)
    key = server.key
    status, provisioned = server.request("PUT", "/integrations/v1/surveys/upgrade-fixture", key,
                                         {"name": "Upgrade fixture"})
    assert status == 200, provisioned
    survey_id = provisioned["data"]["surveyId"]
    tracking_key = provisioned["data"]["trackingKey"]
    sessions = []
    start = int(time.time() * 1000) - 600_000
    for number in range(6):
        reference = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        identifier = f"fixture-{number}-{reference[:8]}"
        events = session_events(rng, identifier, reference, start + number * 60_000)
        post(server, tracking_key, identifier, events)
        sessions.append({"reference": reference, "identifier": identifier, "events": len(events)})
    references = [session["reference"] for session in sessions]

    def lookup():
        status, body = server.request("POST", f"/integrations/v1/surveys/{survey_id}/sessions/lookup",
                                      key, {"externalReferences": references})
        assert status == 200, body
        return body["data"]

    wait_for("the sessions' statistics", lambda: lookup() if all(
        row["eventCount"] == session["events"] for row, session in zip(lookup(), sessions)) else None)
    status, started = server.request("POST", f"/integrations/v1/surveys/{survey_id}/scoring-runs",
                                     key, {})
    assert status == 202, started
    run_id = started["data"]["id"]
    run_path = f"/integrations/v1/surveys/{survey_id}/scoring-runs/{run_id}"

    def run_done():
        status, body = server.request("GET", run_path, key)
        return body["data"] if body["data"]["status"] != "running" else None

    run = wait_for("the scoring run", run_done, within=120)
    assert run["status"] == "completed", run

    # The sixth session is erased: its tombstone must hold after the upgrade.
    erased = sessions[5]
    status, body = server.request(
        "DELETE", f"/integrations/v1/surveys/{survey_id}/sessions/by-reference/{erased['reference']}", key)
    assert status == 202, body
    deletion_path = f"/integrations/v1/surveys/{survey_id}/session-deletions/{erased['reference']}"

    def deletion_done():
        status, body = server.request("GET", deletion_path, key)
        return body["data"] if body["data"]["status"] != "pending" else None

    deletion = wait_for("the erasure", deletion_done, within=120)
    assert deletion["status"] == "completed", deletion
    server.stop()

    # Batches the lake never gets from the old release: the flush is held off, and the server
    # is SIGKILLed once their statistics are in the catalog. The log holds them.
    server = Server(binary, data_dir, [*extra[2:], "--flush-interval-ms", "3600000"])
    unflushed = sessions[0]
    more = session_events(rng, unflushed["identifier"], unflushed["reference"], start + 500_000)[1:41]
    post(server, tracking_key, unflushed["identifier"], more)
    unflushed["events"] += len(more)
    rows = wait_for("the unflushed batch's statistics", lambda: lookup() if lookup()[0]["eventCount"]
                    == unflushed["events"] else None)
    _, run_after = server.request("GET", run_path, key)
    _, deletion_after = server.request("GET", deletion_path, key)
    server.kill()

    target = os.path.join(out, config)
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(target)
    for name in sorted(os.listdir(data_dir)):
        source = os.path.join(data_dir, name)
        if name.endswith("-shm"):
            continue  # SQLite's index of its -wal file, rebuilt from the -wal on open
        if name == "wal":
            copy_log(source, os.path.join(target, "wal"))
        elif os.path.isdir(source):
            shutil.copytree(source, os.path.join(target, name))
        else:
            shutil.copy2(source, os.path.join(target, name))
    if database is not None:
        with open(os.path.join(target, "catalog.sql"), "w") as dump:
            subprocess.run(["pg_dump", "--no-owner", "--no-privileges", "-d", catalog_url],
                           stdout=dump, check=True)
        subprocess.run(["psql", "-X", "-q", "-d", postgres_admin, "-c",
                        f"DROP DATABASE {database} WITH (FORCE)"], check=True)
    expected = {
        "config": config,
        "key": key,
        "surveyId": survey_id,
        "trackingKey": tracking_key,
        "sessions": [{**session, "erased": session is erased} for session in sessions],
        "lookup": rows,
        "run": run_after["data"],
        "deletion": deletion_after["data"],
    }
    with open(os.path.join(target, "expected.json"), "w") as file:
        json.dump(expected, file, indent=1, sort_keys=True)
        file.write("\n")
    shutil.rmtree(scratch)


def copy_log(source, target):
    """Copies the log's segments, each cut after its last nonzero byte: a segment is 40 MiB of
    preallocated zeros past its records, and zeros read as its end."""
    os.makedirs(target)
    for name in sorted(os.listdir(source)):
        if name == "LOCK" or not name.endswith(".wal"):
            continue
        with open(os.path.join(source, name), "rb") as file:
            data = file.read()
        with open(os.path.join(target, name), "wb") as file:
            file.write(data.rstrip(b"\0"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    for config in ["embedded", "postgres"]:
        write_fixture(os.path.abspath(args.binary), os.path.abspath(args.out), config, args.postgres)
        print(f"wrote {os.path.join(args.out, config)}", file=sys.stderr)


if __name__ == "__main__":
    main()
