"""Shared pieces of the Python families: the same reference UUIDs, answers and masking as
lib/common.js, a seeded random source, and the survey flow written against primitives."""
import hashlib
import json
import math
import random
import re
import time

EXPERIENCES = [
    'It was fine, a bit long but the questions were clear.',
    'Pretty quick. Some of the questions repeated themselves though.',
    'I did one about grocery shopping last week, it took about ten minutes.',
    'Honestly it was boring but I finished it',
    'The last one kept asking about my job and then screened me out at the end, annoying.',
    'Good experience overall, easy to answer on my laptop.',
    'It was ok. too many grid questions',
    'Short survey about streaming services, I liked that it had a progress bar.',
    'not bad, I got paid quickly',
    'A survey about coffee habits. Some questions were confusing but mostly straightforward.',
    'It crashed halfway so I had to start again, otherwise fine.',
    'Easy. took maybe 5 min',
]
COLOURS = ['blue', 'Blue', 'green', 'red', 'purple', 'Dark green', 'black', 'yellow', 'orange', 'teal', 'navy blue', 'pink']
DESKTOP_SCREENS = [
    ((1920, 1080), (1920, 969)),
    ((1366, 768), (1366, 657)),
    ((1536, 864), (1536, 730)),
    ((1440, 900), (1440, 789)),
    ((1280, 800), (1280, 689)),
    ((1680, 1050), (1680, 939)),
]
CHROMIUM = '/usr/bin/chromium'
CHROMEDRIVER = '/usr/bin/chromedriver'


def reference_for(tool, seed):
    """Same derivation as lib/common.js referenceFor."""
    h = hashlib.sha256(f'telltale-redteam/{tool}/{seed}'.encode()).hexdigest()
    variant = format((int(h[16], 16) & 0x3) | 0x8, 'x')
    return f'{h[0:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}'


class Rng(random.Random):
    def __init__(self, tool, seed):
        super().__init__(int.from_bytes(hashlib.sha256(f'rng/{tool}/{seed}'.encode()).digest()[:8], 'little'))

    def chance(self, p):
        return self.random() < p

    def normal(self, mean, sd, lo=-math.inf, hi=math.inf):
        return min(hi, max(lo, self.gauss(mean, sd)))

    def pause(self, median_ms, spread=0.45):
        """Log-normal pause in seconds around a median given in ms."""
        return math.exp(math.log(median_ms) + spread * self.normal(0, 1, -2.5, 2.5)) / 1000.0


def answers_for(r):
    devices = [d for d in ('phone', 'laptop', 'tablet') if r.chance(0.55)] or [r.choice(['phone', 'laptop'])]
    return {
        'often': r.choice(['weekly', 'monthly', 'rarely']),
        'devices': devices,
        'experience': r.choice(EXPERIENCES),
        'colour': r.choice(COLOURS),
        'satisfaction': r.randint(3, 10),
    }


def ordinary_user_agent(original):
    m = re.search(r'(?:Headless)?Chrome/(\d+)', original or '')
    major = m.group(1) if m else '131'
    if re.search(r'Android|Mobile', original or ''):
        return f'Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{major}.0.0.0 Mobile Safari/537.36'
    return f'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{major}.0.0.0 Safari/537.36'


def mask_body(body):
    """--mask-environment: drop `environment` events, make the session event's webdriver false
    and its user agent an ordinary Chrome one. None when nothing is left to send."""
    try:
        parsed = json.loads(body)
    except (ValueError, TypeError):
        return body
    if not isinstance(parsed, dict) or not isinstance(parsed.get('events'), list):
        return body
    events = [e for e in parsed['events'] if not (isinstance(e, dict) and e.get('type') == 'environment')]
    for e in events:
        if isinstance(e, dict) and e.get('type') == 'session' and isinstance(e.get('data'), dict):
            e['data']['webdriver'] = False
            e['data']['userAgent'] = ordinary_user_agent(e['data'].get('userAgent'))
    if not events:
        return None
    parsed['events'] = events
    return json.dumps(parsed, separators=(',', ':'))


COLLECTOR_PATH = re.compile(r'/event/[0-9a-fA-F]{24}/')


def label(name, value):
    return f'label:has(> input[name="{name}"][value="{value}"])'


def radio(name, value):
    return f'input[name="{name}"][value="{value}"]'


def fill_survey(p, r, ans, think_scale=1.0):
    """The survey as a respondent goes through it (mirror of lib/flow.js); p implements
    wait_visible, think(seconds), click(css), type(css, text), reveal(css), set_range(css, v),
    and optionally idle(seconds) and type_clicks_field."""
    def think(median, spread=0.45):
        p.think(r.pause(median * think_scale, spread))

    p.wait_visible('#page-1')
    think(2200)
    p.click(label('often', ans['often']) if r.chance(0.5) else radio('often', ans['often']))
    think(1400)
    for device in ans['devices']:
        p.click(label('device', device) if r.chance(0.5) else radio('device', device))
        think(650)
    if hasattr(p, 'idle') and r.chance(0.3):
        p.idle(r.pause(900))
    think(700)
    p.click('#next-1')

    p.wait_visible('#page-2')
    think(1800)
    if not getattr(p, 'type_clicks_field', False):
        p.click('#experience')
        think(900)
    p.type('#experience', ans['experience'])
    think(1200)
    if not getattr(p, 'type_clicks_field', False):
        p.click('#colour')
        think(500)
    p.type('#colour', ans['colour'])
    think(800)
    p.reveal('#next-2')
    think(700)
    p.click('#next-2')

    p.wait_visible('#page-3')
    think(1600)
    p.set_range('#satisfaction', ans['satisfaction'])
    think(1000)
    p.click('#submit')
    p.wait_visible('#done')


def human_keystrokes(r, text, typo_rate=0.03):
    """(key, hold_s, flight_s) per key for a person typing: log-normal flight times, longer
    after spaces and punctuation, an occasional neighbouring-key slip fixed with BACKSPACE."""
    out = []
    for i, ch in enumerate(text):
        if ch.isalpha() and r.chance(typo_rate):
            out.append((r.choice('asdfghjklqwertyuiop'), r.normal(0.085, 0.02, 0.04, 0.16), r.pause(260)))
            out.append(('\b', r.normal(0.08, 0.02, 0.04, 0.15), r.pause(180)))
        flight = r.pause(125, 0.4)
        if ch == ' ':
            flight += r.pause(90)
        if ch in '.,!?':
            flight += r.pause(350)
        if i and i % r.randint(9, 16) == 0 and r.chance(0.3):
            flight += r.pause(700)
        out.append((ch, r.normal(0.085, 0.02, 0.04, 0.16), flight))
    return out


def now():
    return time.monotonic()
