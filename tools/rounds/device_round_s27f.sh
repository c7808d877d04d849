#!/usr/bin/env bash
# (Record of the call as run. The paired dequantization it measured was reverted in session 27: the st.shared::cluster
# form 1.4x slower (S27b/S27c); the bulk-copy form hung at >= 2 tiles per CTA (copies completed on the partner's
# buffer-0 barriers), fixed in S27g it was 11-13% slower; reports/2026-12-04-h200-kv-kernels.md.)
# Session 27, call S27f. S27d / S27e: the paired MLA form (bulk copies to the partner) hangs. This call runs only the
# phase probe built with bounded waits (GLM5_MLA_WGMMA_PROBE: each paired wait gives up after ~1 s and records its
# barrier, tile, thread, CTA and cluster rank) on the paired shapes, B 2 x 128 heads first.
# Usage: tools/device_pack.sh build-lead mla_wgmma_probe; `bash THIS`
set -u
. tools/device_round_lib.sh
device_round_begin s27f
GLM5_PROBE_PAIR=1 timeout 40 $BIN/mla_wgmma_probe > $W/probe_pair.txt 2>&1; echo "probe pair rc=$?"
head -60 $W/probe_pair.txt
device_round_pack
