'use strict';
// Family `pw-keyboard`: a keyboard-only respondent driven by Playwright (playwright-core's
// page.keyboard: down/up/press, documented in Playwright's Keyboard API). No pointer at all:
// Tab and Shift+Tab walk the form, arrow keys pick a radio and move the slider, Space ticks
// checkboxes, Enter presses buttons, and text is typed key by key with variable hold and
// flight times (keyboard.down/up per character; Playwright's own option is a fixed `delay`).
const { DESKTOP_SCREENS, sleep } = require('../lib/common');
const { launch, maskCollector } = require('../lib/pw');
const { playwrightAttach } = require('../lib/connect');

const NEIGHBOURS = 'qwertyuiopasdfghjklzxcvbnm';

async function run({ url, r, answers, maskEnvironment, connect }) {
  if (connect) {
    // Connect mode: the harness's browser, its default context and existing page, as they are.
    // Playwright has no disconnect for a CDP connection (and close() may send Browser.close):
    // the runner exits when the session ends, which drops the connection; the browser stays up.
    const { page } = await playwrightAttach(connect.browserURL);
    await page.goto(url, { waitUntil: 'load' });
    await session(page, r, answers);
    return;
  }
  const screen = r.pick(DESKTOP_SCREENS);
  const browser = await launch([`--window-size=${screen.screen[0]},${screen.screen[1]}`]);
  try {
    const context = await browser.newContext({
      viewport: { width: screen.viewport[0], height: screen.viewport[1] },
      screen: { width: screen.screen[0], height: screen.screen[1] },
    });
    const page = await context.newPage();
    if (maskEnvironment) await maskCollector(page);
    await page.goto(url, { waitUntil: 'load' });
    await session(page, r, answers);
  } finally {
    await browser.close();
  }
}

async function session(page, r, answers) {
  const kb = page.keyboard;
  const think = (median, spread) => sleep(r.pause(median, spread));
  const tap = async (key) => {
    await kb.down(key);
    await sleep(r.normal(85, 22, 40, 170));
    await kb.up(key);
  };
  const press = async (key, median = 420) => { await tap(key); await think(median); };
  const shiftTab = async () => {
    await kb.down('Shift'); await sleep(r.uniform(60, 140));
    await tap('Tab'); await sleep(r.uniform(40, 110));
    await kb.up('Shift'); await think(450);
  };
  // Typing: hold 60-120 ms, flight times log-normal, longer after spaces and punctuation,
  // an occasional slip fixed with Backspace, Shift held for capitals.
  const typeText = async (text) => {
    for (let i = 0; i < text.length; i++) {
      const ch = text[i];
      if (/[a-z]/i.test(ch) && r.chance(0.03)) {
        await tap(r.pick(NEIGHBOURS));
        await sleep(r.pause(260));
        await tap('Backspace');
        await sleep(r.pause(180));
      }
      const upper = /[A-Z]/.test(ch);
      if (upper) { await kb.down('Shift'); await sleep(r.uniform(40, 120)); }
      await kb.down(ch);
      await sleep(r.normal(85, 20, 40, 160));
      await kb.up(ch);
      if (upper) { await sleep(r.uniform(20, 80)); await kb.up('Shift'); }
      let flight = r.pause(120, 0.4);
      if (ch === ' ') flight += r.pause(90);
      if (/[.,!?]/.test(ch)) flight += r.pause(350);
      if (i && i % r.int(9, 16) === 0 && r.chance(0.3)) flight += r.pause(700);
      await sleep(flight);
    }
  };
  const focused = () => page.evaluate(() => {
    const el = document.activeElement;
    return el ? (el.id || el.name || el.tagName) : '';
  });
  // Tab until the element with this id/name has focus (a keyboard user looks, then tabs).
  const tabTo = async (want, max = 8) => {
    for (let i = 0; i < max; i++) {
      if ((await focused()) === want) return;
      await press('Tab', 380);
    }
    if ((await focused()) !== want) throw new Error(`could not tab to ${want}`);
  };

  // Page 1.
  await page.waitForSelector('#page-1', { state: 'visible' });
  await think(2600);
  await press('Tab', 700);                       // into the radio group (first radio)
  if ((await focused()) !== 'often') await tabTo('often');
  const order = ['weekly', 'monthly', 'rarely'];
  const steps = order.indexOf(answers.often);
  if (steps === 0) await press('Space', 600);
  for (let i = 0; i < steps; i++) await press('ArrowDown', i + 1 < steps ? 300 : 700);
  const devices = ['phone', 'laptop', 'tablet'];
  for (const d of devices) {
    await press('Tab', 350);
    if (answers.devices.includes(d)) await press('Space', 550);
  }
  // Now and then someone overshoots, tabs back and forward again.
  if (r.chance(0.25)) { await shiftTab(); await press('Tab', 400); }
  await press('Tab', 600);                        // Next
  await press('Enter', 1200);

  // Page 2: the hidden button kept the focus position, so Tab goes on to the textarea.
  await page.waitForSelector('#page-2', { state: 'visible' });
  await tabTo('experience');
  await think(900);
  await typeText(answers.experience);
  await think(1100);
  await press('Tab', 500);
  await typeText(answers.colour);
  await think(800);
  await tabTo('next-2');                          // passes Back; focusing scrolls it into view
  await think(600);
  await press('Enter', 1400);

  // Page 3: slider by arrow keys, then Submit.
  await page.waitForSelector('#page-3', { state: 'visible' });
  await tabTo('satisfaction');
  await think(900);
  const current = await page.$eval('#satisfaction', (e) => +e.value);
  const diff = answers.satisfaction - current;
  for (let i = 0; i < Math.abs(diff); i++) await press(diff > 0 ? 'ArrowRight' : 'ArrowLeft', 260);
  await think(900);
  await tabTo('submit');
  await think(700);
  await press('Enter', 200);
  await page.waitForSelector('#done', { state: 'visible', timeout: 30000 });
  await sleep(2500);
  await page.goto('about:blank');
  await sleep(300);
}

module.exports = { name: 'pw-keyboard', run };
