#!/usr/bin/env bash
# Session 28, call S28i. WG1 issues tile i + 2's code copies panel by panel as its P . V releases them (four commit
# groups, each warp waiting for its own panel's: early_issue_pv, GLM5_MLA_WG_EARLY_ISSUE, on in mla_wgmma_probe)
# against the same build issuing after the whole P . V (probe_p0, -DGLM5_MLA_WG_EARLY_ISSUE=0). Predicted: the copies
# start up to ~1k cycles earlier on the tile loop's latency chain, -3..10% at batch 64-128; same results bitwise.
# Result (H100): fp16 form -0.7..-0.9% (B 128 x 128 heads 226.4 against 228.1 us), bf16 form -1.7..+0.9%: WG1's wait
# for P fell from ~2.5k to ~0.5k cycles per tile but the tile did not shorten. Not kept (not in any commit).
# Usage: tools/device_pack.sh build-lead mla_wgmma_probe probe_p0
set -u
. tools/device_round_lib.sh
device_round_begin s28i
for v in p0 p1; do
  exe=$BIN/mla_wgmma_probe; [ $v = p0 ] && exe=$BIN/probe_p0
  timeout 30 $exe > $W/probe_${v}_bf16.txt 2>&1; echo "probe $v bf16 rc=$?"
  GLM5_PROBE_F16=1 timeout 30 $exe > $W/probe_${v}_f16.txt 2>&1; echo "probe $v f16 rc=$?"
done
for f in bf16 f16; do
  echo "== $f operands: after the whole P . V / early issue"
  paste -d'\n' $W/probe_p0_$f.txt $W/probe_p1_$f.txt | grep -E 'B=|producer|WG0|WG1|check' | head -40
done
device_round_pack
