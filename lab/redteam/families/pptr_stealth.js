'use strict';
// Family `pptr-stealth`: puppeteer-extra with puppeteer-extra-plugin-stealth (the usual
// "undetectable puppeteer" setup, from the puppeteer-extra README: addExtra(puppeteer-core) +
// use(StealthPlugin())), pointer paths along bezier-js curves driven through page.mouse.move,
// wheel scrolling through page.mouse.wheel, and text typed with @forad/puppeteer-humanize's
// typeInto (its README's configuration: mistakes 8 %, short space delays).
const { addExtra } = require('puppeteer-extra');
const StealthPlugin = require('puppeteer-extra-plugin-stealth');
const puppeteerCore = require('puppeteer-core');
const { typeInto } = require('@forad/puppeteer-humanize');
const { CHROMIUM, DESKTOP_SCREENS, maskBody, isCollectorPost, sleep } = require('../lib/common');
const { fillSurvey } = require('../lib/flow');
const { humanMove, aimPoint } = require('../lib/mouse');
const { puppeteerAttach, viewportOf } = require('../lib/connect');

const puppeteer = addExtra(puppeteerCore);
puppeteer.use(StealthPlugin());

async function interceptCollector(page) {
  await page.setRequestInterception(true);
  page.on('request', (req) => {
    if (req.isInterceptResolutionHandled()) return;
    if (!isCollectorPost(req.url(), req.method())) return req.continue();
    const body = maskBody(req.postData() || '');
    if (body === null) {
      return req.respond({ status: 201, contentType: 'application/json', body: '{"success":true,"count":0}' });
    }
    return req.continue({ postData: body });
  });
}

async function run({ url, r, answers, maskEnvironment, connect }) {
  if (connect) {
    // Connect mode: the harness's browser and page, as they are. The stealth plugin is not
    // applied: its evasions rewrite the environment (user agent, webdriver, plugins...), which
    // connect mode leaves to the harness; the input below is the family.
    const { browser, page } = await puppeteerAttach(puppeteerCore, connect.browserURL);
    try {
      await page.goto(url, { waitUntil: 'load' });
      const { width, height } = await viewportOf(page);
      await session(page, r, answers, width, height);
    } finally {
      await browser.disconnect();
    }
    return;
  }
  const screen = r.pick(DESKTOP_SCREENS);
  const [vw, vh] = screen.viewport;
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', `--window-size=${screen.screen[0]},${screen.screen[1]}`],
    defaultViewport: { width: vw, height: vh },
  });
  try {
    const page = await browser.newPage();
    if (maskEnvironment) await interceptCollector(page);
    await page.goto(url, { waitUntil: 'load' });
    await session(page, r, answers, vw, vh);
  } finally {
    await browser.close();
  }
}

async function session(page, r, answers, vw, vh) {
  // Where the pointer rests when the page appears.
  let pos = { x: r.uniform(vw * 0.3, vw * 0.8), y: r.uniform(vh * 0.3, vh * 0.8) };
  const move = (x, y) => page.mouse.move(x, y);
  await move(pos.x, pos.y);

  const inView = async (sel) => page.$eval(sel, (el) => {
    const b = el.getBoundingClientRect();
    return b.top >= 0 && b.bottom <= window.innerHeight;
  });
  // Wheel notches of 100 px in bursts, until the element is in view.
  const wheelTo = async (sel) => {
    for (let burst = 0; burst < 12 && !(await inView(sel)); burst++) {
      const dir = await page.$eval(sel, (el) => (el.getBoundingClientRect().top < 0 ? -1 : 1));
      const notches = r.int(2, 5);
      for (let i = 0; i < notches; i++) {
        await page.mouse.wheel({ deltaY: 100 * dir });
        await sleep(r.uniform(25, 110));
      }
      await sleep(r.pause(350));
    }
  };

  const p = {
    typeClicksField: true,
    waitVisible: (sel) => page.waitForSelector(sel, { visible: true, timeout: 30000 }),
    think: async (ms) => {
      // A resting hand drifts a little now and then.
      if (ms > 1500 && r.chance(0.35)) {
        const to = { x: Math.min(vw - 5, Math.max(5, pos.x + r.normal(0, 60))), y: Math.min(vh - 5, Math.max(5, pos.y + r.normal(0, 40))) };
        const t0 = Date.now();
        pos = await humanMove(move, pos, to, r, 200);
        ms -= Date.now() - t0;
      }
      await sleep(ms);
    },
    idle: async (ms) => {
      const to = { x: r.uniform(vw * 0.2, vw * 0.8), y: r.uniform(vh * 0.2, vh * 0.8) };
      pos = await humanMove(move, pos, to, r, 100);
      await sleep(ms);
    },
    click: async (sel) => {
      await wheelTo(sel);
      const el = await page.$(sel);
      const box = await el.boundingBox();
      const target = aimPoint(box, r);
      pos = await humanMove(move, pos, target, r, box.width);
      await sleep(r.uniform(40, 160));
      await page.mouse.down();
      await sleep(r.normal(95, 25, 45, 190));
      await page.mouse.up();
    },
    type: async (sel, text) => {
      await wheelTo(sel);
      const el = await page.$(sel);
      const box = await el.boundingBox();
      // Bring the pointer close first; typeInto then hovers, clicks and types.
      pos = await humanMove(move, pos, aimPoint(box, r), r, box.width);
      await typeInto(el, text, {
        mistakes: { chance: 8, delay: { min: 50, max: 500 } },
        delays: { space: { chance: 70, min: 10, max: 50 } },
      });
      const after = await el.boundingBox();
      pos = { x: after.x + after.width / 2, y: after.y + after.height / 2 };
    },
    reveal: (sel) => wheelTo(sel),
    setRange: async (sel, value) => {
      await wheelTo(sel);
      const el = await page.$(sel);
      const box = await el.boundingBox();
      const info = await page.$eval(sel, (e) => ({ min: +e.min, max: +e.max, value: +e.value }));
      const thumb = 8; // half of Chromium's 16 px range thumb
      const xOf = (v) => box.x + thumb + ((box.width - 2 * thumb) * (v - info.min)) / (info.max - info.min);
      const y = box.y + box.height / 2;
      pos = await humanMove(move, pos, { x: xOf(info.value) + r.normal(0, 2), y: y + r.normal(0, 1.5) }, r, 16);
      await sleep(r.uniform(80, 200));
      await page.mouse.down();
      pos = await humanMove(move, pos, { x: xOf(value) + r.normal(0, 1.5), y: y + r.normal(0, 3) }, r, 20);
      await sleep(r.uniform(60, 180));
      await page.mouse.up();
      const got = await page.$eval(sel, (e) => +e.value);
      if (got !== value) {
        // Missed by a notch: nudge it with a second small drag.
        await sleep(r.pause(500));
        await page.mouse.down();
        pos = await humanMove(move, pos, { x: xOf(value), y }, r, 20);
        await page.mouse.up();
      }
    },
  };
  await fillSurvey(p, r, answers);
  await sleep(2500);
  await page.goto('about:blank');
  await sleep(300);
}

module.exports = { name: 'pptr-stealth', run };
