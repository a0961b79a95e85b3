// Bot generators for the scoring-quality harness: each session is the demo survey filled in by
// real headless Chromium, captured by the real embed and sent to the real collector.
//
//   node bots.js --base URL --key TRACKING_KEY --generator factorial --seeds FROM-TO
//                [--concurrency N] [--replay-traces FILE] [--typing-traces FILE]
//                [--path P] [--typing T] [--pacing C] [--modality M] [--driver D]
//   node bots.js --base URL --key TRACKING_KEY --generator naive|stealth --seeds FROM-TO
//   node bots.js --list-design FROM-TO [--path P] ...   (the factors each seed gets; no browser)
//
// Prints one JSON line per session: {"reference", "generator", "seed", "ok", "seconds", "error"?,
// "factors": {"path", "typing", "pacing", "modality", "driver"}, "details"}. The reference is
// derived from generator and seed, and so are the factor levels and every other draw, so a
// session is reproducible and its label is known without asking the page. Nothing downloads a
// browser: every driver launches Debian's /usr/bin/chromium (or $CHROMIUM), the webdriver one
// through Debian's /usr/bin/chromedriver (or $CHROMEDRIVER).
//
// Generators (docs/evaluation.md describes each):
//   naive      Playwright fill/check/click: webdriver flag and HeadlessChrome user agent as shipped
//   stealth    the same actions, webdriver flag hidden and a desktop Chrome user agent
//   factorial  a factorial design: every session draws one level of each of five factors from its
//              seed, so that no single factor (typing speed, pacing, the pointer, the driver) can
//              tell these bots from people on its own. Every factorial session has the stealth
//              environment (navigator.webdriver false through a patched getter, a Chrome user
//              agent without "Headless").
//
// The factors and their levels:
//   path      the pointer path family: bezier (this project's cubic Bezier humanizer with overshoot
//             and jitter), ghost-cursor (the npm library with puppeteer-core, its own paths and
//             pacing; cdp driver only), windmouse, perlin, minjerk, replay (human TRAIN strokes
//             from --replay-traces, scaled, rotated and time-warped), or none (no pointer: the
//             keyboard and touch modalities, and paste sessions that reach the field by keyboard)
//   typing    the key timing source, as key-down to key-down intervals and holds (the features'
//             measure, and humans.py's): population (humans.py's Typist reimplemented: a person's
//             mean interval ~ N(238.66, 111.60) ms clipped to [100, 900], mean hold
//             ~ N(116.25, 23.88) clipped to [50, 250], lognormal spread per keystroke, 3 % typos
//             corrected with Backspace), replay (one TRAIN person's consecutive recorded intervals
//             and holds from --typing-traces, class-matched where the trace has the class),
//             metronome (Playwright's keyboard.type(text, {delay}) rhythm: hold = delay, then the
//             same delay to the next key; delay 20-200 ms per session) or insert (no keys:
//             Input.insertText). Capitals typed with keys get a Shift 30-120 ms before the key and
//             released 10-60 ms after it, as a person's.
//   pacing    human (lognormal pauses; per-session medians 0.8-2.5 s before a page's first action,
//             0.3-1.2 s between actions, 1-4 s before typing an answer), agent (2-12 s of
//             "thinking" before every action, then the action fast) or fast (a script: 30-300 ms)
//   modality  mouse (a path to every target, press, dwell, release; wheel notches to scroll),
//             keyboard (no pointer at all: Tab / Shift+Tab, Space on checkboxes and radios, arrows
//             in the radio group and on the slider, Enter or Space on buttons), touch (a phone
//             context: taps and swipes through Input.dispatchTouchEvent or W3C touch actions, a
//             soft keyboard's key events) or paste (the mouse or the keyboard reaches the long
//             answer, which is pasted with Control+V from the clipboard: a real, trusted paste
//             event; the short answer is typed)
//   driver    cdp (playwright-core; puppeteer-core for ghost-cursor) or webdriver
//             (selenium-webdriver and Debian's chromedriver: W3C pointer, wheel, key and touch
//             actions; chromedriver's DevTools pass-through only where W3C has no action or
//             setting: insertText, soft-keyboard key events, the webdriver getter patch and a
//             phone's screen). chromedriver runs from a copy whose `cdc_` page globals are
//             renamed, as undetected-chromedriver does, so no driver shows automation globals.
// Levels are balanced across seeds: each factor's level is a permutation of its levels per block
// of consecutive seeds (seeded by factor and block), so every level appears equally often in each
// block; the path is drawn among the moving paths for mouse sessions (ghost-cursor a third of
// the time under cdp, never under webdriver, so every path is about equally frequent).
// Impossible combinations (keyboard or touch with a pointer path, mouse without one,
// ghost-cursor under webdriver) are repaired deterministically by changing as few factors as
// possible (the path first). `--path` and the other factor flags force a level; the reference
// stays that of the seed, so forced and unforced runs of one seed belong in different surveys.
"use strict";

const crypto = require("crypto");
const fs = require("fs");
const path = require("path");

// The survey layouts every recorded session fills, people and automation alike.
const LAYOUTS = JSON.parse(fs.readFileSync(path.join(__dirname, "survey", "layouts.json"), "utf8"));

const GENERATORS = ["naive", "stealth", "factorial", "touch-person"];
// A generator's number is part of its sessions' behaviour seeds: naive and stealth keep the
// numbers they always had, the factorial generator takes one no earlier generator used.
const GENERATOR_NUMBER = { naive: 0, stealth: 1, factorial: 9 };
const FACTORS = {
  path: ["bezier", "ghost-cursor", "windmouse", "perlin", "minjerk", "replay", "none"],
  typing: ["population", "replay", "metronome", "insert"],
  pacing: ["human", "agent", "fast"],
  modality: ["mouse", "keyboard", "touch", "paste"],
  driver: ["cdp", "webdriver", "xtest"],
};
const FACTOR_NAMES = Object.keys(FACTORS);
const MOVING_PATHS = FACTORS.path.filter((level) => level !== "none");
// The path draw per driver. ghost-cursor needs puppeteer, so webdriver and XTEST sessions draw
// among the other five paths; cdp sessions (a quarter of all) draw ghost-cursor two times in three
// (ten of fifteen entries, the other paths one each), so that every path is drawn about equally
// often over the three drivers.
const PATH_DRAW = {
  cdp: MOVING_PATHS.flatMap((level) => Array(level === "ghost-cursor" ? 10 : 1).fill(level)),
  webdriver: MOVING_PATHS.filter((level) => level !== "ghost-cursor"),
  xtest: MOVING_PATHS.filter((level) => level !== "ghost-cursor"),
};
// The input path is the first draw: half the sessions go through the operating system (XTEST,
// the path people's input takes), half through DevTools (cdp or webdriver, a quarter each).
const DRIVER_DRAW = ["cdp", "webdriver", "xtest", "xtest"];
// What the operating system's keyboard and mouse cannot do: no touch screen on the X server, no
// insertText (keys only). Every other level is drawn for XTEST sessions as for DevTools ones.
const XTEST_LEVELS = {
  typing: FACTORS.typing.filter((level) => level !== "insert"),
  modality: FACTORS.modality.filter((level) => level !== "touch"),
};
// What the library generators are, in the factorial's terms: Playwright's fill is insertText;
// through the operating system (`--driver xtest`), PyAutoGUI's or xdotool's way: the pointer
// jumps to a control and clicks, keys go 12 ms apart.
const LIBRARY_FACTORS = {
  cdp: { path: "none", typing: "insert", pacing: "fast", modality: "library", driver: "cdp" },
  xtest: { path: "jump", typing: "xdotool", pacing: "fast", modality: "library", driver: "xtest" },
};

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

/** Seeds from "FROM-TO", "N" or a comma-separated list of either. */
function seedRange(text) {
  const seeds = [];
  for (const part of String(text).split(",")) {
    const [from, to] = part.split("-").map(Number);
    if (!Number.isInteger(from) || (to !== undefined && !Number.isInteger(to))) throw new Error(`bad seed range ${text}`);
    for (let seed = from; seed <= (to === undefined ? from : to); seed++) seeds.push(seed);
  }
  return seeds;
}

function parseArgs(argv) {
  const args = { concurrency: 3 };
  for (let i = 2; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || argv[i + 1] === undefined) throw new Error(`expected --name value, got ${argv[i]}`);
    const name = argv[i].replace(/^--/, "");
    args[name.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = argv[i + 1];
  }
  args.forced = {};
  for (const factor of FACTOR_NAMES) {
    if (args[factor] === undefined) continue;
    if (!FACTORS[factor].includes(args[factor])) {
      throw new Error(`unknown ${factor} level ${args[factor]} (one of ${FACTORS[factor].join(", ")})`);
    }
    args.forced[factor] = args[factor];
  }
  if (args.listDesign) {
    args.generator = args.generator || "factorial";
    args.seedList = seedRange(args.listDesign);
    return args;
  }
  for (const required of args.connect ? ["generator", "seeds"] : ["base", "key", "generator", "seeds"]) {
    if (!args[required]) throw new Error(`--${required} is required`);
  }
  if (!GENERATORS.includes(args.generator)) throw new Error(`unknown generator ${args.generator}`);
  const libraryDriver = Object.keys(args.forced).length === 1 && ["cdp", "xtest"].includes(args.forced.driver);
  if (Object.keys(args.forced).length && args.generator !== "factorial" && !(libraryDriver && ["naive", "stealth"].includes(args.generator))) {
    throw new Error("factor levels can only be forced for the factorial generator (naive and stealth take --driver cdp|xtest)");
  }
  args.seedList = seedRange(args.seeds);
  args.concurrency = Math.max(1, Number(args.concurrency));
  if (args.connect) {
    for (const required of ["display", "window", "url"]) {
      if (!args[required]) throw new Error(`--connect needs --${required}`);
    }
    if (args.seedList.length !== 1) throw new Error("--connect runs one session: give one seed");
    const [x, y, width, height] = args.window.split(",").map(Number);
    args.window = { x, y, width, height };
  }
  args.layout = args.layout || "demo";
  if (!LAYOUTS.layouts[args.layout]) throw new Error(`unknown layout ${args.layout}`);
  if (args.layout !== "demo" && !args.pages && !args.url) throw new Error("--layout needs --pages (the harness's page server)");
  // A display makes every browser headed, in a window of its own on that (virtual) screen, as
  // the replayed people's are (lab/replay/browser.py).
  if (args.display) process.env.DISPLAY = args.display;
  return args;
}

/** The survey page of a session: the harness's page server's layout, or the demo page. */
function pageUrl(args, reference) {
  if (args.url) return args.url;
  if (args.pages) return `${args.pages}/s/${args.layout}?key=${args.key}&response=${reference}`;
  return `${args.base}/demo/${args.key}?response=${reference}`;
}

