// Hopper warpgroup matrix products (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate",
// wgmma.mma_async, sm_90a only) for BF16 operands in shared memory: the building block of the next
// MLA decode kernel (reports/2026-11-29-h200-kv-kernels.md, session 5: FlashMLA's wgmma kernel takes
// 0.37-0.50x our mma.sync kernel's time at batch 64 / 128). Checked on its own by
// tests/kernels/gpu_wgmma.cu before any kernel relies on it.
//
// Operand layout ("K-major, 128-byte swizzle", PTX ISA "Shared Memory Matrix Layout"): a matrix of R rows x
// K bf16 columns (K contiguous) is stored as K / 64 panels of [R rows x 64 columns]; a panel is R rows of
// 128 bytes, 1024-byte aligned, and the 16-byte chunk c (columns 8c..8c+7) of row r sits at byte
// r * 128 + ((c ^ (r % 8)) * 16) of its panel (the pattern TMA's CU_TENSOR_MAP_SWIZZLE_128B writes).
// The 16-column k-step s (0..3) of a panel is addressed by advancing the descriptor's start address by
// 32 * s bytes inside the swizzle atom; 8-row groups are 1024 bytes apart (the stride byte offset).
// The same bytes read as an MN-major B operand (transposed B: rows = the k dimension, 64 n-columns per
// panel; CUTLASS's canonical "MN-major, 128B" layout: 8-row x 128-byte atoms 1024 B apart along k) give
// O = P . V straight from V's stored rows: k-step s starts 16 rows (2048 B) further.
//
// Accumulators of m64nNk16 with fp32 D (N / 2 registers per thread; thread t of the 128 in the warpgroup,
// warp w = t / 32, lane l = t % 32): register 4i + e holds row 16 w + l / 4 + 8 (e / 2), column
// 8 i + 2 (l % 4) + (e % 2) (the mma.sync m16n8 C layout, repeated over the n8 blocks): acc_row / acc_col.
#pragma once
#include <cstdint>

#include "kernels/launch.cuh"
#include "kernels/mbarrier.cuh"  // fence_proxy_async

