// Bot generators for the scoring-quality harness: each session is the demo survey filled in by
// real headless Chromium, captured by the real embed and sent to the real collector.
//
//   node bots.js --base URL --key TRACKING_KEY --generator NAME --seeds FROM-TO \
//                [--concurrency N] [--replay-traces FILE]
//
// Prints one JSON line per session: {"reference", "generator", "seed", "ok", "error"?}.
// The reference is derived from generator and seed, so a session is reproducible and its label
// is known without asking the page. Generators (docs/evaluation.md describes each):
//   naive      Playwright fill/check/click: webdriver flag and HeadlessChrome user agent as shipped
//   stealth    the same actions, webdriver flag hidden and a desktop Chrome user agent
//   humanized  stealth environment, Bezier pointer paths with overshoot and jitter, lognormal
//              dwell, hold and flight times, wheel scrolling, reading pauses
//   replay     stealth environment, pointer paths copied from human TRAIN strokes (with jitter)
//              and translated onto each target, keys typed at a jittered fixed rhythm
//   agent      stealth environment, long think pauses, clicks at element centres without any
//              movement in between, answers pasted or typed in bursts
"use strict";

const crypto = require("crypto");
const fs = require("fs");
const { chromium } = require("playwright-core");

const GENERATORS = ["naive", "stealth", "humanized", "replay", "agent"];
const ANSWERS = [
  "I mostly use it on the train in the morning",
  "Setup was easy but the sync is slow",
  "Fine overall",
  "It crashed twice last month, otherwise ok",
  "The new layout is confusing",
  "I like the dark mode and the shortcuts",
  "Too many notifications",
  "Support answered quickly",
];
const COLOURS = ["blue", "green", "red", "purple", "teal", "orange", "black", "yellow"];

