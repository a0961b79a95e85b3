#!/usr/bin/env node
'use strict';
// Red-team runner: one demo-survey session per seed with the named tool, one JSON line each.
//   node lab/redteam/run.js --base URL --key TRACKING_KEY --tool NAME --seeds FROM-TO
//                       [--concurrency N] [--mask-environment]
// Connect mode: one session in a browser the harness launched and shows on an X display:
//   node lab/redteam/run.js --tool NAME --seed S --connect http://127.0.0.1:PORT --display :N
//                       --url PAGE_URL --window X,Y,W,H
// Node families run here; Python families are handed to run.py with the same arguments.
const path = require('path');
const { spawn } = require('child_process');
const { parseArgs, referenceFor, rng, answersFor, pool } = require('./lib/common');

const NODE_FAMILIES = {
  'pptr-stealth': './families/pptr_stealth',
  'pw-keyboard': './families/pw_keyboard',
  'pw-touch': './families/pw_touch',
  'llm-agent': './families/llm_agent',
};
const PYTHON_FAMILIES = ['selenium-humancursor', 'pw-stealth-oxymouse', 'xvfb-pyclick', 'xdotool-agent'];
const SESSION_TIMEOUT_MS = 300000;

function usage() {
  return 'usage: node lab/redteam/run.js --base URL --key TRACKING_KEY --tool NAME --seeds FROM-TO ' +
    '[--concurrency N] [--mask-environment]\n' +
    '       node lab/redteam/run.js --tool NAME --seed S --connect http://127.0.0.1:PORT --display :N ' +
    '--url PAGE_URL --window X,Y,W,H\ntools: ' + [...Object.keys(NODE_FAMILIES), ...PYTHON_FAMILIES].join(', ');
}

async function main() {
  let args;
  try { args = parseArgs(process.argv.slice(2)); } catch (e) { console.error(e.message + '\n' + usage()); process.exit(2); }
  if (args.help || args.list) { console.log(usage()); return; }
  if (args.connect === undefined && (!args.base || !args.key || !args.tool || args.from === undefined)) {
    console.error(usage()); process.exit(2);
  }

  if (PYTHON_FAMILIES.includes(args.tool)) {
    const child = spawn('python3', [path.join(__dirname, 'run.py'), ...process.argv.slice(2)], { stdio: 'inherit' });
    child.on('exit', (code) => process.exit(code === null ? 1 : code));
    return;
  }
  const modulePath = NODE_FAMILIES[args.tool];
  if (!modulePath) { console.error(`unknown tool ${args.tool}\n` + usage()); process.exit(2); }
  const family = require(modulePath);

  if (args.connect !== undefined) {
    const ok = await runConnected(family, args);
    process.exit(ok ? 0 : 1);
  }

  const seeds = [];
  for (let s = args.from; s <= args.to; s++) seeds.push(s);
  let failures = 0;
  await pool(seeds, args.concurrency, async (seed) => {
    const reference = referenceFor(args.tool, seed);
    const url = `${args.base}/demo/${args.key}?response=${reference}`;
    const r = rng(args.tool, seed);
    const answers = answersFor(r);
    const started = Date.now();
    const line = { reference, tool: args.tool, seed, ok: false, seconds: 0 };
    let timer;
    try {
      await Promise.race([
        family.run({ url, reference, seed, r, answers, base: args.base, maskEnvironment: args.maskEnvironment }),
        new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('session timed out')), SESSION_TIMEOUT_MS); }),
      ]);
      line.ok = true;
    } catch (e) {
      line.error = String((e && e.message) || e).split('\n')[0].slice(0, 300);
      failures++;
    } finally {
      clearTimeout(timer);
    }
    line.seconds = Math.round((Date.now() - started) / 100) / 10;
    process.stdout.write(JSON.stringify(line) + '\n');
  });
  process.exit(failures ? 1 : 0);
}

// Connect mode: one session, in the harness's browser (never launched or closed here). The
// reference is the page's response= (the harness draws it); choices still come from tool and seed.
async function runConnected(family, args) {
  const r = rng(args.tool, args.seed);
  const answers = answersFor(r);
  const started = Date.now();
  const line = { reference: args.reference, tool: args.tool, seed: args.seed, ok: false, seconds: 0 };
  const connect = { browserURL: args.connect, display: args.display, window: args.window };
  let timer;
  try {
    await Promise.race([
      family.run({ url: args.url, reference: args.reference, seed: args.seed, r, answers, base: args.base, maskEnvironment: false, connect }),
      new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('session timed out')), SESSION_TIMEOUT_MS); }),
    ]);
    line.ok = true;
  } catch (e) {
    line.error = String((e && e.message) || e).split('\n')[0].slice(0, 300);
  } finally {
    clearTimeout(timer);
  }
  line.seconds = Math.round((Date.now() - started) / 100) / 10;
  process.stdout.write(JSON.stringify(line) + '\n');
  return line.ok;
}

main().catch((e) => { console.error(e); process.exit(1); });
