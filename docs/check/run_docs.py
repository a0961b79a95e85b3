#!/usr/bin/env python3
"""Run the commands the documents tell a user to run, against the real `telltale` binary.

    python3 docs/check/run_docs.py [-v] [--list] [--keep] [--bin PATH] [DOCUMENT ...]

The documents (README.md, docs/lake.md, docs/operations.md, docs/backup.md, clients/python/README.md and
clients/typescript/README.md unless others are named) are read from the working tree, their
fenced code blocks extracted and run in order, each document on its own, and the outputs the
documents show are compared with what the commands print. `.ci/run` runs it after the clients'
tests; a documented command that fails fails CI.

Where a document runs
---------------------
Each document gets a temporary folder holding a copy of the repository (its tracked and
unignored files, as in the working tree: a fresh clone, with no `telltale-data/`, `target/` or
`node_modules/`) and runs from the copy's root, in ONE bash session (`set -euo pipefail`), so a
variable exported by one block is there for the next. The default data dir `./telltale-data`
is therefore a fresh folder inside the copy: nothing of the user's is read or written. In that
session:

- `telltale` on PATH is the binary under test: `--bin`, else `$TELLTALE_BIN`, else
  `$CARGO_TARGET_DIR/debug/telltale` (CARGO_TARGET_DIR defaulting to ~/.cache/telltale-target).
- `cargo` is a shell function: `cargo run [-q] [--release] -- ARGS` runs that binary with ARGS,
  and any other cargo command fails. A real `cargo run` in CI would rebuild the binary with
  another feature set than the test build (minutes of compiling); the check is about the
  documented arguments and outputs, on the binary the tests just built.
- `curl` is a shell function adding `--fail-with-body`: a documented request that gets a 4xx or
  5xx fails its block (plain `curl -s` would exit 0 on it).
- `python3` and `pip` are a fresh virtual environment's (made with the system's site packages
  visible, so duckdb, deltalake, polars and httpx as `.ci/run` installs them are there), so a
  documented `pip install` never touches the user's Python.
- Every `TELLTALE_*` variable of the caller's environment is removed (a `TELLTALE_DATA_DIR`
  would point the commands at the user's data), then `TELLTALE_BIN` is set to the binary.

Which blocks run
----------------
- ```` ```sh ```` (also `bash`, `shell`) blocks run in the session; ```` ```python ```` blocks
  run with `python3` from the session (same folder, same environment); ```` ```sql ```` blocks
  are DuckDB SQL, run with python3's `duckdb` module. Every such block runs unless a
  `<!-- docs-check: skip (why) -->` comment stands just before it (only blank lines or other
  `docs-check` comments between); the reason is mandatory and is listed by `-v` and `--list`.
  Skip what cannot or should not run here: a `cargo build`, CI itself, a suite `.ci/run` runs
  anyway, a download CI cannot make, and a documented command the binary gets wrong today
  (name the issue, so whoever fixes the binary removes the skip).
- Blocks in any other language (`ts`, `html`, `text`, `json`, no language: layouts, synopses,
  formats) are never run.
- A block that starts the server (its one command is `cargo run [...] -- serve [ARGS]` or
  `telltale serve [ARGS]`) is not run in the session: the runner starts the binary with
  `serve ARGS` in the background, from the same folder, with `TELLTALE_BIND=127.0.0.1:0` (a
  free port, so a server of the user's on 8080 is no obstacle), waits for its
  `telltale listening on URL` line (120 s) and keeps it until the end of the document, when it
  stops it with SIGTERM and requires exit status 0 within 60 s. The first start's
  `TELLTALE_INTEGRATION_KEY=...` line is remembered for `replace` (below).
- Built-in rewrites, in every block run: `http://127.0.0.1:8080` (the documented default
  address) becomes the running server's URL (also in shown outputs), and `/tmp/` becomes the
  document's temporary folder.

Directives (HTML comments, invisible on GitHub)
-----------------------------------------------
Before a block (only blank lines or other directives between):

- `<!-- docs-check: skip (why) -->`: do not run the block.
- `<!-- docs-check: replace "OLD" "NEW" -->`: run the block with OLD replaced by NEW; NEW may
  name `{TELLTALE_URL}` and `{TELLTALE_INTEGRATION_KEY}` (the running server's URL and its
  first start's key). For placeholders a reader fills in, such as `tt_...`. OLD must occur.
- `<!-- docs-check: expect REGEX -->`: the block's stdout (a server block: the server's stdout
  once it listens) must contain a match of the Python regular expression REGEX (multi-line
  mode: `^` and `$` match at line ends). For outputs the prose promises without showing them.
- `<!-- docs-check: requires COMMAND -->`: run the block only if the shell COMMAND succeeds
  (otherwise it counts as skipped, and `-v` says why), e.g. for DuckDB's `delta` extension,
  which needs a download CI may not be able to make.
- `<!-- docs-check: unordered -->`: compare the shown output's lines in any order.
- `<!-- docs-check: timeout SECONDS -->`: the block's time limit (default 300 s).

Anywhere in a document:

- `<!-- docs-check: server -->`: start `telltale serve` (as above) before the document's first
  block, for documents that use a running service without saying how to start it.
- `<!-- docs-check: fixture scored-survey -->`: before the first block, fill the data dir: a
  server as above provisions a survey, takes events for three sessions (two person-like, one
  a driven browser), scores them with a scoring run, and is stopped; the document then reads
  a lake holding events, features and scores. For documents about reading data.

A directive the runner does not know, or a block directive with no block after it, is an error.

How outputs are checked
-----------------------
A ```` ```text ```` or ```` ```json ```` block right after a block that runs (only blank lines
between) is the output the document shows for it, and the block's stdout must match it:

- `json`: both are read as a sequence of JSON values (curl prints none of the newlines between
  two answers) and compared as values, so the shown form may be pretty-printed. The string
  `"..."` matches any value; a string containing `...` matches any string with the rest as
  written (`"tt_..."`); a key `"..."` in an object allows keys not shown; a list `["..."]`
  matches any list. Everything else must be equal: names, types, numbers, order of lists.
- `text`: compared line by line, trailing spaces and leading or trailing blank lines ignored;
  `...` matches any text, across lines too (as doctest's ELLIPSIS). With `unordered`, the
  lines are compared as a multiset and a line `...` allows lines not shown.

Failures and the summary
------------------------
A block fails when it exits non-zero (the session's `set -e` ends at the first failing
command, and with it the document: its later blocks are reported as not run), runs past its
time limit, or prints what does not match its shown output or `expect`. The failure names the
document, the block's line and first line, the exit status, and the block's stdout and stderr
(or a diff against the shown output). A document whose server does not start or does not stop
cleanly fails too. One line per document follows (`README.md: 12 run, 3 skipped`), then
`# pass N` / `# fail N` (blocks run that passed, and failures) in node's test-runner form,
which `.ci/run` adds to its total; every other line the runner prints is indented or starts
with a document's name, so a block's own output (`Ran 9 tests ...`) is never counted. The exit
status is 1 on any failure, 2 when the documents cannot be read.

`--list` prints each block's line, language and what would happen to it, without running.
`--keep` keeps the temporary folders (their paths are printed) for a look after a failure.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [
    "README.md",
    "docs/lake.md",
    "docs/operations.md",
    "docs/backup.md",
    "clients/python/README.md",
    "clients/typescript/README.md",
]
RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "py": "python", "sql": "sql"}
OUTPUT_LANGUAGES = {"text", "json"}
DOCUMENTED_URL = "http://127.0.0.1:8080"
BLOCK_DIRECTIVES = {"skip", "replace", "expect", "requires", "unordered", "timeout"}
DOCUMENT_DIRECTIVES = {"server", "fixture"}
DEFAULT_TIMEOUT = 300.0
SERVER_START_SECS = 120.0
SERVER_STOP_SECS = 60.0


class DocumentError(Exception):
    """A document the runner cannot read: a malformed or misplaced directive."""


@dataclass
class Block:
    doc: str
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    directives: list = field(default_factory=list)  # (line, name, argument)
    output: Optional["Block"] = None

    @property
    def kind(self) -> Optional[str]:
        return RUNNABLE.get(self.language)

    @property
    def first_line(self) -> str:
        for text in self.code.splitlines():
            if text.strip():
                return text.strip()
        return "(empty block)"

    def directive(self, name: str) -> Optional[str]:
        for _, directive_name, argument in self.directives:
            if directive_name == name:
                return argument
        return None

    def all(self, name: str) -> list:
        return [argument for _, directive_name, argument in self.directives if directive_name == name]

    def serve_args(self) -> Optional[list]:
        """The `serve` arguments when the block's one command starts the server."""
        if self.kind != "sh":
            return None
        lines = [t for t in self.code.splitlines() if t.strip() and not t.strip().startswith("#")]
        if len(lines) != 1:
            return None
        try:
            words = shlex.split(lines[0], comments=True)
        except ValueError:
            return None
        if words[:2] == ["cargo", "run"] and "--" in words:
            args = words[words.index("--") + 1 :]
        elif words[:1] == ["telltale"]:
            args = words[1:]
        else:
            return None
        return args[1:] if args[:1] == ["serve"] else None


