// FP8 block-scaled GEMV fed by the Tensor Memory Accelerator (TMA), m = 1 (batch-1 decode).
//
// Why another GEMV: the register-fed FP8 GEMV (linear_fp8.h) streams weights at ~60% of DRAM peak at
// m = 1 (Nsight Compute on the H200, reports/2026-11-29-h200-decode-step.md run P5): it is latency-bound,
// the bytes it keeps in flight per SM are bounded by registers x occupancy (~24 KB), and HBM3e's loaded
// latency needs more (Little's law: ~32 GB/s per SM x ~1-1.5 us ~ 32-48 KB). Here the weight bytes land in a
// shared-memory ring filled by 2-D TMA copies, so the bytes in flight are set by the ring
// (stages x 32 KB per CTA), not by registers.
//
// Design (written before measuring; kernels/linear_fp8_tma.cu has the details):
// - A CTA owns box_rows (256 by default) output rows and a range of 128-column weight blocks (split-K). One
//   producer thread issues the stage's cp.async.bulk.tensor.2d boxes: 256 / box_rows boxes of [box_rows x 128
//   columns] FP8 (32 KB per stage, the 128-byte swizzle so the consumers' 16-byte reads are bank-conflict
//   free), completing on that stage's "full" mbarrier; eight consumer warps (256 / box_rows threads per
//   row, one box each) dot their row's codes with x and arrive on the stage's "empty" mbarrier. No
//   CTA-wide barrier in the loop.
//   Measured (H200, session 5, box_rows 256): no faster than linear_fp8_gemv (o_proj 41.3 vs 39.2 us), so
//   it is not the default (LinearContext::fp8_tma_gemv); box_rows 64 / 128 test the DRAM access pattern.
// - The weight bytes do not depend on the previous kernel: the producer starts the ring before
//   griddepcontrol.wait (PDL); the consumers wait before reading x.
// - Split-K partials [S][n] are summed in split order by the last CTA of each row block (a counter per
//   row block, left at zero), so the result is deterministic.
// Arithmetic per row: sum over 128-column blocks b of w_scale[r/128][b] * (sum_c x[c] * e4m3(w[r, c])),
// fp32, the same grouping as linear_fp8_gemv (per-block partial times the block scale).
// Supported: m == 1, F8_E4M3 weights with scales, k % 16 == 0, w and x 16-byte aligned, row stride (ldw) a
// multiple of 16 bytes; columns past k and rows past n are zero-filled by the TMA.
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

#include "kernels/linear.h"

namespace glm5 {

bool linear_fp8_tma_supported(const LinearParams& p);
// box_rows (64, 128 or 256; tuning): rows per CTA; a 32 KB ring stage holds 256 / box_rows boxes of
// [box_rows x 128 columns] at adjacent column blocks, i.e. 128 x 256 / box_rows contiguous bytes of each
// weight row per stage (256: the first design; 64: 512 B per row, the DRAM pattern of the register GEMV).
// Split count the launcher uses for `p` (splits = 0) and the partial / counter sizes it needs.
int linear_fp8_tma_splits(const LinearParams& p, int box_rows = 256, int stages = 3);
// floats: S * n (0 when S == 1)
size_t linear_fp8_tma_partial(const LinearParams& p, int splits = 0, int box_rows = 256, int stages = 3);
size_t linear_fp8_tma_counters(const LinearParams& p);  // ints: ceil(n / 64) (any box_rows)
// y[n] (=|+=) x[k] W^T. `partial` >= linear_fp8_tma_partial(p, splits, box_rows, stages) floats, `counters` >=
// linear_fp8_tma_counters(p) ints, zero before the first call (each call leaves them zero); one stream
// at a time per counter array. splits 0: linear_fp8_tma_splits(p, box_rows, stages), else at most ceil(k / 128)
// and at least what keeps a CTA's x slice within its shared memory (2 CTAs per SM at 2-3 stages);
// stages: 2..4 ring stages (tuning).
// Throws glm5::Error when unsupported, on a bad stages / box_rows, on too small buffers, or when the
// driver refuses the tensor map.
void linear_fp8_tma_cuda(const LinearParams& p, float* partial, size_t partial_elems, int* counters,
                         size_t counter_elems, cudaStream_t stream, int splits = 0, int stages = 3,
                         int box_rows = 256);

}  // namespace glm5
