'use strict';
// Shared pieces of the red-team runner: argument parsing, deterministic reference UUIDs, a
// seeded random source, the answers a respondent gives, and the --mask-environment rewrite.
const crypto = require('crypto');

function parseArgs(argv) {
  const args = { concurrency: 1, maskEnvironment: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--base') args.base = next().replace(/\/+$/, '');
    else if (a === '--key') args.key = next();
    else if (a === '--tool') args.tool = next();
    else if (a === '--seeds') args.seeds = next();
    else if (a === '--seed') args.seed = next();
    else if (a === '--connect') args.connect = next().replace(/\/+$/, '');
    else if (a === '--display') args.display = next();
    else if (a === '--url') args.url = next();
    else if (a === '--window') args.window = next();
    else if (a === '--concurrency') args.concurrency = Math.max(1, parseInt(next(), 10) || 1);
    else if (a === '--mask-environment') args.maskEnvironment = true;
    else if (a === '--list') args.list = true;
    else if (a === '-h' || a === '--help') args.help = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (args.seeds) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(args.seeds);
    if (!m) throw new Error('--seeds is FROM-TO (or a single number)');
    args.from = parseInt(m[1], 10);
    args.to = m[2] === undefined ? args.from : parseInt(m[2], 10);
    if (args.to < args.from) throw new Error('--seeds FROM-TO needs FROM <= TO');
  }
  if (args.connect !== undefined) parseConnect(args);
  return args;
}

// Connect mode: one session in a browser the harness launched (DevTools endpoint --connect,
// X display --display, window --window X,Y,W,H), on the page --url, whose `response=` is the
// session's reference.
function parseConnect(args) {
  for (const k of ['tool', 'seed', 'url', 'window', 'display']) {
    if (args[k] === undefined) throw new Error(`--connect needs --${k}`);
  }
  if (args.seeds || args.base || args.key || args.maskEnvironment || args.concurrency > 1) {
    throw new Error('--connect runs one session: no --seeds, --base, --key, --concurrency or --mask-environment');
  }
  if (!/^\d+$/.test(args.seed)) throw new Error('--seed is a number');
  args.seed = parseInt(args.seed, 10);
  if (!/^https?:\/\/[^/]+$/.test(args.connect)) throw new Error('--connect is http://HOST:PORT (the DevTools HTTP endpoint)');
  if (!/^:\d+(\.\d+)?$/.test(args.display)) throw new Error('--display is :N');
  const w = args.window.split(',').map((v) => Number(v));
  if (w.length !== 4 || w.some((v) => !Number.isInteger(v)) || w[2] <= 0 || w[3] <= 0) throw new Error('--window is X,Y,W,H');
  args.window = { x: w[0], y: w[1], width: w[2], height: w[3] };
  let page;
  try { page = new URL(args.url); } catch (e) { throw new Error('--url is not a URL'); }
  const reference = page.searchParams.get('response');
  if (!reference) throw new Error('--url has no response= parameter (the session reference)');
  args.reference = reference;
  args.base = page.origin;
}

