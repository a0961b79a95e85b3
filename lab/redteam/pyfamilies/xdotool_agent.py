"""Family `xdotool-agent`: a computer-use agent as the public reference implementations build
it, acting on the X display only through the `xdotool` command.

Modelled on Anthropic's computer-use reference implementation (anthropics/anthropic-quickstarts,
computer-use-demo/computer_use_demo/tools/computer.py) and its xdotool calls:

- every action is one `xdotool` command line: `mousemove --sync X Y` (the pointer jumps),
  `click 1`, `mousemove --sync X Y click 1` (the `computer_20250124` tool's left_click with a
  coordinate), `type --delay 12 -- TEXT` in chunks of 50 characters (TYPING_DELAY_MS = 12,
  TYPING_GROUP_SIZE = 50), `key -- KEYS`, scrolling as `mousemove --sync X Y click --repeat N 5`
  (wheel button 5 down, 4 up), `mousedown 1 mousemove --sync X Y mouseup 1` for a drag;
- after every action but `type` the tool waits `_screenshot_delay = 2.0` s and takes a
  screenshot (after `type`, at once); the model sees the screenshot scaled down to one of
  MAX_SCALING_TARGETS (1920x1080 is ~16:9: FWXGA 1366x768) and answers in those coordinates,
  which the tool scales back up with round() (`scale_coordinates`), so every point the pointer
  lands on is a rounded multiple of 1920/1366 px;
- the older `computer_20241022` tool has no coordinate on left_click (the model sends a
  `mouse_move`, sees the result, then a `left_click`) and no scroll action (keys instead).

The "seeing" is a stand-in: element rectangles read over DevTools (Runtime.evaluate on the page's
target, no domain enabled) where the agent would take a screenshot and run the vision model; the
model's latency is a seeded log-normal wait before each action. Nothing else goes over DevTools
except navigation (the harness's page and, at the end, about:blank). Every choice comes from
the seeded Rng (tool version, what to click, pointing error, scroll amounts, latencies).
"""
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import websocket  # websocket-client (a Selenium dependency): the DevTools connection

from .common import CHROMIUM, DESKTOP_SCREENS, label, radio

TYPING_DELAY_MS = 12          # computer.py TYPING_DELAY_MS (also xdotool's own default --delay)
TYPING_GROUP_SIZE = 50        # computer.py TYPING_GROUP_SIZE
SCREENSHOT_DELAY_S = 2.0      # computer.py BaseComputerTool._screenshot_delay
MAX_SCALING_TARGETS = ((1024, 768), (1280, 800), (1366, 768))  # XGA, WXGA, FWXGA (computer.py)


