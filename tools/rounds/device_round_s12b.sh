set -u
. tools/device_round_lib.sh
device_round_begin s12b
timeout 120 $BIN/kernels_gpu_kv_cast > $W/kv_cast_test.log 2>&1; echo "kv_cast test rc=$?"
grep -E "FAILED|PASSED|Failure|tuning rows 32 stages 3|copy_d2d" $W/kv_cast_test.log | head
timeout 150 $BIN/glm5prof bench kernels --only cast --reps 20 --out $W/cast.json > $W/cast.txt 2>&1; echo "cast bench rc=$?"
grep -E "kv_|copy|gemm" $W/cast.txt | head -30
device_round_step "1 32" fp8 1 330 "^\| (attn.mla|attn.kv|kv)"
device_round_pack
