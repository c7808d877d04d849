#!/usr/bin/env bash
# Device call F (2026-11-29, session 3): the round-1 GPU requests of the indexer and linear-mma work
# (their scripts travel in .device/req/). Pack first: tools/device_pack.sh build-lead <binaries>.
set -u
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 ))s]"; }
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared" BIN=$PWD/.device/bin
ROOT=$OUT
for r in ${REQS:-indexer mma}; do
  mkdir -p "$ROOT/$r"
  OUT=$ROOT/$r timeout "${REQ_TIMEOUT:-250}" bash .device/req/gpu-request-$r.sh > "$ROOT/$r/stdout.txt" 2>&1
  echo "$r rc=$? $(el)"
  tail -25 "$ROOT/$r/stdout.txt"
done
(cd "$ROOT" && tar czf "${TARNAME:-f}.tar.gz" ${REQS:-indexer mma} && rm -rf ${REQS:-indexer mma})
echo "done $(el)"
