#!/usr/bin/env python3
"""Connect-mode check: runs red-team families the way the recording harness will, one session per
family, each in a browser started exactly as the harness starts it (lab/replay: an Xvfb display of
its own, Debian Chromium headed with replay.browser's FLAGS, a window drawn from its sizes, the
phone window for the phone family), on the harness's page server's copy of the demo survey.

    python3 lab/redteam/connect_check.py [--tools a,b,...] [--seed N] [--telltale BIN] [--out FILE]

With a Telltale binary (default: $HOME/.cache/telltale-target/release/telltale when it exists) a
server is started on a fresh data dir, a survey provisioned and each session looked up afterwards
(`captured`, `eventCount`); without one, a made-up tracking key is used (the survey still runs to
#done) and a stub collector on the loopback serves the repository's embed
(ingest/embed/telltale.js) and counts the events it is sent per session (`stubEvents`, and the
event types as `stubTypes`): a capture check without the server, not a stand-in for it. Prints one JSON line per session, the runner's line plus `window`
and `browserAlive` (the browser must outlive the session: connect mode never closes it)."""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.dirname(HERE)
sys.path.insert(0, LAB)

from replay.browser import PHONE_WINDOW, Browser, Window, draw_window  # noqa: E402
from replay.pages import PageServer  # noqa: E402
from replay.xinput import Display  # noqa: E402

TOOLS = ['pptr-stealth', 'pw-keyboard', 'pw-touch', 'llm-agent', 'selenium-humancursor',
         'pw-stealth-oxymouse', 'xvfb-pyclick', 'xdotool-agent']
PHONE_TOOLS = {'pw-touch'}
DEFAULT_BIN = os.path.expanduser('~/.cache/telltale-target/release/telltale')


