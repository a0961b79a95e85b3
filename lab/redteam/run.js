#!/usr/bin/env node
'use strict';
// Red-team runner: one demo-survey session per seed with the named tool, one JSON line each.
//   node lab/redteam/run.js --base URL --key TRACKING_KEY --tool NAME --seeds FROM-TO
//                       [--concurrency N] [--mask-environment]
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
const PYTHON_FAMILIES = ['selenium-humancursor', 'pw-stealth-oxymouse', 'xvfb-pyclick'];
const SESSION_TIMEOUT_MS = 300000;

function usage() {
  return 'usage: node lab/redteam/run.js --base URL --key TRACKING_KEY --tool NAME --seeds FROM-TO ' +
    '[--concurrency N] [--mask-environment]\ntools: ' + [...Object.keys(NODE_FAMILIES), ...PYTHON_FAMILIES].join(', ');
}

async function main() {
  let args;
  try { args = parseArgs(process.argv.slice(2)); } catch (e) { console.error(e.message + '\n' + usage()); process.exit(2); }
  if (args.help || args.list) { console.log(usage()); return; }
  if (!args.base || !args.key || !args.tool || args.from === undefined) { console.error(usage()); process.exit(2); }

  if (PYTHON_FAMILIES.includes(args.tool)) {
    const child = spawn('python3', [path.join(__dirname, 'run.py'), ...process.argv.slice(2)], { stdio: 'inherit' });
    child.on('exit', (code) => process.exit(code === null ? 1 : code));
    return;
  }
  const modulePath = NODE_FAMILIES[args.tool];
  if (!modulePath) { console.error(`unknown tool ${args.tool}\n` + usage()); process.exit(2); }
  const family = require(modulePath);

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

main().catch((e) => { console.error(e); process.exit(1); });
