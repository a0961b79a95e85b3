'use strict';
// Family `pw-touch`: a phone respondent. Playwright (playwright-core) with its 'Pixel 7' device
// descriptor (isMobile, hasTouch, 412x839 at DPR 2.625; Playwright's "Emulation" docs), the
// user agent's Chrome version set to the real browser's. All input is touch through the
// DevTools protocol's Input.dispatchTouchEvent on a CDP session (context.newCDPSession, the
// documented way to reach raw CDP from Playwright): taps with a contact radius and a little
// finger roll, swipes to scroll, a drag on the slider's thumb. Text arrives the way Android's
// virtual keyboards deliver it: keydown/keyup with key "Unidentified" (keyCode 229) around
// Input.insertText, sometimes a whole word at once from the suggestion strip.
const { devices } = require('playwright-core');
const { sleep } = require('../lib/common');
const { launch, maskCollector } = require('../lib/pw');
const { fillSurvey } = require('../lib/flow');
const { playwrightAttach } = require('../lib/connect');
const { minimumJerk } = require('../lib/mouse');

const phoneUserAgent = (major) => devices['Pixel 7'].userAgent
  .replace(/Chrome\/[\d.]+/, `Chrome/${major}.0.0.0`).replace('Android 14; Pixel 7', 'Android 10; K');

async function run({ url, r, answers, maskEnvironment, connect }) {
  if (connect) {
    // Connect mode: the harness's browser and page; the phone is emulated on that page through
    // DevTools before it navigates (what Playwright's device descriptor does for a context of its
    // own: metrics, touch, user agent), on this family's CDP session, which lives as long as the
    // session does.
    const { browser, context, page } = await playwrightAttach(connect.browserURL);
    const cdp = await context.newCDPSession(page);
    await emulatePhone(page, cdp, browser.version().split('.')[0]);
    await page.goto(url, { waitUntil: 'load' });
    await session(page, cdp, r, answers);
    return; // the runner exits and drops the connection; the browser stays up
  }
  const browser = await launch();
  try {
    const major = browser.version().split('.')[0];
    const device = { ...devices['Pixel 7'] };
    device.userAgent = phoneUserAgent(major);
    const context = await browser.newContext(device);
    const page = await context.newPage();
    if (maskEnvironment) await maskCollector(page);
    const cdp = await context.newCDPSession(page);
    await page.goto(url, { waitUntil: 'load' });
    await session(page, cdp, r, answers);
  } finally {
    await browser.close();
  }
}

// The Pixel 7 of Playwright's descriptor on an existing page: Emulation.setDeviceMetricsOverride
// (mobile), setTouchEmulationEnabled, setUserAgentOverride with an Android Chrome user agent of
// the browser's own major version (and the matching client-hint metadata: brands as the browser
// reports them, platform Android, mobile).
async function emulatePhone(page, cdp, major) {
  const d = devices['Pixel 7'];
  // The browser's own brands, read before anything is overridden (a fallback if the page
  // cannot say).
  const own = await page.evaluate(async () => {
    if (!navigator.userAgentData) return null;
    const h = await navigator.userAgentData.getHighEntropyValues(['fullVersionList', 'uaFullVersion']);
    return { brands: navigator.userAgentData.brands, fullVersionList: h.fullVersionList, fullVersion: h.uaFullVersion };
  }).catch(() => null);
  const brands = (own && own.brands) || [{ brand: 'Chromium', version: major }, { brand: 'Not?A_Brand', version: '99' }];
  const fullVersion = (own && own.fullVersion) || `${major}.0.0.0`;
  const fullVersionList = (own && own.fullVersionList) || brands.map((b) => ({ brand: b.brand, version: `${b.version}.0.0.0` }));
  await cdp.send('Emulation.setDeviceMetricsOverride', {
    width: d.viewport.width, height: d.viewport.height, deviceScaleFactor: d.deviceScaleFactor, mobile: true,
    screenWidth: d.screen.width, screenHeight: d.screen.height,
    screenOrientation: { type: 'portraitPrimary', angle: 0 },
  });
  await cdp.send('Emulation.setTouchEmulationEnabled', { enabled: true, maxTouchPoints: 5 });
  await cdp.send('Emulation.setUserAgentOverride', {
    userAgent: phoneUserAgent(major),
    platform: 'Linux armv8l',
    userAgentMetadata: {
      brands, fullVersionList, fullVersion,
      platform: 'Android', platformVersion: '10.0.0', architecture: '', model: 'K', mobile: true,
    },
  });
}

const PHONE = { width: devices['Pixel 7'].viewport.width, height: devices['Pixel 7'].viewport.height };