class Server:
    """`telltale serve` on a fresh data dir, with a provisioned survey."""

    def __init__(self, binary):
        self.data = tempfile.mkdtemp(prefix='rt-data-')
        self.proc = subprocess.Popen(
            [binary, 'serve', '--bind', '127.0.0.1:0', '--data-dir', self.data,
             '--collector-ip-rate', '0', '--collector-identifier-rate', '0'],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.key = self.base = None
        deadline = time.time() + 120
        while time.time() < deadline and not (self.key and self.base):
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f'telltale serve exited ({self.proc.poll()})')
            m = re.search(r'TELLTALE_INTEGRATION_KEY=(\S+)', line)
            if m:
                self.key = m.group(1)
            m = re.search(r'telltale listening on (\S+)', line)
            if m:
                self.base = m.group(1).rstrip('/')
        if not (self.key and self.base):
            raise RuntimeError('telltale serve did not print its key and URL')
        # Keep draining its output so it never blocks on a full pipe.
        import threading
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()
        req = urllib.request.Request(f'{self.base}/integrations/v1/surveys/redteam', method='PUT',
                                     data=json.dumps({'name': 'rt'}).encode(),
                                     headers={'Authorization': f'Bearer {self.key}', 'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=30) as resp:
            data = json.load(resp)['data']
        self.tracking_key, self.survey_id = data['trackingKey'], data['surveyId']

    def lookup(self, references):
        req = urllib.request.Request(
            f'{self.base}/integrations/v1/surveys/{self.survey_id}/sessions/lookup', method='POST',
            data=json.dumps({'externalReferences': references}).encode(),
            headers={'Authorization': f'Bearer {self.key}', 'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return {row['externalReference']: row for row in json.load(resp)['data']}

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.data, ignore_errors=True)


class StubCollector:
    """Serves /embed/v1/telltale.js from the repository and accepts the embed's batches
    (POST /event/{key}/{session}, fetch or sendBeacon), counting events by session."""

    def __init__(self):
        import collections
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        embed = os.path.join(os.path.dirname(LAB), 'ingest', 'embed', 'telltale.js')
        self.events = collections.defaultdict(collections.Counter)
        self.env = collections.defaultdict(dict)  # session: the data of its session/environment events
        self.raw = collections.defaultdict(list)  # session: every event as sent
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def log_message(self, *a):
                pass

            def reply(self, status, body=b'', kind='text/plain'):
                self.send_response(status)
                self.send_header('Access-Control-Allow-Origin', '*')
                self.send_header('Access-Control-Allow-Headers', 'Content-Type')
                self.send_header('Content-Type', kind)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_OPTIONS(self):  # noqa: N802
                self.reply(204)

            def do_GET(self):  # noqa: N802
                if self.path.split('?')[0] == '/embed/v1/telltale.js':
                    with open(embed, 'rb') as f:
                        self.reply(200, f.read(), 'text/javascript')
                else:
                    self.reply(404)

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
                parts = self.path.split('?')[0].strip('/').split('/')
                if len(parts) == 3 and parts[0] == 'event':
                    try:
                        for e in json.loads(body).get('events', []):
                            sid = urllib.parse.unquote(parts[2])
                            stub.events[sid][e.get('type', '?')] += 1
                            stub.raw[sid].append(e)
                            if e.get('type') in ('session', 'environment'):
                                stub.env[sid][e['type']] = e.get('data')
                    except (ValueError, AttributeError):
                        pass
                    self.reply(201, b'{"success":true}', 'application/json')
                else:
                    self.reply(404)

        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f'http://127.0.0.1:{self.httpd.server_address[1]}'
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def session(tool, seed, pages, tracking_key, rng):
    display = Display.start()
    window = draw_window(rng, (display.width, display.height), phone=tool in PHONE_TOOLS)
    browser = None
    try:
        browser = Browser(display.name, 'about:blank', window)
        devtools = browser.devtools()
        time.sleep(1.0)  # the window is drawn
        reference = str(uuid.uuid4())
        url = pages.url('demo', tracking_key, reference)
        cmd = ['node', os.path.join(HERE, 'run.js'), '--tool', tool, '--seed', str(seed), '--connect', devtools,
               '--display', display.name, '--url', url,
               '--window', f'{window.x},{window.y},{window.width},{window.height}']
        print('$ ' + ' '.join(cmd), file=sys.stderr, flush=True)
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=660)
            lines = [l for l in proc.stdout.splitlines() if l.startswith('{')]
            line = json.loads(lines[-1]) if lines else {'reference': reference, 'tool': tool, 'seed': seed,
                                                        'ok': False, 'error': f'runner exited {proc.returncode}'}
        except subprocess.TimeoutExpired:
            line = {'reference': reference, 'tool': tool, 'seed': seed, 'ok': False, 'error': 'runner timed out'}
        line['window'] = [window.x, window.y, window.width, window.height]
        line['browserAlive'] = browser.process.poll() is None
        return line
    finally:
        if browser:
            browser.close()
        display.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--tools', default=','.join(TOOLS))
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--telltale', default=DEFAULT_BIN, help='telltale binary (a fake key is used if missing)')
    ap.add_argument('--out', help='also append the lines to this file')
    ap.add_argument('--show-env', action='store_true', help='stub only: add the session/environment events')
    ap.add_argument('--dump', help='stub only: write each session\'s events to DIR/REFERENCE.json')
    args = ap.parse_args()
    server = Server(args.telltale) if os.path.exists(args.telltale) else None
    stub = None if server else StubCollector()
    base = server.base if server else stub.base
    tracking_key = server.tracking_key if server else 'ab' * 12
    pages = PageServer(base)
    rng = random.Random(f'connect-check/{args.seed}')
    failures = 0
    try:
        lines = []
        for tool in args.tools.split(','):
            line = session(tool, args.seed, pages, tracking_key, rng)
            if server:
                time.sleep(3)  # the collector writes the last batch
                try:
                    row = server.lookup([line['reference']]).get(line['reference'], {})
                    # Only capture statistics: the red team never reads a score.
                    line['captured'], line['eventCount'] = row.get('captured', False), row.get('eventCount', 0)
                except OSError as e:
                    line['lookupError'] = str(e)
            else:
                time.sleep(1)
                types = stub.events.get(line['reference'], {})
                line['stubEvents'], line['stubTypes'] = sum(types.values()), dict(types)
                if args.dump:
                    os.makedirs(args.dump, exist_ok=True)
                    with open(os.path.join(args.dump, line['reference'] + '.json'), 'w') as f:
                        json.dump(stub.raw.get(line['reference'], []), f)
                if args.show_env:
                    line['stubEnv'] = stub.env.get(line['reference'], {})
            failures += 0 if line['ok'] and line['browserAlive'] else 1
            print(json.dumps(line), flush=True)
            lines.append(line)
            if args.out:
                with open(args.out, 'a') as f:
                    f.write(json.dumps(line) + '\n')
        if server and lines:
            # The same check through lookup.py, on the runner lines as they were printed.
            with tempfile.NamedTemporaryFile('w', suffix='.jsonl', delete=False) as f:
                for line in lines:
                    f.write(json.dumps({k: line[k] for k in ('reference', 'tool', 'seed', 'ok', 'seconds')}) + '\n')
            out = subprocess.run([sys.executable, os.path.join(HERE, 'lookup.py'), '--base', server.base,
                                  '--api-key', server.key, '--survey-id', server.survey_id, f.name],
                                 stdout=subprocess.PIPE, text=True, timeout=60).stdout
            os.unlink(f.name)
            for l in out.splitlines():
                print('lookup.py: ' + l, file=sys.stderr, flush=True)
    finally:
        pages.close()
        if server:
            server.close()
        if stub:
            stub.close()
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