/** The reference of a session whose page the harness gave (`--url ...&response=UUID`). */
function referenceOfUrl(args) {
  return args.url ? new URL(args.url).searchParams.get("response") : null;
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
const clamp = (value, low, high) => Math.min(high, Math.max(low, value));
const hash32 = (text) => crypto.createHash("sha1").update(text).digest().readUInt32BE(0);

// ---- the design: which levels a seed gets ----------------------------------------------------

/**
 * A balanced draw: seeds are cut into blocks of `levels.length` consecutive seeds (from seed 1),
 * and each block gets its own permutation of the levels (seeded by the factor's name and the
 * block), so every level appears once per block, and the factors' permutations are independent.
 */
function balancedPick(seed, name, levels) {
  const n = levels.length;
  if (n === 1) return levels[0];
  const k = seed - 1;
  const block = Math.floor(k / n);
  const r = rng(hash32(`telltale-quality/design/${name}/${levels.join(",")}/${block}`));
  const order = levels.slice();
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(r.next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order[k - block * n];
}

/** Whether a combination of levels can be run at all. */
function possible(d) {
  if ((d.modality === "keyboard" || d.modality === "touch") && d.path !== "none") return false;
  if (d.modality === "mouse" && d.path === "none") return false;
  if (d.path === "ghost-cursor" && d.driver !== "cdp") return false;
  if (d.driver === "xtest" && (d.modality === "touch" || d.typing === "insert")) return false;
  return true;
}

/**
 * The factor levels of a factorial seed. Typing, pacing, modality and driver are balanced draws
 * (restricted to the forced level where one is forced); the path follows the modality: none for
 * keyboard and touch, a balanced draw among the moving paths for mouse, and for paste one or the
 * other (a coin per seed: the mouse or the keyboard reaches the field). An impossible
 * combination is repaired by the cheapest change of unforced factors (path before driver before
 * modality before typing before pacing), ties broken by a hash of the seed.
 */
function designFor(seed, forced = {}) {
  const levels = (factor) => (forced[factor] ? [forced[factor]] : FACTORS[factor]);
  const drawn = {};
  drawn.driver = forced.driver || balancedPick(seed, "driver", DRIVER_DRAW);
  // Each input path draws its own balanced levels among those it can do.
  const among = (factor) =>
    forced[factor] ? [forced[factor]] : drawn.driver === "xtest" && XTEST_LEVELS[factor] ? XTEST_LEVELS[factor] : FACTORS[factor];
  for (const factor of ["typing", "modality"]) {
    const list = among(factor);
    drawn[factor] = balancedPick(seed, list === FACTORS[factor] ? factor : `${factor}/${drawn.driver}`, list);
  }
  drawn.pacing = balancedPick(seed, "pacing", levels("pacing"));
  if (forced.path) drawn.path = forced.path;
  else if (drawn.modality === "keyboard" || drawn.modality === "touch") drawn.path = "none";
  else if (drawn.modality === "paste" && hash32(`telltale-quality/design/reach/${seed}`) % 2 === 0) drawn.path = "none";
  else drawn.path = balancedPick(seed, `path/${drawn.driver}`, PATH_DRAW[drawn.driver]);
  const ordered = (d) => Object.fromEntries(FACTOR_NAMES.map((factor) => [factor, d[factor]]));
  if (possible(drawn)) return ordered(drawn);
  const weight = { path: 1, driver: 2, modality: 4, typing: 8, pacing: 16 };
  let best = null;
  const visit = (index, combo) => {
    if (index === FACTOR_NAMES.length) {
      if (!possible(combo)) return;
      const cost = FACTOR_NAMES.reduce((sum, f) => sum + (combo[f] === drawn[f] ? 0 : weight[f]), 0);
      const tie = hash32(`telltale-quality/design/repair/${seed}/${JSON.stringify(ordered(combo))}`);
      if (!best || cost < best.cost || (cost === best.cost && tie < best.tie)) best = { cost, tie, combo: ordered(combo) };
      return;
    }
    const factor = FACTOR_NAMES[index];
    for (const level of levels(factor)) visit(index + 1, { ...combo, [factor]: level });
  };
  visit(0, {});
  if (!best) throw new Error(`no possible combination with the forced levels ${JSON.stringify(forced)}`);
  return best.combo;
}

/**
 * A seed's factors on a layout: a phone layout is filled by touch (the modality forced), a
 * desktop layout by touch only when asked (`--modality touch`, an emulated phone on a desktop
 * page); otherwise a drawn touch design is redrawn without it.
 */
function factorsFor(generator, seed, forced, layout = "demo") {
  if (generator !== "factorial") return { ...LIBRARY_FACTORS[forced.driver === "xtest" ? "xtest" : "cdp"] };
  const phone = LAYOUTS.layouts[layout].device === "phone";
  if (phone) return designFor(seed, { ...forced, modality: "touch" });
  const drawn = designFor(seed, forced);
  if (drawn.modality !== "touch" || forced.modality === "touch") return drawn;
  // Another modality, the first possible with the forced levels in an order drawn by the seed.
  const others = FACTORS.modality.filter((m) => m !== "touch");
  const first = hash32(`telltale-quality/desktop/${seed}`) % others.length;
  for (let k = 0; k < others.length; k++) {
    try {
      return designFor(seed, { ...forced, modality: others[(first + k) % others.length] });
    } catch (error) {
      if (k === others.length - 1) throw error;
    }
  }
  throw new Error("unreachable");
}

// ---- naive and stealth: the automation library's own actions --------------------------------

async function fillNaive(page, r, layout) {
  for (const actions of drawPlan(r, layout)) {
    for (const action of actions) {
      if (action.do === "radio" || action.do === "checkbox") await page.check(`input[name="${action.name}"][value="${action.value}"]`);
      else if (action.do === "text") await page.fill(action.selector, action.text);
      else if (action.do === "range") await page.fill(action.selector, String(action.value));
      else await page.click(action.selector);
    }
  }
}

/**
 * The library generators through the operating system, as a script built on PyAutoGUI or
 * xdotool fills a form (the page read over DevTools): the pointer jumps to each control's centre
 * (a slider: the value's place) and clicks, a text goes in as keys 12 ms apart (xdotool type's
 * default delay; a capital with Shift around it), the wheel scrolls a control into view. No pause
 * between actions (naive), or a short one (stealth: 100-400 ms, as such scripts add).
 */
async function fillLibraryXtest(io, r, layout, stealthy) {
  await io.rest(); // where the page sits on the screen
  const quick = { notchMedian: 8 };
  for (const actions of drawPlan(r, layout)) {
    for (const action of actions) {
      if (stealthy) await sleep(r.uniform(100, 400));
      const selector = action.selector || `input[name="${action.name}"][value="${action.value}"]`;
      const b = await wheelIntoView(io, r, quick, (dy) => io.wheel(dy), selector);
      const p = action.do === "range" ? sliderPoint(action.value)(r, b) : { x: b.x + b.width / 2, y: b.y + b.height / 2 };
      await io.playPath([{ x: p.x, y: p.y, t: 0 }]);
      await io.press(0, 1);
      if (action.do === "text") await io.keys(xdotoolKeys(action.text));
    }
  }
}

/** xdotool type's key events: each key down and up at once, the next 12 ms later. */
function xdotoolKeys(text) {
  const events = [];
  let t = 0;
  for (const ch of text) {
    const capital = ch.length === 1 && ch !== ch.toLowerCase();
    if (capital) events.push({ t, type: "down", key: "Shift" });
    events.push({ t: t + 0.5, type: "down", key: ch }, { t: t + 1, type: "up", key: ch });
    if (capital) events.push({ t: t + 1.5, type: "up", key: "Shift" });
    t += 12;
  }
  return events;
}

// ---- what every factorial session shares -----------------------------------------------------

/**
 * One person's motor habits, drawn once per session and the same under every pacing, so that
 * pacing alone sets the pauses between actions.
 */
function drawMotor(r) {
  return {
    preClickMedian: r.uniform(90, 220), // from arriving on a target to pressing, ms
    dwellMedian: r.uniform(70, 130), // mouse button held, ms
    notchMedian: r.uniform(45, 90), // between the wheel notches of one burst, ms
    keyHoldMedian: r.uniform(70, 130), // Tab, arrows, Space, Enter held, ms
    slip: r.uniform(0, 0.15), // chance of tabbing one field too far, then back
    activate: r.next() < 0.7 ? "Enter" : " ", // the key that presses a focused button
    tapDwellMedian: r.uniform(60, 140), // a finger on the glass, ms (40-180 per tap)
    fingerBias: { x: r.uniform(-3, 3), y: r.uniform(0, 6) }, // taps land a little low
  };
}

/** A lognormal pause, capped so that no session runs away. */
const pause = (r, median, sigma) => sleep(Math.min(r.lognormal(median, sigma), 4 * median));

/** The pauses between actions, by the pacing level. `navGap` is a number: inside key schedules. */
function drawPacer(r, level) {
  if (level === "human") {
    const medians = { page: r.uniform(800, 2500), between: r.uniform(300, 1200), typing: r.uniform(1000, 4000), nav: r.uniform(180, 450) };
    return {
      level,
      details: Object.fromEntries(Object.entries(medians).map(([k, v]) => [k, Math.round(v)])),
      pageStart: () => pause(r, medians.page, 0.4),
      between: () => pause(r, medians.between, 0.4),
      beforeTyping: () => pause(r, medians.typing, 0.4),
      navGap: () => Math.min(r.lognormal(medians.nav, 0.35), 4 * medians.nav),
    };
  }
  if (level === "agent") {
    const think = () => sleep(r.uniform(2000, 12000));
    return { level, details: {}, pageStart: think, between: think, beforeTyping: think, navGap: () => r.uniform(30, 300) };
  }
  const quick = () => sleep(r.uniform(30, 300));
  return { level, details: {}, pageStart: quick, between: quick, beforeTyping: quick, navGap: () => r.uniform(30, 300) };
}

/**
 * The element's box in viewport coordinates, with the viewport's size, once it is displayed (its
 * label's box when `label` and the element sits in one). Runs in the page through any driver.
 */
async function locate(io, selector, label = false) {
  const until = Date.now() + 10000;
  for (;;) {
    const found = await io.evaluate(
      ({ sel, useLabel }) => {
        const element = document.querySelector(sel);
        const target = (useLabel && element && element.closest("label")) || element;
        const b = target && target.getBoundingClientRect();
        if (!b || !b.width || !b.height) return null;
        const page = document.scrollingElement || document.documentElement;
        return {
          x: b.left, y: b.top, width: b.width, height: b.height, viewWidth: innerWidth, viewHeight: innerHeight,
          scrollY: page.scrollTop, scrollMax: page.scrollHeight - innerHeight,
        };
      },
      { sel: selector, useLabel: label },
    );
    if (found) return found;
    if (Date.now() > until) throw new Error(`${selector} was not displayed`);
    await sleep(50);
  }
}

/** Wheel notches of 100 px, in bursts, until the element is wholly in view; returns its box. */
async function wheelIntoView(io, r, who, wheel, selector, label = false) {
  for (let burst = 0; burst < 30; burst++) {
    const b = await locate(io, selector, label);
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

/** Fitts-law movement time (Shannon form) for a distance and a target size, in ms. */
const fitts = (a, b, distance, size) => a + b * Math.log2(1 + distance / Math.max(size, 4));

// ---- bezier: this project's own humanizer ------------------------------------------------------

/**
 * A cubic Bezier curve from the cursor to the target with random control points, an ease in-out
 * over a Fitts-like lognormal duration, 0.6 px jitter, and an overshoot (3-10 % past the target,
 * then back in five steps) 30 % of the time: the path of the former `humanized` generator.
 */
function bezierPath(r, from, to) {
  const distance = Math.hypot(to.x - from.x, to.y - from.y);
  if (distance < 3) return [{ x: to.x, y: to.y, t: 16 }];
  const duration = r.lognormal(250 + 110 * Math.log2(1 + distance / 20), 0.25);
  const bend = () => r.normal() * Math.min(120, distance * 0.35);
  const c1 = { x: from.x + (to.x - from.x) * 0.3 + bend(), y: from.y + (to.y - from.y) * 0.3 + bend() };
  const c2 = { x: from.x + (to.x - from.x) * 0.7 + bend(), y: from.y + (to.y - from.y) * 0.7 + bend() };
  const overshoot = r.next() < 0.3 ? 1 + r.uniform(0.03, 0.1) : 1;
  const end = { x: from.x + (to.x - from.x) * overshoot, y: from.y + (to.y - from.y) * overshoot };
  const steps = Math.max(4, Math.round(duration / 16));
  const points = [];
  let t = 0;
  for (let i = 1; i <= steps; i++) {
    const linear = i / steps;
    const e = linear < 0.5 ? 2 * linear * linear : 1 - Math.pow(-2 * linear + 2, 2) / 2;
    const u = 1 - e;
    const jitter = i < steps || overshoot > 1 ? 0.6 : 0;
    t = Math.max(t + 1, (duration * i) / steps + r.normal() * 3);
    points.push({
      x: u * u * u * from.x + 3 * u * u * e * c1.x + 3 * u * e * e * c2.x + e * e * e * end.x + jitter * r.normal(),
      y: u * u * u * from.y + 3 * u * u * e * c1.y + 3 * u * e * e * c2.y + e * e * e * end.y + jitter * r.normal(),
      t,
    });
  }
  if (overshoot > 1) {
    t += r.lognormal(80, 0.3);
    for (let i = 1; i <= 5; i++) {
      points.push({ x: end.x + ((to.x - end.x) * i) / 5, y: end.y + ((to.y - end.y) * i) / 5, t });
      t += r.lognormal(16, 0.2);
    }
  }
  points[points.length - 1] = { ...points[points.length - 1], x: to.x, y: to.y };
  return points;
}

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

// ---- typing: key timing sources ----------------------------------------------------------------

// Dhakal, Feit, Kristensson and Oulasvirta (CHI 2018) as humans.py uses them: a person's mean
// key-down to key-down interval and mean hold; the clips, the per-keystroke log-sigmas and the
// typo rate are humans.py's (Typist, Timeline.typing).
const IKI_MEAN_MS = 238.66;
const IKI_SD_MS = 111.6;
const HOLD_MEAN_MS = 116.25;
const HOLD_SD_MS = 23.88;
const IKI_SIGMA = 0.45;
const HOLD_SIGMA = 0.25;
const TYPO_RATE = 0.03; // a wrong neighbouring letter, then Backspace, then the right one
const KEYBOARD_ROWS = ["qwertyuiop", "asdfghjkl", "zxcvbnm"];

/** The embed's key class of a typed character. */
function keyClassOf(ch) {
  if (ch === " ") return "space";
  if (ch >= "0" && ch <= "9") return "digit";
  if (ch === "\n") return "enter";
  return "char";
}

/** A letter next to `ch` on its keyboard row (the usual slip of a finger). */
function neighbour(r, ch) {
  const lower = ch.toLowerCase();
  const row = KEYBOARD_ROWS.find((keys) => keys.includes(lower));
  if (!row) return lower;
  const index = row.indexOf(lower);
  const choices = [row[index - 1], row[index + 1]].filter(Boolean);
  return r.pick(choices);
}

/**
 * The session's typist: `strokes(text)` gives the keys that type `text` as [{key, down, hold}]
 * (ms from the first key-down), or null for `insert`. Drawn from the typing level.
 */
function drawTypist(r, level, resources) {
  if (level === "population") {
    const iki = clamp(IKI_MEAN_MS + IKI_SD_MS * r.normal(), 100, 900);
    const holdMean = clamp(HOLD_MEAN_MS + HOLD_SD_MS * r.normal(), 50, 250);
    // Lognormals whose means are the person's means, as humans.py's Typist draws them.
    const flight = () => iki * Math.exp(IKI_SIGMA * r.normal() - (IKI_SIGMA * IKI_SIGMA) / 2);
    const hold = () => holdMean * Math.exp(HOLD_SIGMA * r.normal() - (HOLD_SIGMA * HOLD_SIGMA) / 2);
    return {
      level,
      details: { ikiMeanMs: Math.round(iki), holdMeanMs: Math.round(holdMean) },
      strokes(text) {
        const out = [];
        let t = 0;
        for (const ch of text) {
          if (/[a-z]/i.test(ch) && r.next() < TYPO_RATE) {
            out.push({ key: neighbour(r, ch), down: t, hold: hold() });
            t += flight();
            out.push({ key: "Backspace", down: t, hold: hold() });
            t += flight();
          }
          out.push({ key: ch, down: t, hold: hold() });
          t += flight();
        }
        return out;
      },
    };
  }
  if (level === "replay") {
    const trace = r.pick(resources.typingTraces());
    const keys = trace.keys;
    const byClass = {};
    keys.forEach(([, , keyClass], index) => {
      if (index > 0) (byClass[keyClass] = byClass[keyClass] || []).push(index);
    });
    const intervals = keys.slice(1).map((k, i) => k[0] - keys[i][0]).sort((a, b) => a - b);
    const medianInterval = intervals[Math.floor(intervals.length / 2)] || 200;
    let cursor = r.int(1, Math.max(1, keys.length - 1));
    return {
      level,
      details: { person: trace.person },
      strokes(text) {
        const out = [];
        let t = 0;
        for (const ch of text) {
          if (cursor >= keys.length) cursor = 1;
          let index = cursor;
          const wanted = keyClassOf(ch);
          if (keys[index][2] !== wanted && byClass[wanted]) {
            // The nearest recorded key of the class from here on (or the first one): its own
            // interval from the key before it, and its hold.
            index = byClass[wanted].find((i) => i >= cursor) || byClass[wanted][0];
          }
          const interval = index > 0 ? keys[index][0] - keys[index - 1][0] : medianInterval;
          if (out.length) t += clamp(interval, 1, 5000);
          out.push({ key: ch, down: t, hold: Math.max(5, keys[index][1] - keys[index][0]) });
          cursor++;
        }
        return out;
      },
    };
  }
  if (level === "metronome") {
    const delay = r.uniform(20, 200);
    return {
      level,
      details: { delayMs: Math.round(delay) },
      // keyboard.type(text, {delay}): each key down, `delay`, up, `delay`, the next key down.
      strokes: (text) => Array.from(text, (key, i) => ({ key, down: 2 * delay * i, hold: delay })),
    };
  }
  return { level, details: {}, strokes: () => null };
}

/** Whether two key names are one physical key (a capital and its small letter are). */
const sameKey = (a, b) => a.toLowerCase() === b.toLowerCase();

/**
 * Key events [{t, type: "down"|"up", key}] from strokes: a key never goes down again while it is
 * held (that would be an auto-repeat), and with `shift` every capital gets a Shift pressed
 * 30-120 ms before it (after the previous key's press) and released 10-60 ms after it (before the
 * next key's press); Shifts of consecutive capitals merge into one.
 */
function keyEvents(r, strokes, { shift = true } = {}) {
  for (let i = 0; i < strokes.length; i++) {
    for (let j = i + 1; j < strokes.length && strokes[j].down < strokes[i].down + strokes[i].hold; j++) {
      if (sameKey(strokes[j].key, strokes[i].key)) strokes[i].hold = Math.max(3, strokes[j].down - strokes[i].down - 3);
    }
  }
  const events = [];
  const shifts = [];
  strokes.forEach((s, i) => {
    events.push({ t: s.down, type: "down", key: s.key }, { t: s.down + s.hold, type: "up", key: s.key });
    if (!shift || s.key.length !== 1 || s.key === s.key.toLowerCase()) return;
    const previous = i > 0 ? strokes[i - 1].down : -Infinity;
    const next = i + 1 < strokes.length ? strokes[i + 1].down : Infinity;
    let down = s.down - r.uniform(30, 120);
    if (down <= previous + 2) down = previous + (s.down - previous) * r.uniform(0.3, 0.7);
    const release = s.down + s.hold;
    let up = release + r.uniform(10, 60);
    if (up >= next) up = r.uniform(release < next ? release : s.down + 1, next);
    const last = shifts[shifts.length - 1];
    if (last && down <= last.up) last.up = Math.max(last.up, up);
    else shifts.push({ down, up });
  });
  for (const s of shifts) events.push({ t: s.down, type: "down", key: "Shift" }, { t: s.up, type: "up", key: "Shift" });
  // In time order; at one time a release before a press.
  events.sort((a, b) => a.t - b.t || (a.type === "up" ? -1 : 1) - (b.type === "up" ? -1 : 1));
  const start = Math.min(0, ...events.map((e) => e.t));
  return events.map((e) => ({ ...e, t: e.t - start }));
}

/**
 * A phone's soft keyboard: each character is a key-down of key "Unidentified" (keyCode 229), the
 * text inserted, and a key-up of "Unidentified", as Chrome on Android reports an IME's input;
 * Backspace stays a real key, capitals need no Shift key.
 */
function softKeyEvents(strokes) {
  const events = [];
  for (const s of strokes) {
    if (s.key === "Backspace") {
      events.push({ t: s.down, type: "down", key: "Backspace" }, { t: s.down + s.hold, type: "up", key: "Backspace" });
    } else {
      events.push({ t: s.down, type: "soft-down", text: s.key }, { t: s.down + s.hold, type: "soft-up" });
    }
  }
  return events.sort((a, b) => a.t - b.t || (a.type.endsWith("up") ? -1 : 1) - (b.type.endsWith("up") ? -1 : 1));
}

/** One key pressed after `gap` ms (Shift held around it when `shifted`). */
function pressEvents(r, motor, key, gap, shifted = false) {
  const hold = clamp(r.lognormal(motor.keyHoldMedian, 0.25), 30, 400);
  if (!shifted) return [{ t: gap, type: "down", key }, { t: gap + hold, type: "up", key }];
  const lead = r.uniform(30, 120);
  return [
    { t: gap, type: "down", key: "Shift" },
    { t: gap + lead, type: "down", key },
    { t: gap + lead + hold, type: "up", key },
    { t: gap + lead + hold + r.uniform(10, 60), type: "up", key: "Shift" },
  ];
}

/** Control+V as a person presses it. */
function pasteEvents(r, motor) {
  const lead = r.uniform(60, 200);
  const hold = clamp(r.lognormal(motor.keyHoldMedian, 0.25), 30, 400);
  return [
    { t: 0, type: "down", key: "Control" },
    { t: lead, type: "down", key: "v" },
    { t: lead + hold, type: "up", key: "v" },
    { t: lead + hold + r.uniform(20, 120), type: "up", key: "Control" },
  ];
}

/** Human TRAIN typing for the replay level: [{person, keys: [[down_ms, up_ms, key_class], ...]}]. */
function loadTypingTraces(path) {
  if (!path) throw new Error("the replay typing level needs --typing-traces");
  const traces = JSON.parse(fs.readFileSync(path, "utf8")).filter((trace) => trace.keys && trace.keys.length >= 12);
  if (!traces.length) throw new Error(`no typing traces in ${path}`);
  return traces;
}

/** Human TRAIN strokes for the replay path: a JSON array of [[t, x, y], ...] strokes. */
function loadStrokes(path) {
  if (!path) throw new Error("the replay path needs --replay-traces");
  const strokes = JSON.parse(fs.readFileSync(path, "utf8"))
    .map((stroke) => stroke.map(([t, x, y]) => ({ t, x, y })))
    .filter((stroke) => stroke.length >= 5);
  if (!strokes.length) throw new Error(`no strokes in ${path}`);
  return strokes;
}

// ---- drivers: one small input interface over three automation stacks --------------------------
//
// Every driver gives: goto(url), evaluate(fn, arg...), keys(events) (a timed schedule of key
// downs and ups, or soft-keyboard inputs), insertText(text), setClipboard(text), close(); the
// pointer drivers also playPath(points) (timed moves), press(preMs, dwellMs), wheel(dy); the touch
// drivers tap(x, y, dwellMs, contact) and swipe(points, contact).

/** Makes navigator.webdriver false, as stealth plugins do (an init script in every document). */
function hideWebdriver() {
  Object.defineProperty(Navigator.prototype, "webdriver", { get: () => false });
}

const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const CHROMEDRIVER = process.env.CHROMEDRIVER || "/usr/bin/chromedriver";
const VIEWPORT_WIDTHS = [1280, 1366, 1440, 1536];
const VIEWPORT_HEIGHTS = [720, 768, 800, 864];
// Phones of common CSS sizes and pixel ratios.
const PHONES = [
  { width: 390, height: 844, ratio: 3 },
  { width: 412, height: 915, ratio: 2.625 },
  { width: 393, height: 873, ratio: 2.75 },
  { width: 360, height: 800, ratio: 3 },
];

/** The browser's major version, for user agents that match it. */
let chromeMajor = null;
function chromiumMajor() {
  if (chromeMajor === null) {
    const { execFileSync } = require("child_process");
    const text = execFileSync(CHROMIUM, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    chromeMajor = (text.match(/(\d+)\.\d+\.\d+\.\d+/) || [null, "120"])[1];
  }
  return chromeMajor;
}
/** Chrome's reduced user agents (what Chrome sends since version 110), without "Headless". */
const desktopAgent = () => `Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${chromiumMajor()}.0.0.0 Safari/537.36`;
const phoneAgent = () => `Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${chromiumMajor()}.0.0.0 Mobile Safari/537.36`;

// Headed: the virtual screen and the windows drawn on it, as lab/replay/browser.py
// draws them for the replayed people (outer window sizes; the page gets what the frame leaves).
const SCREEN = { width: 1920, height: 1080 };
const WINDOW_SIZES = [[1280, 800], [1366, 768], [1440, 900], [1536, 864], [1600, 1000], [1280, 1024]];
const headed = () => !!process.env.DISPLAY;

/** The session's screen: a desktop window or a phone. */
function drawScreen(r, factors, args = {}) {
  if (args.connect) {
    // The harness drew the window (the same sizes for every session, lab/replay/browser.py); a
    // phone is emulated inside it.
    if (factors.modality !== "touch") return { phone: false, width: args.window.width, height: args.window.height, ratio: 1, userAgent: null, window: args.window };
    const phone = r.pick(PHONES);
    return { phone: true, width: phone.width, height: phone.height, ratio: phone.ratio, userAgent: phoneAgent(), window: args.window };
  }
  if (factors.modality === "touch") {
    const phone = r.pick(PHONES);
    return { phone: true, width: phone.width, height: phone.height, ratio: phone.ratio, userAgent: phoneAgent(), window: headed() ? { x: r.int(0, 400), y: r.int(0, 100), width: 480, height: 980 } : null };
  }
  if (headed()) {
    const [width, height] = r.pick(WINDOW_SIZES);
    const window = { x: r.int(0, SCREEN.width - width), y: r.int(0, SCREEN.height - height), width, height };
    return { phone: false, width, height, ratio: 1, userAgent: null, window };
  }
  return { phone: false, width: r.pick(VIEWPORT_WIDTHS), height: r.pick(VIEWPORT_HEIGHTS), ratio: 1, userAgent: desktopAgent() };
}

/** Chromium's flags for a session's window: headed on the display, or headless. */
function windowArgs(screen) {
  if (!screen || !screen.window) return ["--headless"];
  const w = screen.window;
  return [`--window-position=${w.x},${w.y}`, `--window-size=${w.width},${w.height}`];
}

const SOFT_KEY = { key: "Unidentified", code: "", windowsVirtualKeyCode: 229, nativeVirtualKeyCode: 229 };

/** Plays key events in real time: `send(event)` dispatches one. */
async function playKeys(events, send) {
  const start = Date.now();
  for (const event of events) {
    await sleep(start + event.t - Date.now());
    await send(event);
  }
}

/**
 * Dispatches a timed path ([{x, y, t}], t in ms from its start) in real time. A dispatched move
 * returns only once the page has handled it (about one per frame in headless Chromium), so when
 * dispatching lags behind the plan, the points already overdue are skipped, as a browser
 * coalesces a mouse's reports to one per frame; the path keeps its planned timing either way.
 */
async function playTimed(points, move) {
  const start = Date.now();
  for (let next = 0; next < points.length; next++) {
    await sleep(start + points[next].t - Date.now());
    const elapsed = Date.now() - start;
    while (next + 1 < points.length && points[next + 1].t <= elapsed) next++;
    await move(points[next]);
  }
}

/** Touch points for Input.dispatchTouchEvent: CDP's defaults (radius 1, force 1) without a contact. */
const touchPoint = (x, y, contact) => ({ x, y, id: 1, ...(contact || {}) });

/** Playwright's page (the cdp driver), with a DevTools session for touch and soft keys. */
async function playwrightDriver(context, page, screen, attached = false) {
  const cdp = await context.newCDPSession(page);
  if (screen.phone && attached) {
    // The harness's window is a desktop one: the phone is emulated on the page, before it loads.
    await cdp.send("Emulation.setDeviceMetricsOverride", {
      width: screen.width, height: screen.height, deviceScaleFactor: screen.ratio, mobile: true,
      screenWidth: screen.width, screenHeight: screen.height,
    });
    await cdp.send("Emulation.setUserAgentOverride", { userAgent: screen.userAgent });
  }
  if (screen.phone) await cdp.send("Emulation.setTouchEmulationEnabled", { enabled: true, maxTouchPoints: 5 });
  return {
    name: "playwright",
    page,
    // Attached to a page that shows the survey already (the harness opened it), nothing to do.
    goto: async (url) => {
      if (attached && page.url() === url) return page.waitForLoadState("load");
      return page.goto(url);
    },
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    playPath: (points) => playTimed(points, (p) => page.mouse.move(p.x, p.y)),
    async press(preMs, dwellMs) {
      await sleep(preMs);
      await page.mouse.down();
      await sleep(dwellMs);
      await page.mouse.up();
    },
    wheel: (dy) => page.mouse.wheel(0, dy),
    keys: (events) =>
      playKeys(events, async (e) => {
        if (e.type === "down") await page.keyboard.down(e.key);
        else if (e.type === "up") await page.keyboard.up(e.key);
        else if (e.type === "soft-down") {
          await cdp.send("Input.dispatchKeyEvent", { type: "rawKeyDown", ...SOFT_KEY });
          await cdp.send("Input.insertText", { text: e.text });
        } else await cdp.send("Input.dispatchKeyEvent", { type: "keyUp", ...SOFT_KEY });
      }),
    insertText: (text) => page.keyboard.insertText(text),
    async tap(x, y, dwellMs, contact) {
      await cdp.send("Input.dispatchTouchEvent", { type: "touchStart", touchPoints: [touchPoint(x, y, contact)] });
      await sleep(dwellMs);
      await cdp.send("Input.dispatchTouchEvent", { type: "touchEnd", touchPoints: [] });
    },
    async swipe(points, contact) {
      await cdp.send("Input.dispatchTouchEvent", { type: "touchStart", touchPoints: [touchPoint(points[0].x, points[0].y, contact)] });
      await playTimed(points.slice(1), (p) =>
        cdp.send("Input.dispatchTouchEvent", { type: "touchMove", touchPoints: [touchPoint(p.x, p.y, contact)] }),
      );
      await cdp.send("Input.dispatchTouchEvent", { type: "touchEnd", touchPoints: [] });
    },
    setClipboard: (text) => page.evaluate((t) => navigator.clipboard.writeText(t), text),
    close: () => context.close(),
  };
}

/** Puppeteer's page (the cdp driver of ghost-cursor sessions); the library moves the pointer. */
function puppeteerDriver(context, page) {
  return {
    name: "puppeteer",
    page,
    goto: (url) => page.goto(url),
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    keys: (events) => playKeys(events, (e) => (e.type === "down" ? page.keyboard.down(e.key) : page.keyboard.up(e.key))),
    insertText: (text) => page.keyboard.sendCharacter(text), // Input.insertText
    async setClipboard(text) {
      const origin = new URL(page.url()).origin;
      await context.overridePermissions(origin, ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);
      await page.evaluate((t) => navigator.clipboard.writeText(t), text);
    },
    close: () => context.close(),
  };
}

/**
 * Debian's chromedriver with the `cdc_` prefix of the globals it leaves in every page it runs a
 * script in renamed (bytes of the same length), as undetected-chromedriver patches it: the
 * stealth environment of a Selenium user. The copy lives in the temporary folder, one per
 * chromedriver build.
 */
function stealthChromedriver() {
  const os = require("os");
  const path = require("path");
  const stat = fs.statSync(CHROMEDRIVER);
  const target = path.join(os.tmpdir(), `telltale-quality-chromedriver-${stat.size}-${Math.round(stat.mtimeMs)}`);
  if (fs.existsSync(target)) return target;
  const binary = fs.readFileSync(CHROMEDRIVER);
  const alnum = (byte) => (byte >= 48 && byte <= 57) || (byte >= 65 && byte <= 90) || (byte >= 97 && byte <= 122);
  let renamed = 0;
  for (let at = binary.indexOf("cdc_"); at >= 0; at = binary.indexOf("cdc_", at + 1)) {
    const tail = binary.subarray(at + 4, at + 26);
    if (tail.length < 22 || !tail.every(alnum) || binary[at + 26] !== 0x5f) continue;
    const letters = crypto.createHash("sha256").update(binary.subarray(at, at + 26)).digest("hex").replace(/[0-9]/g, "");
    const name = ("tlq" + letters + "qqqqqqqqqqqqqqqqqqqqqqqqqq").slice(0, 26);
    binary.write(name, at, "latin1");
    renamed++;
  }
  if (!renamed) return CHROMEDRIVER; // a chromedriver without the prefix needs no patch
  const partial = `${target}.${process.pid}`;
  fs.writeFileSync(partial, binary, { mode: 0o755 });
  fs.renameSync(partial, target);
  return target;
}

/**
 * A chromedriver session (the webdriver driver): W3C actions for the pointer, touch and keys;
 * chromedriver's DevTools pass-through (what Selenium users call execute_cdp_cmd) only where the
 * W3C protocol has no action or setting: insertText and soft-keyboard keys, the webdriver getter
 * patch, and a phone's screen (chromedriver's own mobileEmulation resets maxTouchPoints to 1 on
 * every navigation, so the phone is emulated with the same DevTools calls Playwright makes).
 */
async function webdriverDriver(screen, connect = null) {
  const { Builder, Key } = require("selenium-webdriver");
  const chrome = require("selenium-webdriver/chrome");
  const { Pointer } = require("selenium-webdriver/lib/input");
  // Attached to the harness's browser (connect mode), chromedriver launches nothing: the flags
  // are the harness's.
  const options = connect
    ? new chrome.Options().debuggerAddress(new URL(connect).host)
    : new chrome.Options()
        .setChromeBinaryPath(CHROMIUM)
        .addArguments("--no-sandbox", "--disable-blink-features=AutomationControlled", ...windowArgs(screen))
        .addArguments(...(screen.window ? [] : [`--window-size=${screen.width},${screen.height}`]))
        .addArguments(...(screen.userAgent ? [`--user-agent=${screen.userAgent}`] : []))
        .excludeSwitches("enable-automation");
  const driver = await new Builder()
    .forBrowser("chrome")
    .setChromeOptions(options)
    .setChromeService(new chrome.ServiceBuilder(stealthChromedriver()))
    .build();
  try {
    if (!connect) await driver.sendDevToolsCommand("Page.addScriptToEvaluateOnNewDocument", { source: `(${hideWebdriver})()` });
    if (screen.phone) {
      if (connect) await driver.sendDevToolsCommand("Emulation.setUserAgentOverride", { userAgent: screen.userAgent });
      await driver.sendDevToolsCommand("Emulation.setDeviceMetricsOverride", {
        width: screen.width, height: screen.height, deviceScaleFactor: screen.ratio, mobile: true,
        screenWidth: screen.width, screenHeight: screen.height,
      });
      await driver.sendDevToolsCommand("Emulation.setTouchEmulationEnabled", { enabled: true, maxTouchPoints: 5 });
    }
  } catch (error) {
    await driver.quit();
    throw error;
  }
  const KEYS = {
    Shift: Key.SHIFT, Control: Key.CONTROL, Tab: Key.TAB, Enter: Key.ENTER, Backspace: Key.BACK_SPACE,
    ArrowUp: Key.ARROW_UP, ArrowDown: Key.ARROW_DOWN, ArrowLeft: Key.ARROW_LEFT, ArrowRight: Key.ARROW_RIGHT,
  };
  const finger = new Pointer("finger", Pointer.Type.TOUCH);
  let view = { width: screen.width, height: screen.height };
  let mouse = { x: 0, y: 0 };
  const inView = (p) => ({ x: clamp(Math.round(p.x), 0, view.width - 1), y: clamp(Math.round(p.y), 0, view.height - 1) });
  const perform = (device, steps) => {
    const actions = driver.actions({ async: true });
    const devices = { mouse: actions.mouse(), keyboard: actions.keyboard(), wheel: actions.wheel() };
    actions.insert(devices[device] || device, ...steps);
    return actions.perform();
  };
  const wait = (ms) => ({ type: "pause", duration: Math.max(0, Math.round(ms)) });
  const contactOf = (contact) =>
    contact ? { width: 2 * contact.radiusX, height: 2 * contact.radiusY, pressure: contact.force } : {};
  const devtools = (e) =>
    e.type === "down" && e.key === "Backspace"
      ? driver.sendDevToolsCommand("Input.dispatchKeyEvent", { type: "rawKeyDown", key: "Backspace", code: "Backspace", windowsVirtualKeyCode: 8 })
      : e.type === "up" && e.key === "Backspace"
        ? driver.sendDevToolsCommand("Input.dispatchKeyEvent", { type: "keyUp", key: "Backspace", code: "Backspace", windowsVirtualKeyCode: 8 })
        : e.type === "soft-down"
          ? driver
              .sendDevToolsCommand("Input.dispatchKeyEvent", { type: "rawKeyDown", ...SOFT_KEY })
              .then(() => driver.sendDevToolsCommand("Input.insertText", { text: e.text }))
          : driver.sendDevToolsCommand("Input.dispatchKeyEvent", { type: "keyUp", ...SOFT_KEY });
  return {
    name: "webdriver",
    async goto(url) {
      if (connect && (await driver.getCurrentUrl()) === url) {
        view = await driver.executeScript("return { width: innerWidth, height: innerHeight };");
        return;
      }
      await driver.get(url);
      if (url.startsWith("http")) view = await driver.executeScript("return { width: innerWidth, height: innerHeight };");
    },
    evaluate: (fn, arg) => driver.executeScript(`return (${fn}).apply(null, arguments);`, arg),
    /**
     * The path as W3C pointerMove actions: chromedriver dispatches at most one move per frame
     * and waits each move's duration first, so points closer than a frame are dropped and
     * each kept move lasts the time since the last kept one.
     */
    async playPath(points) {
      const steps = [];
      let last = 0;
      points.forEach((p, index) => {
        if (index < points.length - 1 && p.t - last < 16) return;
        steps.push({ type: "pointerMove", origin: "viewport", ...inView(p), duration: Math.round(p.t - last) });
        last = p.t;
      });
      await perform("mouse", steps);
      mouse = inView(points[points.length - 1]);
    },
    press: (preMs, dwellMs) =>
      perform("mouse", [wait(preMs), { type: "pointerDown", button: 0 }, wait(dwellMs), { type: "pointerUp", button: 0 }]),
    wheel: (dy) => perform("wheel", [{ type: "scroll", origin: "viewport", x: mouse.x, y: mouse.y, deltaX: 0, deltaY: dy, duration: 0 }]),
    async keys(events) {
      if (events.some((e) => e.type.startsWith("soft"))) return playKeys(events, devtools);
      // chromedriver spends about 2 ms on each key action: the pause before it is that much shorter.
      const steps = [];
      let at = 0;
      for (const e of events) {
        if (e.t - at > 2) steps.push(wait(e.t - at - 2));
        at = Math.max(at, e.t);
        steps.push({ type: e.type === "down" ? "keyDown" : "keyUp", value: KEYS[e.key] || e.key });
      }
      await perform("keyboard", steps);
    },
    insertText: (text) => driver.sendDevToolsCommand("Input.insertText", { text }),
    tap: (x, y, dwellMs, contact) =>
      perform(finger, [
        { type: "pointerMove", origin: "viewport", ...inView({ x, y }), duration: 0 },
        { type: "pointerDown", button: 0, ...contactOf(contact) },
        wait(dwellMs),
        { type: "pointerUp", button: 0 },
      ]),
    swipe(points, contact) {
      const steps = [{ type: "pointerMove", origin: "viewport", ...inView(points[0]), duration: 0 }, { type: "pointerDown", button: 0, ...contactOf(contact) }];
      let last = points[0].t;
      for (const p of points.slice(1)) {
        if (p !== points[points.length - 1] && p.t - last < 16) continue;
        steps.push({ type: "pointerMove", origin: "viewport", ...inView(p), duration: Math.round(p.t - last), ...contactOf(contact) });
        last = p.t;
      }
      steps.push({ type: "pointerUp", button: 0 });
      return perform(finger, steps);
    },
    async setClipboard(text) {
      await driver.setPermission("clipboard-read", "granted");
      await driver.setPermission("clipboard-write", "granted");
      const outcome = await driver.executeAsyncScript(
        "const done = arguments[arguments.length - 1]; navigator.clipboard.writeText(arguments[0]).then(() => done('ok'), (e) => done(String(e)));",
        text,
      );
      if (outcome !== "ok") throw new Error(`clipboard: ${outcome}`);
    },
    close: () => driver.quit(),
  };
}

// ---- modalities: how a session reaches and operates each control ------------------------------

/**
 * A pointer moved along our own path models: `path(from, to, size)` returns the timed points of
 * one movement, its last point where the pointer stops.
 */
function pathPointer(io, r, who, path, start, view) {
  let at = start;
  const moveTo = async (to, size) => {
    const points = path(at, to, size);
    await io.playPath(points);
    at = points[points.length - 1];
  };
  const pointer = {
    async click(selector, aim = aimPoint, label = false) {
      const b = await wheelIntoView(io, r, who, (dy) => io.wheel(dy), selector, label);
      view = { width: b.viewWidth, height: b.viewHeight };
      await moveTo(aim(r, b), Math.min(b.width, b.height));
      await io.press(Math.min(r.lognormal(who.preClickMedian, 0.4), 4 * who.preClickMedian), Math.min(r.lognormal(who.dwellMedian, 0.3), 4 * who.dwellMedian));
    },
    async idle() {
      if (r.next() < 0.5) return;
      const edge = (v, high) => Math.min(high - 20, Math.max(20, v));
      await moveTo({ x: edge(at.x + 150 * r.normal(), view.width), y: edge(at.y + 100 * r.normal(), view.height) }, 60);
    },
  };
  return pointer;
}

/** The session's path model, with its per-session parameters. */
function pathModel(r, level, resources) {
  if (level === "bezier") return (from, to) => bezierPath(r, from, to);
  if (level === "windmouse") {
    const style = windMouseStyle(r);
    return (from, to, size) => windMousePath(r, style, from, to, size);
  }
  if (level === "perlin") {
    const style = perlinStyle(r);
    return (from, to, size) => perlinPath(r, style, from, to, size);
  }
  if (level === "minjerk") {
    const style = minJerkStyle(r);
    return (from, to, size) => minJerkPath(r, style, from, to, size);
  }
  if (level === "replay") {
    const style = replayStyle(r, resources.strokes());
    return (from, to, size) => replayPath(r, style, from, to, size);
  }
  throw new Error(`no path model ${level}`);
}

/**
 * ghost-cursor as a fraudster uses it: createCursor(page) with its random moves on, then
 * cursor.click(selector) (Bezier path, Fitts-law point count, overshoot on long moves, a random
 * point inside the element) with the library's hesitate/waitForClick/moveDelay options. Wheel
 * notches go through the library's cursor.scroll, so they land where its cursor is. The library
 * draws its paths from Math.random: only the rest of the session follows the seed.
 */
function ghostPointer(io, r, who, shown) {
  const { createCursor } = require("ghost-cursor");
  const page = io.page;
  const view = page.viewport() || shown; // headed: no emulated viewport, the window's
  const start = { x: r.uniform(0.1, 0.6) * view.width, y: r.uniform(0.1, 0.7) * view.height };
  const cursor = createCursor(page, start, true);
  const wheel = (dy) => cursor.scroll({ y: dy }, { scrollSpeed: 100, scrollDelay: 0 });
  return {
    async click(selector, aim, label = false) {
      await wheelIntoView(io, r, who, wheel, selector, label);
      // ghost-cursor clicks an element handle: the label's when it aims at one.
      const target = label ? await io.page.evaluateHandle((sel) => {
        const element = document.querySelector(sel);
        return (element && element.closest("label")) || element;
      }, selector) : selector;
      await cursor.click(target, {
        paddingPercentage: r.uniform(20, 60),
        hesitate: Math.min(r.lognormal(who.preClickMedian, 0.4), 900),
        waitForClick: Math.min(r.lognormal(who.dwellMedian, 0.3), 500),
        moveDelay: r.uniform(100, 400),
      });
    },
    idle: async () => {}, // the library's random moves wander on their own while the page is read
    // Random moves stop once the page is gone; they would never stop while flagged as moving.
    stop: () => cursor.toggleRandomMove(true),
  };
}

/** A point on the slider's track for a value from 0 to 10. */
const sliderPoint = (value) => (r, b) => ({
  x: b.x + 8 + ((b.width - 16) * value) / 10 + r.normal(),
  y: b.y + b.height * clamp(0.5 + 0.1 * r.normal(), 0.25, 0.75),
});

/** The mouse operates every control: a path there, a press. */
function mouseActor(pointer, r) {
  // A radio or a checkbox is pressed on its label about half the time, as people press them
  // (lab/replay/play.py's Runner.choose draws the same coin).
  const label = () => !!r && r.next() < 0.5;
  return {
    idle: () => pointer.idle(),
    radio: (name, value) => pointer.click(`input[name="${name}"][value="${value}"]`, aimPoint, label()),
    checkbox: (value) => pointer.click(`input[type=checkbox][value="${value}"]`, aimPoint, label()),
    button: (selector) => pointer.click(selector),
    field: (selector) => pointer.click(selector),
    range: (selector, value) => pointer.click(selector, sliderPoint(value)),
  };
}

/**
 * The page as the keyboard sees it: whether `selector` (or, for a radio, its group) has the
 * focus, whether it lies after the focused element in document order, and the state of the
 * control. Runs in the page.
 */
function focusState(selector) {
  const element = document.querySelector(selector);
  const active = document.activeElement;
  const radio = element.type === "radio";
  const shown = (e) => !!e && e !== document.body && e.getClientRects().length > 0;
  const focused = active === element || (radio && !!active && active.type === "radio" && active.name === element.name);
  const forward = focused || !shown(active) || !!(active.compareDocumentPosition(element) & Node.DOCUMENT_POSITION_FOLLOWING);
  const group = radio ? Array.from(document.querySelectorAll(`input[type=radio][name="${element.name}"]`)).map((e) => e.value) : null;
  return {
    focused,
    forward,
    group,
    activeValue: active ? active.value : null,
    activeChecked: !!(active && active.checked),
    checked: !!element.checked,
    value: element.type === "range" ? Number(element.value) : null,
  };
}

/** No pointer at all: focus moves with Tab and Shift+Tab, controls answer to keys. */
function keyboardActor(io, r, who, pacer) {
  const press = (key, shifted = false) => io.keys(pressEvents(r, who, key, pacer.navGap(), shifted));
  async function tabTo(selector, mayslip = true) {
    let slipped = !mayslip;
    for (let step = 0; step < 40; step++) {
      const state = await io.evaluate(focusState, selector);
      if (state.focused) {
        // Now and then one Tab too many, then back (not past a page's last button).
        if (slipped || r.next() >= who.slip) return state;
        slipped = true;
        await press("Tab");
        continue;
      }
      await press("Tab", !state.forward);
    }
    throw new Error(`could not tab to ${selector}`);
  }
  return {
    idle: async () => {},
    async radio(name, value) {
      const state = await tabTo(`input[name="${name}"][value="${value}"]`);
      const n = state.group.length;
      const steps = (state.group.indexOf(value) - state.group.indexOf(state.activeValue) + n) % n;
      if (steps === 0) {
        if (!state.activeChecked) await press(" ");
        return;
      }
      // Arrows move the selection within the group (and check as they go), the short way round.
      const [key, count] = steps <= n / 2 ? ["ArrowDown", steps] : ["ArrowUp", n - steps];
      for (let i = 0; i < count; i++) await press(key);
    },
    async checkbox(value) {
      const state = await tabTo(`input[type=checkbox][value="${value}"]`);
      if (!state.checked) await press(" ");
    },
    async button(selector) {
      await tabTo(selector, false);
      await press(who.activate);
    },
    field: (selector) => tabTo(selector),
    async range(selector, value) {
      const state = await tabTo(selector);
      const key = value > state.value ? "ArrowRight" : "ArrowLeft";
      for (let i = Math.abs(value - state.value); i > 0; i--) await press(key);
    },
  };
}

/** A contact for each tap: none (CDP's defaults: radius 1, force 1) or drawn per tap. */
function drawContact(r, style) {
  if (style === "fixed") return null;
  const radius = clamp(r.lognormal(11, 0.25), 4, 30);
  return { radiusX: radius, radiusY: clamp(radius * r.uniform(0.75, 1.3), 4, 36), force: clamp(r.uniform(0.15, 0.85), 0.05, 1) };
}

/** Swipes until the element is wholly in view (40 px from the edges); returns its box. */
async function swipeIntoView(io, r, who, selector, label) {
  for (let swipe = 0; swipe < 25; swipe++) {
    const b = await locate(io, selector, label);
    // Clear of the edges by 40 px, unless the page can scroll no further that way.
    const margin = 40;
    const inside = b.y >= 0 && b.y + b.height <= b.viewHeight;
    const below = b.y + b.height - (b.viewHeight - margin);
    const above = margin - b.y;
    if ((below <= 0 || (inside && b.scrollY >= b.scrollMax - 1)) && (above <= 0 || (inside && b.scrollY <= 0))) return b;
    const direction = below > 0 ? 1 : -1; // 1: the finger goes up, the page scrolls down
    const need = Math.max(below, above);
    const distance = clamp(need * r.uniform(0.5, 0.9) + 40, 100, b.viewHeight * 0.55);
    const duration = r.uniform(150, 500);
    const x0 = b.viewWidth * r.uniform(0.35, 0.75);
    const y0 = direction > 0 ? b.viewHeight * r.uniform(0.6, 0.8) : b.viewHeight * r.uniform(0.2, 0.4);
    const drift = r.normal() * 15;
    const points = [];
    for (let t = 0; t <= duration; t += r.uniform(12, 20)) {
      const u = t / duration;
      const eased = u * u * (3 - 2 * u);
      points.push({ x: x0 + drift * eased + r.normal() * 0.5, y: y0 - direction * distance * eased, t });
    }
    // Close to the target the finger stops before it lifts: no fling.
    if (need < b.viewHeight * 0.5) {
      const end = points[points.length - 1];
      points.push({ x: end.x, y: end.y, t: end.t + r.uniform(80, 200) });
    }
    await io.swipe(points, drawContact(r, who.contactStyle));
    await sleep(r.uniform(350, 800)); // the scroll settles, the eyes follow
  }
  throw new Error(`could not swipe ${selector} into view`);
}

/** A phone: taps (a little off the target's centre) and swipes. */
function touchActor(io, r, who) {
  const fingerPoint = (_, b) => ({
    x: clamp(b.x + b.width / 2 + who.fingerBias.x + r.normal() * 0.15 * b.width, b.x + 1, b.x + b.width - 1),
    y: clamp(b.y + b.height / 2 + who.fingerBias.y + r.normal() * 0.15 * b.height, b.y + 1, b.y + b.height - 1),
  });
  async function tap(selector, aim = fingerPoint, label = false) {
    const b = await swipeIntoView(io, r, who, selector, label);
    const p = aim(r, b);
    await sleep(Math.min(r.lognormal(who.preClickMedian, 0.4), 4 * who.preClickMedian));
    await io.tap(p.x, p.y, clamp(r.lognormal(who.tapDwellMedian, 0.35), 40, 180), drawContact(r, who.contactStyle));
  }
  return {
    idle: async () => {},
    // Radios and checkboxes are 13 px: a finger aims at their labels.
    radio: (name, value) => tap(`input[name="${name}"][value="${value}"]`, fingerPoint, true),
    checkbox: (value) => tap(`input[type=checkbox][value="${value}"]`, fingerPoint, true),
    button: (selector) => tap(selector),
    field: (selector) => tap(selector),
    range: (selector, value) => tap(selector, sliderPoint(value)),
  };
}

// ---- the factorial session ---------------------------------------------------------------------

/**
 * What this session answers on its layout (survey/layouts.json), page by page: one action per
 * control, as the replay of a person draws it (lab/replay/play.py draw_plan).
 */
function drawPlan(r, layout) {
  const spec = LAYOUTS.layouts[layout];
  if (!spec) throw new Error(`unknown layout ${layout}`);
  return spec.pages.map((steps) => {
    const actions = [];
    for (const step of steps) {
      if (step.kind === "radio") actions.push({ do: "radio", name: step.name, value: r.pick(step.values) });
      else if (step.kind === "checkbox") {
        const chosen = step.values.filter(() => r.next() < 0.45);
        for (const value of chosen.length ? chosen : [r.pick(step.values)]) actions.push({ do: "checkbox", name: step.name, value });
      } else if (step.kind === "text") actions.push({ do: "text", selector: step.selector, text: answerText(r, step.answer) });
      else if (step.kind === "range") actions.push({ do: "range", selector: step.selector, value: r.int(step.min, step.max) });
      else if (step.kind === "button") actions.push({ do: "button", selector: step.selector });
      else throw new Error(`unknown step ${step.kind}`);
    }
    return actions;
  });
}

/** An answer of about the length a person types for it: a word, a sentence, two or three. */
function answerText(r, length) {
  if (length === "word") return r.pick(COLOURS);
  if (length === "short") return r.pick(ANSWERS);
  const count = r.int(2, 3);
  return Array.from({ length: count }, () => r.pick(ANSWERS)).join(". ");
}

/** Types `text` into the focused field with the session's typist (or the soft keyboard). */
async function enterText(io, r, session, text) {
  const strokes = session.typist.strokes(text);
  if (!strokes) return io.insertText(text);
  if (session.soft === "unidentified") return io.keys(softKeyEvents(strokes));
  return io.keys(keyEvents(r, strokes, { shift: session.soft !== "keys" }));
}

/** The layout, page by page, with the session's pacing, modality and typing. */
async function fillFactorial(io, r, session) {
  const { actor, pacer, plan, factors } = session;
  const paste = factors.modality === "paste";
  for (const actions of plan) {
    await pacer.pageStart();
    if (pacer.level === "human") await actor.idle();
    let first = true;
    for (const action of actions) {
      if (!first) await pacer.between();
      first = false;
      if (action.do === "radio") await actor.radio(action.name, action.value);
      else if (action.do === "checkbox") await actor.checkbox(action.value);
      else if (action.do === "range") await actor.range(action.selector, action.value);
      else if (action.do === "button") await actor.button(action.selector);
      else if (paste && action.text.length > 20) {
        await io.setClipboard(action.text); // copied from somewhere else
        await actor.field(action.selector);
        await pacer.between();
        await io.keys(pasteEvents(r, session.motor));
      } else {
        await actor.field(action.selector);
        await pacer.beforeTyping();
        await enterText(io, r, session, action.text);
      }
    }
  }
}

// ---- browsers ----------------------------------------------------------------------------------

/** Launches a browser once, when the first session needs it. */
function lazy(launch) {
  let promise = null;
  return {
    get: () => (promise = promise || launch()),
    close: async () => {
      if (promise) await (await promise).close();
    },
  };
}

/** Debian's Chromium under playwright-core, stealthed unless `naive`; headed in the session's
 * window when `screen` has one. */
async function launchPlaywright(naive, screen = null) {
  const { chromium } = require("playwright-core");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: false, // the flags below say headless or not, as for puppeteer
    // Stealth hides the automation flag as stealth plugins do; naive sessions keep it as shipped.
    args: ["--no-sandbox", ...windowArgs(screen)].concat(naive ? [] : ["--disable-blink-features=AutomationControlled"]),
  });
  // The browser's own user agent without the "Headless" tell, as stealth plugins do.
  const probe = await browser.newPage();
  const userAgent = (await probe.evaluate(() => navigator.userAgent)).replace("HeadlessChrome", "Chrome");
  await probe.close();
  return { browser, userAgent, close: () => browser.close() };
}

/** Debian's Chromium under puppeteer-core (ghost-cursor's driver), set up as the stealth one. */
async function launchPuppeteer(screen = null) {
  const puppeteer = require("puppeteer-core");
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    // The flags spelled out as for Playwright; `headless: false` only stops puppeteer adding its own.
    headless: false,
    defaultViewport: screen && screen.window ? null : undefined,
    args: ["--no-sandbox", "--disable-blink-features=AutomationControlled", ...windowArgs(screen)],
  });
  const userAgent = (await browser.userAgent()).replace("HeadlessChrome", "Chrome");
  return { browser, userAgent, close: () => browser.close() };
}

// ---- connect mode: the harness's browser -------------------------------------------------------
//
// In the recorded corpus (lab/corpus.py) the harness launches every session's browser itself
// (lab/replay/browser.py: the same flags and window sizes for people and automation, one browser
// per display) and a session attaches to it: `--connect` its DevTools endpoint, `--display` its X
// display, `--window x,y,w,h` its window, `--url` the page (its `response` is the reference).

/** Playwright attached to the harness's browser: its one window's page. */
async function attachPlaywright(args) {
  const { chromium } = require("playwright-core");
  const browser = await chromium.connectOverCDP(args.connect);
  const context = browser.contexts()[0];
  const page = context.pages()[0] || (await context.newPage());
  // Disconnects; the harness closes the browser.
  return { browser, context, page, close: () => browser.close() };
}

// X keysyms of the keys sessions press (key names as keyEvents and pressEvents write them).
const X_KEYSYMS = {
  " ": "space", Backspace: "BackSpace", Shift: "Shift_L", Control: "Control_L", Tab: "Tab", Enter: "Return",
  ArrowUp: "Up", ArrowDown: "Down", ArrowLeft: "Left", ArrowRight: "Right", ".": "period", ",": "comma",
  "'": "apostrophe", "-": "minus", "\n": "Return",
};
const keysymOf = (key) => X_KEYSYMS[key] || (key.length === 1 ? key.toLowerCase() : key);

/**
 * The operating system's mouse and keyboard (XTEST) on the session's display, through
 * lab/replay/xserve.py: each command is carried out as it arrives, so the timing is the
 * session's own schedule, as for the replayed people (lab/replay/xinput.py).
 */
function xtestInput(display) {
  const { spawn } = require("child_process");
  const child = spawn("python3", [path.join(__dirname, "replay", "xserve.py"), display], { stdio: ["pipe", "pipe", "inherit"] });
  const waiting = [];
  let buffer = "";
  child.stdout.on("data", (chunk) => {
    buffer += chunk;
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      const next = waiting.shift();
      if (next) next(JSON.parse(line));
    }
  });
  const send = (command) => child.stdin.write(JSON.stringify(command) + "\n");
  return {
    send,
    ask: (command) => new Promise((resolve) => { waiting.push(resolve); send(command); }),
    close: () => new Promise((resolve) => { child.once("exit", resolve); child.stdin.end(); }),
  };
}