namespace glm5 {
namespace wgmma {

// Byte offset of element (row, col) in a K-major 128-byte-swizzled bf16 operand of `rows` rows
// (K / 64 panels of rows x 128 bytes).
__host__ __device__ __forceinline__ uint32_t sw128_offset(int row, int col, int rows) {
  const int panel = col / 64, c = col % 64;
  return uint32_t(panel * rows * 128 + row * 128 + ((((c * 2) >> 4) ^ (row & 7)) << 4) + ((c * 2) & 15));
}

// Shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address >> 4 in bits
// 0-13, leading-dimension byte offset >> 4 in 16-29, stride-dimension byte offset >> 4 in 32-45 (1024 B
// between 8-row groups), base offset 0 in 49-51 (panels are 1024-byte aligned), swizzle mode in 62-63
// (1: 128-byte). The leading byte offset is not used by the swizzled K-major layout (16 B); for an MN-major B
// wider than one 64-column panel (N > 64) it is the panel stride (K x 128 B): pass `lbo`.
__device__ __forceinline__ uint64_t desc_sw128(const void* smem, uint32_t lbo = 16) {
  const uint32_t a = smem_u32(smem);
  return uint64_t((a & 0x3FFFF) >> 4) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}

// Orders this thread's earlier register / shared-memory writes before the warpgroup's next wgmma.
__device__ __forceinline__ void fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
// Waits until at most N committed groups of this warpgroup are pending.
template <int N>
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
// Makes generic-proxy writes to shared memory (st.shared) visible to wgmma's operand reads (async proxy).
using ::glm5::fence_proxy_async;  // kernels/mbarrier.cuh

// The asm of one m64n64k16 with element type TYPE (".bf16.bf16" or ".f16.f16"), as a macro so the two forms share
// their operand list (inline asm takes no string operands).
#define GLM5_WGMMA_M64N64K16_SS(TYPE)                                                                         \
  asm volatile(                                                                                              \
      "{\n"                                                                                                  \
      ".reg .pred p;\n"                                                                                      \
      "setp.ne.b32 p, %34, 0;\n"                                                                             \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32" TYPE " "                                                 \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                              \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                    \
      "%32, %33, p, 1, 1, 0, %35;\n"                                                                         \
      "}\n"                                                                                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),       \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),            \
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),            \
        "+f"(d[30]), "+f"(d[31])                                                                              \
      : "l"(da), "l"(db), "r"(int(accumulate)), "n"(kTransB ? 1 : 0))
// D[64 x 64] (+)= A[64 x 16] . B, fp32 D, operands from shared memory (descriptors above). kTransB false:
// B is [64 x 16] K-major (D = A . B^T: S = Q . K^T with K's rows as they are stored); kTransB true: B is
// [16 x 64] MN-major (D = A . B: O = P . V with V's rows as they are stored, n = value dims contiguous;
// the PTX "transpose" of a 16-bit B operand). accumulate false: D = the product. All 128 threads of the
// warpgroup call it with the same descriptors.
// kF16: the operands are fp16 instead of bf16 (same layouts, same rate; wgmma's .f32.f16.f16 form).
template <bool kTransB, bool kF16 = false>
__device__ __forceinline__ void m64n64k16_bf16_ss(float (&d)[32], uint64_t da, uint64_t db, bool accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kF16) GLM5_WGMMA_M64N64K16_SS(".f16.f16");
  else GLM5_WGMMA_M64N64K16_SS(".bf16.bf16");
#else
  (void)d, (void)da, (void)db, (void)accumulate;
  __trap();  // wgmma needs sm_90a code (CUDA_ARCHITECTURES 90a-real)
#endif
}

// D[64 x 64] (+)= A[64 x K] . B[64 x K]^T over K / 16 k-steps: A and B K-major 128-byte-swizzled (64 rows each:
// element (r, k) at sw128_offset(r, k, 64)); one commit group is left to the caller (commit(), wait<0>()).
// The same from the operands' descriptors (desc_sw128 of their first bytes): each k-step adds its byte offset
// >> 4 to the descriptors' start-address field (no carry: shared memory addresses stay below 256 KB).
template <bool kF16 = false>
__device__ __forceinline__ void m64n64_bf16_ss(float (&d)[32], uint64_t da, uint64_t db, int K, bool accumulate) {
#pragma unroll
  for (int k = 0; k < K; k += 16) {
    const uint64_t off = uint64_t(((k / 64) * 64 * 128 + ((k % 64) / 16) * 32) >> 4);
    m64n64k16_bf16_ss<false, kF16>(d, da + off, db + off, accumulate || k > 0);
  }
}
template <bool kF16 = false>
__device__ __forceinline__ void m64n64_bf16_ss(float (&d)[32], const uint8_t* a, const uint8_t* b, int K,
                                               bool accumulate) {
  m64n64_bf16_ss<kF16>(d, desc_sw128(a), desc_sw128(b), K, accumulate);
}

// D[64 x 64] (+)= A[64 x K] . B[K x 64] (N = 64: one panel, so the leading byte offset is unused) with A
// K-major as above and B MN-major, stored as a swizzled
// operand of K rows and 64 columns (element (k, n) at sw128_offset(k, n, K): one 64-column panel, the
// 8-row atoms of 1024 B along K). k-step s starts 2048 B (16 rows) further into B; A advances as above.
// kF16 (both helpers): fp16 operands (the names keep "bf16", the default).
template <bool kF16 = false>
__device__ __forceinline__ void m64n64_bf16_ss_tb(float (&d)[32], const uint8_t* a, const uint8_t* b, int K,
                                                  bool accumulate) {
  for (int k = 0; k < K; k += 16) {
    const uint32_t off_a = uint32_t((k / 64) * 64 * 128 + ((k % 64) / 16) * 32);
    m64n64k16_bf16_ss<true, kF16>(d, desc_sw128(a + off_a), desc_sw128(b + uint32_t(k) * 128), accumulate || k > 0);
  }
}

// m64n128k16's 64 fp32 accumulators d0[32] (columns 0..63) and d1[32] (64..127), each laid out as an m64n64 tile's:
// the register list of the asm string and its output operands %0..%63 (shared by the SS and RS forms below).
#define GLM5_WGMMA_N128_DREGS                                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                 \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "        \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "        \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
#define GLM5_WGMMA_N128_DOUTS                                                                                      \
  "+f"(d0[0]), "+f"(d0[1]), "+f"(d0[2]), "+f"(d0[3]), "+f"(d0[4]), "+f"(d0[5]), "+f"(d0[6]), "+f"(d0[7]),         \
      "+f"(d0[8]), "+f"(d0[9]), "+f"(d0[10]), "+f"(d0[11]), "+f"(d0[12]), "+f"(d0[13]), "+f"(d0[14]),              \
      "+f"(d0[15]), "+f"(d0[16]), "+f"(d0[17]), "+f"(d0[18]), "+f"(d0[19]), "+f"(d0[20]), "+f"(d0[21]),            \
      "+f"(d0[22]), "+f"(d0[23]), "+f"(d0[24]), "+f"(d0[25]), "+f"(d0[26]), "+f"(d0[27]), "+f"(d0[28]),            \
      "+f"(d0[29]), "+f"(d0[30]), "+f"(d0[31]), "+f"(d1[0]), "+f"(d1[1]), "+f"(d1[2]), "+f"(d1[3]), "+f"(d1[4]),    \
      "+f"(d1[5]), "+f"(d1[6]), "+f"(d1[7]), "+f"(d1[8]), "+f"(d1[9]), "+f"(d1[10]), "+f"(d1[11]), "+f"(d1[12]),   \
      "+f"(d1[13]), "+f"(d1[14]), "+f"(d1[15]), "+f"(d1[16]), "+f"(d1[17]), "+f"(d1[18]), "+f"(d1[19]),            \
      "+f"(d1[20]), "+f"(d1[21]), "+f"(d1[22]), "+f"(d1[23]), "+f"(d1[24]), "+f"(d1[25]), "+f"(d1[26]),            \
      "+f"(d1[27]), "+f"(d1[28]), "+f"(d1[29]), "+f"(d1[30]), "+f"(d1[31])
// One m64n128k16 with element type TYPE (".bf16.bf16" or ".f16.f16"), A and B from shared memory (descriptors).
#define GLM5_WGMMA_M64N128K16_SS(TYPE)                                                         \
  asm volatile("{\n"                                                                          \
               ".reg .pred p;\n"                                                              \
               "setp.ne.b32 p, %66, 0;\n"                                                     \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32" TYPE " " GLM5_WGMMA_N128_DREGS   \
               "%64, %65, p, 1, 1, 0, %67;\n"                                                 \
               "}\n"                                                                          \
               : GLM5_WGMMA_N128_DOUTS                                                        \
               : "l"(da), "l"(db), "r"(int(accumulate)), "n"(kTransB ? 1 : 0))
// The same with A from four 32-bit registers a[0..3] (operands %64..%67; see m64n128k16_rs).
#define GLM5_WGMMA_M64N128K16_RS(TYPE)                                                         \
  asm volatile("{\n"                                                                          \
               ".reg .pred p;\n"                                                              \
               "setp.ne.b32 p, %69, 0;\n"                                                     \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32" TYPE " " GLM5_WGMMA_N128_DREGS   \
               "{%64, %65, %66, %67}, %68, p, 1, 1, %70;\n"                                   \
               "}\n"                                                                          \
               : GLM5_WGMMA_N128_DOUTS                                                        \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(int(accumulate)),   \
                 "n"(kTransB ? 1 : 0))

// D[64 x 128] (+)= A[64 x 16] . B, fp32 D in d0 (columns 0..63) and d1 (64..127), each laid out as m64n64's, operands
// from shared memory. kTransB true (the MLA's O = P . V): B is [16 x 128] MN-major, two 64-column panels whose
// distance is the descriptor's leading byte offset (desc_sw128(b, panel stride)); false: B [128 x 16] K-major.
// One instruction instead of two m64n64k16: A is read once instead of twice. (m64n256k16's 128 accumulators do not
// fit a 512-thread kernel's 128 registers per thread at compile time: ptxas refuses it.) kF16 as above.
template <bool kTransB, bool kF16 = false>
__device__ __forceinline__ void m64n128k16_ss(float (&d0)[32], float (&d1)[32], uint64_t da, uint64_t db,
                                              bool accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kF16) GLM5_WGMMA_M64N128K16_SS(".f16.f16");
  else GLM5_WGMMA_M64N128K16_SS(".bf16.bf16");
#else
  (void)d0, (void)d1, (void)da, (void)db, (void)accumulate;
  __trap();  // wgmma needs sm_90a code (CUDA_ARCHITECTURES 90a-real)
#endif
}

