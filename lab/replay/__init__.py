"""The recording path of the scoring-quality harness: people's recorded input replayed through
the operating system (XTEST on a virtual display) into a headed Chromium on survey pages, through
the production embed and collector. See lab/replay/session.py."""
