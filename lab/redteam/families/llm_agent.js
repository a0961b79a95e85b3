'use strict';
// Family `llm-agent`: what a language-model browsing agent does to a form, driven by plain
// puppeteer-core (no stealth: agent frameworks mostly run stock Chromium). Each step the agent
// reads the page (a DOM snapshot of the interactive elements plus a screenshot, as agent
// frameworks do before every action), "thinks" for the seconds a model call takes, then acts
// through Puppeteer's documented high-level calls: ElementHandle.click() (scroll into view,
// one jump to the element's centre, press), a page-sized mouse.wheel for "scroll down",
// page.mouse.click(x, y) at a computed point for the slider, and text entered one of three
// ways chosen per seed: keyboard.sendCharacter (Input.insertText: the whole answer in one
// input event, like Playwright's fill()), ElementHandle.type with a small fixed delay (what
// computer-use agents' xdotool typing looks like), or a clipboard paste (Ctrl+V with the
// 'paste' editing command, the text written to the clipboard first).
const puppeteer = require('puppeteer-core');
const { CHROMIUM, maskBody, isCollectorPost, sleep } = require('../lib/common');
const { fillSurvey } = require('../lib/flow');
const { puppeteerAttach, viewportOf } = require('../lib/connect');

const SNAPSHOT = () => Array.from(document.querySelectorAll('input, textarea, button, select, a[href]'))
  .filter((el) => el.offsetParent !== null)
  .map((el, i) => {
    const b = el.getBoundingClientRect();
    return { i, tag: el.tagName, type: el.type, id: el.id, name: el.name, value: el.value, x: b.x, y: b.y, w: b.width, h: b.height };
  });

async function run({ url, r, answers, maskEnvironment, base, connect }) {
  const mode = r.pick(['insert', 'type', 'paste']);
  // Agent frameworks default to a fixed, screenshot-friendly viewport (standalone only: in
  // connect mode the viewport is the harness's window's).
  const fixed = r.pick([{ width: 1280, height: 720 }, { width: 1280, height: 1100 }, { width: 1024, height: 768 }]);
  if (connect) {
    const { browser, page } = await puppeteerAttach(puppeteer, connect.browserURL);
    try {
      if (mode === 'paste') {
        await browser.defaultBrowserContext().overridePermissions(new URL(url).origin, ['clipboard-read', 'clipboard-write', 'clipboard-sanitized-write']);
      }
      await page.goto(url, { waitUntil: 'load' });
      await session(page, r, answers, mode, await viewportOf(page));
    } finally {
      await browser.disconnect();
    }
    return;
  }
  const viewport = fixed;
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', `--window-size=${viewport.width},${viewport.height}`],
    defaultViewport: viewport,
  });
  try {
    const page = await browser.newPage();
    if (mode === 'paste') {
      await browser.defaultBrowserContext().overridePermissions(new URL(base).origin, ['clipboard-read', 'clipboard-write', 'clipboard-sanitized-write']);
    }
    if (maskEnvironment) {
      await page.setRequestInterception(true);
      page.on('request', (req) => {
        if (!isCollectorPost(req.url(), req.method())) return req.continue();
        const body = maskBody(req.postData() || '');
        if (body === null) return req.respond({ status: 201, contentType: 'application/json', body: '{"success":true,"count":0}' });
        return req.continue({ postData: body });
      });
    }
    await page.goto(url, { waitUntil: 'load' });
    await session(page, r, answers, mode, viewport);
  } finally {
    await browser.close();
  }
}

async function session(page, r, answers, mode, viewport) {
  // One agent step: observe (DOM snapshot and screenshot), wait for the model, then act.
  const step = async () => {
    await page.evaluate(SNAPSHOT);
    await page.screenshot({ type: 'jpeg', quality: 60 });
    await sleep(r.pause(4200, 0.5));
  };

  const p = {
    waitVisible: (sel) => page.waitForSelector(sel, { visible: true, timeout: 30000 }),
    // The flow's short human pauses fold into the agent's model latency.
    think: (ms) => sleep(Math.min(ms, 400)),
    click: async (sel) => {
      await step();
      const el = await page.$(sel);
      await el.click();
    },
    type: async (sel, text) => {
      await step();
      const el = await page.$(sel);
      if (mode === 'insert') {
        await el.focus();
        await page.keyboard.sendCharacter(text);
      } else if (mode === 'type') {
        await el.type(text, { delay: r.int(8, 20) });
      } else {
        await page.evaluate((t) => navigator.clipboard.writeText(t), text);
        await el.focus();
        await page.keyboard.down('Control');
        await page.keyboard.press('KeyV', { commands: ['paste'] });
        await page.keyboard.up('Control');
      }
    },
    reveal: async (sel) => {
      for (let i = 0; i < 6; i++) {
        const visible = await page.$eval(sel, (el) => {
          const b = el.getBoundingClientRect();
          return b.top >= 0 && b.bottom <= window.innerHeight;
        });
        if (visible) return;
        await step();
        await page.mouse.wheel({ deltaY: Math.round(viewport.height * 0.8) });
        await sleep(300);
      }
    },
    setRange: async (sel, value) => {
      await step();
      const el = await page.$(sel);
      await el.scrollIntoView();
      const box = await el.boundingBox();
      const info = await page.$eval(sel, (e) => ({ min: +e.min, max: +e.max }));
      const x = box.x + 8 + ((box.width - 16) * (value - info.min)) / (info.max - info.min);
      await page.mouse.click(Math.round(x), Math.round(box.y + box.height / 2));
      if ((await page.$eval(sel, (e) => +e.value)) !== value) {
        // The model notices from the next snapshot and corrects with the arrow keys.
        await step();
        const got = await page.$eval(sel, (e) => +e.value);
        for (let i = 0; i < Math.abs(value - got); i++) await page.keyboard.press(value > got ? 'ArrowRight' : 'ArrowLeft');
      }
    },
  };
  await fillSurvey(p, r, answers);
  await sleep(2500);
  await page.goto('about:blank');
  await sleep(300);
}

module.exports = { name: 'llm-agent', run };
