"""Smoke test of the built wheel, run by .ci/run in a fresh venv where only the wheel (and its
dependencies) is installed: the package imports from the venv, not this checkout, and makes real
calls against the server at TELLTALE_URL with TELLTALE_KEY. One line per result; any mismatch
exits non-zero."""

import os
import sys
from importlib import metadata

import telltale_client
from telltale_client import Client, TelltaleError

url, key = os.environ["TELLTALE_URL"], os.environ["TELLTALE_KEY"]
where = os.path.dirname(telltale_client.__file__)
assert where.startswith(sys.prefix) and "site-packages" in where, f"imported from {where}, not the venv"
meta = metadata.metadata("telltale-client")
assert meta["License-Expression"] == "Apache-2.0", meta["License-Expression"]
assert os.path.exists(os.path.join(where, "py.typed")), "py.typed missing"
with Client(url, key) as client:
    context = client.context()
    assert key.startswith(context.key_prefix + "_"), context
    survey = client.provision_survey("smoke-wheel", "Smoke (wheel)")
    assert len(survey.survey_id) == 24, survey
    [row] = client.lookup(survey.survey_id, ["00000000-0000-4000-8000-000000000000"])
    assert row.captured is False, row
    try:
        client.start_scoring_run("0" * 24)
        raise AssertionError("no TelltaleError for an unknown survey")
    except TelltaleError as error:
        assert error.status == 404, error
print(f"wheel smoke ok: telltale-client {meta['Version']} from {where}, survey {survey.survey_id}")
