#!/usr/bin/env python3
"""One line per record of a decode_step_bench.sh result (decode-step.json), for the device-call scripts' output.
Usage: tools/decode_step_summary.py OUT/decode-step.json"""
import json
import sys

for r in json.load(open(sys.argv[1])):
    if 'skipped' in r:
        print('skipped', r.get('batch'), r.get('skipped'))
        continue
    print(r['weights_dtype'], 'b%d' % r['batch'], 'ctx', r['context'], r['kv_path'], 'graph', int(r['graph']),
          '%.2f ms' % (r['step_us'] / 1e3), 'ratio %.2f' % r['ratio'], 'traced %.2f' % (r['traced_step_us'] / 1e3))