/**
 * DevTools reads the page (where the controls are, the clipboard), the operating system's input
 * drives it: what a bot built on Selenium or Playwright plus PyAutoGUI or xdotool does. Page
 * coordinates become screen ones by the viewport's place on the screen, measured from a mouse
 * event (screenX - clientX) when the hand first moves.
 */
async function xtestDriver(args, screen, paste = false) {
  const attached = await attachPlaywright(args);
  if (paste) {
    // The page writes the answer to the clipboard (the X server's, which Chromium owns); the
    // keys that paste it go through the OS like every other key.
    await attached.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(args.url).origin });
  }
  const base = await playwrightDriver(attached.context, attached.page, screen, true);
  const x = xtestInput(args.display);
  let offset = null;
  // Input sent through the X server reaches the page a moment later (a DevTools dispatch returns
  // once the page handled it): before the page is read again, the events are let through.
  const delivered = () => sleep(60);
  const measure = async () => {
    const [pointer] = [await x.ask({ op: "pointer" })];
    const seen = base.page.evaluate(() => new Promise((resolve) => {
      document.addEventListener("mousemove", (e) => resolve({ x: e.screenX - e.clientX, y: e.screenY - e.clientY }), { once: true, capture: true });
      setTimeout(() => resolve(null), 2000);
    }));
    await sleep(100);
    x.send({ op: "move", x: pointer.x + 1, y: pointer.y }); // a hand at rest moves a pixel
    offset = await seen;
    if (!offset) throw new Error("the page saw no XTEST mouse move: is the pointer over its window?");
    return { x: pointer.x + 1 - offset.x, y: pointer.y - offset.y };
  };
  return {
    ...base,
    name: "xtest",
    /** Where the hand is on the page now (measures the viewport's place on first use). */
    rest: measure,
    playPath: (points) => playTimed(points, async (p) => x.send({ op: "move", x: p.x + offset.x, y: p.y + offset.y })),
    async press(preMs, dwellMs) {
      await sleep(preMs);
      x.send({ op: "button", button: 1, down: true });
      await sleep(dwellMs);
      x.send({ op: "button", button: 1, down: false });
      await delivered();
    },
    wheel: async (dy) => x.send({ op: "wheel", notches: dy > 0 ? 1 : -1 }),
    async keys(events) {
      await playKeys(events, async (e) => x.send({ op: "key", keysym: keysymOf(e.key), down: e.type === "down" }));
      await delivered();
    },
    insertText: () => { throw new Error("XTEST has no insertText"); },
    tap: () => { throw new Error("XTEST has no touch screen"); },
    swipe: () => { throw new Error("XTEST has no touch screen"); },
    async close() {
      await x.ask({ op: "release" });
      await x.close();
      await attached.close();
    },
  };
}

