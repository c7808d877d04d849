#!/usr/bin/env python3
"""The hand-off between layers in a glm5prof trace.json(.gz) (measured steps only): per (step, layer) the first
kernel's start and the end of attn.qkv_a_proj, against the previous layer's last kernel end. Prints the medians
(a negative start: the layer's first kernel was admitted early under programmatic dependent launch), which op and
kernel ended the previous layers, and four sample layers. The report's layer timeline (glm5prof analyze) measures
from each layer's own first kernel; this measures from the previous layer's end.
Usage: tools/layer_handoff.py TRACE.json[.gz]"""
import gzip, json, sys, statistics as st
if len(sys.argv) != 2:
    sys.exit(__doc__)
f = sys.argv[1]
d = json.load(gzip.open(f) if f.endswith('.gz') else open(f))
ev = d['traceEvents'] if isinstance(d, dict) else d
ks = [e for e in ev if e.get('ph') == 'X' and e.get('cat') == 'kernel' and 'args' in e and 'layer' in e['args']]
if not ks:
    ks = [e for e in ev if e.get('ph') == 'X' and 'args' in e and 'layer' in e['args'] and 'op' in e['args']]
by = {}
for e in ks:
    a = e['args']
    if a.get('step', -1) < 0: continue
    k = (a.get('step'), a['layer'])
    by.setdefault(k, []).append(e)
rows = []
for (s, l), es in sorted(by.items()):
    if l < 0: continue
    prev = by.get((s, l - 1))
    if not prev: continue
    pend = max(x['ts'] + x['dur'] for x in prev)
    first = min(x['ts'] for x in es)
    q = [x for x in es if x['args']['op'] == 'attn.qkv_a_proj']
    if not q: continue
    qe = max(x['ts'] + x['dur'] for x in q)
    last_prev = max(prev, key=lambda x: x['ts'] + x['dur'])
    rows.append((s, l, first - pend, qe - pend, last_prev['args']['op'], last_prev['name'][:60]))
print('layers', len(rows))
print('first start - prev last end: median %.2f us' % st.median(r[2] for r in rows))
print('qkv_a end - prev last end:   median %.2f us' % st.median(r[3] for r in rows))
from collections import Counter
print(Counter(r[4] for r in rows).most_common(3))
print(Counter(r[5] for r in rows).most_common(2))
for r in rows[40:44]: print(r)