@dataclass
class Document:
    path: str
    blocks: list
    directives: list  # document-wide (line, name, argument)


DIRECTIVE = re.compile(r"^\s*<!--\s*docs-check:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")


def parse_directive(text: str, doc: str, line: int) -> tuple:
    name, _, argument = text.partition(" ")
    argument = argument.strip()
    where = f"{doc}:{line}"
    if name not in BLOCK_DIRECTIVES | DOCUMENT_DIRECTIVES:
        raise DocumentError(f"{where}: unknown docs-check directive {name!r}")
    if name == "skip" and not re.fullmatch(r"\(.+\)", argument):
        raise DocumentError(f"{where}: `skip` needs its reason in parentheses: skip (why)")
    if name == "replace":
        try:
            parts = shlex.split(argument)
        except ValueError as error:
            raise DocumentError(f"{where}: replace: {error}") from None
        if len(parts) != 2 or not parts[0]:
            raise DocumentError(f'{where}: replace takes two quoted strings: replace "OLD" "NEW"')
        argument = tuple(parts)
    if name in ("expect", "requires") and not argument:
        raise DocumentError(f"{where}: `{name}` needs an argument")
    if name == "expect":
        try:
            re.compile(argument)
        except re.error as error:
            raise DocumentError(f"{where}: expect: bad regular expression: {error}") from None
    if name == "timeout":
        try:
            argument = float(argument)
        except ValueError:
            raise DocumentError(f"{where}: timeout takes seconds") from None
    if name == "fixture" and argument != "scored-survey":
        raise DocumentError(f"{where}: the only fixture is `scored-survey`")
    if name in ("server", "unordered") and argument:
        raise DocumentError(f"{where}: `{name}` takes no argument")
    return (line, name, argument)


