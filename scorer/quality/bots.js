// Bot generators for the scoring-quality harness: each session is the demo survey filled in by
// real headless Chromium, captured by the real embed and sent to the real collector.
//
//   node bots.js --base URL --key TRACKING_KEY --generator NAME --seeds FROM-TO \
//                [--concurrency N] [--replay-traces FILE]
//
// Prints one JSON line per session: {"reference", "generator", "seed", "ok", "seconds", "error"?}.
// The reference is derived from generator and seed, so a session is reproducible and its label
// is known without asking the page. Every generator but ghost-cursor drives the browser with
// playwright-core; ghost-cursor uses puppeteer-core, as that library requires. Neither downloads
// a browser: both launch Debian's /usr/bin/chromium (or $CHROMIUM).
//
// Generators (docs/evaluation.md describes each):
//   naive         Playwright fill/check/click: webdriver flag and HeadlessChrome user agent as
//                 shipped
//   stealth       the same actions, webdriver flag hidden and a desktop Chrome user agent
//   humanized     stealth environment, own-code cubic Bezier pointer paths with overshoot and
//                 jitter, lognormal dwell, hold and flight times, wheel scrolling, reading pauses
//   agent         stealth environment, long think pauses, clicks at element centres without any
//                 movement in between, answers pasted or typed in bursts
// The humanizers below share one survey filling (fillSurvey): a stealth environment, reading
// pauses, wheel notches in bursts to bring every target into view (page 2 is long), lognormal
// pre-click pauses and press dwell, and typing key by key with one person's lognormal hold and
// flight medians (hold 80-130 ms, flight 150-300 ms, longer after spaces, occasional pauses
// between words, Shift for capitals). They differ in the pointer path:
//   ghost-cursor  the npm library ghost-cursor, used as its README shows, with puppeteer-core:
//                 createCursor(page) with its random moves on, cursor.click(selector): Bezier
//                 paths with Fitts-law point counts and overshoot, dispatched as fast as the
//                 DevTools protocol takes them (the library's own pacing)
//   windmouse     the WindMouse algorithm (gravity towards the target, random wind, a maximum
//                 step shrinking near the target), per-session parameters, waits per step
//                 proportional to its length, as the original
//   perlin        a straight or slightly bowed base path displaced across the chord by 1-D
//                 Perlin noise (two octaves, zero at both ends), an asymmetric eased speed
//                 profile and a Fitts-law duration
//   minjerk       sub-movements: a minimum-jerk primary movement covering 85-100 % of the distance
//                 with a sideways error, then 0-2 smaller minimum-jerk corrections after short
//                 dwells, with per-session motor noise growing with speed
//   replay        pieces of human TRAIN aimed movements (Balabit TRAIN users, --replay-traces)
//                 chosen for a chord near the needed distance, scaled, rotated (and mirrored half
//                 the time) to run from the cursor to the target, played through a random monotone
//                 time warp and a per-session speed factor, with 0.3-0.8 px noise
"use strict";

const crypto = require("crypto");
const fs = require("fs");
const { chromium } = require("playwright-core");

// The first five keep their positions: a generator's index is part of its sessions' seeds.
const GENERATORS = ["naive", "stealth", "humanized", "replay", "agent", "ghost-cursor", "windmouse", "perlin", "minjerk"];
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

// ---- the humanizers' shared survey filling: a person, the wheel, clicks and keys -------------

/** One person's habits, drawn once per session from human ranges. */
function drawPerson(r) {
  return {
    holdMedian: r.uniform(80, 130), // key down to key up, ms
    holdSigma: r.uniform(0.18, 0.3),
    flightMedian: r.uniform(150, 300), // key up to the next key down, ms
    flightSigma: r.uniform(0.35, 0.55),
    spaceFactor: r.uniform(1.2, 1.7), // the flight after a space is longer
    wordPause: r.uniform(0.05, 0.2), // chance of a longer pause between words
    preClickMedian: r.uniform(90, 220), // from arriving on a target to pressing, ms
    dwellMedian: r.uniform(70, 130), // mouse button held, ms
    notchMedian: r.uniform(45, 90), // between the wheel notches of one burst, ms
    readingScale: r.uniform(0.7, 1.2), // a slower or faster reader
  };
}