/** The session's driver attached to the harness's browser (connect mode). */
async function attachDriver(args, factors, screen) {
  if (factors.driver === "webdriver") return webdriverDriver(screen, args.connect);
  if (factors.driver === "xtest") return xtestDriver(args, screen, factors.modality === "paste");
  if (factors.path === "ghost-cursor") {
    const puppeteer = require("puppeteer-core");
    const browser = await puppeteer.connect({ browserURL: args.connect, defaultViewport: null });
    const page = (await browser.pages())[0] || (await browser.newPage());
    const io = puppeteerDriver(browser.defaultBrowserContext(), page);
    io.goto = async (url) => (page.url() === url ? undefined : page.goto(url));
    io.close = () => browser.disconnect();
    return io;
  }
  const attached = await attachPlaywright(args);
  if (factors.modality === "paste") {
    await attached.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: new URL(args.url).origin });
  }
  const io = await playwrightDriver(attached.context, attached.page, screen, true);
  io.close = attached.close;
  return io;
}

/**
 * The session's driver, opened on a fresh context (or a fresh browser, for webdriver). Headed (a
 * session window drawn), every session gets a browser of its own in that window.
 */
async function openDriver(browsers, factors, screen, args = {}) {
  if (args.connect) return attachDriver(args, factors, screen);
  if (factors.driver === "xtest") throw new Error("the xtest driver needs a browser the harness launched (--connect)");
  if (factors.driver === "webdriver") return webdriverDriver(screen);
  const own = !!screen.window;
  if (factors.path === "ghost-cursor") {
    const { browser, userAgent } = own ? await launchPuppeteer(screen) : await browsers.puppeteer.get();
    const context = own ? browser.defaultBrowserContext() : await browser.createBrowserContext();
    const page = own ? (await browser.pages())[0] || (await browser.newPage()) : await context.newPage();
    if (!own) {
      await page.setViewport({ width: screen.width, height: screen.height });
      await page.setUserAgent({ userAgent });
    }
    await page.evaluateOnNewDocument(hideWebdriver);
    const io = puppeteerDriver(context, page);
    if (own) io.close = () => browser.close();
    return io;
  }
  const launched = own ? await launchPlaywright(false, screen) : await browsers.stealth.get();
  const options = screen.phone
    ? { viewport: { width: screen.width, height: screen.height }, deviceScaleFactor: screen.ratio, isMobile: true, hasTouch: true, userAgent: screen.userAgent }
    : own ? { viewport: null } : { viewport: { width: screen.width, height: screen.height }, userAgent: launched.userAgent };
  if (factors.modality === "paste") options.permissions = ["clipboard-read", "clipboard-write"];
  const context = await launched.browser.newContext(options);
  await context.addInitScript(hideWebdriver);
  const io = await playwrightDriver(context, await context.newPage(), screen);
  if (own) io.close = () => launched.browser.close();
  return io;
}

