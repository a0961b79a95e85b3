"""The survey platform of the recordings: a web server on its own origin that serves the survey
layouts (survey/layouts.json) with the production embed loaded from the Telltale server and its
collector there, as an integrator's pages do, and the probe the replay runner asks for
geometry (survey/probe.js).

- `GET /s/{layout}?key=TRACKING_KEY&response=UUID[&probe=ID]`: the layout's page. `demo` is the
  product's own demo page (src/http/demo.html) served from this origin; the others are
  survey/{layout}.html.
- `GET /survey/{survey,probe}.js`: the pages' scripts.
- `GET /probe/{id}/next` (long poll) and `POST /probe/{id}/answer`: the page's side of `ask`.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

HERE = Path(__file__).resolve().parent
SURVEY = HERE.parent / "survey"
REPO = HERE.parent.parent
DEMO_PAGE = REPO / "src" / "http" / "demo.html"
LAYOUTS = json.loads((SURVEY / "layouts.json").read_text())
KEY = re.compile(r"^[0-9a-f]{24}$")
POLL_SECONDS = 20.0


class ProbeError(RuntimeError):
    pass


def layout_names() -> list[str]:
    return list(LAYOUTS["layouts"])


class Channel:
    """One page's probe: queries wait for the page's poll, answers for the asker."""

    def __init__(self) -> None:
        self.queries: queue.Queue = queue.Queue()
        self.answers: queue.Queue = queue.Queue()
        self.next_id = 0
        self.seen = threading.Event()  # the page polled at least once: it has loaded
        self.lock = threading.Lock()


class PageServer:
    def __init__(self, telltale_base: str):
        self.telltale = telltale_base.rstrip("/")
        self.channels: dict[str, Channel] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def reply(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the page went away while its poll waited (it was left)

            def do_GET(self) -> None:  # noqa: N802 (the base class's name)
                url = urlparse(self.path)
                parts = url.path.strip("/").split("/")
                if len(parts) == 2 and parts[0] == "s":
                    page = server.page(parts[1], parse_qs(url.query))
                    if page is None:
                        self.reply(404, b"no such layout or key", "text/plain")
                    else:
                        self.reply(200, page.encode(), "text/html; charset=utf-8")
                elif len(parts) == 2 and parts[0] == "survey" and parts[1] in ("survey.js", "probe.js"):
                    self.reply(200, (SURVEY / parts[1]).read_bytes(), "text/javascript")
                elif len(parts) == 3 and parts[0] == "probe" and parts[2] == "next":
                    channel = server.channel(parts[1])
                    channel.seen.set()
                    try:
                        query = channel.queries.get(timeout=POLL_SECONDS)
                    except queue.Empty:
                        query = {"kind": "none"}
                    self.reply(200, json.dumps(query).encode(), "application/json")
                else:
                    self.reply(404, b"not found", "text/plain")

            def do_POST(self) -> None:  # noqa: N802
                parts = urlparse(self.path).path.strip("/").split("/")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if len(parts) == 3 and parts[0] == "probe" and parts[2] == "answer":
                    try:
                        server.channel(parts[1]).answers.put(json.loads(body))
                    except json.JSONDecodeError:
                        self.reply(400, b"bad answer", "text/plain")
                        return
                    self.reply(204, b"", "text/plain")
                else:
                    self.reply(404, b"not found", "text/plain")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, layout: str, tracking_key: str, reference: str, probe: str | None = None) -> str:
        url = f"{self.base}/s/{layout}?key={tracking_key}&response={reference}"
        return url + (f"&probe={probe}" if probe else "")

    def page(self, layout: str, query: dict) -> str | None:
        key = (query.get("key") or [""])[0]
        if layout not in LAYOUTS["layouts"] or not KEY.match(key):
            return None
        embed, collector = f"{self.telltale}/embed/v1/telltale.js", f"{self.telltale}/event"
        if layout == "demo":
            html = DEMO_PAGE.read_text()
            html = html.replace('src="/embed/v1/telltale.js"', f'src="{embed}"')
            html = html.replace('location.origin + "/event"', json.dumps(collector))
            html = html.replace("{{TRACKING_KEY}}", key)
            return html.replace("</body>", '<script src="/survey/probe.js"></script>\n</body>')
        html = (SURVEY / f"{layout}.html").read_text()
        return (html.replace("{{EMBED_URL}}", embed).replace("{{COLLECTOR_URL}}", collector)
                .replace("{{TRACKING_KEY}}", key))

    def channel(self, probe: str) -> Channel:
        with self.lock:
            if probe not in self.channels:
                self.channels[probe] = Channel()
            return self.channels[probe]

    def forget(self, probe: str) -> None:
        with self.lock:
            self.channels.pop(probe, None)

    def wait_loaded(self, probe: str, timeout: float = 30.0) -> None:
        if not self.channel(probe).seen.wait(timeout):
            raise ProbeError(f"the page of probe {probe} did not load in {timeout:.0f} s")

    def ask(self, probe: str, query: dict, timeout: float = 10.0):
        """Asks the page `query` ({"kind": "box" | "focus" | "shown" | "frame" | "leave", ...})
        and returns its answer."""
        channel = self.channel(probe)
        with channel.lock:
            channel.next_id += 1
            query = {**query, "id": channel.next_id}
            channel.queries.put(query)
            while True:
                try:
                    answer = channel.answers.get(timeout=timeout)
                except queue.Empty:
                    raise ProbeError(f"the page did not answer {query['kind']} in {timeout:.0f} s") from None
                if answer.get("id") != query["id"]:
                    continue  # a stale answer of a query that timed out
                if "error" in answer:
                    raise ProbeError(f"the page failed to answer {query['kind']}: {answer['error']}")
                return answer.get("answer")


def main() -> None:
    """`python3 -m replay.pages --telltale URL`: serves the layouts until interrupted (for running
    bots.js or a browser against them by hand)."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--telltale", required=True, help="the Telltale server's base URL")
    args = parser.parse_args()
    server = PageServer(args.telltale)
    print(f"survey pages on {server.base}/s/<layout>?key=TRACKING_KEY&response=UUID "
          f"(layouts: {', '.join(layout_names())})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