/** A lognormal pause, capped so that no session runs away from the 40 s budget. */
const pause = (r, median, sigma) => sleep(Math.min(r.lognormal(median, sigma), 4 * median));

/**
 * The element's box in viewport coordinates, with the viewport's size, once it is displayed.
 * Works with Playwright's and Puppeteer's pages alike (both take evaluate(fn, arg)).
 */
async function locate(page, selector) {
  const until = Date.now() + 10000;
  for (;;) {
    const found = await page.evaluate((sel) => {
      const el = document.querySelector(sel);
      const b = el && el.getBoundingClientRect();
      if (!b || !b.width || !b.height) return null;
      return { x: b.left, y: b.top, width: b.width, height: b.height, viewWidth: innerWidth, viewHeight: innerHeight };
    }, selector);
    if (found) return found;
    if (Date.now() > until) throw new Error(`${selector} was not displayed`);
    await sleep(50);
  }
}

/** Wheel notches of 100 px, in bursts, until the element is wholly in view; returns its box. */
async function wheelIntoView(page, r, who, wheel, selector) {
  for (let burst = 0; burst < 30; burst++) {
    const b = await locate(page, selector);
    const below = b.y + b.height - b.viewHeight; // > 0: under the fold
    const above = -b.y; // > 0: over the top
    if (below <= 0 && above <= 0) return b;
    const direction = below > 0 ? 1 : -1;
    // Enough notches to bring it some way in, sometimes one more, never more than a hand's burst.
    const needed = Math.ceil((Math.max(below, above) + r.uniform(20, 120)) / 100) + (r.next() < 0.25 ? 1 : 0);
    for (let notch = Math.min(needed, r.int(2, 6)); notch > 0; notch--) {
      await wheel(100 * direction);
      await pause(r, who.notchMedian, 0.35);
    }
    await sleep(200 + r.lognormal(200, 0.4)); // the smooth scroll ends, the eyes follow
  }
  throw new Error(`could not scroll ${selector} into view`);
}

/** A point inside the box, nearer its centre than its edges. */
function aimPoint(r, b) {
  const share = () => Math.min(0.8, Math.max(0.2, 0.5 + 0.15 * r.normal()));
  return { x: b.x + b.width * share(), y: b.y + b.height * share() };
}

/** Keys pressed and released one by one, with the person's lognormal holds and flights. */
async function typeText(page, r, who, text) {
  for (const ch of text) {
    const capital = ch !== ch.toLowerCase();
    if (capital) {
      await page.keyboard.down("Shift");
      await pause(r, 70, 0.3);
    }
    await page.keyboard.down(ch);
    await pause(r, who.holdMedian, who.holdSigma);
    await page.keyboard.up(ch);
    if (capital) {
      await pause(r, 40, 0.4);
      await page.keyboard.up("Shift");
    }
    let flight = r.lognormal(who.flightMedian, who.flightSigma);
    if (ch === " ") {
      flight *= who.spaceFactor;
      if (r.next() < who.wordPause) flight += r.lognormal(700, 0.4); // finding the next word
    }
    await sleep(Math.min(flight, 2000));
  }
}

/**
 * The demo survey filled in by a person: `pointer.click(selector)` brings the target into view
 * with the wheel, moves there and clicks; `pointer.idle()` may drift the hand while reading.
 */
async function fillSurvey(page, r, who, pointer) {
  const read = (median) => pause(r, median * who.readingScale, 0.4);
  await read(1200);
  await pointer.idle();
  await pointer.click(`input[value=${r.pick(["weekly", "monthly", "rarely"])}]`);
  await read(600);
  const devices = ["phone", "laptop", "tablet"].filter(() => r.next() < 0.5);
  for (const device of devices.length ? devices : [r.pick(["phone", "laptop", "tablet"])]) {
    await pointer.click(`input[value=${device}]`);
    await read(300);
  }
  await pointer.click("#next-1");
  await read(900);
  await pointer.idle();
  await pointer.click("#experience");
  await typeText(page, r, who, r.pick(ANSWERS).slice(0, r.int(8, 20)).trim());
  await read(500);
  await pointer.click("#colour");
  await typeText(page, r, who, r.pick(COLOURS));
  await read(500);
  await pointer.click("#next-2"); // under the long block: wheel bursts first
  await read(800);
  await pointer.idle();
  await pointer.click("#satisfaction");
  await read(400);
  await pointer.click("#submit");
}

