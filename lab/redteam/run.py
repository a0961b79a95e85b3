#!/usr/bin/env python3
"""Red-team runner for the Python families (node lab/redteam/run.js hands these tools here):

    python3 lab/redteam/run.py --base URL --key TRACKING_KEY --tool NAME --seeds FROM-TO
                           [--concurrency N] [--mask-environment]

Each session runs in a child process (the families that drive the OS pointer need a display of
their own, so those children run under xvfb-run) and prints one JSON line."""
import argparse
import concurrent.futures
import importlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from pyfamilies.common import Rng, answers_for, reference_for  # noqa: E402

FAMILIES = {
    'selenium-humancursor': ('pyfamilies.selenium_humancursor', True),  # HumanCursor imports pyautogui, which opens $DISPLAY
    'pw-stealth-oxymouse': ('pyfamilies.pw_stealth_oxymouse', False),
    'xvfb-pyclick': ('pyfamilies.xvfb_pyclick', True),   # needs an X display
}
SESSION_TIMEOUT_S = 300


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--base', required=True)
    ap.add_argument('--key', required=True, help='the survey tracking key')
    ap.add_argument('--tool', required=True, choices=sorted(FAMILIES))
    ap.add_argument('--seeds', required=True, help='FROM-TO (or one number)')
    ap.add_argument('--concurrency', type=int, default=1)
    ap.add_argument('--mask-environment', action='store_true')
    ap.add_argument('--one', type=int, help=argparse.SUPPRESS)  # child: run this seed in-process
    args = ap.parse_args(argv)
    args.base = args.base.rstrip('/')
    parts = args.seeds.split('-')
    if len(parts) > 2 or not all(p.isdigit() for p in parts):
        ap.error('--seeds is FROM-TO')
    args.seed_from, args.seed_to = int(parts[0]), int(parts[-1])
    if args.seed_to < args.seed_from:
        ap.error('--seeds FROM-TO needs FROM <= TO')
    return args


def run_one(args, seed):
    """Child process: one session, one JSON line."""
    module_name, _ = FAMILIES[args.tool]
    family = importlib.import_module(module_name)
    reference = reference_for(args.tool, seed)
    r = Rng(args.tool, seed)
    answers = answers_for(r)
    url = f'{args.base}/demo/{args.key}?response={reference}'
    started = time.monotonic()
    line = {'reference': reference, 'tool': args.tool, 'seed': seed, 'ok': False, 'seconds': 0}
    try:
        family.run(url=url, r=r, answers=answers, base=args.base, mask_environment=args.mask_environment)
        line['ok'] = True
    except Exception as e:  # report, never crash the batch
        line['error'] = (f'{type(e).__name__}: {e}'.splitlines() or [''])[0][:300]
        if os.environ.get('REDTEAM_DEBUG'):
            traceback.print_exc()
    line['seconds'] = round(time.monotonic() - started, 1)
    print(json.dumps(line, separators=(',', ':')), flush=True)
    return 0 if line['ok'] else 1


def spawn(args, seed):
    _, needs_display = FAMILIES[args.tool]
    cmd = [sys.executable, os.path.abspath(__file__), '--base', args.base, '--key', args.key,
           '--tool', args.tool, '--seeds', str(seed), '--one', str(seed)]
    if args.mask_environment:
        cmd.append('--mask-environment')
    if needs_display:
        # A display per session: the OS pointer is one per X server.
        cmd = ['xvfb-run', '-a', '-s', '-screen 0 1920x1080x24 -nolisten tcp'] + cmd
    started = time.monotonic()
    reference = reference_for(args.tool, seed)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
        out, _ = proc.communicate(timeout=SESSION_TIMEOUT_S)
        for line in out.splitlines():
            if line.startswith('{'):
                return line
        return json.dumps({'reference': reference, 'tool': args.tool, 'seed': seed, 'ok': False,
                           'seconds': round(time.monotonic() - started, 1),
                           'error': f'session process exited {proc.returncode} without a result'})
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return json.dumps({'reference': reference, 'tool': args.tool, 'seed': seed, 'ok': False,
                           'seconds': round(time.monotonic() - started, 1), 'error': 'session timed out'})


def main(argv):
    args = parse(argv)
    if args.one is not None:
        return run_one(args, args.one)
    seeds = range(args.seed_from, args.seed_to + 1)
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.concurrency)) as pool:
        for line in pool.map(lambda s: spawn(args, s), seeds):
            print(line, flush=True)
            failures += 0 if json.loads(line).get('ok') else 1
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