class Cdp:
    """A minimal synchronous DevTools client on one page target."""

    def __init__(self, browser_url):
        with urllib.request.urlopen(browser_url + '/json/list', timeout=10) as resp:
            targets = [t for t in json.load(resp) if t.get('type') == 'page']
        if not targets:
            raise RuntimeError('the browser shows no page')
        target = next((t for t in targets if t.get('url') == 'about:blank'), targets[0])
        # No Origin header: Chromium refuses DevTools websockets from origins it was not told of.
        self.ws = websocket.create_connection(target['webSocketDebuggerUrl'], suppress_origin=True, timeout=30)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({'id': self.next_id, 'method': method, 'params': params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get('id') == self.next_id:
                if 'error' in msg:
                    raise RuntimeError(f"{method}: {msg['error'].get('message')}")
                return msg.get('result', {})

    def evaluate(self, expression, retries=20):
        for attempt in range(retries):
            try:
                res = self.call('Runtime.evaluate', expression=expression, returnByValue=True)
            except RuntimeError:  # no execution context while a page loads
                time.sleep(0.1)
                continue
            if 'exceptionDetails' in res:
                if attempt + 1 < retries:
                    time.sleep(0.1)
                    continue
                raise RuntimeError(res['exceptionDetails'].get('text', 'evaluation failed'))
            return res['result'].get('value')
        raise RuntimeError(f'could not evaluate {expression[:40]}')

    def navigate(self, url, timeout=30):
        self.call('Page.navigate', url=url)
        deadline = time.monotonic() + timeout
        time.sleep(0.2)
        while time.monotonic() < deadline:
            try:
                if self.evaluate(f'location.href === {json.dumps(url)} && document.readyState === "complete"', retries=1):
                    return
            except RuntimeError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f'{url} did not load')

    def close(self):
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001 (the browser may be gone)
            pass


# What the agent "sees" on each screenshot: the boxes of the elements it may act on, the
# slider's value, which page is showing, and the browser's frame (for page-to-screen).
OBSERVE = """(() => {
  const out = {vw: innerWidth, vh: innerHeight, fw: outerWidth - innerWidth, fh: outerHeight - innerHeight,
               sx: screenX, sy: screenY, boxes: {}, shown: {}};
  for (const sel of %s) {
    const e = document.querySelector(sel);
    if (!e) continue;
    const b = e.getBoundingClientRect();
    out.boxes[sel] = {x: b.x, y: b.y, w: b.width, h: b.height};
    out.shown[sel] = e.offsetParent !== null || getComputedStyle(e).position === 'fixed';
  }
  const s = document.querySelector('#satisfaction');
  out.slider = s ? {min: +s.min, max: +s.max, value: +s.value} : null;
  out.focus = document.activeElement ? (document.activeElement.id || document.activeElement.tagName) : '';
  return out;
})()"""


class Agent:
    def __init__(self, cdp, r, display, window):
        self.cdp, self.r, self.window = cdp, r, window
        self.env = {**os.environ, 'DISPLAY': display}
        geometry = self.xdotool('getdisplaygeometry', capture=True).split()
        self.screen = (int(geometry[0]), int(geometry[1]))
        self.scale = scaling(self.screen)
        # Which tool version the agent was given: the newer one clicks and scrolls at a coordinate.
        self.version = '20250124' if r.chance(0.65) else '20241022'
        # Median model latency of this agent (model and load vary): 2.5-6 s a step.
        self.latency_median_ms = r.uniform(2500, 6000)
        self.steps = 0

    # ---- the tool ----------------------------------------------------------------------------

    def xdotool(self, *args, capture=False):
        proc = subprocess.run(['xdotool', *args], env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60)
        if proc.returncode != 0:
            raise RuntimeError(f"xdotool {' '.join(args[:3])}: {proc.stderr.strip()[:200]}")
        return proc.stdout if capture else None

    def after_action(self, screenshot_delay=True):
        """What the tool does after an action: wait for things to settle, take a screenshot
        (scrot and ImageMagick's convert to the scaled size: a fraction of a second)."""
        if screenshot_delay:
            time.sleep(SCREENSHOT_DELAY_S)
        time.sleep(self.r.uniform(0.25, 0.6))

    # ---- the model ---------------------------------------------------------------------------

    def think(self):
        """One model call: the screenshot goes up, an action comes back."""
        self.steps += 1
        time.sleep(min(20.0, max(1.2, self.r.pause(self.latency_median_ms, 0.5))))

    def look(self, selectors):
        return self.cdp.evaluate(OBSERVE % json.dumps(list(selectors)))

    def point(self, seen, sel, fx=0.5, fy=0.5):
        """Where the model points for `sel`: a spot of the element on the scaled screenshot,
        a pixel or so off (vision), in API coordinates; returned scaled up as the tool does."""
        b = seen['boxes'][sel]
        ox, oy = self.window[0] + seen['fw'] / 2, self.window[1] + seen['fh']
        sx, sy = ox + b['x'] + b['w'] * fx, oy + b['y'] + b['h'] * fy
        kx, ky = self.scale
        ax = int(round(sx * kx + self.r.normal(0, 0.9, -2.5, 2.5)))
        ay = int(round(sy * ky + self.r.normal(0, 0.9, -2.5, 2.5)))
        return int(round(ax / kx)), int(round(ay / ky))

    # ---- actions (one model step each) -------------------------------------------------------

    def screenshot(self):
        self.think()
        self.after_action(screenshot_delay=False)

    def click(self, sel, fx=0.5, fy=0.5):
        seen = self.look([sel])
        if not seen['shown'].get(sel):
            raise RuntimeError(f'{sel} is not on the screen')
        x, y = self.point(seen, sel, fx, fy)
        if self.version == '20250124':
            self.think()
            self.xdotool('mousemove', '--sync', str(x), str(y), 'click', '1')
            self.after_action()
        else:
            self.think()
            self.xdotool('mousemove', '--sync', str(x), str(y))
            self.after_action()
            self.think()
            self.xdotool('click', '1')
            self.after_action()

    def type(self, text):
        self.think()
        for i in range(0, len(text), TYPING_GROUP_SIZE):
            self.xdotool('type', '--delay', str(TYPING_DELAY_MS), '--', text[i:i + TYPING_GROUP_SIZE])
        self.after_action(screenshot_delay=False)

    def key(self, keys):
        self.think()
        self.xdotool('key', '--', *keys.split())
        self.after_action()

    def scroll_to(self, sel):
        """Scroll until `sel` is wholly on the screen: the scroll action at a point of the page
        (newer tool; amounts as models pick them), or Page_Down keys (older tool, no scroll)."""
        for _ in range(15):
            seen = self.look([sel, 'body'])
            b = seen['boxes'][sel]
            if b['y'] >= 0 and b['y'] + b['h'] <= seen['vh']:
                return
            down = b['y'] + b['h'] > seen['vh']
            if self.version == '20250124':
                amount = self.r.choice([3, 5, 5, 10])
                ox, oy = self.window[0] + seen['fw'] / 2, self.window[1] + seen['fh']
                kx, ky = self.scale
                ax = int(round((ox + seen['vw'] * self.r.uniform(0.3, 0.7)) * kx))
                ay = int(round((oy + seen['vh'] * self.r.uniform(0.35, 0.65)) * ky))
                self.think()
                self.xdotool('mousemove', '--sync', str(int(round(ax / kx))), str(int(round(ay / ky))),
                             'click', '--repeat', str(amount), '5' if down else '4')
                self.after_action()
            else:
                self.key('Page_Down' if down else 'Page_Up')
        raise RuntimeError(f'could not scroll {sel} into view')

    def wait_for(self, sel, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.look([sel])['shown'].get(sel):
                return
            self.screenshot()  # the model asks for another look
        raise TimeoutError(f'{sel} never became visible')

    def set_slider(self, sel, value):
        seen = self.look([sel])
        s, b = seen['slider'], seen['boxes'][sel]
        # The model reads the track off the screenshot: about a thumb's half in from each end.
        frac = (8 + (b['w'] - 16) * (value - s['min']) / (s['max'] - s['min'])) / b['w']
        self.click(sel, fx=frac, fy=0.5)
        got = self.look([sel])['slider']['value']
        if got == value:
            return
        # It sees the wrong number on the next screenshot and corrects it.
        if self.r.chance(0.6):
            self.key(' '.join(['Right' if value > got else 'Left'] * abs(value - got)))
        else:
            seen = self.look([sel])
            x, y = self.point(seen, sel, frac, 0.5)
            self.think()
            self.xdotool('mousedown', '1', 'mousemove', '--sync', str(x), str(y), 'mouseup', '1')
            self.after_action()
            got = self.look([sel])['slider']['value']
            if got != value:
                self.key(' '.join(['Right' if value > got else 'Left'] * abs(value - got)))


def scaling(screen):
    """computer.py's scale_coordinates factors: the first target of the screen's aspect ratio
    (within 0.02) that is smaller than the screen, else none."""
    w, h = screen
    for tw, th in MAX_SCALING_TARGETS:
        if abs(tw / th - w / h) < 0.02:
            if tw < w:
                return tw / w, th / h
            break
    return 1.0, 1.0


def fill(agent, r, ans):
    """The demo survey as a computer-use agent does it: one action per model step."""
    if r.chance(0.75):
        agent.screenshot()  # agents usually start by looking at the screen
    agent.wait_for('#page-1')
    # Page 1: the radio and the checkboxes: the circle/box or the words next to it.
    agent.click(radio('often', ans['often']) if r.chance(0.5) else label('often', ans['often']))
    for device in ans['devices']:
        agent.click(radio('device', device) if r.chance(0.5) else label('device', device))
    agent.click('#next-1')
    # Page 2: click into each field and type; Tab to the second field now and then.
    agent.wait_for('#page-2')
    agent.click('#experience', fy=r.uniform(0.3, 0.6))
    agent.type(ans['experience'])
    if r.chance(0.35):
        agent.key('Tab')
    else:
        agent.click('#colour')
    agent.type(ans['colour'])
    agent.scroll_to('#next-2')
    agent.click('#next-2')
    # Page 3: the slider, then Submit.
    agent.wait_for('#page-3')
    agent.set_slider('#satisfaction', ans['satisfaction'])
    agent.scroll_to('#submit')
    agent.click('#submit')
    agent.wait_for('#done')


def run(url, r, answers, base, mask_environment, connect=None):
    if mask_environment:
        raise RuntimeError('xdotool-agent does not mask the environment (it never touches requests)')
    if connect:
        _drive(connect['browser_url'], connect['display'], connect['window'], url, r, answers)
        return
    # Standalone: a headed Chromium of its own on the session's xvfb-run display, at 0,0, with a
    # DevTools port (the stand-in for the screenshot) and the harness's switch that keeps that
    # port from setting navigator.webdriver.
    (sw, sh), _ = r.choice(DESKTOP_SCREENS)
    profile = tempfile.mkdtemp(prefix='rt-xdotool-agent-')
    proc = subprocess.Popen([CHROMIUM, '--no-sandbox', '--no-first-run', '--no-default-browser-check',
                             '--disable-background-networking', '--password-store=basic',
                             '--remote-debugging-address=127.0.0.1', '--remote-debugging-port=0',
                             '--disable-blink-features=AutomationControlled', f'--user-data-dir={profile}',
                             '--window-position=0,0', f'--window-size={sw},{sh}', 'about:blank'],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        port = ''
        deadline = time.monotonic() + 20
        while not port.isdigit() and time.monotonic() < deadline:
            time.sleep(0.1)
            try:
                port = open(os.path.join(profile, 'DevToolsActivePort')).read().split('\n')[0].strip()
            except FileNotFoundError:
                pass
        if not port.isdigit():
            raise RuntimeError('chromium did not listen for DevTools')
        time.sleep(1.0)
        _drive(f'http://127.0.0.1:{port}', os.environ.get('DISPLAY', ':0'), (0, 0, sw, sh), url, r, answers)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def _drive(browser_url, display, window, url, r, answers):
    cdp = Cdp(browser_url)
    try:
        cdp.navigate(url)
        agent = Agent(cdp, r, display, window)
        fill(agent, r, answers)
        time.sleep(2.5)
        cdp.navigate('about:blank')
        time.sleep(0.3)
    finally:
        cdp.close()  # only this connection: the browser is the harness's