/**
 * Dispatches a timed path ([{x, y, t}], t in ms from its start) in real time. A dispatched move
 * returns only once the page has handled it (about one per frame in headless Chromium), so when
 * dispatching lags behind the plan, the points already overdue are skipped, as a browser
 * coalesces a mouse's reports to one per frame; the path keeps its planned timing either way.
 */
async function playPath(page, points) {
  const start = Date.now();
  for (let next = 0; next < points.length; next++) {
    await sleep(start + points[next].t - Date.now());
    const elapsed = Date.now() - start;
    while (next + 1 < points.length && points[next + 1].t <= elapsed) next++;
    await page.mouse.move(points[next].x, points[next].y);
  }
}

/**
 * A pointer for a Playwright page moved along our own path models: `path(from, to, size)`
 * returns the timed points of one movement, its last point where the pointer stops.
 */
function pathPointer(page, r, who, path, start, view) {
  let at = start;
  const moveTo = async (to, size) => {
    const points = path(at, to, size);
    await playPath(page, points);
    at = points[points.length - 1];
  };
  const pointer = {
    wheel: (dy) => page.mouse.wheel(0, dy),
    async click(selector) {
      const b = await wheelIntoView(page, r, who, pointer.wheel, selector);
      view = { width: b.viewWidth, height: b.viewHeight };
      await moveTo(aimPoint(r, b), Math.min(b.width, b.height));
      await pause(r, who.preClickMedian, 0.4);
      await page.mouse.down();
      await pause(r, who.dwellMedian, 0.3);
      await page.mouse.up();
    },
    async idle() {
      if (r.next() < 0.5) return;
      const clamp = (v, high) => Math.min(high - 20, Math.max(20, v));
      await moveTo({ x: clamp(at.x + 150 * r.normal(), view.width), y: clamp(at.y + 100 * r.normal(), view.height) }, 60);
    },
  };
  return pointer;
}

/** Fills the survey moving the pointer with a path model drawn for this session. */
async function fillWithPath(page, r, path) {
  const who = drawPerson(r);
  const view = await page.evaluate(() => ({ width: innerWidth, height: innerHeight }));
  const start = { x: r.uniform(0.1, 0.6) * view.width, y: r.uniform(0.1, 0.7) * view.height };
  await page.mouse.move(start.x, start.y); // the hand rests where it left the page
  await fillSurvey(page, r, who, pathPointer(page, r, who, path, start, view));
}

/** Fitts-law movement time (Shannon form) for a distance and a target size, in ms. */
const fitts = (a, b, distance, size) => a + b * Math.log2(1 + distance / Math.max(size, 4));

// ---- windmouse: gravity, wind and a maximum step ---------------------------------------------

/** Per-session WindMouse parameters; `speed` scales steps up and waits down, as in the original. */
function windMouseStyle(r) {
  const speed = r.uniform(0.8, 1.5);
  return {
    gravity: r.uniform(7, 11), // pull towards the target per step
    wind: r.uniform(2, 5), // size of the random wind's fluctuations
    maxStep: r.uniform(9, 15) * speed, // velocity clip, px per step
    targetArea: r.uniform(8, 14) * speed, // closer than this, the wind calms and steps shrink
    minWait: r.uniform(3, 6) / speed, // ms after a step, growing with its length up to maxWait
    maxWait: r.uniform(9, 16) / speed,
  };
}

/**
 * WindMouse (from the algorithm's published description; our code): the velocity gets gravity
 * towards the target plus a wind that decays by 1/sqrt(3) and gets a fresh random gust each
 * step; the speed is clipped to a random share of the maximum step; within the target area the
 * wind decays faster and the maximum step shrinks. Positions are whole pixels, as a mouse's.
 */