def parse(path: str, text: str) -> Document:
    lines = text.splitlines()
    blocks: list = []
    document_directives: list = []
    pending: list = []  # block directives waiting for their block
    previous = None  # the last element: a Block, or "prose"
    index = 0
    while index < len(lines):
        current = lines[index]
        directive = DIRECTIVE.match(current)
        fence = FENCE.match(current)
        if directive:
            parsed = parse_directive(directive.group(1), path, index + 1)
            if parsed[1] in DOCUMENT_DIRECTIVES:
                document_directives.append(parsed)
            else:
                pending.append(parsed)
            previous = "directive"
        elif current.strip().startswith("<!--") and "docs-check" in current:
            raise DocumentError(f"{path}:{index + 1}: a docs-check directive must be one line: <!-- docs-check: ... -->")
        elif fence:
            indent, marker, language = fence.group(1), fence.group(2), fence.group(3).lower()
            body = []
            start = index
            index += 1
            while index < len(lines) and not re.match(rf"^\s*{re.escape(marker[0])}{{{len(marker)},}}\s*$", lines[index]):
                raw = lines[index]
                body.append(raw[len(indent) :] if raw.startswith(indent) else raw.lstrip())
                index += 1
            block = Block(path, start + 1, language, "\n".join(body) + "\n", pending)
            pending = []
            if (
                language in OUTPUT_LANGUAGES
                and isinstance(previous, Block)
                and previous.kind
                and previous.output is None
                and not block.directives
            ):
                previous.output = block
            else:
                blocks.append(block)
            previous = block
        elif current.strip():
            if pending:
                first = pending[0]
                raise DocumentError(f"{path}:{first[0]}: docs-check `{first[1]}` is not followed by a code block")
            previous = "prose"
        index += 1
    if pending:
        raise DocumentError(f"{path}:{pending[0][0]}: docs-check `{pending[0][1]}` is not followed by a code block")
    for block in blocks:
        if block.directives and not block.kind:
            raise DocumentError(
                f"{path}:{block.line}: docs-check directives on a `{block.language or 'plain'}` block, which never runs"
            )
    return Document(path, blocks, document_directives)


