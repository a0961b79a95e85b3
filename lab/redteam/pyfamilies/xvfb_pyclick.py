"""Family `xvfb-pyclick`: real OS input into a headed Chromium on an X display (Xvfb, one per
session; run.py starts it with xvfb-run). The browser is launched by nodriver (the "undetected"
CDP driver: no WebDriver, no navigator.webdriver; README: `browser = await uc.start()`,
`tab = await browser.get(url)`), which is used only to open the page, read where elements are
and, with --mask-environment, Chromium goes through the loopback rewriting proxy of
maskproxy.py (nodriver 0.50.99's Fetch interception could not continue requests: every
Fetch.continueRequest answered "Fetch domain is not enabled"). Every input goes through the X server like a
person's: pointer paths from pyclick's HumanClicker (Bezier HumanCurve, README:
hc.move((x, y), duration)), buttons, keys and wheel notches from PyAutoGUI (mouseDown/mouseUp,
keyDown/keyUp, scroll). Needs a display."""
import asyncio
import contextlib
import json
import os
import threading
import time

import nodriver as uc
from nodriver import cdp

from .common import CHROMIUM, DESKTOP_SCREENS, fill_survey, human_keystrokes
from .maskproxy import MaskProxy

X_SCREEN = (1920, 1080)   # run.py's xvfb-run screen


