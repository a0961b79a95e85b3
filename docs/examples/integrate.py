#!/usr/bin/env python3
"""A survey platform's server talking to Telltale through the Python client
(`clients/python`, package `telltale-client`): provision a survey, start a scoring run and wait
for it with bounded polling, then look the given responses up. Prints one JSON line per step.

Usage:
    pip install ./clients/python
    TELLTALE_URL=http://127.0.0.1:8080 TELLTALE_KEY=tt_... python3 integrate.py EXTERNAL_ID [RESPONSE_UUID ...]

The client retries only what is transient (429 after its `Retry-After`, 5xx, connection errors)
and raises every other error at once.
"""
import json
import os
import sys
from pathlib import Path

try:
    import telltale_client
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python" / "src"))
    import telltale_client


def main():
    external_id, references = sys.argv[1], sys.argv[2:]
    url = os.environ.get("TELLTALE_URL", "http://127.0.0.1:8080")
    with telltale_client.Client(url, os.environ["TELLTALE_KEY"]) as telltale:
        survey = telltale.provision_survey(external_id, f"Survey {external_id}")
        print(json.dumps({"provisioned": {"surveyId": survey.survey_id, "trackingKey": survey.tracking_key}}))
        # The embed goes on the survey pages with survey.tracking_key and the response UUID.

        run = telltale.score_and_wait(survey.survey_id, poll_interval=1.0, timeout=600)
        print(json.dumps({"run": {"id": run.id, "status": run.status, "scored": run.scored, "error": run.error}}))

        for row in telltale.lookup(survey.survey_id, references):
            print(json.dumps({"session": {
                "externalReference": row.external_reference,
                "captured": row.captured,
                "eventCount": row.event_count,
                "humanScorePercent": row.human_score_percent,
                "scoreBand": row.score_band,
            }}))


if __name__ == "__main__":
    main()