/** Every draw of a factorial session beyond its factors, from its behaviour seed. */
function drawSession(r, factors, resources, args = {}) {
  const screen = drawScreen(r, factors, args);
  const motor = drawMotor(r);
  motor.contactStyle = r.next() < 0.5 ? "fixed" : "drawn";
  const pacer = drawPacer(r, factors.pacing);
  const typist = drawTypist(r, factors.typing, resources);
  // A phone's keyboard: an IME's "Unidentified" keys most of the time, real key events otherwise.
  const soft = factors.modality === "touch" ? (r.next() < 0.7 ? "unidentified" : "keys") : null;
  const path = MOVING_PATHS.includes(factors.path) && factors.path !== "ghost-cursor" ? pathModel(r, factors.path, resources) : null;
  const plan = drawPlan(r, resources.layout);
  const details = {
    screen: `${screen.width}x${screen.height}${screen.phone ? " phone" : ""}`,
    typist: typist.details,
    pacing: pacer.details,
  };
  if (soft) details.softKeyboard = soft;
  if (factors.modality === "touch") details.contact = motor.contactStyle;
  return { factors, screen, motor, pacer, typist, soft, path, plan, details };
}

async function runFactorial(browsers, args, seed, resources, factors, reference) {
  const r = rng(seed * 7919 + GENERATOR_NUMBER.factorial);
  const session = drawSession(r, factors, resources, args);
  const io = await openDriver(browsers, factors, session.screen, args);
  let ghost = null;
  try {
    await io.goto(pageUrl(args, reference));
    const who = session.motor;
    if (factors.modality === "touch") session.actor = touchActor(io, r, who);
    else if (factors.path === "none") session.actor = keyboardActor(io, r, who, session.pacer);
    else if (factors.path === "ghost-cursor") {
      const shown = await io.evaluate(() => ({ width: innerWidth, height: innerHeight }));
      session.actor = mouseActor((ghost = ghostPointer(io, r, who, shown)), r);
    }
    else {
      const view = await io.evaluate(() => ({ width: innerWidth, height: innerHeight }));
      // The operating system's pointer is where the harness left it over the window, as a
      // person's hand is; a DevTools pointer starts where the session puts it.
      const start = io.rest ? await io.rest() : { x: r.uniform(0.1, 0.6) * view.width, y: r.uniform(0.1, 0.7) * view.height };
      if (!io.rest) await io.playPath([{ ...start, t: 0 }]); // the hand rests where it left the page
      session.actor = mouseActor(pathPointer(io, r, who, session.path, start, view), r);
    }
    await fillFactorial(io, r, session);
    await finish(io);
    return session.details;
  } finally {
    if (ghost) ghost.stop();
    await io.close();
  }
}