# ---------------------------------------------------------------------------------------------
# Comparing outputs


def ellipsis_pattern(expected: str) -> re.Pattern:
    return re.compile(".*?".join(re.escape(part) for part in expected.split("...")), re.DOTALL)


def normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")


def json_values(text: str) -> list:
    decoder = json.JSONDecoder()
    values, position = [], 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return values
        value, position = decoder.raw_decode(text, position)
        values.append(value)


def json_mismatch(expected, actual, where: str = "$") -> Optional[str]:
    if expected == "...":
        return None
    if isinstance(expected, str) and "..." in expected:
        if isinstance(actual, str) and ellipsis_pattern(expected).fullmatch(actual):
            return None
        return f"{where}: {json.dumps(actual)} does not match {json.dumps(expected)}"
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected an object, got {json.dumps(actual)}"
        shown = [key for key in expected if key != "..."]
        missing = [key for key in shown if key not in actual]
        if missing:
            return f"{where}: missing {', '.join(missing)}"
        if "..." not in expected:
            extra = [key for key in actual if key not in expected]
            if extra:
                return f"{where}: not shown in the document: {', '.join(extra)}"
        for key in shown:
            problem = json_mismatch(expected[key], actual[key], f"{where}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if expected == ["..."] and isinstance(actual, list):
            return None
        if not isinstance(actual, list) or len(actual) != len(expected):
            return f"{where}: expected a list of {len(expected)}, got {json.dumps(actual)}"
        for position, (shown, got) in enumerate(zip(expected, actual)):
            problem = json_mismatch(shown, got, f"{where}[{position}]")
            if problem:
                return problem
        return None
    numbers = (int, float)
    if isinstance(expected, bool) or isinstance(actual, bool) or not isinstance(expected, numbers):
        same = type(expected) is type(actual) and expected == actual
    else:
        same = isinstance(actual, numbers) and expected == actual
    return None if same else f"{where}: expected {json.dumps(expected)}, got {json.dumps(actual)}"


def output_mismatch(language: str, expected: str, actual: str, unordered: bool) -> Optional[str]:
    """None when `actual` matches the shown output, else why not."""
    if language == "json":
        try:
            shown = json_values(expected)
        except json.JSONDecodeError as error:
            return f"the document's json output block does not parse: {error}"
        try:
            got = json_values(actual)
        except json.JSONDecodeError as error:
            return f"the output is not JSON ({error})"
        if len(got) != len(shown):
            return f"expected {len(shown)} JSON value(s), got {len(got)}"
        for position, (one, other) in enumerate(zip(shown, got)):
            problem = json_mismatch(one, other, f"value {position + 1}")
            if problem:
                return problem
        return None
    expected_text, actual_text = normalise(expected), normalise(actual)
    if unordered:
        remaining = [line for line in actual_text.splitlines() if line.strip()]
        shown = [line for line in expected_text.splitlines() if line.strip()]
        open_ended = "..." in shown
        missing = []
        for line in shown:
            if line == "...":
                continue
            if line in remaining:
                remaining.remove(line)
            else:
                missing.append(line)
        if missing or (remaining and not open_ended):
            return (
                "lines differ (in any order):\n"
                + "".join(f"- {line}\n" for line in missing)
                + "".join(f"+ {line}\n" for line in ([] if open_ended else remaining))
            ).rstrip("\n")
        return None
    if ellipsis_pattern(expected_text).fullmatch(actual_text):
        return None
    diff = difflib.unified_diff(
        expected_text.splitlines(), actual_text.splitlines(), "shown in the document", "printed", lineterm=""
    )
    return "output differs:\n" + "\n".join(diff)


# ---------------------------------------------------------------------------------------------
# Running one document


SESSION_PRELUDE = r"""
set -euo pipefail
cargo() {
  if [ "${1:-}" != run ]; then
    echo "docs-check: only 'cargo run ... -- ARGS' can run here, not 'cargo $*' (mark the block <!-- docs-check: skip (why) -->)" >&2
    return 127
  fi
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done
  [ $# -gt 0 ] && shift
  "$TELLTALE_BIN" "$@"
}
curl() { command curl --fail-with-body "$@"; }
"""

DUCKDB_RUNNER = """import sys, duckdb
relation = duckdb.sql(open(sys.argv[1]).read())
if relation is not None:
    relation.show(max_rows=1000)
"""


def indent(text: str, prefix: str = "    | ", limit: int = 60) -> str:
    lines = text.rstrip("\n").splitlines()
    if len(lines) > limit:
        lines = [f"... ({len(lines) - limit} lines before)"] + lines[-limit:]
    return "\n".join(prefix + line for line in lines) if lines else prefix + "(nothing)"


def copy_checkout(destination: Path) -> None:
    """The repository's tracked and unignored files, as in the working tree."""
    try:
        listing = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True,
            capture_output=True,
        ).stdout.decode()
        names = sorted({name for name in listing.split("\0") if name})
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", "target", "node_modules", "telltale-data", "__pycache__"}
        names = [
            str(path.relative_to(REPO))
            for path in REPO.rglob("*")
            if not path.is_dir() and not skip & set(path.relative_to(REPO).parts)
        ]
    for name in names:
        source = REPO / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