// The reference (the survey's response UUID) is a function of tool and seed alone, so a rerun of
// the same seed lands in the same session. Same derivation as lib/common.py.
function referenceFor(tool, seed) {
  const h = crypto.createHash('sha256').update(`telltale-redteam/${tool}/${seed}`).digest('hex');
  const variant = ((parseInt(h[16], 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

// mulberry32 seeded by the reference: every behavioural choice of a session is reproducible.
function rng(tool, seed) {
  let a = crypto.createHash('sha256').update(`rng/${tool}/${seed}`).digest().readUInt32LE(0);
  const next = () => {
    a |= 0; a = (a + 0x6D2B79F5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const r = {
    next,
    uniform: (lo, hi) => lo + (hi - lo) * next(),
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    pick: (list) => list[Math.floor(next() * list.length)],
    chance: (p) => next() < p,
    // Gaussian by Box-Muller, clamped to [lo, hi] when given.
    normal: (mean, sd, lo = -Infinity, hi = Infinity) => {
      const u = Math.max(next(), 1e-9), v = next();
      const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
      return Math.min(hi, Math.max(lo, mean + sd * z));
    },
    // Log-normal pause in ms around a median: the long right tail of human hesitation.
    pause: (medianMs, spread = 0.45) => Math.exp(Math.log(medianMs) + spread * r.normal(0, 1, -2.5, 2.5)),
  };
  return r;
}

const EXPERIENCES = [
  'It was fine, a bit long but the questions were clear.',
  'Pretty quick. Some of the questions repeated themselves though.',
  'I did one about grocery shopping last week, it took about ten minutes.',
  'Honestly it was boring but I finished it',
  'The last one kept asking about my job and then screened me out at the end, annoying.',
  'Good experience overall, easy to answer on my laptop.',
  'It was ok. too many grid questions',
  'Short survey about streaming services, I liked that it had a progress bar.',
  'not bad, I got paid quickly',
  'A survey about coffee habits. Some questions were confusing but mostly straightforward.',
  'It crashed halfway so I had to start again, otherwise fine.',
  'Easy. took maybe 5 min',
];
const COLOURS = ['blue', 'Blue', 'green', 'red', 'purple', 'Dark green', 'black', 'yellow', 'orange', 'teal', 'navy blue', 'pink'];

// What this respondent answers: one radio, one to three devices, two texts, a 0-10 rating.
function answersFor(r) {
  const often = r.pick(['weekly', 'monthly', 'rarely']);
  const devices = ['phone', 'laptop', 'tablet'].filter(() => r.chance(0.55));
  if (!devices.length) devices.push(r.pick(['phone', 'laptop']));
  return {
    often,
    devices,
    experience: r.pick(EXPERIENCES),
    colour: r.pick(COLOURS),
    satisfaction: r.int(3, 10),
  };
}

// Ordinary desktop window sizes (outer) and the viewport a maximised browser leaves of them.
const DESKTOP_SCREENS = [
  { screen: [1920, 1080], viewport: [1920, 969] },
  { screen: [1366, 768], viewport: [1366, 657] },
  { screen: [1536, 864], viewport: [1536, 730] },
  { screen: [1440, 900], viewport: [1440, 789] },
  { screen: [1280, 800], viewport: [1280, 689] },
  { screen: [1680, 1050], viewport: [1680, 939] },
];

const DESKTOP_UA = (major) =>
  `Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${major}.0.0.0 Safari/537.36`;
const ANDROID_UA = (major) =>
  `Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${major}.0.0.0 Mobile Safari/537.36`;

function ordinaryUserAgent(original) {
  const m = /(?:Headless)?Chrome\/(\d+)/.exec(original || '');
  const major = m ? m[1] : '131';
  return /Android|Mobile/.test(original || '') ? ANDROID_UA(major) : DESKTOP_UA(major);
}

// --mask-environment: what an anti-detect browser would let the collector see. Drops every
// `environment` event and makes the `session` event's webdriver false and its user agent an
// ordinary Chrome one. Returns null when nothing is left to send (the caller answers locally).
function maskBody(body) {
  let parsed;
  try { parsed = JSON.parse(body); } catch (e) { return body; }
  if (!parsed || !Array.isArray(parsed.events)) return body;
  const events = parsed.events.filter((e) => !(e && e.type === 'environment'));
  for (const e of events) {
    if (e && e.type === 'session' && e.data) {
      e.data.webdriver = false;
      e.data.userAgent = ordinaryUserAgent(e.data.userAgent);
    }
  }
  if (!events.length) return null;
  parsed.events = events;
  return JSON.stringify(parsed);
}

const isCollectorPost = (url, method) => method === 'POST' && /\/event\/[0-9a-fA-F]{24}\//.test(url);

const sleep = (ms) => new Promise((res) => setTimeout(res, Math.max(0, ms)));

async function pool(items, concurrency, worker) {
  let i = 0;
  const runners = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (i < items.length) {
      const item = items[i++];
      await worker(item);
    }
  });
  await Promise.all(runners);
}

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

module.exports = {
  parseArgs, referenceFor, rng, answersFor, maskBody, ordinaryUserAgent, isCollectorPost, sleep, pool,
  DESKTOP_SCREENS, CHROMIUM, EXPERIENCES, COLOURS,
};
