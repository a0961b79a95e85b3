'use strict';
// Playwright (playwright-core) helpers shared by the Playwright families: launch Debian's
// Chromium, and the --mask-environment route (page.route + route.continue({postData}), as in
// Playwright's network docs).
const { chromium } = require('playwright-core');
const { CHROMIUM, maskBody } = require('./common');

function launch(extraArgs = []) {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--headless', '--no-sandbox', ...extraArgs] });
}

async function maskCollector(target) {
  await target.route(/\/event\/[0-9a-fA-F]{24}\//, async (route) => {
    const request = route.request();
    if (request.method() !== 'POST') return route.continue();
    const body = maskBody(request.postData() || '');
    if (body === null) {
      return route.fulfill({ status: 201, contentType: 'application/json', body: '{"success":true,"count":0}' });
    }
    return route.continue({ postData: body });
  });
}

module.exports = { launch, maskCollector };
