#!/usr/bin/env python3
"""A survey platform's server talking to Telltale: provision a survey, look sessions up, start a
scoring run, poll it with a bounded interval, and read the scores.

Standard library only. Usage:
    TELLTALE_URL=http://127.0.0.1:8080 TELLTALE_KEY=tt_... python3 integrate.py EXTERNAL_ID [RESPONSE_UUID ...]

Retries only what is transient and only a bounded number of times: 429 (waiting the
`Retry-After` the service sends), 502/503/504 and connection failures. Every other error is a
bug on one side and is raised at once.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request

BASE = os.environ.get("TELLTALE_URL", "http://127.0.0.1:8080").rstrip("/")
KEY = os.environ["TELLTALE_KEY"]
MAX_ATTEMPTS = 5
POLL_INTERVAL_S = 1.0
POLL_LIMIT_S = 600


def call(method, path, body=None):
    """One API call with bounded retries of transient failures; returns the `data` member."""
    payload = None if body is None else json.dumps(body).encode()
    for attempt in range(1, MAX_ATTEMPTS + 1):
        request = urllib.request.Request(BASE + path, data=payload, method=method)
        request.add_header("Authorization", "Bearer " + KEY)
        if payload is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)["data"]
        except urllib.error.HTTPError as error:
            if error.code == 429 and attempt < MAX_ATTEMPTS:
                time.sleep(int(error.headers.get("Retry-After", "1")))
                continue
            if error.code in (502, 503, 504) and attempt < MAX_ATTEMPTS:
                time.sleep(min(2 ** attempt, 30))
                continue
            raise RuntimeError(f"{method} {path}: {error.code} {error.read().decode()}") from None
        except urllib.error.URLError:
            if attempt == MAX_ATTEMPTS:
                raise
            time.sleep(min(2 ** attempt, 30))
    raise RuntimeError("unreachable")


def main():
    external_id = sys.argv[1]
    references = sys.argv[2:]
    survey = call("PUT", f"/integrations/v1/surveys/{external_id}", {"name": f"Survey {external_id}"})
    survey_id = survey["surveyId"]
    print(json.dumps({"provisioned": survey}))
    # The embed goes on the survey pages with survey["trackingKey"] and the response UUID.

    run = call("POST", f"/integrations/v1/surveys/{survey_id}/scoring-runs", {"force": False})
    deadline = time.monotonic() + POLL_LIMIT_S
    while run["status"] == "running":
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run['id']} still running after {POLL_LIMIT_S} s")
        time.sleep(POLL_INTERVAL_S)
        run = call("GET", f"/integrations/v1/surveys/{survey_id}/scoring-runs/{run['id']}")
    print(json.dumps({"run": run}))

    for start in range(0, len(references), 100):
        rows = call(
            "POST",
            f"/integrations/v1/surveys/{survey_id}/sessions/lookup",
            {"externalReferences": references[start:start + 100]},
        )
        for row in rows:
            print(json.dumps({"session": row}))


if __name__ == "__main__":
    main()
