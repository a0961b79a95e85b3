// One survey session in real headless Chromium, for tests/it/browser.rs. Prints one JSON object.
//
// Environment: BASE (server URL), TRACKING_KEY, REFERENCE, SECRET_TYPED, SECRET_PASTED,
// COLLECTOR ("up", "down": requests to the collector fail, "error": it answers 500).
const { chromium } = require("playwright-core");

async function main() {
  const { BASE, TRACKING_KEY, REFERENCE, SECRET_TYPED, SECRET_PASTED } = process.env;
  const collector = process.env.COLLECTOR || "up";
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox"],
  });
  const context = await browser.newContext();
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: BASE });
  const page = await context.newPage();
  const pageErrors = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));

  // What the page sent: every collector request the browser completed with 201, fetches and
  // pagehide beacons alike (beacons bypass `page.route`, so they are counted from the context).
  const sent = [];
  context.on("requestfinished", async (request) => {
    if (!request.url().includes("/event/") || request.resourceType() !== "fetch") return;
    const response = await request.response();
    const body = request.postData();
    if (body && response && response.status() === 201) sent.push(JSON.parse(body));
  });
  // Beacons leave while the page unloads, where Playwright does not see them: the page notes
  // each one in sessionStorage, read back from another page of the same origin.
  await context.addInitScript(() => {
    const original = navigator.sendBeacon && navigator.sendBeacon.bind(navigator);
    if (!original) return;
    navigator.sendBeacon = (url, data) => {
      const queued = original(url, data);
      if (queued && String(url).includes("/event/") && typeof data === "string") {
        const log = JSON.parse(sessionStorage.getItem("beacons") || "[]");
        log.push(data);
        sessionStorage.setItem("beacons", JSON.stringify(log));
      }
      return queued;
    };
  });
  // Failure modes are simulated in front of the real collector.
  let attempts = 0;
  if (collector !== "up") {
    await page.route("**/event/**", (route) => {
      attempts += 1;
      if (collector === "down") return route.abort("connectionrefused");
      return route.fulfill({ status: 500, contentType: "application/json", body: '{"error":"down"}' });
    });
  }

  await page.goto(`${BASE}/demo/${TRACKING_KEY}?response=${REFERENCE}`);
  for (let i = 0; i < 40; i++) await page.mouse.move(120 + i * 9, 140 + i * 4, { steps: 2 });
  await page.click("input[value=weekly]");
  await page.click("input[value=laptop]");
  await page.click("#next-1");
  await page.click("#experience");
  await page.keyboard.type(SECRET_TYPED, { delay: 35 });
  await page.click("#colour");
  await page.evaluate((text) => navigator.clipboard.writeText(text), SECRET_PASTED);
  await page.keyboard.press("Control+V");
  await page.mouse.wheel(0, 600);
  await page.waitForTimeout(200);
  await page.click("#next-2");
  await page.fill("#satisfaction", "8");
  await page.click("#submit");
  const finished = await page.isVisible("#done");
  const answers = await page.evaluate(() => ({
    experience: document.getElementById("experience").value,
    colour: document.getElementById("colour").value,
  }));
  await page.waitForTimeout(collector === "up" ? 2500 : 6000);
  // Leaving the page fires `pagehide`: the embed sends what is left with sendBeacon. The page
  // object stays alive, so that request is still observed.
  await page.goto(`${BASE}/status/health`);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const beacons = await page.evaluate(() => JSON.parse(sessionStorage.getItem("beacons") || "[]"));
  for (const body of beacons) if (body) sent.push(JSON.parse(body));
  await browser.close();

  const events = sent.flatMap((batch) => batch.events);
  const fields = {};
  for (const event of events) {
    const known = (fields[event.type] = fields[event.type] || []);
    for (const name of Object.keys(event.data || {})) if (!known.includes(name)) known.push(name);
  }
  for (const type of Object.keys(fields)) fields[type].sort();
  console.log(JSON.stringify({ sentEvents: events.length, fields, pageErrors, finished, answers, attempts }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