function windMousePath(r, s, from, to) {
  const points = [];
  let x = from.x;
  let y = from.y;
  let vx = 0;
  let vy = 0;
  let wx = 0;
  let wy = 0;
  let maxStep = s.maxStep;
  let t = 0;
  let last = { x: Math.round(x), y: Math.round(y) };
  for (let i = 0; i < 3000; i++) {
    const dist = Math.hypot(to.x - x, to.y - y);
    if (dist < 1) break;
    const wind = Math.min(s.wind, dist);
    if (dist >= s.targetArea) {
      wx = wx / Math.sqrt(3) + ((2 * r.next() - 1) * wind) / Math.sqrt(5);
      wy = wy / Math.sqrt(3) + ((2 * r.next() - 1) * wind) / Math.sqrt(5);
    } else {
      wx /= Math.SQRT2;
      wy /= Math.SQRT2;
      maxStep = maxStep < 3 ? r.uniform(3, 6) : maxStep / Math.sqrt(5);
    }
    vx += wx + (s.gravity * (to.x - x)) / dist;
    vy += wy + (s.gravity * (to.y - y)) / dist;
    const speed = Math.hypot(vx, vy);
    if (speed > maxStep) {
      const clipped = maxStep / 2 + (r.next() * maxStep) / 2;
      vx = (vx / speed) * clipped;
      vy = (vy / speed) * clipped;
    }
    x += vx;
    y += vy;
    t += s.minWait + (s.maxWait - s.minWait) * Math.min(1, Math.hypot(vx, vy) / maxStep);
    const pixel = { x: Math.round(x), y: Math.round(y) };
    if (pixel.x !== last.x || pixel.y !== last.y) points.push({ ...pixel, t });
    last = pixel;
  }
  points.push({ x: Math.round(to.x), y: Math.round(to.y), t: t + s.minWait });
  return points;
}

// ---- perlin: a base path displaced by 1-D gradient noise ------------------------------------

/** Seeded 1-D Perlin (gradient) noise, about -1 to 1, zero at whole numbers. */
function perlinNoise(r) {
  const gradients = Array.from({ length: 256 }, () => r.uniform(-1, 1));
  const fade = (f) => f * f * f * (f * (f * 6 - 15) + 10);
  return (v) => {
    const i = Math.floor(v);
    const f = v - i;
    const left = gradients[i & 255] * f;
    const right = gradients[(i + 1) & 255] * (f - 1);
    return 2 * (left + (right - left) * fade(f));
  };
}

/** Per-session parameters of the perlin paths. */
function perlinStyle(r) {
  return {
    noise: perlinNoise(r),
    amplitude: r.uniform(0.04, 0.1), // across the chord, share of the distance (at most 60 px)
    frequency: r.uniform(1.2, 3), // noise cycles over one movement
    bend: r.uniform(0, 0.12), // the base path's bow, share of the distance
    fittsA: r.uniform(100, 220),
    fittsB: r.uniform(80, 140),
    accelerate: r.uniform(1.6, 2.4), // exponents of the eased profile: a longer deceleration
    decelerate: r.uniform(1.8, 3.2), //   when the second is larger
    sampleMs: r.uniform(7, 12),
  };
}

/**
 * Perlin path: the chord, bowed by a parabola to one side (the base), then displaced along the
 * chord's normal by two octaves of noise under a sin(pi u) envelope, so both ends stay put.
 * Progress u over time follows tau^a / (tau^a + (1 - tau)^b), an asymmetric ease in-out.
 */
function perlinPath(r, s, from, to, size) {
  const dx = to.x - from.x;
  const dy = to.y - from.y;
  const distance = Math.hypot(dx, dy);
  if (distance < 3) return [{ x: to.x, y: to.y, t: 16 }];
  const normal = { x: -dy / distance, y: dx / distance };
  const bow = (r.next() < 0.5 ? -1 : 1) * s.bend * distance;
  const amplitude = Math.min(60, s.amplitude * distance);
  const offset = r.uniform(0, 250); // a fresh stretch of noise for every movement
  const duration = fitts(s.fittsA, s.fittsB, distance, size) * r.lognormal(1, 0.15);
  const points = [];
  for (let t = 0; t < duration; t += s.sampleMs * r.uniform(0.8, 1.2)) {
    const tau = t / duration;
    const u = tau ** s.accelerate / (tau ** s.accelerate + (1 - tau) ** s.decelerate);
    const noise = s.noise(offset + u * s.frequency) + 0.5 * s.noise(offset + 97 + 2 * u * s.frequency);
    const across = 4 * u * (1 - u) * bow + Math.sin(Math.PI * u) * amplitude * noise;
    points.push({ x: from.x + dx * u + normal.x * across, y: from.y + dy * u + normal.y * across, t });
  }
  points.push({ x: to.x, y: to.y, t: duration });
  return points.slice(1); // the first point is where the pointer already is
}