async function session(page, cdp, r, answers) {
  const vw = PHONE.width, vh = PHONE.height;
  const finger = { radius: r.normal(11, 2, 6, 18), force: r.uniform(0.35, 0.9) };

  const touch = (type, points) => cdp.send('Input.dispatchTouchEvent', {
    type,
    touchPoints: points.map((p) => ({ x: p.x, y: p.y, radiusX: p.rx, radiusY: p.ry, force: p.force, id: 0 })),
  });
  const contact = (x, y, scale = 1) => {
    const rx = finger.radius * scale * r.uniform(0.9, 1.1);
    return { x, y, rx, ry: rx * r.uniform(1.0, 1.3), force: Math.min(1, finger.force * scale * r.uniform(0.9, 1.1)) };
  };
  // A tap: finger lands, rolls a pixel or two, lifts after 60-160 ms.
  const tapAt = async (x, y) => {
    await touch('touchStart', [contact(x, y, 0.8)]);
    const hold = r.normal(95, 28, 45, 190);
    if (r.chance(0.4)) {
      await sleep(hold / 2);
      await touch('touchMove', [contact(x + r.normal(0, 0.8), y + r.normal(0, 1.0), 1)]);
      await sleep(hold / 2);
    } else {
      await sleep(hold);
    }
    await touch('touchEnd', []);
  };
  // A swipe: the finger accelerates and lifts while moving (a fling) or slows and lifts.
  const swipe = async (x0, y0, x1, y1, ms) => {
    const steps = Math.max(5, Math.round(ms / 16));
    await touch('touchStart', [contact(x0, y0)]);
    await sleep(r.uniform(30, 90));
    for (let i = 1; i <= steps; i++) {
      const t = minimumJerk(i / steps);
      await touch('touchMove', [contact(x0 + (x1 - x0) * t + r.normal(0, 1), y0 + (y1 - y0) * t)]);
      await sleep(ms / steps);
    }
    await touch('touchEnd', []);
  };
  const rect = (sel) => page.$eval(sel, (el) => {
    const b = el.getBoundingClientRect();
    return { x: b.x, y: b.y, width: b.width, height: b.height };
  });
  const reveal = async (sel) => {
    let lastScroll = -1;
    for (let i = 0; i < 15; i++) {
      const b = await rect(sel);
      if (b.y >= 8 && b.y + b.height <= vh - 8) return;
      const scrollY = await page.evaluate(() => window.scrollY);
      if (scrollY === lastScroll) return; // the page moves no further
      lastScroll = scrollY;
      const up = b.y + b.height > vh - 40;   // content has to move up: swipe up
      const dist = Math.min(vh * 0.55, Math.abs(up ? b.y + b.height - vh * 0.6 : b.y - vh * 0.4) + 60) * r.uniform(0.8, 1.1);
      const x = vw * r.uniform(0.45, 0.8);
      const y0 = up ? vh * r.uniform(0.6, 0.8) : vh * r.uniform(0.2, 0.35);
      await swipe(x, y0, x + r.normal(0, 12), up ? y0 - dist : y0 + dist, r.uniform(120, 260));
      await sleep(r.pause(600));
    }
  };
  const tapOn = async (sel) => {
    await reveal(sel);
    const b = await rect(sel);
    // Thumbs land low and a little off centre; small targets get a generous miss radius.
    const x = b.x + b.width * Math.min(0.9, Math.max(0.1, r.normal(0.5, 0.18)));
    const y = b.y + b.height * Math.min(0.9, Math.max(0.1, r.normal(0.58, 0.15)));
    await tapAt(x, y);
  };
  const typeMobile = async (sel, text) => {
    const words = text.split(/(?<= )/);
    for (const word of words) {
      let i = 0;
      const chars = [...word];
      while (i < chars.length) {
        // After a few letters a suggestion may be taken: the rest of the word in one go.
        if (i >= 3 && chars.length - i > 2 && r.chance(0.12)) {
          await sleep(r.pause(500));
          await cdp.send('Input.insertText', { text: chars.slice(i).join('') });
          i = chars.length;
          break;
        }
        await cdp.send('Input.dispatchKeyEvent', { type: 'rawKeyDown', key: 'Unidentified', code: '', windowsVirtualKeyCode: 229, nativeVirtualKeyCode: 229 });
        await cdp.send('Input.insertText', { text: chars[i] });
        await sleep(r.uniform(20, 60));
        await cdp.send('Input.dispatchKeyEvent', { type: 'keyUp', key: 'Unidentified', code: '', windowsVirtualKeyCode: 229, nativeVirtualKeyCode: 229 });
        await sleep(r.pause(230, 0.45));
        i++;
      }
    }
  };

  const p = {
    waitVisible: (sel) => page.waitForSelector(sel, { state: 'visible', timeout: 30000 }),
    think: (ms) => sleep(ms),
    idle: async (ms) => {
      // A small idle scroll down and back, as thumbs do while reading.
      const x = vw * r.uniform(0.4, 0.8);
      await swipe(x, vh * 0.7, x + r.normal(0, 8), vh * 0.55, r.uniform(150, 250));
      await sleep(ms);
      await swipe(x, vh * 0.45, x + r.normal(0, 8), vh * 0.6, r.uniform(150, 250));
    },
    click: tapOn,
    type: typeMobile,
    reveal,
    setRange: async (sel, value) => {
      await reveal(sel);
      const b = await rect(sel);
      const info = await page.$eval(sel, (e) => ({ min: +e.min, max: +e.max, value: +e.value }));
      const thumb = 8;
      const xOf = (v) => b.x + thumb + ((b.width - 2 * thumb) * (v - info.min)) / (info.max - info.min);
      const y = b.y + b.height / 2;
      await swipe(xOf(info.value) + r.normal(0, 3), y + r.normal(0, 2), xOf(value) + r.normal(0, 2), y + r.normal(0, 4), r.uniform(250, 600));
      if ((await page.$eval(sel, (e) => +e.value)) !== value) {
        await sleep(r.pause(600));
        await tapAt(xOf(value), y + r.normal(0, 1.5));
      }
    },
  };
  await fillSurvey(p, r, answers, { thinkScale: 1.1 });
  await sleep(2500);
  await page.goto('about:blank');
  await sleep(300);
}

module.exports = { name: 'pw-touch', run };
