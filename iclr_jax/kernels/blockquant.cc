// Matrix products with GGML block-quantized weights, as XLA FFI handlers (CPU).
//
// y [rows, out] = x [rows, in] · Wᵀ, where W [out, in] is stored in blocks of 32 inputs:
//   Q4_1: w = d · q + m, q ∈ [0, 15] packed two to a byte (low nibbles are inputs 0–15 of
//         the block, high nibbles 16–31): qs uint8 [out, in/32, 16], d, m float32 [out, in/32]
//   Q8_0: w = d · q, q ∈ [-127, 127]: qs int8 [out, in/32, 32], d float32 [out, in/32]
// The weights stay packed: one row of x (single-stream decoding) reads 0.75 (Q4_1) or 1.25
// (Q8_0) bytes per weight instead of float32's 4. Outputs are split over OpenMP threads;
// products and sums are float32.

#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kHalf = kBlock / 2;
constexpr int64_t kMaxRows = 64;  // the Python side sends more rows to a float32 product

// y[o] = Σ_b d[o, b] · Σ_j x[32b + j] · q[o, b, j]  (+ m[o, b] · Σ_j x[32b + j]) for one row
// x [in]. `Block::Dot16(i, j, x)` is x[j] · q[j] + x[j + 16] · q[j + 16] of block i, with q
// converted to float inside the vectorised loop (converting a block into a temporary array
// first was 3× slower here). Each output keeps 16 running lane sums, added at the end.
template <typename Block>
void Row(const float* x, int64_t in, int64_t out, const Block& block, const float* xsum,
         float* y) {
  const int64_t nb = in / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o) {
    float acc[kHalf] = {};
    float lin = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t i = o * nb + b;
      const float s = block.d[i];
      const float* xb = x + b * kBlock;
#pragma omp simd
      for (int64_t j = 0; j < kHalf; ++j) acc[j] += s * block.Dot16(i, j, xb);
      if (Block::kOffset) lin += block.m[i] * xsum[b];
    }
    for (int64_t j = 0; j < kHalf; ++j) lin += acc[j];
    y[o] = lin;
  }
}

struct Q41Block {
  static constexpr bool kOffset = true;
  const uint8_t* qs;
  const float* d;
  const float* m;
  float Dot16(int64_t i, int64_t j, const float* x) const {
    const uint8_t q = qs[i * kHalf + j];
    return x[j] * static_cast<float>(q & 15) + x[j + kHalf] * static_cast<float>(q >> 4);
  }
  // q of inputs j and j + 16 of block i, as floats
  void Pair(int64_t i, int64_t j, float* lo, float* hi) const {
    const uint8_t q = qs[i * kHalf + j];
    *lo = static_cast<float>(q & 15);
    *hi = static_cast<float>(q >> 4);
  }
};

struct Q80Block {
  static constexpr bool kOffset = false;
  const int8_t* qs;
  const float* d;
  const float* m;  // unused
  float Dot16(int64_t i, int64_t j, const float* x) const {
    const int8_t* q = qs + i * kBlock;
    return x[j] * static_cast<float>(q[j]) + x[j + kHalf] * static_cast<float>(q[j + kHalf]);
  }
  void Pair(int64_t i, int64_t j, float* lo, float* hi) const {
    const int8_t* q = qs + i * kBlock;
    *lo = static_cast<float>(q[j]);
    *hi = static_cast<float>(q[j + kHalf]);
  }
};

// R rows at once (2 ≤ R ≤ 8, batched decoding): each weight is converted to float once,
// inside the vectorised loop, and used for every row, so the conversion no longer grows with
// the batch.
template <typename Block, int R>
void Rows(const float* x, int64_t in, int64_t out, const Block& block, const float* xsum,
          float* y) {
  const int64_t nb = in / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o) {
    float acc[R][kHalf] = {};
    float lin[R] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t i = o * nb + b;
      const float s = block.d[i];
      const float* xb = x + b * kBlock;
#pragma omp simd
      for (int64_t j = 0; j < kHalf; ++j) {
        float lo, hi;
        block.Pair(i, j, &lo, &hi);
        lo *= s;
        hi *= s;
        for (int r = 0; r < R; ++r)
          acc[r][j] += xb[r * in + j] * lo + xb[r * in + j + kHalf] * hi;
      }
      if (Block::kOffset)
        for (int r = 0; r < R; ++r) lin[r] += block.m[i] * xsum[r * nb + b];
    }
    for (int r = 0; r < R; ++r) {
      float sum = lin[r];
      for (int64_t j = 0; j < kHalf; ++j) sum += acc[r][j];
      y[r * out + o] = sum;
    }
  }
}