// ---- minjerk: a primary sub-movement and corrections ----------------------------------------

/** Per-session parameters of the sub-movement model, motor noise included. */
function minJerkStyle(r) {
  return {
    fittsA: r.uniform(80, 180),
    fittsB: r.uniform(90, 150),
    lateral: r.uniform(0.01, 0.04), // SD of the primary's sideways error, share of the distance
    bow: r.uniform(0.01, 0.06), // SD of a sub-movement's sideways bow, share of its length
    tremor: r.uniform(0.2, 0.7), // px of motor noise on every sample
    noiseGain: r.uniform(0.03, 0.1), // more noise the faster the hand: px per px of step
    dwellMedian: r.uniform(40, 110), // pause between sub-movements, ms
    sampleMs: r.uniform(7, 11),
  };
}

/** Minimum-jerk position profile: 10 tau^3 - 15 tau^4 + 6 tau^5. */
const minJerk = (tau) => tau * tau * tau * (10 - 15 * tau + 6 * tau * tau);

/** One minimum-jerk sub-movement from `from` to `to`, appended to `points` from time t0. */
function subMovement(r, s, from, to, duration, t0, points) {
  const dx = to.x - from.x;
  const dy = to.y - from.y;
  const length = Math.hypot(dx, dy) || 1;
  const bow = s.bow * length * r.normal();
  const steps = Math.max(3, Math.round(duration / s.sampleMs));
  for (let i = 1; i <= steps; i++) {
    const u = minJerk(i / steps);
    const step = length * (u - minJerk((i - 1) / steps));
    const noise = i < steps ? s.tremor + s.noiseGain * step : 0;
    const across = bow * Math.sin(Math.PI * u);
    points.push({
      x: from.x + dx * u + (-dy / length) * across + noise * r.normal(),
      y: from.y + dy * u + (dx / length) * across + noise * r.normal(),
      t: t0 + (duration * i) / steps,
    });
  }
  return t0 + duration;
}

/**
 * Sub-movement model: a primary minimum-jerk movement covering 85-100 % of the distance with a
 * sideways error; then, unless it already ended well inside the target (then only sometimes),
 * one or two corrections (the last one on the aimed point), each after a short dwell.
 */
function minJerkPath(r, s, from, to, size) {
  const dx = to.x - from.x;
  const dy = to.y - from.y;
  const distance = Math.hypot(dx, dy);
  if (distance < 3) return [{ x: to.x, y: to.y, t: 16 }];
  const reach = r.uniform(0.85, 1);
  const lateral = s.lateral * distance * r.normal();
  const primaryEnd = {
    x: from.x + dx * reach - (dy / distance) * lateral,
    y: from.y + dy * reach + (dx / distance) * lateral,
  };
  const miss = Math.hypot(to.x - primaryEnd.x, to.y - primaryEnd.y);
  const corrections = miss <= 0.15 * size ? (r.next() < 0.7 ? 0 : 1) : r.next() < 0.65 ? 1 : 2;
  const points = [];
  let t = subMovement(r, s, from, primaryEnd, fitts(s.fittsA, s.fittsB, distance * reach, size) * r.lognormal(1, 0.12), 0, points);
  let at = primaryEnd;
  for (let k = corrections; k > 0; k--) {
    t += Math.min(r.lognormal(s.dwellMedian, 0.4), 400);
    const share = k === 1 ? 1 : r.uniform(0.6, 0.9);
    const next = k === 1 ? to : { x: at.x + (to.x - at.x) * share + r.normal() * 2, y: at.y + (to.y - at.y) * share + r.normal() * 2 };
    const length = Math.hypot(next.x - at.x, next.y - at.y);
    t = subMovement(r, s, at, next, Math.max(80, 0.6 * fitts(s.fittsA, s.fittsB, length, size) * r.lognormal(1, 0.15)), t, points);
    at = next;
  }
  return points;
}

// ---- replay: human strokes scaled, rotated and time-warped onto the survey ------------------

