#!/usr/bin/env bash
# One device call running every GPU test executable of a build, 4 at a time under 240 s each (tools/device_tests.sh),
# then kernels_gpu_moe_grouped alone (it needs ~244 s when it runs beside others). Calls made with it: S6j (session
# 6's final build), S7g (session 7's: the wgmma MLA kernel's bulk-copy FP8 feed).
#   tools/device_pack.sh build-lead glm5prof <every *_gpu_* executable>; run `bash THIS TAG` with carry [".device"]
set -u
TAG=${1:-gpu_tests}
tar xJf .device/pack.tar.xz -C .device
export LD_LIBRARY_PATH="$PWD/.device/lib:${LD_LIBRARY_PATH:-}" GLM5_SHARED_DIR="$PWD/.device/shared" GLM5_BINARY_DIR=$PWD/.device/bin
BIN=$PWD/.device/bin; W=$OUT/$TAG; mkdir -p $W/alone
mv $BIN/kernels_gpu_moe_grouped $W/alone/ 2>/dev/null
timeout 330 tools/device_tests.sh $BIN $W/tests 4 240 > $W/tests.txt 2>&1; echo "tests rc=$?"
timeout 200 $W/alone/kernels_gpu_moe_grouped > $W/moe_grouped.log 2>&1; echo "moe_grouped rc=$? ok=$(grep -c '^\[       OK \]' $W/moe_grouped.log) failed=$(grep -c '^\[  FAILED  \]' $W/moe_grouped.log)"
sed -n '/==== failures ====/,/==== measured ====/p' $W/tests.txt | head -40
sed -n '/==== table ====/,$p' $W/tests.txt
(cd $OUT && tar czf $TAG.tar.gz $TAG && rm -rf $TAG)
