#!/usr/bin/env bash
# Device call S8f (reports/2026-11-30-h200-mla-wgmma-probe.md): tools/probe/dequant_probe (e4m3 -> bf16 variants,
# checked bitwise, then timed) and the SASS instruction mix of its kernels and of the wgmma MLA kernel's FP8 variant.
# (The wgmma kernel name below is the S8f build's, before the cluster variant added a template parameter.)
# Pack: nvcc -std=c++20 -O3 -arch=sm_90a -I. -Isrc tools/probe/dequant_probe.cu -o build-lead/dequant_probe;
#       tools/device_pack.sh build-lead dequant_probe kernels_gpu_mla_decode; run `bash THIS` with carry [".device"].
tar xJf .device/pack.tar.xz -C .device
B=.device/bin
$B/dequant_probe; echo "rc=$?"
CO=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null); echo "cuobjdump: $CO"
if [ -n "$CO" ]; then
  $CO -sass $B/dequant_probe > $OUT/dq.sass 2>&1
  for f in time_kernelILi0 time_kernelILi1 time_kernelILi2 time_kernelILi3; do
    echo "== $f"; awk -v f="$f" '/Function :/ {p = index($0, f) > 0} p' $OUT/dq.sass | grep -oE "^\s+/\*[0-9a-f]+\*/\s+[A-Z0-9_.]+" | awk '{print $2}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -14
  done
  $CO -sass -fun '_ZN4glm56mla_wg23mla_decode_wgmma_kernelILb1ELb0EEEvNS_15MlaDecodeParamsEi14CUtensorMap_st' $B/kernels_gpu_mla_decode > $OUT/wg.sass 2>&1
  echo "== wgmma fp8 kernel"; grep -oE "^\s+/\*[0-9a-f]+\*/\s+[A-Z0-9_.]+" $OUT/wg.sass | awk '{print $2}' | sort | uniq -c | sort -rn | grep -E "F2F|HADD2|F2FP|PRMT|FMUL|HMUL" 
fi
