#!/usr/bin/env bash
# Device call S6f (2026-11-30): phase probes of the wgmma MLA kernel's producer variants (rows in flight per
# producer warp 2 / 4, L2 prefetch on / off, and no global loads at all).
#   tools/device_pack.sh build-lead probe_f2_p1 probe_f4_p1 probe_f2_p0 probe_f4_p0 probe_noload
set -u
tar xJf .device/pack.tar.xz -C .device
for b in probe_f2_p1 probe_f4_p1 probe_f2_p0 probe_f4_p0 probe_noload; do
  echo "=== $b"; timeout 60 .device/bin/$b 2>&1 | grep -A4 -E "^B=(64 H=64|128 H=128)"
done