function parseArgs(argv) {
  const args = { concurrency: 3 };
  for (let i = 2; i < argv.length; i += 2) {
    const name = argv[i].replace(/^--/, "");
    args[name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = argv[i + 1];
  }
  for (const required of ["base", "key", "generator", "seeds"]) {
    if (!args[required]) throw new Error(`--${required} is required`);
  }
  if (!GENERATORS.includes(args.generator)) throw new Error(`unknown generator ${args.generator}`);
  const [from, to] = args.seeds.split("-").map(Number);
  args.seedList = [];
  for (let seed = from; seed <= (to || from); seed++) args.seedList.push(seed);
  args.concurrency = Number(args.concurrency);
  return args;
}

/** A UUID (v4 layout) from generator and seed: the session's reference and identifier. */
function referenceFor(generator, seed) {
  const hex = crypto.createHash("sha1").update(`telltale-quality/${generator}/${seed}`).digest("hex");
  const variant = ((parseInt(hex[16], 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** mulberry32: a small seeded PRNG, so a seed replays the same session. */
function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = () => {
    const u = Math.max(next(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * next());
  };
  return {
    next,
    uniform: (low, high) => low + (high - low) * next(),
    int: (low, high) => Math.floor(low + (high - low + 1) * next()),
    pick: (list) => list[Math.floor(next() * list.length)],
    normal,
    /** Lognormal with the given median and log-space sigma. */
    lognormal: (median, sigma) => median * Math.exp(sigma * normal()),
  };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

async function box(page, selector) {
  const handle = await page.waitForSelector(selector, { state: "visible" });
  await handle.scrollIntoViewIfNeeded();
  return handle.boundingBox();
}

// ---- naive and stealth: the automation library's own actions --------------------------------

async function fillNaive(page, r) {
  await page.check(`input[value=${r.pick(["weekly", "monthly", "rarely"])}]`);
  await page.check(`input[value=${r.pick(["phone", "laptop", "tablet"])}]`);
  await page.click("#next-1");
  await page.fill("#experience", r.pick(ANSWERS));
  await page.fill("#colour", r.pick(COLOURS));
  await page.click("#next-2");
  await page.fill("#satisfaction", String(r.int(0, 10)));
  await page.click("#submit");
}

// ---- humanized: curved paths, jittered dwell, lognormal keys --------------------------------

/** Moves along a cubic Bezier curve from the current position to (x, y), sampled per frame. */
async function bezierMove(page, r, from, x, y) {
  const distance = Math.hypot(x - from.x, y - from.y);
  // Fitts-like duration: longer for longer moves, with spread.
  const duration = r.lognormal(250 + 110 * Math.log2(1 + distance / 20), 0.25);
  const bend = () => r.normal() * Math.min(120, distance * 0.35);
  const c1 = { x: from.x + (x - from.x) * 0.3 + bend(), y: from.y + (y - from.y) * 0.3 + bend() };
  const c2 = { x: from.x + (x - from.x) * 0.7 + bend(), y: from.y + (y - from.y) * 0.7 + bend() };
  const overshoot = r.next() < 0.3 ? 1 + r.uniform(0.03, 0.1) : 1;
  const target = { x: from.x + (x - from.x) * overshoot, y: from.y + (y - from.y) * overshoot };
  const steps = Math.max(4, Math.round(duration / 16));
  const start = Date.now();
  for (let i = 1; i <= steps; i++) {
    const linear = i / steps;
    const t = linear < 0.5 ? 2 * linear * linear : 1 - Math.pow(-2 * linear + 2, 2) / 2; // ease in-out
    const u = 1 - t;
    const px = u * u * u * from.x + 3 * u * u * t * c1.x + 3 * u * t * t * c2.x + t * t * t * target.x;
    const py = u * u * u * from.y + 3 * u * u * t * c1.y + 3 * u * t * t * c2.y + t * t * t * target.y;
    await page.mouse.move(px + r.normal() * 0.6, py + r.normal() * 0.6);
    await sleep(start + (duration * i) / steps + r.normal() * 3 - Date.now());
  }
  if (overshoot > 1) {
    await sleep(r.lognormal(80, 0.3));
    for (let i = 1; i <= 5; i++) {
      await page.mouse.move(target.x + ((x - target.x) * i) / 5, target.y + ((y - target.y) * i) / 5);
      await sleep(r.lognormal(16, 0.2));
    }
  }
  return { x, y };
}

async function humanClick(page, r, cursor, selector) {
  const b = await box(page, selector);
  const x = b.x + b.width * r.uniform(0.25, 0.75);
  const y = b.y + b.height * r.uniform(0.3, 0.7);
  const at = await bezierMove(page, r, cursor, x, y);
  await sleep(r.lognormal(120, 0.4));
  await page.mouse.down();
  await sleep(r.lognormal(95, 0.3));
  await page.mouse.up();
  return at;
}

async function humanType(page, r, text, holdMedian, flightMedian) {
  for (const ch of text) {
    await page.keyboard.down(ch);
    await sleep(r.lognormal(holdMedian, 0.25));
    await page.keyboard.up(ch);
    await sleep(r.lognormal(flightMedian, 0.45) * (ch === " " ? 1.3 : 1));
  }
}

async function fillHumanized(page, r) {
  // A person first looks at the page; the cursor then starts from wherever it rested.
  await sleep(r.lognormal(1200, 0.4));
  let cursor = { x: r.uniform(100, 700), y: r.uniform(80, 500) };
  await page.mouse.move(cursor.x, cursor.y);
  const hold = r.lognormal(105, 0.2);
  const flight = r.lognormal(210, 0.3);
  cursor = await humanClick(page, r, cursor, `input[value=${r.pick(["weekly", "monthly", "rarely"])}]`);
  await sleep(r.lognormal(700, 0.5));
  cursor = await humanClick(page, r, cursor, `input[value=${r.pick(["phone", "laptop", "tablet"])}]`);
  cursor = await humanClick(page, r, cursor, "#next-1");
  await sleep(r.lognormal(900, 0.4));
  cursor = await humanClick(page, r, cursor, "#experience");
  await humanType(page, r, r.pick(ANSWERS).slice(0, r.int(8, 20)), hold, flight);
  for (let notch = r.int(1, 4); notch > 0; notch--) {
    await page.mouse.wheel(0, 100);
    await sleep(r.lognormal(70, 0.4));
  }
  await sleep(r.lognormal(600, 0.4));
  cursor = await humanClick(page, r, cursor, "#colour");
  await humanType(page, r, r.pick(COLOURS), hold, flight);
  cursor = await humanClick(page, r, cursor, "#next-2");
  await sleep(r.lognormal(800, 0.4));
  cursor = await humanClick(page, r, cursor, "#satisfaction");
  cursor = await humanClick(page, r, cursor, "#submit");
}

// ---- replay: human pointer strokes copied onto the survey ------------------------------------

/** Replays a human stroke translated so that it ends on (x, y), with the recorded timing. */
async function replayStroke(page, r, stroke, x, y) {
  const last = stroke[stroke.length - 1];
  const start = Date.now();
  for (const point of stroke) {
    await sleep(start + (point.t - stroke[0].t) * r.uniform(0.95, 1.05) - Date.now());
    await page.mouse.move(point.x - last.x + x + r.normal() * 0.5, point.y - last.y + y + r.normal() * 0.5);
  }
}

async function replayClick(page, r, strokes, selector) {
  const b = await box(page, selector);
  const x = b.x + b.width * r.uniform(0.3, 0.7);
  const y = b.y + b.height * r.uniform(0.3, 0.7);
  await replayStroke(page, r, r.pick(strokes), x, y);
  await page.mouse.down();
  await sleep(r.uniform(60, 140));
  await page.mouse.up();
}

async function fillReplay(page, r, strokes) {
  await sleep(r.uniform(500, 1500));
  await replayClick(page, r, strokes, `input[value=${r.pick(["weekly", "monthly", "rarely"])}]`);
  await replayClick(page, r, strokes, `input[value=${r.pick(["phone", "laptop", "tablet"])}]`);
  await replayClick(page, r, strokes, "#next-1");
  await replayClick(page, r, strokes, "#experience");
  await page.keyboard.type(r.pick(ANSWERS).slice(0, r.int(8, 20)), { delay: r.uniform(80, 160) });
  await replayClick(page, r, strokes, "#colour");
  await page.keyboard.type(r.pick(COLOURS), { delay: r.uniform(80, 160) });
  await replayClick(page, r, strokes, "#next-2");
  await replayClick(page, r, strokes, "#satisfaction");
  await replayClick(page, r, strokes, "#submit");
}

// ---- agent: think, then act at element centres -----------------------------------------------

async function centreClick(page, r, selector) {
  await sleep(r.uniform(1000, 3000));
  const b = await box(page, selector);
  await page.mouse.click(b.x + b.width / 2, b.y + b.height / 2);
}

async function agentText(page, r, selector, text) {
  await centreClick(page, r, selector);
  if (r.next() < 0.5) await page.keyboard.insertText(text);
  else await page.keyboard.type(text, { delay: r.uniform(5, 25) });
}

async function fillAgent(page, r) {
  await centreClick(page, r, `input[value=${r.pick(["weekly", "monthly", "rarely"])}]`);
  await centreClick(page, r, `input[value=${r.pick(["phone", "laptop", "tablet"])}]`);
  await centreClick(page, r, "#next-1");
  await agentText(page, r, "#experience", r.pick(ANSWERS));
  await agentText(page, r, "#colour", r.pick(COLOURS));
  await centreClick(page, r, "#next-2");
  await centreClick(page, r, "#satisfaction");
  await centreClick(page, r, "#submit");
}

// ---- sessions ---------------------------------------------------------------------------------

/** Human TRAIN strokes for the replay generator: a JSON array of [[t, x, y], ...] strokes. */
function loadStrokes(path) {
  if (!path) throw new Error("the replay generator needs --replay-traces");
  const strokes = JSON.parse(fs.readFileSync(path, "utf8"))
    .map((stroke) => stroke.map(([t, x, y]) => ({ t, x, y })))
    .filter((stroke) => stroke.length >= 5);
  if (!strokes.length) throw new Error(`no strokes in ${path}`);
  return strokes;
}

async function runSession(browser, args, seed, strokes, desktopUserAgent) {
  const generator = args.generator;
  const reference = referenceFor(generator, seed);
  const r = rng(seed * 7919 + GENERATORS.indexOf(generator));
  const stealthed = generator !== "naive";
  const context = await browser.newContext(
    stealthed
      ? { userAgent: desktopUserAgent, viewport: { width: r.pick([1280, 1366, 1440, 1536]), height: r.pick([720, 768, 800, 864]) } }
      : {},
  );
  if (stealthed) {
    await context.addInitScript(() => {
      Object.defineProperty(Navigator.prototype, "webdriver", { get: () => false });
    });
  }
  const page = await context.newPage();
  try {
    await page.goto(`${args.base}/demo/${args.key}?response=${reference}`);
    if (generator === "naive" || generator === "stealth") await fillNaive(page, r);
    else if (generator === "humanized") await fillHumanized(page, r);
    else if (generator === "replay") await fillReplay(page, r, strokes);
    else await fillAgent(page, r);
    if (!(await page.isVisible("#done"))) throw new Error("the survey did not reach its end");
    // Past the embed's 2 s batching interval, then leave: pagehide sends the rest.
    await sleep(2300);
    await page.goto("about:blank");
    await sleep(300);
    return { reference, generator, seed, ok: true };
  } catch (error) {
    return { reference, generator, seed, ok: false, error: String(error).slice(0, 300) };
  } finally {
    await context.close();
  }
}

async function main() {
  const args = parseArgs(process.argv);
  const strokes = args.generator === "replay" ? loadStrokes(args.replayTraces) : null;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    // Stealth hides the automation flag as stealth plugins do; naive sessions keep it as shipped.
    args: ["--headless", "--no-sandbox"].concat(
      args.generator === "naive" ? [] : ["--disable-blink-features=AutomationControlled"],
    ),
  });
  // The browser's own user agent without the "Headless" tell, as stealth plugins do.
  const probe = await browser.newPage();
  const desktopUserAgent = (await probe.evaluate(() => navigator.userAgent)).replace("HeadlessChrome", "Chrome");
  await probe.close();
  const queue = args.seedList.slice();
  const workers = Array.from({ length: args.concurrency }, async () => {
    while (queue.length) {
      const seed = queue.shift();
      const result = await runSession(browser, args, seed, strokes, desktopUserAgent);
      process.stdout.write(JSON.stringify(result) + "\n");
    }
  });
  await Promise.all(workers);
  await browser.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