class _Loop:
    """nodriver is asyncio; the OS input is blocking. The loop runs on its own thread so the
    browser connection (and the request interception) keeps going while the pointer moves."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def __call__(self, coro, timeout=60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


def run(url, r, answers, base, mask_environment, connect=None):
    if connect:
        os.environ['DISPLAY'] = connect['display']  # the harness's display, before PyAutoGUI opens it
    import pyautogui  # opens $DISPLAY at import: the session's xvfb-run, or the harness's display
    from pyclick import HumanClicker

    pyautogui.FAILSAFE = False  # no human at this display to slam the pointer into a corner
    if connect:
        _attach(url, r, answers, pyautogui, HumanClicker(), connect)
        return
    (sw, sh), _ = r.choice(DESKTOP_SCREENS)
    sw, sh = min(sw, X_SCREEN[0]), min(sh, X_SCREEN[1])
    with (MaskProxy() if mask_environment else contextlib.nullcontext()) as proxy:
        _browse(url, r, answers, pyautogui, HumanClicker(), sw, sh, proxy.chromium_args() if proxy else [])


def _browse(url, r, answers, pyautogui, clicker, sw, sh, extra_args):
    call = _Loop()
    browser = call(uc.start(browser_executable_path=CHROMIUM, headless=False, sandbox=False,
                            browser_args=[f'--window-size={sw},{sh}', '--window-position=0,0',
                                          '--disable-dev-shm-usage'] + extra_args))
    try:
        tab = call(browser.get(url))
        call(tab.sleep(1.0))
        _session(call, tab, r, answers, pyautogui, clicker)
    finally:
        try:
            call(browser.connection.send(cdp.browser.close()), timeout=10)
        except Exception:
            pass
        browser.stop()


def _attach(url, r, answers, pyautogui, clicker, connect):
    """Connect mode: nodriver attaches to the harness's browser (`uc.start(host=..., port=...)`,
    its way to connect to a running Chrome), navigates the existing tab, and closes only its own
    connection at the end (no Browser.close: the harness closes the browser)."""
    host, port = connect['browser_url'].split('://', 1)[1].rsplit(':', 1)
    call = _Loop()
    browser = call(uc.start(host=host, port=int(port)))
    try:
        tab = call(browser.get(url))
        call(tab.sleep(1.0))
        _session(call, tab, r, answers, pyautogui, clicker, window=connect['window'])
    finally:
        try:
            call(browser.connection.aclose() if browser.connection else asyncio.sleep(0), timeout=10)
        except Exception:
            pass
        for t in browser.targets:
            try:
                call(t.aclose(), timeout=5)
            except Exception:
                pass


def _session(call, tab, r, answers, pyautogui, clicker, window=None):
    def js(expr):
        return json.loads(call(tab.evaluate(f'JSON.stringify({expr})', return_by_value=True)))

    def rect(css):
        # Client rectangle plus where the page's (0, 0) is on the X screen: the window's corner
        # (the harness's geometry in connect mode, else the page's screenX/screenY) plus the
        # browser's frame, measured by the page (outer minus inner size; no window manager, so
        # the frame is Chromium's own: the side borders split the width, the top has the rest).
        b = js("(() => { const b = document.querySelector(%s).getBoundingClientRect();"
               " return {x: b.x, y: b.y, w: b.width, h: b.height, vh: innerHeight, sx: screenX, sy: screenY,"
               " fw: outerWidth - innerWidth, fh: outerHeight - innerHeight}; })()" % json.dumps(css))
        wx, wy = (window[0], window[1]) if window else (b['sx'], b['sy'])
        b['ox'], b['oy'] = wx + b['fw'] / 2, wy + b['fh']
        return b

    def move_to(sx, sy):
        dist = ((sx - pyautogui.position()[0]) ** 2 + (sy - pyautogui.position()[1]) ** 2) ** 0.5
        duration = (0.3 + dist / 1500.0) * r.uniform(0.8, 1.3)
        clicker.move((int(sx), int(sy)), duration)
        pyautogui.PAUSE = 0  # HumanClicker leaves its per-point pause behind

    def aim(b):
        return (b['ox'] + b['x'] + b['w'] * min(0.85, max(0.15, r.gauss(0.5, 0.14))),
                b['oy'] + b['y'] + b['h'] * min(0.8, max(0.2, r.gauss(0.5, 0.12))))

    def wheel_to(css):
        for _ in range(12):
            b = rect(css)
            if b['y'] >= 0 and b['y'] + b['h'] <= b['vh']:
                return
            step = 1 if b['y'] < 0 else -1
            for _ in range(r.randint(2, 5)):
                pyautogui.scroll(step)
                time.sleep(r.uniform(0.03, 0.11))
            time.sleep(r.pause(350))

    def press_release(hold):
        pyautogui.mouseDown()
        time.sleep(hold)
        pyautogui.mouseUp()

    b0 = rect('body')
    pyautogui.moveTo(int(b0['ox'] + r.uniform(200, 700)), int(b0['oy'] + r.uniform(150, 450)))

    class P:
        type_clicks_field = False

        @staticmethod
        def wait_visible(css):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if js('(() => { const e = document.querySelector(%s); return !!e && e.offsetParent !== null; })()' % json.dumps(css)):
                    return
                time.sleep(0.2)
            raise TimeoutError(f'{css} never became visible')

        @staticmethod
        def think(seconds):
            time.sleep(seconds)

        @staticmethod
        def idle(seconds):
            b = rect('body')
            move_to(b['ox'] + r.uniform(100, 600), b['oy'] + r.uniform(100, 400))
            time.sleep(seconds)

        @staticmethod
        def click(css):
            wheel_to(css)
            move_to(*aim(rect(css)))
            time.sleep(r.uniform(0.04, 0.16))
            press_release(r.normal(0.095, 0.025, 0.045, 0.19))

        @staticmethod
        def type(css, text):
            for key, hold, flight in human_keystrokes(r, text):
                k = 'backspace' if key == '\b' else ('space' if key == ' ' else key)
                pyautogui.keyDown(k)
                time.sleep(hold)
                pyautogui.keyUp(k)
                time.sleep(flight)

        @staticmethod
        def reveal(css):
            wheel_to(css)

        @staticmethod
        def set_range(css, value):
            wheel_to(css)
            b = rect(css)
            lo, hi, cur = js('(() => { const e = document.querySelector(%s); return [+e.min, +e.max, +e.value]; })()' % json.dumps(css))
            x_of = lambda v: b['ox'] + b['x'] + 8 + (b['w'] - 16) * (v - lo) / (hi - lo)  # noqa: E731
            y = b['oy'] + b['y'] + b['h'] / 2
            move_to(x_of(cur) + r.gauss(0, 2), y)
            pyautogui.mouseDown()
            time.sleep(r.uniform(0.08, 0.2))
            move_to(x_of(value) + r.gauss(0, 1.5), y + r.gauss(0, 2))
            pyautogui.mouseUp()
            if js('+document.querySelector(%s).value' % json.dumps(css)) != value:
                time.sleep(r.pause(600))
                move_to(x_of(value), y)
                press_release(0.09)

    fill_survey(P, r, answers)
    time.sleep(2.5)
    call(tab.get('about:blank'))
    time.sleep(0.3)
