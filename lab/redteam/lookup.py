#!/usr/bin/env python3
"""Capture check for runner output: reads the runner's JSON lines (stdin or files), looks their
references up (POST /integrations/v1/surveys/{id}/sessions/lookup) and prints each line with
`captured` and `eventCount` added. Only those two fields are copied: no scores.

    node lab/redteam/run.js ... > out.jsonl
    python3 lab/redteam/lookup.py --base URL --api-key tt_... --survey-id ID out.jsonl"""
import argparse
import fileinput
import json
import sys
import urllib.request


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--base', required=True)
    ap.add_argument('--api-key', required=True, help='integration key (Bearer)')
    ap.add_argument('--survey-id', required=True)
    ap.add_argument('files', nargs='*')
    args = ap.parse_args()
    lines = [json.loads(l) for l in fileinput.input(args.files or ['-']) if l.strip().startswith('{')]
    found = {}
    refs = [l['reference'] for l in lines]
    for i in range(0, len(refs), 100):
        req = urllib.request.Request(
            f"{args.base.rstrip('/')}/integrations/v1/surveys/{args.survey_id}/sessions/lookup",
            data=json.dumps({'externalReferences': refs[i:i + 100]}).encode(), method='POST',
            headers={'Authorization': f'Bearer {args.api_key}', 'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=30) as resp:
            for row in json.load(resp)['data']:
                found[row['externalReference']] = {'captured': row.get('captured'), 'eventCount': row.get('eventCount')}
    for l in lines:
        l.update(found.get(l['reference'], {'captured': False, 'eventCount': 0}))
        print(json.dumps(l))
    return 0


if __name__ == '__main__':
    sys.exit(main())