/** Per-session parameters of the replays. */
function replayStyle(r, strokes) {
  return {
    strokes,
    speed: r.uniform(0.75, 1.35), // overall: above 1 plays faster than recorded
    warp: r.uniform(0.2, 0.6), // how unevenly the time warp stretches the stroke's pieces
    noise: r.uniform(0.3, 0.8), // px added to every replayed point
  };
}

/** A piece of a human stroke, fairly straight (chord at least 0.8 of its arc), chord near `distance`. */
function strokePiece(r, strokes, distance) {
  let best = null;
  for (let attempt = 0; attempt < 8; attempt++) {
    const stroke = r.pick(strokes);
    const arc = [0];
    for (let i = 1; i < stroke.length; i++) {
      arc.push(arc[i - 1] + Math.hypot(stroke[i].x - stroke[i - 1].x, stroke[i].y - stroke[i - 1].y));
    }
    const fits = [];
    for (let i = 0; i < stroke.length - 3; i++) {
      for (let j = i + 3; j < stroke.length; j++) {
        const chord = Math.hypot(stroke[j].x - stroke[i].x, stroke[j].y - stroke[i].y);
        if (chord < 10 || chord < 0.8 * (arc[j] - arc[i])) continue;
        const misfit = Math.abs(Math.log(chord / Math.max(distance, 10)));
        if (misfit < Math.log(1.6)) fits.push([i, j]);
        if (!best || misfit < best.misfit) best = { piece: stroke.slice(i, j + 1), misfit };
      }
    }
    if (fits.length) {
      const [i, j] = r.pick(fits);
      return stroke.slice(i, j + 1);
    }
  }
  return best ? best.piece : r.pick(strokes);
}

/** A random monotone map of [0, 1] onto itself: piecewise linear through 2-4 random knots. */
function timeWarp(r, unevenness) {
  const pieces = r.int(3, 5);
  const widths = Array.from({ length: pieces }, () => r.uniform(1 - unevenness, 1 + unevenness));
  const total = widths.reduce((a, b) => a + b, 0);
  const knots = [0];
  for (const w of widths) knots.push(knots[knots.length - 1] + w / total);
  return (u) => {
    const k = Math.min(pieces - 1, Math.floor(u * pieces));
    return knots[k] + (knots[k + 1] - knots[k]) * (u * pieces - k);
  };
}

/**
 * Replay path: a piece of a human stroke mapped by the similarity transform (scale, rotation,
 * translation; mirrored half the time) that takes its first point to the cursor and its last to
 * the target, its recorded times passed through a time warp and divided by the speed factor.
 */
function replayPath(r, s, from, to) {
  const distance = Math.hypot(to.x - from.x, to.y - from.y);
  if (distance < 3) return [{ x: to.x, y: to.y, t: 16 }];
  const piece = strokePiece(r, s.strokes, distance);
  const first = piece[0];
  const last = piece[piece.length - 1];
  const chord = Math.hypot(last.x - first.x, last.y - first.y) || 1;
  const scale = distance / chord;
  const chordAngle = Math.atan2(last.y - first.y, last.x - first.x);
  const angle = Math.atan2(to.y - from.y, to.x - from.x) - chordAngle;
  // Half the time the piece is mirrored across its chord (a stroke drawn the other way round).
  const mirror = r.next() < 0.5;
  const warp = timeWarp(r, s.warp);
  const duration = (last.t - first.t) / (s.speed * r.uniform(0.9, 1.1));
  const points = piece.slice(1).map((p, index) => {
    let vx = p.x - first.x;
    let vy = p.y - first.y;
    if (mirror) {
      const c = Math.cos(2 * chordAngle);
      const sn = Math.sin(2 * chordAngle);
      [vx, vy] = [vx * c + vy * sn, vx * sn - vy * c];
    }
    const x = from.x + scale * (vx * Math.cos(angle) - vy * Math.sin(angle));
    const y = from.y + scale * (vx * Math.sin(angle) + vy * Math.cos(angle));
    const final = index === piece.length - 2;
    return {
      x: final ? to.x : x + r.normal() * s.noise,
      y: final ? to.y : y + r.normal() * s.noise,
      t: duration * warp((p.t - first.t) / (last.t - first.t || 1)),
    };
  });
  return smoothed([{ x: from.x, y: from.y, t: 0 }, ...points]).slice(1);
}