/**
 * Checks that the survey ended (within a few seconds: input through the operating system reaches
 * the page a moment after it was sent), then leaves past the embed's 2 s batching interval.
 */
async function finish(io) {
  const shown = () =>
    io.evaluate(() => {
      const el = document.querySelector("#done");
      return !!el && el.getClientRects().length > 0;
    });
  const until = Date.now() + 5000;
  let done = await shown();
  while (!done && Date.now() < until) {
    await sleep(100);
    done = await shown();
  }
  if (!done) throw new Error("the survey did not reach its end");
  await sleep(2300);
  await io.goto("about:blank"); // pagehide sends the rest
  await sleep(300);
}

async function runLibrary(browsers, args, seed, reference) {
  const naive = args.generator === "naive";
  const r = rng(seed * 7919 + GENERATOR_NUMBER[args.generator]);
  if (args.connect && args.forced.driver === "xtest") {
    const io = await xtestDriver(args, { phone: false, window: args.window });
    try {
      await io.goto(pageUrl(args, reference));
      await fillLibraryXtest(io, r, args.layout, !naive);
      await finish(io);
    } finally {
      await io.close();
    }
    return {};
  }
  if (args.connect) {
    const attached = await attachPlaywright(args);
    const page = attached.page;
    try {
      if (page.url() !== pageUrl(args, reference)) await page.goto(pageUrl(args, reference));
      else await page.waitForLoadState("load");
      await fillNaive(page, r, args.layout);
      await finish({ evaluate: (fn) => page.evaluate(fn), goto: (url) => page.goto(url) });
    } finally {
      await attached.close();
    }
    return {};
  }
  const screen = headed() ? drawScreen(r, { modality: "library" }) : null;
  const launched = screen ? await launchPlaywright(naive, screen) : await (naive ? browsers.naive : browsers.stealth).get();
  const context = await launched.browser.newContext(
    screen ? { viewport: null } : naive ? {} : { userAgent: launched.userAgent, viewport: { width: r.pick(VIEWPORT_WIDTHS), height: r.pick(VIEWPORT_HEIGHTS) } },
  );
  if (!naive) await context.addInitScript(hideWebdriver);
  const page = await context.newPage();
  try {
    await page.goto(pageUrl(args, reference));
    await fillNaive(page, r, args.layout);
    await finish({ evaluate: (fn) => page.evaluate(fn), goto: (url) => page.goto(url) });
  } finally {
    await context.close();
    if (screen) await launched.browser.close();
  }
  return {};
}

