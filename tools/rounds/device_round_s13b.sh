#!/usr/bin/env bash
# Session 13, call S13b: the batch-1 sparse MLA decode's hot source lines (mla_small_batch_probe's first variant,
# Auto = mma.sync MT 1 at S 32): Nsight Compute's SourceCounters (instructions executed and warp-stall samples per
# CUDA source line; the library is built with -lineinfo), exported as CSV and summed per line.
# Usage: tools/device_pack.sh build-lead mla_small_batch_probe; run `bash THIS`, carry [".device"]
set -u
. tools/device_round_lib.sh
device_round_begin s13b
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 200 $NCU --cache-control all --clock-control none -k regex:mla_decode_tc -c 1 --import-source yes \
  --section SourceCounters --section WarpStateStats --section InstructionStats -o $W/mla_src $BIN/mla_small_batch_probe \
  > $W/ncu.log 2>&1; echo "ncu rc=$?"; tail -2 $W/ncu.log
$NCU -i $W/mla_src.ncu-rep --page source --csv --print-source cuda --source-folders $PWD/kernels > $W/src_cuda.csv 2> $W/src.err
echo "cuda csv rc=$? lines=$(wc -l < $W/src_cuda.csv)"; head -c 600 $W/src_cuda.csv; echo
$NCU -i $W/mla_src.ncu-rep --page source --csv --print-source sass > $W/src_sass.csv 2>> $W/src.err
echo "sass csv rc=$? lines=$(wc -l < $W/src_sass.csv)"; head -c 400 $W/src_sass.csv; echo
$NCU -i $W/mla_src.ncu-rep --page details --section WarpStateStats --section InstructionStats --print-details all 2>&1 | grep -vi "^ *--" | head -60
device_round_pack