/**
 * The replayed piece as a real mouse would deliver it: recorded strokes are remote-desktop
 * packets (several moves share a time, 16-125 ms apart), so points of one time are spread evenly
 * up to the next, and the path is drawn through them by a Catmull-Rom spline at 8 ms, as a
 * fraudster's replay tool interpolates its recordings.
 */
function smoothed(points) {
  const p = points.map((q) => ({ ...q }));
  for (let i = 0; i < p.length; ) {
    let j = i;
    while (j + 1 < p.length && p[j + 1].t <= p[i].t) j++;
    const next = j + 1 < p.length ? p[j + 1].t : p[i].t + 8 * (j - i + 1);
    for (let k = i + 1; k <= j; k++) p[k].t = p[i].t + ((next - p[i].t) * (k - i)) / (j - i + 1);
    i = j + 1;
  }
  const out = [p[0]];
  for (let i = 0; i + 1 < p.length; i++) {
    const [a, b, c, d] = [p[Math.max(0, i - 1)], p[i], p[i + 1], p[Math.min(p.length - 1, i + 2)]];
    const steps = Math.max(1, Math.round((c.t - b.t) / 8));
    for (let k = 1; k <= steps; k++) {
      const u = k / steps;
      const spline = (key) =>
        0.5 * (2 * b[key] + (c[key] - a[key]) * u + (2 * a[key] - 5 * b[key] + 4 * c[key] - d[key]) * u * u +
          (3 * b[key] - a[key] - 3 * c[key] + d[key]) * u * u * u);
      out.push(k === steps ? c : { x: spline("x"), y: spline("y"), t: b.t + (c.t - b.t) * u });
    }
  }
  return out;
}

// ---- ghost-cursor: the public library, with puppeteer-core ----------------------------------

/**
 * ghost-cursor as a fraudster uses it: createCursor(page) with its random moves on, then
 * cursor.click(selector) (Bezier path, Fitts-law point count, overshoot on long moves, a random
 * point inside the element) with the library's hesitate/waitForClick/moveDelay options. Wheel
 * notches go through the library's cursor.scroll, so they land where its cursor is. The library
 * draws its paths from Math.random: only the rest of the session follows the seed.
 */
async function fillGhostCursor(page, r) {
  const { createCursor } = require("ghost-cursor");
  const who = drawPerson(r);
  const view = page.viewport();
  const start = { x: r.uniform(0.1, 0.6) * view.width, y: r.uniform(0.1, 0.7) * view.height };
  const cursor = createCursor(page, start, true);
  const pointer = {
    wheel: (dy) => cursor.scroll({ y: dy }, { scrollSpeed: 100, scrollDelay: 0 }),
    async click(selector) {
      await wheelIntoView(page, r, who, pointer.wheel, selector);
      await cursor.click(selector, {
        paddingPercentage: r.uniform(20, 60),
        hesitate: Math.min(r.lognormal(who.preClickMedian, 0.4), 900),
        waitForClick: Math.min(r.lognormal(who.dwellMedian, 0.3), 500),
        moveDelay: r.uniform(100, 400),
      });
    },
    idle: async () => {}, // the library's random moves wander on their own while the page is read
  };
  try {
    await fillSurvey(page, r, who, pointer);
  } finally {
    // Random moves stop once the page is gone; they would never stop while flagged as moving.
    cursor.toggleRandomMove(true);
  }
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

/** Each generator's survey filling: (page, r, strokes) -> Promise. */
const FILL = {
  naive: fillNaive,
  stealth: fillNaive,
  humanized: fillHumanized,
  agent: fillAgent,
  "ghost-cursor": fillGhostCursor,
  windmouse: (page, r) => {
    const style = windMouseStyle(r);
    return fillWithPath(page, r, (from, to, size) => windMousePath(r, style, from, to, size));
  },
  perlin: (page, r) => {
    const style = perlinStyle(r);
    return fillWithPath(page, r, (from, to, size) => perlinPath(r, style, from, to, size));
  },
  minjerk: (page, r) => {
    const style = minJerkStyle(r);
    return fillWithPath(page, r, (from, to, size) => minJerkPath(r, style, from, to, size));
  },
  replay: (page, r, strokes) => {
    const style = replayStyle(r, strokes);
    return fillWithPath(page, r, (from, to, size) => replayPath(r, style, from, to, size));
  },
};

/** Makes navigator.webdriver false, as stealth plugins do (an init script in every document). */
function hideWebdriver() {
  Object.defineProperty(Navigator.prototype, "webdriver", { get: () => false });
}

const VIEWPORT_WIDTHS = [1280, 1366, 1440, 1536];
const VIEWPORT_HEIGHTS = [720, 768, 800, 864];
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

/** Debian's Chromium under playwright-core; `open(r)` gives a fresh context and page. */
async function launchPlaywright(generator) {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    // Stealth hides the automation flag as stealth plugins do; naive sessions keep it as shipped.
    args: ["--headless", "--no-sandbox"].concat(generator === "naive" ? [] : ["--disable-blink-features=AutomationControlled"]),
  });
  // The browser's own user agent without the "Headless" tell, as stealth plugins do.
  const probe = await browser.newPage();
  const userAgent = (await probe.evaluate(() => navigator.userAgent)).replace("HeadlessChrome", "Chrome");
  await probe.close();
  const stealthed = generator !== "naive";
  return {
    async open(r) {
      const context = await browser.newContext(
        stealthed ? { userAgent, viewport: { width: r.pick(VIEWPORT_WIDTHS), height: r.pick(VIEWPORT_HEIGHTS) } } : {},
      );
      if (stealthed) await context.addInitScript(hideWebdriver);
      return { page: await context.newPage(), close: () => context.close() };
    },
    close: () => browser.close(),
  };
}