// ---- people's touch on the phone layout, through DevTools ------------------------------------

// The one generator here that plays people, not automation (the pipeline labels its sessions
// human): no kernel here has uinput and Xvfb has no touch device, so a person's recorded taps and
// swipes (lab/replay/touch.py exports HMOG's) reach the phone layout through the same
// DevTools touch input the touch bots use, and the report counts touch apart. Its seeds number
// the export's jobs (1 is the first); a job names the person, the share of their gestures it
// plays and the session's reference. The page is read as replay/play.py reads it: each question
// for as long as its words take at the person's reading speed (Brysbaert 2019: adults read
// 175-300 words a minute silently), then the person's own recorded pause before the gesture.

const READING_WPM_MEAN = 238;
const READING_WPM_SD = 40;

function loadTouchPeople(path) {
  if (!path) throw new Error("the touch-person generator needs --touch-people (replay/touch.py's export)");
  return JSON.parse(fs.readFileSync(path, "utf8"));
}

/** Words a person reads before answering, as survey/probe.js counts them. Runs in the page. */
function countWords({ selector, page }) {
  let text = "";
  if (page) {
    const section = document.querySelector("section.current") || document.body;
    section.querySelectorAll("h1, h2, p").forEach((e) => {
      text += " " + e.textContent;
    });
  } else {
    const element = document.querySelector(selector);
    const around = element && element.closest("fieldset, tr");
    text = around ? around.textContent : "";
  }
  return text.split(/\s+/).filter((w) => w.length > 0).length;
}