// The same with A from registers (PTX's "register A" form): a[4] is this thread's A fragment of the 64 x 16 slice as
// four 16-bit pairs -- rows r = 16 w + l / 4 and r + 8, columns 2 (l % 4) + {0, 1} and + 8: a[0] (r, c), a[1] (r + 8, c),
// a[2] (r, c + 8), a[3] (r + 8, c + 8) -- which is how an m64nN fp32 accumulator holds columns 16 s .. 16 s + 15
// (registers 8 s .. 8 s + 7, acc_row / acc_col): the MLA's P goes from the softmax straight into P . V.
template <bool kTransB, bool kF16 = false>
__device__ __forceinline__ void m64n128k16_rs(float (&d0)[32], float (&d1)[32], const uint32_t (&a)[4], uint64_t db,
                                              bool accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kF16) GLM5_WGMMA_M64N128K16_RS(".f16.f16");
  else GLM5_WGMMA_M64N128K16_RS(".bf16.bf16");
#else
  (void)d0, (void)d1, (void)a, (void)db, (void)accumulate;
  __trap();  // wgmma needs sm_90a code (CUDA_ARCHITECTURES 90a-real)
#endif
}

// D[64 x 128] (+)= A[64 x K] . B[K x 128] with A K-major (as m64n64_bf16_ss) and B MN-major: element (k, n) at
// sw128_offset(k, n, K), i.e. two panels of K rows x 64 columns, K x 128 bytes apart (the leading byte offset).
// k-step s starts 2048 B (16 rows) further into each panel. kF16: fp16 operands.
template <bool kF16 = false>
__device__ __forceinline__ void m64n128_ss_tb(float (&d0)[32], float (&d1)[32], const uint8_t* a, const uint8_t* b,
                                              int K, bool accumulate) {
  for (int k = 0; k < K; k += 16) {
    const uint32_t off_a = uint32_t((k / 64) * 64 * 128 + ((k % 64) / 16) * 32);
    m64n128k16_ss<true, kF16>(d0, d1, desc_sw128(a + off_a), desc_sw128(b + uint32_t(k) * 128, uint32_t(K) * 128),
                              accumulate || k > 0);
  }
}

