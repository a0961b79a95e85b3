// One survey session in real headless Chromium, for tests/it/browser.rs. Prints one JSON object.
//
// Environment: BASE (server URL), TRACKING_KEY, REFERENCE, SECRET_TYPED, SECRET_PASTED,
// COLLECTOR ("up", "down": requests to the collector fail, "error": it answers 500, "flaky": a
// stand-in in front of the real collector refuses every third request, in turn with 503 and
// Retry-After, 429 and Retry-After, and a connection reset, and forwards the rest).
const http = require("http");
const { chromium } = require("playwright-core");

/** A local server that answers every request with `status` (CORS open), counting requests. */
function failingCollector(status) {
  const server = http.createServer((request, response) => {
    server.requests += 1;
    response.writeHead(status, {
      "access-control-allow-origin": "*",
      "access-control-allow-headers": "content-type",
      "content-type": "application/json",
    });
    response.end('{"error":"failing on purpose"}');
  });
  server.requests = 0;
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/**
 * A stand-in in front of the real collector at `base`: every third fetch is refused (503 with
 * Retry-After: 1, 429 with Retry-After: 1, or the connection reset, in turn) and never reaches
 * the collector; the rest are forwarded and their answers passed back.
 */
function flakyCollector(base) {
  const target = new URL(base);
  const refusals = ["503", "429", "reset"];
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      server.requests += 1;
      // Beacons (no-cors) are fire and forget: a page being left cannot learn that one failed,
      // so the stand-in refuses only the embed's fetches, which it can retry.
      const beacon = request.headers["sec-fetch-mode"] === "no-cors";
      if (request.method === "POST" && !beacon && server.requests % 3 === 0) {
        const refusal = refusals[server.refused.length % refusals.length];
        server.refused.push(refusal);
        if (refusal === "reset") {
          request.socket.destroy();
          return;
        }
        response.writeHead(Number(refusal), {
          "access-control-allow-origin": "*",
          "access-control-expose-headers": "retry-after",
          "retry-after": "1",
          "content-type": "application/json",
        });
        response.end('{"error":"refused on purpose"}');
        return;
      }
      const forward = http.request(
        { host: target.hostname, port: target.port, path: request.url, method: request.method, headers: request.headers },
        (answer) => {
          response.writeHead(answer.statusCode, answer.headers);
          answer.pipe(response);
        },
      );
      forward.on("error", () => response.destroy());
      forward.end(Buffer.concat(chunks));
    });
  });
  server.requests = 0;
  server.refused = [];
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** A port nothing listens on: bound, then closed. */
function closedPort() {
  const server = http.createServer();
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    }),
  );
}

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
  // Failure modes use real servers: a closed port ("down") or one answering 500 ("error").
  let failing = null;
  let collectorUrl = "";
  if (collector === "down") collectorUrl = `http://127.0.0.1:${await closedPort()}/event`;
  if (collector === "error") {
    failing = await failingCollector(500);
    collectorUrl = `http://127.0.0.1:${failing.address().port}/event`;
  }
  if (collector === "flaky") {
    failing = await flakyCollector(BASE);
    collectorUrl = `http://127.0.0.1:${failing.address().port}/event`;
  }
  let attempts = 0;
  context.on("request", (request) => {
    if (collectorUrl && request.url().startsWith(collectorUrl)) attempts += 1;
  });

  const query = collectorUrl ? `&collector=${encodeURIComponent(collectorUrl)}` : "";
  await page.goto(`${BASE}/demo/${TRACKING_KEY}?response=${REFERENCE}${query}`);
  // What the page shows as text by the browser's own account, to check the embed's count of
  // visible words against (`page` events, embed 1.4).
  const innerTextWords = await page.evaluate(() => (document.body.innerText.match(/\S+/g) || []).length);
  for (let i = 0; i < 40; i++) await page.mouse.move(120 + i * 9, 140 + i * 4, { steps: 2 });
  if (collector === "flaky") {
    // Several batches' worth of movement, so that refusals meet batches of every kind.
    for (let i = 0; i < 600; i++) {
      await page.mouse.move(200 + 150 * Math.cos(i / 20), 300 + 100 * Math.sin(i / 15), { steps: 1 });
      if (i % 50 === 0) await page.waitForTimeout(300);
    }
  }
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
  // A click dispatched by the automation tool's own page script (untrusted, with its frames in
  // the call stack): the embed's `automationStack` tell.
  await page.evaluate(() => document.body.click());
  // A press injected through the DevTools protocol without a force, as a client that does not
  // set one sends it (Playwright since 1.53 sends 0.5, as a mouse does): the embed's count of
  // presses without pressure (`delivery` events, embed 1.4).
  const cdp = await context.newCDPSession(page);
  for (const type of ["mousePressed", "mouseReleased"]) {
    await cdp.send("Input.dispatchMouseEvent", { type, x: 4, y: 4, button: "left", clickCount: 1 });
  }
  const finished = await page.isVisible("#done");
  const answers = await page.evaluate(() => ({
    experience: document.getElementById("experience").value,
    colour: document.getElementById("colour").value,
  }));
  await page.waitForTimeout(collector === "up" ? 2500 : 6000);
  // With a collector that answers in the end, the queue drains: every event the page produced
  // was accepted before it is left (the embed's own counts, no event content).
  let drained = null;
  if (collector === "flaky") {
    for (let i = 0; i < 60; i++) {
      drained = await page.evaluate(() => window.Telltale.stats());
      if (drained.queued === 0 && drained.accepted === drained.produced) break;
      await page.waitForTimeout(500);
    }
  }
  // The last moments before leaving: under the embed's 2 s batching interval, so these events
  // can only arrive through the pagehide beacon.
  for (let i = 0; i < 10; i++) await page.mouse.move(300 + i * 5, 300, { steps: 1 });
  // Leaving the page fires `pagehide`: the embed sends what is left with sendBeacon. The page
  // object stays alive, so that request is still observed.
  await page.goto(`${BASE}/status/health`);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const beacons = await page.evaluate(() => JSON.parse(sessionStorage.getItem("beacons") || "[]"));
  let beaconTypes = [];
  for (const body of beacons) {
    if (!body) continue;
    const batch = JSON.parse(body);
    sent.push(batch);
    beaconTypes = beaconTypes.concat(batch.events.map((event) => event.type));
  }
  const refused = failing && failing.refused ? failing.refused : [];
  if (failing) {
    attempts = Math.max(attempts, failing.requests);
    failing.close();
  }
  await browser.close();

  const events = sent.flatMap((batch) => batch.events);
  const fields = {};
  for (const event of events) {
    const known = (fields[event.type] = fields[event.type] || []);
    for (const name of Object.keys(event.data || {})) if (!known.includes(name)) known.push(name);
  }
  for (const type of Object.keys(fields)) fields[type].sort();
  const environments = events.filter((event) => event.type === "environment").map((event) => event.data);
  const deliveries = events.filter((event) => event.type === "delivery").map((event) => event.data);
  const pages = events.filter((event) => event.type === "page").map((event) => event.data);
  console.log(
    JSON.stringify({
      sentEvents: events.length, fields, environments, deliveries, pages, innerTextWords, pageErrors, finished, answers, attempts, beaconTypes,
      drained, refused, beaconEvents: beaconTypes.length,
    }),
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
