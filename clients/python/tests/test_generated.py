"""The models in `_schema.py` are what the generator makes of clients/typescript/openapi.json
today (no server needed): a changed document, or a hand edit of the generated file, fails here
until `python3 clients/python/scripts/generate_models.py` is run again."""

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[1]
GENERATOR = CLIENT / "scripts" / "generate_models.py"
CHECKED_IN = CLIENT / "src" / "telltale_client" / "_schema.py"
DOCUMENT = CLIENT.parent / "typescript" / "openapi.json"


class GeneratedModelsTest(unittest.TestCase):
    def test_the_checked_in_models_are_what_the_document_generates(self):
        if not GENERATOR.exists() and not DOCUMENT.exists():
            self.skipTest("not a checkout (an unpacked sdist has neither generator nor document)")
        with tempfile.TemporaryDirectory() as folder:
            fresh = Path(folder) / "_schema.py"
            made = subprocess.run(
                [sys.executable, str(GENERATOR), "--output", str(fresh)],
                capture_output=True,
                text=True,
            )
            self.assertEqual(made.returncode, 0, f"the generator failed: {made.stderr}")
            expected = fresh.read_text(encoding="utf-8")
        self.assertTrue(
            CHECKED_IN.read_text(encoding="utf-8") == expected,
            f"{CHECKED_IN.relative_to(CLIENT.parents[1])} is stale: run "
            "`python3 clients/python/scripts/generate_models.py` and commit the result",
        )


if __name__ == "__main__":
    unittest.main()