// One row: `Row`; 2–8 rows: `Rows` (a block converted once for all of them), more rows in
// groups of 8.
template <typename Block>
void BlockProduct(const float* x, int64_t rows, int64_t in, int64_t out, const Block& block,
                  float* y) {
  const int64_t nb = in / kBlock;
  std::vector<float> xsum(Block::kOffset ? rows * nb : 0);  // Σ_j x[r, 32b + j]
  for (int64_t r = 0; r < (Block::kOffset ? rows : 0); ++r) {
    for (int64_t b = 0; b < nb; ++b) {
      float s = 0.0f;
      for (int64_t j = 0; j < kBlock; ++j) s += x[r * in + b * kBlock + j];
      xsum[r * nb + b] = s;
    }
  }
  for (int64_t r = 0; r < rows;) {
    const int64_t n = rows - r < 8 ? rows - r : 8;
    const float* xr = x + r * in;
    const float* sr = Block::kOffset ? xsum.data() + r * nb : nullptr;
    float* yr = y + r * out;
    switch (n) {
      case 1: Row(xr, in, out, block, sr, yr); break;
      case 2: Rows<Block, 2>(xr, in, out, block, sr, yr); break;
      case 3: Rows<Block, 3>(xr, in, out, block, sr, yr); break;
      case 4: Rows<Block, 4>(xr, in, out, block, sr, yr); break;
      case 5: Rows<Block, 5>(xr, in, out, block, sr, yr); break;
      case 6: Rows<Block, 6>(xr, in, out, block, sr, yr); break;
      case 7: Rows<Block, 7>(xr, in, out, block, sr, yr); break;
      default: Rows<Block, 8>(xr, in, out, block, sr, yr); break;
    }
    r += n;
  }
}

ffi::Error CheckShapes(ffi::Span<const int64_t> x, ffi::Span<const int64_t> qs,
                       int64_t packed, ffi::Span<const int64_t> d, int64_t* rows,
                       int64_t* in, int64_t* out) {
  if (x.size() != 2 || qs.size() != 3 || d.size() != 2)
    return ffi::Error::InvalidArgument("blockquant: x must be [rows, in], qs [out, in/32, "
                                       "bytes], scales [out, in/32]");
  *rows = x[0];
  *in = x[1];
  *out = qs[0];
  if (*in % kBlock || qs[1] != *in / kBlock || qs[2] != packed || d[0] != *out ||
      d[1] != qs[1])
    return ffi::Error::InvalidArgument("blockquant: shapes of x, qs and scales disagree");
  if (*rows > kMaxRows)
    return ffi::Error::InvalidArgument("blockquant: at most 64 rows per call");
  return ffi::Error::Success();
}

ffi::Error Q41Impl(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::U8> qs, ffi::Buffer<ffi::F32> d,
                   ffi::Buffer<ffi::F32> m, ffi::ResultBuffer<ffi::F32> y) {
  int64_t rows, in, out;
  ffi::Error err = CheckShapes(x.dimensions(), qs.dimensions(), kBlock / 2, d.dimensions(),
                               &rows, &in, &out);
  if (err.failure()) return err;
  BlockProduct(x.typed_data(), rows, in, out,
               Q41Block{qs.typed_data(), d.typed_data(), m.typed_data()}, y->typed_data());
  return ffi::Error::Success();
}

ffi::Error Q80Impl(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::S8> qs, ffi::Buffer<ffi::F32> d,
                   ffi::ResultBuffer<ffi::F32> y) {
  int64_t rows, in, out;
  ffi::Error err = CheckShapes(x.dimensions(), qs.dimensions(), kBlock, d.dimensions(), &rows,
                               &in, &out);
  if (err.failure()) return err;
  BlockProduct(x.typed_data(), rows, in, out, Q80Block{qs.typed_data(), d.typed_data(), nullptr},
               y->typed_data());
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(IclrQ41Matmul, Q41Impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(IclrQ80Matmul, Q80Impl,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::S8>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
