"""--mask-environment for drivers without request interception (Selenium/ChromeDriver): a
small forward HTTP proxy on the loopback, the way selenium-wire intercepts requests. Chromium
is pointed at it with --proxy-server and --proxy-bypass-list=<-loopback> (Chromium otherwise
never proxies loopback addresses). Collector POSTs are rewritten with mask_body; everything else
passes through unchanged. Plain HTTP only (the demo runs on http://127.0.0.1)."""
import http.client
import http.server
import threading
import urllib.parse

from .common import COLLECTOR_PATH, mask_body

HOP = {'connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailers',
       'transfer-encoding', 'upgrade'}


LOOPBACK = {'localhost', '::1', '[::1]'}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *a):
        pass

    def _relay(self):
        url = urllib.parse.urlsplit(self.path)
        if url.scheme != 'http' or not url.hostname:
            self.send_error(400, 'plain http only')
            return
        if url.hostname not in LOOPBACK and not url.hostname.startswith('127.'):
            # Only the local survey server: the browser's own background traffic goes nowhere.
            self.send_error(403, 'loopback only')
            return
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length) if length else None
        path = url.path + (('?' + url.query) if url.query else '')
        if self.command == 'POST' and COLLECTOR_PATH.search(url.path) and body is not None:
            masked = mask_body(body.decode('utf-8', 'replace'))
            if masked is None:  # only environment events: nothing for the collector
                out = b'{"success":true,"count":0}'
                self.send_response(201)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(out)))
                self.end_headers()
                self.wfile.write(out)
                return
            body = masked.encode()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP and k.lower() != 'content-length'}
        if body is not None:
            headers['Content-Length'] = str(len(body))
        conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=30)
        try:
            try:
                conn.request(self.command, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except OSError:
                self.send_error(502, 'upstream unreachable')
                return
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in HOP and k.lower() != 'content-length':
                    self.send_header(k, v)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            if self.command != 'HEAD':
                self.wfile.write(data)
        finally:
            conn.close()

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = _relay


class MaskProxy:
    def __init__(self):
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *a: None  # a browser hanging up is not news
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def address(self):
        return f'http://127.0.0.1:{self.server.server_address[1]}'

    def chromium_args(self):
        return [f'--proxy-server={self.address}', '--proxy-bypass-list=<-loopback>']

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