/** A person's recorded gestures and soft-keyboard runs, from the job's share of them. */
function touchHand(person, job, r) {
  const from = (list) => Math.floor((list.length * job.block) / job.blocks);
  let tap = from(person.taps);
  let swipe = from(person.swipes);
  let run = from(person.keys);
  const wpm = clamp(READING_WPM_MEAN + READING_WPM_SD * r.normal(), 150, 400);
  const letters = "thequickbrownfoxjumpsoverthelazydog";
  let letter = 0;
  return {
    reading: (words) => ((words * 60000) / wpm) * Math.exp(0.35 * r.normal()),
    tap: () => person.taps[tap++ % person.taps.length],
    swipe: () => person.swipes[swipe++ % person.swipes.length],
    /** Soft-keyboard strokes of one answer: a recorded run (its first word for a one-word field). */
    strokes(length) {
      if (!person.keys.length) return [];
      let keys = person.keys[run++ % person.keys.length];
      if (length === "word") {
        const space = keys.findIndex((k) => k[2] === "space");
        keys = space > 0 ? keys.slice(0, space) : keys.slice(0, 8);
      }
      const out = [];
      for (const [down, up, keyClass] of keys) {
        const key = keyClass === "char" ? letters[letter++ % letters.length] : keyClass === "digit" ? "5"
          : keyClass === "space" ? " " : keyClass === "backspace" ? "Backspace" : null;
        if (key !== null) out.push({ key, down, hold: Math.max(5, up - down) });
      }
      return out;
    },
  };
}

const contactOfGesture = (g) => ({ radiusX: g.radius || 1, radiusY: g.radius || 1, force: g.force || 1 });

/** One recorded swipe, its length kept (at most 55 % of the view), turned to scroll `direction`. */
async function personSwipe(io, r, hand, b, direction) {
  const s = hand.swipe();
  const last = s.points[s.points.length - 1];
  const chord = Math.hypot(last[1], last[2]) || 1;
  const scale = Math.min(1, (b.viewHeight * 0.55) / chord);
  // Rotate the chord onto (0, -direction): the finger goes up to scroll down.
  const angle = Math.atan2(-direction, 0) - Math.atan2(last[2], last[1]);
  const cos = Math.cos(angle) * scale;
  const sin = Math.sin(angle) * scale;
  const x0 = b.viewWidth * r.uniform(0.35, 0.75);
  const y0 = direction > 0 ? b.viewHeight * r.uniform(0.65, 0.85) : b.viewHeight * r.uniform(0.15, 0.35);
  const points = s.points.map(([t, dx, dy]) => ({ x: x0 + cos * dx - sin * dy, y: y0 + sin * dx + cos * dy, t }));
  await sleep(Math.min(s.pause, 3000));
  await io.swipe(points, contactOfGesture(s));
  await sleep(r.uniform(350, 800)); // the scroll settles, the eyes follow
}

async function personSwipeIntoView(io, r, hand, selector, label) {
  for (let attempt = 0; attempt < 25; attempt++) {
    const b = await locate(io, selector, label);
    const margin = 40;
    const inside = b.y >= 0 && b.y + b.height <= b.viewHeight;
    const below = b.y + b.height - (b.viewHeight - margin);
    const above = margin - b.y;
    if ((below <= 0 || (inside && b.scrollY >= b.scrollMax - 1)) && (above <= 0 || (inside && b.scrollY <= 0))) return b;
    await personSwipe(io, r, hand, b, below > 0 ? 1 : -1);
  }
  throw new Error(`could not swipe ${selector} into view`);
}

async function fillTouchPerson(io, r, hand, plan) {
  const read = async (query) => sleep(hand.reading(await io.evaluate(countWords, query)));
  const tapAt = async (selector, label, aim) => {
    const b = await personSwipeIntoView(io, r, hand, selector, label);
    const p = aim ? aim(r, b) : { x: b.x + b.width * clamp(0.5 + 0.15 * r.normal(), 0.1, 0.9), y: b.y + b.height * clamp(0.5 + 0.15 * r.normal(), 0.1, 0.9) };
    const tap = hand.tap();
    await sleep(Math.min(tap[3], 3000));
    await io.tap(p.x, p.y, clamp(tap[0], 20, 480), contactOfGesture({ radius: tap[1], force: tap[2] }));
  };
  for (const actions of plan) {
    await read({ page: true });
    for (const action of actions) {
      const selector = action.selector || `input[name="${action.name}"][value="${action.value}"]`;
      await read({ selector });
      if (action.do === "radio" || action.do === "checkbox") await tapAt(selector, true);
      else if (action.do === "range") await tapAt(selector, false, sliderPoint(action.value));
      else if (action.do === "button") await tapAt(selector, false);
      else {
        await tapAt(selector, false);
        await sleep(Math.min(hand.tap()[3], 3000));
        const length = action.text.length <= 10 ? "word" : action.text.length <= 50 ? "short" : "long";
        await io.keys(softKeyEvents(hand.strokes(length)));
      }
    }
    await sleep(400); // the next page shows
  }
}

async function runTouchPerson(args, seed, resources) {
  const exported = resources.touchPeople();
  const job = exported.jobs[seed - 1];
  if (!job) throw new Error(`no touch job ${seed} (the export has ${exported.jobs.length})`);
  const person = exported.people[job.person];
  const r = rng(hash32(`telltale-replay/touch/${job.key}`));
  const screen = drawScreen(r, { modality: "touch" }, args);
  if (args.connect) {
    const attached = await attachPlaywright(args);
    const io = await playwrightDriver(attached.context, attached.page, screen, true);
    try {
      await io.goto(pageUrl(args, referenceOfUrl(args) || job.reference));
      await fillTouchPerson(io, r, touchHand(person, job, r), drawPlan(r, args.layout));
      await finish(io);
    } finally {
      await attached.close();
    }
    return { job };
  }
  // No stealth script: a person's browser answers navigator.webdriver itself.
  const launched = await launchPlaywright(false, screen.window ? screen : null);
  const context = await launched.browser.newContext({
    viewport: { width: screen.width, height: screen.height }, deviceScaleFactor: screen.ratio, isMobile: true,
    hasTouch: true, userAgent: screen.userAgent,
  });
  const io = await playwrightDriver(context, await context.newPage(), screen);
  try {
    await io.goto(pageUrl(args, job.reference));
    await fillTouchPerson(io, r, touchHand(person, job, r), drawPlan(r, args.layout));
    await finish(io);
  } finally {
    await io.close();
    await launched.browser.close();
  }
  return { job };
}

async function runSession(browsers, args, seed, resources) {
  const generator = args.generator;
  const reference = referenceOfUrl(args) || referenceFor(generator, seed);
  const started = Date.now();
  const seconds = () => Math.round((Date.now() - started) / 100) / 10;
  let factors = null;
  try {
    if (generator === "touch-person") {
      factors = { modality: "touch", driver: "cdp" };
      const { job } = await runTouchPerson(args, seed, resources);
      return { reference: referenceOfUrl(args) || job.reference, generator, seed, ok: true, seconds: seconds(), factors, details: { job } };
    }
    factors = factorsFor(generator, seed, args.forced, args.layout);
    const details =
      generator === "factorial"
        ? await runFactorial(browsers, args, seed, resources, factors, reference)
        : await runLibrary(browsers, args, seed, reference);
    return { reference, generator, seed, ok: true, seconds: seconds(), factors, details };
  } catch (error) {
    return { reference, generator, seed, ok: false, seconds: seconds(), error: String(error).slice(0, 300), factors };
  }
}

async function main() {
  const args = parseArgs(process.argv);
  if (args.listDesign) {
    for (const seed of args.seedList) {
      const line = { seed, reference: referenceFor(args.generator, seed), factors: factorsFor(args.generator, seed, args.forced, args.layout || "demo") };
      process.stdout.write(JSON.stringify(line) + "\n");
    }
    return;
  }
  // Trace files are read once, when a session first needs one.
  const once = (load) => {
    let value = null;
    return () => (value = value || load());
  };
  const resources = {
    layout: args.layout,
    touchPeople: once(() => loadTouchPeople(args.touchPeople)),
    strokes: once(() => loadStrokes(args.replayTraces)),
    typingTraces: once(() => loadTypingTraces(args.typingTraces)),
  };
  const browsers = {
    naive: lazy(() => launchPlaywright(true)),
    stealth: lazy(() => launchPlaywright(false)),
    puppeteer: lazy(launchPuppeteer),
  };
  const queue = args.seedList.slice();
  const workers = Array.from({ length: args.concurrency }, async () => {
    while (queue.length) {
      const seed = queue.shift();
      const result = await runSession(browsers, args, seed, resources);
      process.stdout.write(JSON.stringify(result) + "\n");
    }
  });
  await Promise.all(workers);
  for (const browser of Object.values(browsers)) await browser.close();
}

if (require.main === module) {
  main().catch((error) => {
    console.error(String(error && error.message ? error.message : error));
    process.exit(1);
  });
}

module.exports = { designFor, referenceFor, keyEvents, softKeyEvents, drawTypist, drawSession, loadStrokes, loadTypingTraces, rng, FACTORS, GENERATOR_NUMBER };