class Failure(Exception):
    def __init__(self, block: Optional[Block], message: str):
        super().__init__(message)
        self.block = block
        self.message = message


class Session:
    def __init__(self, binary: Path, keep: bool):
        self.binary = binary
        self.keep = keep
        self.tmp = Path(tempfile.mkdtemp(prefix="telltale-docs-check-"))
        self.cwd = self.tmp / "checkout"
        self.vars: dict = {}
        self.server: Optional[subprocess.Popen] = None
        self.server_log: Optional[Path] = None
        self.bash: Optional[subprocess.Popen] = None
        self.counter = 0

    # -- the environment ------------------------------------------------------------------
    def setup(self) -> None:
        self.cwd.mkdir()
        copy_checkout(self.cwd)
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "telltale").symlink_to(self.binary)
        venv = self.tmp / "venv"
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
            check=True,
            capture_output=True,
        )
        env = {key: value for key, value in os.environ.items() if not key.startswith("TELLTALE_")}
        env.pop("PYTHONHOME", None)
        env.update(
            PATH=f"{venv / 'bin'}{os.pathsep}{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            VIRTUAL_ENV=str(venv),
            TELLTALE_BIN=str(self.binary),
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            PYTHONDONTWRITEBYTECODE="1",
        )
        self.env = env
        (self.tmp / "duckdb_run.py").write_text(DUCKDB_RUNNER)
        self.bash = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=open(self.tmp / "session.log", "w"),
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
            env=env,
            text=True,
            start_new_session=True,
        )
        self.send(SESSION_PRELUDE)

    def send(self, commands: str) -> None:
        assert self.bash and self.bash.stdin
        self.bash.stdin.write(commands + "\n")
        self.bash.stdin.flush()

    def close(self) -> list:
        """Stops what the document started; the failures of stopping its server."""
        failures = []
        if self.server is not None:
            try:
                self.stop_server()
            except Failure as failure:
                failures.append(failure)
        if self.bash is not None:
            try:
                self.bash.stdin.close()
            except OSError:
                pass
            try:
                self.bash.wait(10)
            except subprocess.TimeoutExpired:
                pass
            # Whatever a block left running in the background (the session's process group).
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.bash.pid, sig)
                except ProcessLookupError:
                    break
                time.sleep(0.5)
            self.bash.wait()
        if not self.keep:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return failures

    # -- the server ----------------------------------------------------------------------
    def start_server(self, args: list, block: Optional[Block]) -> str:
        if self.server is not None:
            self.stop_server()
        self.counter += 1
        out = self.tmp / f"serve-{self.counter}.out"
        err = self.tmp / f"serve-{self.counter}.err"
        env = dict(self.env, TELLTALE_BIND="127.0.0.1:0")
        self.server = subprocess.Popen(
            [str(self.binary), "serve", *args],
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=open(out, "w"),
            stderr=open(err, "w"),
            start_new_session=True,
        )
        self.server_log = err
        deadline = time.monotonic() + SERVER_START_SECS
        while True:
            printed = out.read_text()
            listening = re.search(r"^telltale listening on (\S+)$", printed, re.MULTILINE)
            if listening:
                break
            if self.server.poll() is not None or time.monotonic() > deadline:
                status = self.server.poll()
                self.kill_server()
                why = f"exited with status {status}" if status is not None else f"did not listen within {SERVER_START_SECS:.0f} s"
                raise Failure(block, f"telltale serve {' '.join(args)} {why}\n  stdout:\n{indent(printed)}\n  stderr:\n{indent(err.read_text())}")
            time.sleep(0.1)
        self.vars["TELLTALE_URL"] = listening.group(1)
        # A first start prints its key; give it a moment in case it comes after the listening line.
        key_deadline = time.monotonic() + 2
        key = re.search(r"^TELLTALE_INTEGRATION_KEY=(\S+)$", printed, re.MULTILINE)
        while not key and time.monotonic() < key_deadline and self.server.poll() is None:
            time.sleep(0.1)
            printed = out.read_text()
            key = re.search(r"^TELLTALE_INTEGRATION_KEY=(\S+)$", printed, re.MULTILINE)
        if key:
            self.vars["TELLTALE_INTEGRATION_KEY"] = key.group(1)
        return printed

    def kill_server(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait()
        self.server = None

    def stop_server(self) -> None:
        server, self.server = self.server, None
        if server is None or server.poll() is not None:
            status = None if server is None else server.returncode
            if status:
                raise Failure(None, f"telltale serve had exited with status {status}\n{indent(self.server_log.read_text())}")
            return
        server.send_signal(signal.SIGTERM)
        try:
            status = server.wait(SERVER_STOP_SECS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
            raise Failure(None, f"telltale serve did not stop within {SERVER_STOP_SECS:.0f} s of SIGTERM\n{indent(self.server_log.read_text())}")
        if status != 0:
            raise Failure(None, f"telltale serve exited with status {status} on SIGTERM\n{indent(self.server_log.read_text())}")

    # -- the fixture ---------------------------------------------------------------------
    def fixture_scored_survey(self) -> None:
        self.start_server([], None)
        url, key = self.vars["TELLTALE_URL"], self.vars.get("TELLTALE_INTEGRATION_KEY")
        if not key:
            raise Failure(None, "fixture: the server printed no integration key")

        def call(method: str, path: str, body=None, content_type="application/json", auth=True):
            request = urllib.request.Request(url + path, method=method)
            if auth:
                request.add_header("Authorization", f"Bearer {key}")
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                request.add_header("Content-Type", content_type)
            try:
                with urllib.request.urlopen(request, data, timeout=30) as response:
                    return json.load(response)
            except urllib.error.HTTPError as error:
                raise Failure(None, f"fixture: {method} {path}: {error.code} {error.read().decode()}") from None

        survey = call("PUT", "/integrations/v1/surveys/docs-check-fixture", {"name": "docs-check fixture"})["data"]
        start = 1763800000000
        for number, webdriver in ((1, False), (2, False), (3, True)):
            reference = f"3f0a5c1e-8d2b-4c7a-9e61-0b5d4f2a7c9{number}"
            events = [
                {
                    "type": "session",
                    "timestamp": start,
                    "data": {"sessionId": reference, "interviewId": reference, "webdriver": webdriver},
                }
            ]
            clock = start
            for step in range(40):
                clock += 16 + (0 if webdriver else (step * 7) % 11)
                wobble = 0 if webdriver else ((step * 13) % 7) - 3
                events.append(
                    {
                        "type": "pointermove",
                        "timestamp": clock,
                        "data": {"x": 100 + step * 9 + wobble, "y": 200 + step * 4 - wobble, "pointerType": "mouse", "trusted": True},
                    }
                )
            for kind in ("pointerdown", "pointerup", "click"):
                clock += 90 if not webdriver else 1
                events.append(
                    {
                        "type": kind,
                        "timestamp": clock,
                        "data": {"x": 460, "y": 360, "pointerType": "mouse", "trusted": True, "button": 0, "target": "choice"},
                    }
                )
            call("POST", f"/event/{survey['trackingKey']}/{reference}", {"events": events}, "text/plain", auth=False)
        run = call("POST", f"/integrations/v1/surveys/{survey['surveyId']}/scoring-runs")["data"]
        deadline = time.monotonic() + 120
        while run["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            run = call("GET", f"/integrations/v1/surveys/{survey['surveyId']}/scoring-runs/{run['id']}")["data"]
        if run["status"] != "completed" or run["scored"] != 3:
            raise Failure(None, f"fixture: the scoring run ended {json.dumps(run)}")
        self.stop_server()

    # -- blocks --------------------------------------------------------------------------
    def substitute(self, block: Block, text: str) -> str:
        for old, new in block.all("replace"):
            if old not in text:
                raise Failure(block, f"docs-check replace: {old!r} does not occur in the block")

            def value(match: re.Match) -> str:
                name = match.group(1)
                if name not in self.vars:
                    raise Failure(block, f"docs-check replace: {{{name}}} is not known here (is a server running?)")
                return self.vars[name]

            text = text.replace(old, re.sub(r"\{([A-Z_]+)\}", value, new))
        return self.rewrite(text)

    def rewrite(self, text: str) -> str:
        if "TELLTALE_URL" in self.vars:
            text = text.replace(DOCUMENTED_URL, self.vars["TELLTALE_URL"])
        return re.sub(r"(?<![\w.~/$-])/tmp/", str(self.tmp) + "/", text)

    def shell(self, command: str, timeout: float) -> tuple:
        """Runs `command` in the session; (status, stdout, stderr). Status None: timed out."""
        self.counter += 1
        base = self.tmp / f"step-{self.counter}"
        done = base.with_suffix(".rc")
        self.send(f"{{ {command}\n}} </dev/null >{base}.out 2>{base}.err; echo $? >{base}.tmp && mv {base}.tmp {done}")
        deadline = time.monotonic() + timeout
        status = None
        while time.monotonic() < deadline:
            if done.exists():
                status = int(done.read_text().strip() or "0")
                break
            if self.bash.poll() is not None:  # `set -e` ended the session
                status = self.bash.returncode or 1
                break
            time.sleep(0.05)
        read = lambda suffix: Path(f"{base}{suffix}").read_text(errors="replace") if Path(f"{base}{suffix}").exists() else ""
        return status, read(".out"), read(".err")

    def run_block(self, block: Block) -> str:
        """Runs one block: 'run', or 'skipped: why'. Raises Failure."""
        skip = block.directive("skip")
        if skip is not None:
            return f"skipped: {skip[1:-1]}"
        timeout = block.directive("timeout") or DEFAULT_TIMEOUT
        for probe in block.all("requires"):
            status, out, _ = self.shell(f"if ( {probe}\n) >/dev/null 2>&1; then echo met; else echo unmet; fi", timeout)
            if status != 0:
                raise Failure(block, f"docs-check requires: the session ended while probing {probe!r}")
            if out.strip() != "met":
                return f"skipped: requirement not met: {probe}"
        serve = block.serve_args()
        if serve is not None:
            printed = self.start_server(serve, block)
            self.check_output(block, printed)
            return "run"
        self.counter += 1
        code = self.substitute(block, block.code)
        if block.kind == "sh":
            script = self.tmp / f"block-{self.counter}.sh"
            script.write_text(code)
            command = f". {shlex.quote(str(script))}"
        elif block.kind == "python":
            script = self.tmp / f"block-{self.counter}.py"
            script.write_text(code)
            command = f"python3 {shlex.quote(str(script))}"
        else:
            script = self.tmp / f"block-{self.counter}.sql"
            script.write_text(code)
            command = f"python3 {shlex.quote(str(self.tmp / 'duckdb_run.py'))} {shlex.quote(str(script))}"
        status, out, err = self.shell(command, timeout)
        if status is None:
            raise Failure(block, f"still running after {timeout:.0f} s\n  stdout:\n{indent(out)}\n  stderr:\n{indent(err)}")
        if status != 0:
            raise Failure(block, f"exit status {status}\n  stdout:\n{indent(out)}\n  stderr:\n{indent(err)}")
        try:
            self.check_output(block, out)
        except Failure as failure:
            failure.message += f"\n  stderr:\n{indent(err)}"
            raise
        return "run"

    def check_output(self, block: Block, out: str) -> None:
        for pattern in block.all("expect"):
            if not re.search(pattern, out, re.MULTILINE):
                raise Failure(block, f"no match for docs-check expect {pattern}\n  stdout:\n{indent(out)}")
        if block.output is not None:
            shown = self.rewrite(block.output.code)
            problem = output_mismatch(block.output.language, shown, out, block.directive("unordered") is not None)
            if problem:
                message = f"the output does not match the one shown at line {block.output.line}: {problem}"
                if not problem.startswith(("output differs", "lines differ")):
                    message += f"\n  stdout:\n{indent(out)}"
                raise Failure(block, message)


# ---------------------------------------------------------------------------------------------


@dataclass
class Result:
    run: int = 0
    skipped: int = 0
    not_run: int = 0
    failures: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def run_document(document: Document, binary: Path, keep: bool, verbose: bool) -> Result:
    result = Result()
    runnable = [block for block in document.blocks if block.kind]
    if not document.directives and all(block.directive("skip") is not None for block in runnable):
        # Nothing to run: no copy, no virtual environment.
        for block in runnable:
            result.skipped += 1
            result.notes.append(f"{document.path}:{block.line}: {block.first_line}: skipped: {block.directive('skip')[1:-1]}")
        return result
    session = Session(binary, keep)
    try:
        session.setup()
        for _, name, argument in document.directives:
            if name == "fixture":
                session.fixture_scored_survey()
            elif name == "server":
                session.start_server([], None)
        for position, block in enumerate(runnable):
            if verbose:
                print(f"  {document.path}:{block.line}: {block.first_line}", flush=True)
            try:
                outcome = session.run_block(block)
            except Failure as failure:
                result.failures.append(failure)
                result.not_run = len(runnable) - position - 1
                break
            if outcome == "run":
                result.run += 1
            else:
                result.skipped += 1
                result.notes.append(f"{document.path}:{block.line}: {block.first_line}: {outcome}")
    except Failure as failure:
        result.failures.append(failure)
        result.not_run = len(runnable) - result.run - result.skipped
    finally:
        result.failures.extend(session.close())
        if keep:
            result.notes.append(f"{document.path}: kept {session.tmp}")
    return result


def describe(document: Document) -> None:
    for _, name, argument in document.directives:
        print(f"{document.path}: document: {name} {argument}".rstrip())
    for block in document.blocks:
        if not block.kind:
            what = f"not run ({block.language or 'no language'})"
        elif block.directive("skip") is not None:
            what = f"skip {block.directive('skip')}"
        elif block.serve_args() is not None:
            what = "server: started by the runner"
        else:
            what = "run"
            if block.all("requires"):
                what += f" if {'; '.join(block.all('requires'))}"
            if block.output is not None:
                what += f", output shown at line {block.output.line} ({block.output.language})"
            if block.all("expect"):
                what += f", expect {len(block.all('expect'))}"
        print(f"{document.path}:{block.line}: {block.language or '-'}: {what}: {block.first_line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", nargs="*", help="Markdown files relative to the repository (default: the five documents)")
    parser.add_argument("--bin", help="the telltale binary (default $TELLTALE_BIN, else $CARGO_TARGET_DIR/debug/telltale)")
    parser.add_argument("--list", action="store_true", help="print what would run, run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each block as it runs and each skip's reason")
    options = parser.parse_args()

    documents = []
    for name in options.documents or DOCUMENTS:
        path = (REPO / name) if not Path(name).is_absolute() else Path(name)
        try:
            documents.append(parse(str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path), path.read_text()))
        except (OSError, DocumentError) as error:
            print(f"docs-check: {error}", file=sys.stderr)
            return 2
    if options.list:
        for document in documents:
            describe(document)
        return 0

    target = os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/telltale-target")
    binary = Path(options.bin or os.environ.get("TELLTALE_BIN") or os.path.join(target, "debug", "telltale"))
    if not os.access(binary, os.X_OK):
        print(f"docs-check: no telltale binary at {binary} (build it, or give --bin or TELLTALE_BIN)", file=sys.stderr)
        return 2
    binary = binary.resolve()

    passed = failed = 0
    for document in documents:
        started = time.monotonic()
        result = run_document(document, binary, options.keep, options.verbose)
        for failure in result.failures:
            block = failure.block
            where = f"{document.path}:{block.line}: FAIL: `{block.first_line}`" if block else f"{document.path}: FAIL:"
            print(f"{where}\n{textwrap_indent(failure.message)}", flush=True)
        if options.verbose or options.keep:
            for note in result.notes:
                print(f"  {note}")
        counts = f"{result.run} run, {result.skipped} skipped"
        if result.not_run:
            counts += f", {result.not_run} not run after the failure"
        verdict = "FAILED" if result.failures else "ok"
        print(f"{document.path}: {counts}: {verdict} ({time.monotonic() - started:.0f} s)", flush=True)
        passed += result.run
        failed += len(result.failures)
    print(f"# pass {passed}")
    print(f"# fail {failed}")
    return 1 if failed else 0


def textwrap_indent(message: str) -> str:
    return "\n".join(line if line.startswith("    ") else "  " + line for line in message.splitlines())


if __name__ == "__main__":
    sys.exit(main())
