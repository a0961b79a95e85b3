'use strict';
// Connect mode: attach to the browser the harness launched (its DevTools HTTP endpoint) and drive
// the page it already shows, instead of launching a browser. No new window, no new context, no
// viewport, user agent or request rewriting: the environment is the harness's. Each tool attaches
// the way its documentation says:
//   puppeteer: puppeteer.connect({ browserURL, defaultViewport: null }) and browser.pages()
//   Playwright: chromium.connectOverCDP(url), browser.contexts()[0] and its pages()
// and leaves again without closing anything (the harness closes the browser).

// The existing page of the harness's window: the one tab (about:blank when a session starts).
function pickPage(pages) {
  const real = pages.filter((p) => !/^(chrome|devtools|chrome-untrusted):/.test(p.url()));
  if (!real.length) throw new Error('the browser shows no page to drive');
  return real.find((p) => p.url() === 'about:blank') || real[0];
}

async function puppeteerAttach(puppeteer, browserURL) {
  const browser = await puppeteer.connect({ browserURL, defaultViewport: null });
  const page = pickPage(await browser.pages());
  return { browser, page };
}

async function playwrightAttach(browserURL) {
  const { chromium } = require('playwright-core');
  const browser = await chromium.connectOverCDP(browserURL);
  const context = browser.contexts()[0];
  if (!context) throw new Error('the browser has no default context');
  const page = pickPage(context.pages());
  return { browser, context, page };
}

// The window's viewport as the page sees it (connect mode never sets one).
const viewportOf = (page) => page.evaluate(() => ({ width: innerWidth, height: innerHeight }));

module.exports = { puppeteerAttach, playwrightAttach, viewportOf, pickPage };