/** Debian's Chromium under puppeteer-core (ghost-cursor's driver), set up as the stealth one. */
async function launchPuppeteer() {
  const puppeteer = require("puppeteer-core");
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    // The flags spelled out as for Playwright; `headless: false` only stops puppeteer adding its own.
    headless: false,
    args: ["--headless", "--no-sandbox", "--disable-blink-features=AutomationControlled"],
  });
  const userAgent = (await browser.userAgent()).replace("HeadlessChrome", "Chrome");
  return {
    async open(r) {
      const context = await browser.createBrowserContext();
      const page = await context.newPage();
      await page.setViewport({ width: r.pick(VIEWPORT_WIDTHS), height: r.pick(VIEWPORT_HEIGHTS) });
      await page.setUserAgent({ userAgent });
      await page.evaluateOnNewDocument(hideWebdriver);
      return { page, close: () => context.close() };
    },
    close: () => browser.close(),
  };
}

async function runSession(driver, args, seed, strokes) {
  const generator = args.generator;
  const reference = referenceFor(generator, seed);
  const r = rng(seed * 7919 + GENERATORS.indexOf(generator));
  const started = Date.now();
  const seconds = () => Math.round((Date.now() - started) / 100) / 10;
  const session = await driver.open(r);
  const page = session.page;
  try {
    await page.goto(`${args.base}/demo/${args.key}?response=${reference}`);
    await FILL[generator](page, r, strokes);
    const done = await page.evaluate(() => {
      const el = document.querySelector("#done");
      return !!el && el.getClientRects().length > 0;
    });
    if (!done) throw new Error("the survey did not reach its end");
    // Past the embed's 2 s batching interval, then leave: pagehide sends the rest.
    await sleep(2300);
    await page.goto("about:blank");
    await sleep(300);
    return { reference, generator, seed, ok: true, seconds: seconds() };
  } catch (error) {
    return { reference, generator, seed, ok: false, seconds: seconds(), error: String(error).slice(0, 300) };
  } finally {
    await session.close();
  }
}

async function main() {
  const args = parseArgs(process.argv);
  const strokes = args.generator === "replay" ? loadStrokes(args.replayTraces) : null;
  const driver = args.generator === "ghost-cursor" ? await launchPuppeteer() : await launchPlaywright(args.generator);
  const queue = args.seedList.slice();
  const workers = Array.from({ length: args.concurrency }, async () => {
    while (queue.length) {
      const seed = queue.shift();
      const result = await runSession(driver, args, seed, strokes);
      process.stdout.write(JSON.stringify(result) + "\n");
    }
  });
  await Promise.all(workers);
  await driver.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
