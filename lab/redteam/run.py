#!/usr/bin/env python3
"""Red-team runner for the Python families (node lab/redteam/run.js hands these tools here):

    python3 lab/redteam/run.py --base URL --key TRACKING_KEY --tool NAME --seeds FROM-TO
                           [--concurrency N] [--mask-environment]

Each session runs in a child process (the families that drive the OS pointer need a display of
their own, so those children run under xvfb-run) and prints one JSON line.

Connect mode, one session in a browser the harness launched on its X display (never launched,
closed or masked here; the reference is PAGE_URL's response=):

    python3 lab/redteam/run.py --tool NAME --seed S --connect http://127.0.0.1:PORT --display :N
                           --url PAGE_URL --window X,Y,W,H"""
import argparse
import concurrent.futures
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from urllib.parse import parse_qs, urlparse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from pyfamilies.common import Rng, answers_for, reference_for  # noqa: E402

FAMILIES = {
    'selenium-humancursor': ('pyfamilies.selenium_humancursor', True),  # HumanCursor imports pyautogui, which opens $DISPLAY
    'pw-stealth-oxymouse': ('pyfamilies.pw_stealth_oxymouse', False),
    'xvfb-pyclick': ('pyfamilies.xvfb_pyclick', True),   # needs an X display
    'xdotool-agent': ('pyfamilies.xdotool_agent', True),  # needs an X display
}
SESSION_TIMEOUT_S = 300
# A computer-use agent takes a model call and a 2 s screenshot delay per action: minutes.
TIMEOUT_S = {'xdotool-agent': 600}


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--base')
    ap.add_argument('--key', help='the survey tracking key')
    ap.add_argument('--tool', required=True, choices=sorted(FAMILIES))
    ap.add_argument('--seeds', help='FROM-TO (or one number)')
    ap.add_argument('--concurrency', type=int, default=1)
    ap.add_argument('--mask-environment', action='store_true')
    ap.add_argument('--seed', type=int, help='connect mode: the session\'s seed')
    ap.add_argument('--connect', help='connect mode: the DevTools endpoint http://127.0.0.1:PORT')
    ap.add_argument('--display', help='connect mode: the X display :N')
    ap.add_argument('--url', help='connect mode: the survey page (its response= is the reference)')
    ap.add_argument('--window', help='connect mode: the window X,Y,W,H')
    ap.add_argument('--one', type=int, help=argparse.SUPPRESS)  # child: run this seed in-process
    args = ap.parse_args(argv)
    if args.connect is not None:
        missing = [k for k in ('seed', 'display', 'url', 'window') if getattr(args, k) is None]
        if missing:
            ap.error('--connect needs ' + ', '.join('--' + k for k in missing))
        if args.seeds or args.base or args.key or args.mask_environment or args.concurrency > 1:
            ap.error('--connect runs one session: no --seeds, --base, --key, --concurrency or --mask-environment')
        args.connect = args.connect.rstrip('/')
        if not re.fullmatch(r'https?://[^/]+', args.connect):
            ap.error('--connect is http://HOST:PORT (the DevTools HTTP endpoint)')
        if not re.fullmatch(r':\d+(\.\d+)?', args.display):
            ap.error('--display is :N')
        try:
            x, y, w, h = (int(v) for v in args.window.split(','))
        except ValueError:
            ap.error('--window is X,Y,W,H')
        args.window = (x, y, w, h)
        page = urlparse(args.url)
        args.reference = (parse_qs(page.query).get('response') or [''])[0]
        if not args.reference:
            ap.error('--url has no response= parameter (the session reference)')
        args.base = f'{page.scheme}://{page.netloc}'
        args.seed_from = args.seed_to = args.seed
        return args
    if not (args.base and args.key and args.seeds):
        ap.error('--base, --key and --seeds are required (or --connect ...)')
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
    connect = None
    if args.connect is not None:
        reference, url = args.reference, args.url
        connect = {'browser_url': args.connect, 'display': args.display, 'window': args.window}
    else:
        reference = reference_for(args.tool, seed)
        url = f'{args.base}/demo/{args.key}?response={reference}'
    r = Rng(args.tool, seed)
    answers = answers_for(r)
    started = time.monotonic()
    line = {'reference': reference, 'tool': args.tool, 'seed': seed, 'ok': False, 'seconds': 0}
    try:
        if connect:
            family.run(url=url, r=r, answers=answers, base=args.base, mask_environment=False, connect=connect)
        else:
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
    env = None
    if args.connect is not None:
        # The harness's browser and display: no xvfb-run, DISPLAY is the harness's.
        cmd = [sys.executable, os.path.abspath(__file__), '--tool', args.tool, '--seed', str(seed),
               '--connect', args.connect, '--display', args.display, '--url', args.url,
               '--window', ','.join(str(v) for v in args.window), '--one', str(seed)]
        env = {**os.environ, 'DISPLAY': args.display}
        reference = args.reference
    else:
        cmd = [sys.executable, os.path.abspath(__file__), '--base', args.base, '--key', args.key,
               '--tool', args.tool, '--seeds', str(seed), '--one', str(seed)]
        if args.mask_environment:
            cmd.append('--mask-environment')
        if needs_display:
            # A display per session: the OS pointer is one per X server.
            cmd = ['xvfb-run', '-a', '-s', '-screen 0 1920x1080x24 -nolisten tcp'] + cmd
        reference = reference_for(args.tool, seed)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True, env=env)
        out, _ = proc.communicate(timeout=TIMEOUT_S.get(args.tool, SESSION_TIMEOUT_S))
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
