"""Family `selenium-humancursor`: Selenium 4 (ChromeDriver, Debian's /usr/bin/chromedriver)
with HumanCursor's WebCursor (README usage: cursor = WebCursor(driver); cursor.click_on(element);
cursor.control_scroll_bar(element, amount_by_percentage, orientation)). HumanCursor draws
Bezier-like curves with random knots, distortion and pytweening easing and plays them through
ActionChains (W3C pointer actions). Scrolling is W3C wheel actions (ActionChains
.scroll_by_amount, Selenium's "Scroll wheel actions" docs) in notches; typing is W3C key actions
(ActionChains key_down / pause / key_up) with human hold and flight times."""
import contextlib
import time

from humancursor import WebCursor
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from .common import CHROMEDRIVER, CHROMIUM, DESKTOP_SCREENS, fill_survey, human_keystrokes
from .maskproxy import MaskProxy


def run(url, r, answers, base, mask_environment, connect=None):
    if connect:
        # Connect mode: ChromeDriver attaches to the harness's browser (Chrome options'
        # debuggerAddress, Selenium's documented way to drive a running Chrome) and drives its
        # existing tab; no launch options, no masking. ChromeDriver did not start that browser,
        # and at the end only ChromeDriver is stopped: no quit(), whose DELETE session could
        # close the window, so the harness closes the browser.
        opts = webdriver.ChromeOptions()
        opts.debugger_address = connect['browser_url'].split('://', 1)[1]
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        try:
            _session(driver, url, r, answers)
        finally:
            driver.service.stop()
        return
    (sw, sh), _ = r.choice(DESKTOP_SCREENS)
    with (MaskProxy() if mask_environment else contextlib.nullcontext()) as proxy:
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for a in ['--headless', '--no-sandbox', f'--window-size={sw},{sh}']:
            opts.add_argument(a)
        if proxy:
            for a in proxy.chromium_args():
                opts.add_argument(a)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        try:
            _session(driver, url, r, answers)
        finally:
            driver.quit()


def _session(driver, url, r, answers):
    driver.get(url)
    cursor = WebCursor(driver)
    find = lambda css: driver.find_element(By.CSS_SELECTOR, css)  # noqa: E731

    def in_view(css):
        return driver.execute_script(
            'const b = arguments[0].getBoundingClientRect(); return b.top >= 0 && b.bottom <= window.innerHeight;',
            find(css))

    def wheel_to(css):
        for _ in range(12):
            if in_view(css):
                return
            up = driver.execute_script('return arguments[0].getBoundingClientRect().top < 0;', find(css))
            chain = ActionChains(driver)
            for _ in range(r.randint(2, 5)):
                chain.scroll_by_amount(0, -100 if up else 100).pause(r.uniform(0.03, 0.11))
            chain.perform()
            time.sleep(r.pause(350))

    class P:
        type_clicks_field = False

        @staticmethod
        def wait_visible(css):
            WebDriverWait(driver, 30).until(EC.visibility_of_element_located((By.CSS_SELECTOR, css)))

        @staticmethod
        def think(seconds):
            time.sleep(seconds)

        @staticmethod
        def click(css):
            wheel_to(css)
            cursor.click_on(find(css))

        @staticmethod
        def type(css, text):
            for key, hold, flight in human_keystrokes(r, text):
                k = Keys.BACKSPACE if key == '\b' else key
                ActionChains(driver, duration=0).key_down(k).pause(hold).key_up(k).perform()
                time.sleep(flight)

        @staticmethod
        def reveal(css):
            wheel_to(css)

        @staticmethod
        def set_range(css, value):
            wheel_to(css)
            el = find(css)
            width = el.size['width']
            lo, hi = float(el.get_attribute('min')), float(el.get_attribute('max'))
            frac = (8 + (width - 16) * (value - lo) / (hi - lo)) / width
            cursor.control_scroll_bar(el, amount_by_percentage=frac, orientation='horizontal')
            if int(el.get_attribute('value')) != value:
                time.sleep(r.pause(600))
                cursor.click_on(el, relative_position=[frac, 0.5])

    fill_survey(P, r, answers)
    time.sleep(2.5)
    driver.get('about:blank')
    time.sleep(0.3)
