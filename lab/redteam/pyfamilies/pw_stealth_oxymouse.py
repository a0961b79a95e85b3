"""Family `pw-stealth-oxymouse`: Playwright for Python with playwright-stealth 2 (its README's
recommended usage: `with Stealth().use_sync(sync_playwright()) as p`), pointer paths from
OxyMouse (README: OxyMouse(algorithm="bezier").generate_coordinates(from_x, from_y, to_x, to_y),
"get button coordinates, get current mouse coordinates, generate movements") played through
page.mouse.move, scrolling from OxyMouse.generate_scroll_coordinates played as page.mouse.wheel
deltas, and text typed with Playwright's locator.press_sequentially(text, delay=ms) (its
documented way to type "like a user"), one delay drawn per word."""
import time

from oxymouse import OxyMouse
from playwright.sync_api import sync_playwright
from playwright_stealth import Stealth

from .common import CHROMIUM, COLLECTOR_PATH, DESKTOP_SCREENS, fill_survey, mask_body


def _mask(route):
    request = route.request
    if request.method != 'POST':
        return route.continue_()
    body = mask_body(request.post_data or '')
    if body is None:
        return route.fulfill(status=201, content_type='application/json', body='{"success":true,"count":0}')
    return route.continue_(post_data=body)


def run(url, r, answers, base, mask_environment, connect=None):
    if connect:
        # Connect mode: Playwright attaches to the harness's browser (connect_over_cdp, the
        # default context and its existing page). playwright-stealth is not applied: its scripts
        # rewrite the environment (navigator, user agent...), which connect mode leaves as it is.
        # Leaving the `with` stops Playwright's driver and drops the connection without
        # Browser.close: the harness closes the browser.
        mouse_paths = OxyMouse(algorithm='bezier')
        with sync_playwright() as p:
            browser = p.chromium.connect_over_cdp(connect['browser_url'])
            pages = [pg for pg in browser.contexts[0].pages if not pg.url.startswith(('chrome:', 'devtools:'))]
            page = next((pg for pg in pages if pg.url == 'about:blank'), pages[0])
            page.goto(url, wait_until='load')
            vw, vh = page.evaluate('[innerWidth, innerHeight]')
            _session(page, r, answers, mouse_paths, vw, vh)
        return
    (sw, sh), (vw, vh) = r.choice(DESKTOP_SCREENS)
    mouse_paths = OxyMouse(algorithm='bezier')
    with Stealth().use_sync(sync_playwright()) as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=['--headless', '--no-sandbox', f'--window-size={sw},{sh}'])
        try:
            context = browser.new_context(viewport={'width': vw, 'height': vh}, screen={'width': sw, 'height': sh})
            page = context.new_page()
            if mask_environment:
                page.route(COLLECTOR_PATH, _mask)
            page.goto(url, wait_until='load')
            _session(page, r, answers, mouse_paths, vw, vh)
        finally:
            browser.close()


def _session(page, r, answers, mouse_paths, vw, vh):
    pos = [int(r.uniform(vw * 0.3, vw * 0.8)), int(r.uniform(vh * 0.3, vh * 0.8))]
    page.mouse.move(*pos)

    def move_to(x, y):
        points = mouse_paths.generate_coordinates(from_x=pos[0], from_y=pos[1], to_x=int(x), to_y=int(y))
        dist = ((x - pos[0]) ** 2 + (y - pos[1]) ** 2) ** 0.5
        duration = (0.25 + dist / 1800.0) * r.uniform(0.8, 1.3)
        for px, py in points:
            page.mouse.move(float(px), float(py))
            time.sleep(duration / len(points))
        pos[0], pos[1] = int(x), int(y)

    def box(css):
        b = page.locator(css).bounding_box()
        return b['x'], b['y'], b['width'], b['height']

    def in_view(css):
        x, y, w, h = box(css)
        return y >= 0 and y + h <= vh

    def scroll_to(css):
        for _ in range(6):
            if in_view(css):
                return
            x, y, w, h = box(css)
            target = y + h / 2 - vh * r.uniform(0.45, 0.65)
            ys = [int(v[1]) for v in mouse_paths.generate_scroll_coordinates(start_y=0, end_y=int(target))]
            last = 0
            for v in ys:
                if v != last:
                    page.mouse.wheel(0, v - last)
                    last = v
                    time.sleep(r.uniform(0.012, 0.03))
            time.sleep(r.pause(400))

    def aim(css):
        x, y, w, h = box(css)
        return x + w * min(0.85, max(0.15, r.gauss(0.5, 0.14))), y + h * min(0.8, max(0.2, r.gauss(0.5, 0.12)))

    class P:
        type_clicks_field = False

        @staticmethod
        def wait_visible(css):
            page.locator(css).wait_for(state='visible', timeout=30000)

        @staticmethod
        def think(seconds):
            time.sleep(seconds)

        @staticmethod
        def idle(seconds):
            move_to(r.uniform(vw * 0.2, vw * 0.8), r.uniform(vh * 0.2, vh * 0.8))
            time.sleep(seconds)

        @staticmethod
        def click(css):
            scroll_to(css)
            move_to(*aim(css))
            time.sleep(r.uniform(0.04, 0.16))
            page.mouse.down()
            time.sleep(r.normal(0.095, 0.025, 0.045, 0.19))
            page.mouse.up()

        @staticmethod
        def type(css, text):
            loc = page.locator(css)
            for i, word in enumerate(text.split(' ')):
                chunk = word if i == 0 else ' ' + word
                loc.press_sequentially(chunk, delay=r.randint(70, 190))
                time.sleep(r.pause(180))

        @staticmethod
        def reveal(css):
            scroll_to(css)

        @staticmethod
        def set_range(css, value):
            scroll_to(css)
            x, y, w, h = box(css)
            lo, hi, cur = page.locator(css).evaluate('e => [+e.min, +e.max, +e.value]')
            x_of = lambda v: x + 8 + (w - 16) * (v - lo) / (hi - lo)  # noqa: E731
            move_to(x_of(cur) + r.gauss(0, 2), y + h / 2)
            page.mouse.down()
            time.sleep(r.uniform(0.08, 0.2))
            move_to(x_of(value) + r.gauss(0, 1.5), y + h / 2 + r.gauss(0, 2))
            page.mouse.up()
            if int(page.locator(css).input_value()) != value:
                time.sleep(r.pause(600))
                move_to(x_of(value), y + h / 2)
                page.mouse.down()
                time.sleep(0.09)
                page.mouse.up()

    fill_survey(P, r, answers)
    time.sleep(2.5)
    page.goto('about:blank')
    time.sleep(0.3)
