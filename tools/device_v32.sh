#!/usr/bin/env bash
# DeepSeek-V3.2-Exp (built-in `deepseek-v32`: DeepSeek-V3 dims + 64-head DSA indexer, top-2048,
# split-half indexer RoPE), one TP8 rank on one GPU, the three FP8 KV paths (cast, gather-cast, fp8)
# at a 32k context, as reports/2026-11-29-h200-deepseek-v3-tp8-rank0.md ran DeepSeek-V3.
#   tools/device_v32.sh BIN OUT        (run from the repository root on the GPU machine)
# BATCHES (env, default "1 16") picks the batch sizes.
# Writes OUT/v32-b{1,16}/ (report.json, report.md, trace.json) and OUT/v32-b{1,16}.log.
set -u
# Libraries built here that the GPU image lacks (e.g. libsimdjson) travel in .device/lib.
[ -d .device/lib ] && export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}"
bin=${1:?usage: tools/device_v32.sh BIN OUT}; out=${2:?usage: tools/device_v32.sh BIN OUT}
mkdir -p "$out"
common=(--model deepseek_v32 --tp 8 --rank 0 --context 32768 --pool-tokens 131072 --steps 8 --warmup 2 --kv-path all)
for b in ${BATCHES:-1 16}; do
  timeout 280 "$bin/glm5prof" profile "${common[@]}" --batch "$b" --out "$out/v32-b$b" > "$out/v32-b$b.log" 2>&1
  echo "deepseek_v32 tp8 rank0 b$b rc=$?"
  grep -iE "path|error|cupti|fallback" "$out/v32-b$b.log" | head -20
done
# The per-path step / cast numbers from report.json (python3 is on the device image).
for b in ${BATCHES:-1 16}; do
  f="$out/v32-b$b/report.json"
  [ -f "$f" ] && python3 - "$f" "$b" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ops = lambda run, pre: sum(o["time_us"] for o in run.get("ops", []) if o["op"].startswith(pre))
for run in r.get("runs", []):
    st = run.get("steps", {})
    print("b%s %-12s source %-10s step median %8.1f us  attention %8.1f us  cast %7.1f us  indexer %7.1f us  complete %s" % (
        sys.argv[2], run.get("name"), run.get("source"), st.get("median_us", 0), run.get("attention_us", 0),
        run.get("cast_us", 0), ops(run, "attn.indexer"), run.get("complete")))
PY
done
exit 0
