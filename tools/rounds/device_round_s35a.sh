#!/usr/bin/env bash
# Session 35, call S35a: the flat top-k (TopkParams::flat_workspace, --topk-flat on): per request a grid of
# 512-thread blocks that fit beside the score kernel's, the k-th key resolved by the last block to finish, instead
# of a cluster of 8 whole SMs. Predicted at batch 1 / 32K: the top-k ends ~5-6 us after the score kernel instead of
# ~13 (S22b, H200): -5 to -7 us per layer, -0.4 to -0.55 ms per step. Tests first (stop on failure); the indexer
# bench (score + top-k pairs, the flat form beside the cluster form); A/B at batch 1 (4 processes, each
# report's layer timeline printed for one of each form), the quick indexer bench, batch 8 (2 processes); in order of
# value, since the call may be cut short by the session's device time.
# Usage: (cd build-lead && make glm5prof kernels_gpu_topk_paths engine_gpu_graph); tools/device_pack.sh build-lead glm5prof
#        kernels_gpu_topk_paths engine_gpu_graph; run `bash THIS` with carry [".device"], timeout 600
set -u
. tools/device_round_lib.sh
device_round_begin s35a
device_round_card
device_round_test kernels_gpu_topk_paths 200 || { echo "top-k tests failed: no timing"; device_round_pack; exit 0; }
device_round_test engine_gpu_graph 150 --gtest_filter='*TopkFlat*' || { echo "flat engine test failed: no timing"; device_round_pack; exit 0; }
grep -E "flat top-k kernels" $W/engine_gpu_graph.log
OPS="attn.indexer.topk|attn.indexer.score|attn.mla"
device_round_ab "$OPS" "A B B A" "--topk-flat on" "--topk-flat off"
for r in b1-1-A b1-2-B; do echo "== $r layer timeline"; device_round_layer_timeline $W/$r | head -24; done
timeout 150 $BIN/glm5prof bench kernels --quick --only indexer --out $W/indexer.json > $W/indexer.txt 2> $W/indexer.err
echo "bench indexer rc=$?"; tail -2 $W/indexer.err
python3 -c "
import json
for r in json.load(open('$W/indexer.json')):
    if r['kernel'] in ('indexer_score', 'indexer_score_topk') and r['batch'] in (1, 8, 32) and r['context'] in (32768, 131072):
        print(r['kernel'], 'B', r['batch'], 'ctx', r['context'], round(r['median_us'], 2), 'us;', r.get('check', '').split('; ', 1)[-1][:70])
" 2>&1 | head -40
device_round_ab_at 8 32768 "$OPS" "A B" "--topk-flat on" "--topk-flat off"
device_round_pack