// Tells the compiler that wgmma may write the accumulator registers up to this point: wgmma.mma_async
// writes them asynchronously, after the asm statement that names them, so reads must not be hoisted above
// wait() and earlier writes must not sink below the next issue (CUTLASS's warpgroup_fence_operand idea).
template <int N>
__device__ __forceinline__ void fence_operand(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Register budget of this warpgroup from here on (PTX ISA setmaxnreg, sm_90a): the producer warpgroup of a
// warp-specialized kernel gives registers back, the consumers take them. N: a multiple of 8 in 24..256;
// all warps of the warpgroup execute it.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

// Named barriers (PTX barrier.sync / barrier.arrive with an id in 1..15; 0 is __syncthreads) between
// warpgroups: `threads` counts every thread that arrives or syncs, a multiple of 32. The non-.aligned forms:
// bar.sync is barrier.sync.aligned, which requires each warp to arrive converged, and compute-sanitizer
// synccheck (S6m) found warps still divergent at the MLA kernel's epilogue barrier after a lane-predicated
// store; the non-aligned forms are correct for divergent callers too.
__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Row and column of accumulator register i of thread t (0..127) in an m64nN fp32 tile.
__host__ __device__ __forceinline__ int acc_row(int i, int t) { return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i % 4) / 2); }
__host__ __device__ __forceinline__ int acc_col(int i, int t) { return 8 * (i / 4) + 2 * (t % 4) + (i % 2); }

}  // namespace wgmma
}  // namespace glm5
