// CUDA backend, convolution (core/backend/conv.hpp): im2col + cuBLAS, col2im as a gather.
//
// The images are processed in chunks whose scratch (column matrices, plus the kernel gradient's
// per-image partials) fits kScratchBudget (256 MiB; at least one image per chunk). Per chunk:
//   forward      im2col_kernel -> per group one cublasSgemmStridedBatched over the chunk's images
//                (cublasSgemm for one image): y[n, g] (ocg, out_sp) = w[g] (ocg, kg) * cols[n, g]
//                (kg, out_sp), strideA = 0; then add_bias_kernel over y.
//   input grad   per group cublasSgemmStridedBatched: dcols[n, g] = w[g]^T * dy[n, g]; then
//                col2im_kernel (gather) writes dx (plus the transposed convolution's bias).
//   kernel grad  im2col_kernel, per group cublasSgemmStridedBatched: part[n][g] = dy[n, g] *
//                cols[n, g]^T; sum_images_kernel adds the partials into dw in increasing n (the
//                first chunk overwrites, later chunks accumulate): a fixed order, no atomics. A
//                chunk of one image writes its GEMM into dw directly (beta = 0, then 1).
// A 1 x ... x 1 kernel with stride 1 and no padding skips im2col and col2im (the GEMMs read x and
// write dx in place of the column matrices). The geometry travels by value in kernel parameters
// (Geo, ~300 bytes); nothing is copied to the device or synchronised per call; scratch comes from
// the stream-ordered pool and is released in stream order. TF32 only when allow_tf32.
//
// Kernels (rank is a template parameter for 1, 2 and 3, a runtime loop otherwise):
//   im2col_kernel: grid y = column-matrix rows (image, channel, window offset j; j decoded once per
//     row), x = output positions, one thread per element: reads x (cached; each input element is
//     read about ksz / prod(stride) times, mostly from L1/L2), writes 4 * in_c * ksz * out_sp
//     bytes per image, coalesced. Bench case conv2d (32, 64, 56, 56) 3x3: 231 MB written.
//   col2im_kernel: grid y = (image, channel), x = input positions; one thread per dx element
//     sums its window contributions in increasing j (row-major window offset), skipping offsets
//     that are not on the stride lattice or fall outside the output: deterministic, no atomics.
//     Reads 4 * in_c * ksz * out_sp bytes per image (coalesced along the last axis for stride 1),
//     writes dx once.
//   add_bias_kernel / channel_fill_kernel: one thread per element, 8 (4) bytes per element.
//   channel_sum_kernel: block (split, channel) sums a contiguous range of its channel's
//     batch * spatial values (256 threads, strided loads, a shared-memory tree), then
//     channel_sum_final adds the split partials in order: deterministic. Reads dy once.
//   sum_images_kernel: dw[i] (+)= part[0][i] + part[1][i] + ... in order; 4 (cnt + 2) bytes per
//     weight.
// FLOPs: 2 * batch * out_c * kg * out_sp per GEMM pass (forward, input grad, kernel grad each).
// Measured: pending a GPU run (bench/conv.py: conv2d (32, 64, 56, 56) 3x3, (1, 64, 56, 56), 3-D
// (4, 32, 32^3) 3x3x3, transposed (32, 64, 28, 28) 4x4 stride 2, against cuDNN with TF32 off).
#include <cublas_v2.h>

#include <algorithm>
#include <climits>

#include "core/backend/conv.hpp"
#include "core/backend/memory.hpp"
#include "cuda/cublas_handle.cuh"
#include "cuda/cuda_common.cuh"

namespace tlrt {
namespace cuda {

namespace {

using ull = unsigned long long;
using ll = long long;

constexpr uint64_t kScratchBudget = uint64_t{256} << 20;
constexpr unsigned kThreads = 256;

// Kernel-parameter geometry. out[d], k[d], out_sp and ksz fit in int (core: out_sp and
// in_c / groups * ksz <= INT_MAX on CUDA); input extents and coordinates are 64-bit signed
// (core: in + 2 pad < 2^62).
struct Geo {
  int rank;
  int out[kConvMaxRank];
  int k[kConvMaxRank];
  ll in[kConvMaxRank], stride[kConvMaxRank], pad[kConvMaxRank], dil[kConvMaxRank];
  ll in_sp;
  int out_sp, ksz;
  ll in_c;
};

Geo geo_of(const ConvShape &s) {
  Geo g{};
  g.rank = (int)s.rank;
  for (uint32_t d = 0; d < s.rank; ++d) {
    g.out[d] = (int)s.out[d];
    g.k[d] = (int)s.kernel[d];
    g.in[d] = (ll)s.in[d];
    g.stride[d] = (ll)s.stride[d];
    g.pad[d] = (ll)s.pad[d];
    g.dil[d] = (ll)s.dilation[d];
  }
  g.in_sp = (ll)s.in_sp;
  g.out_sp = (int)s.out_sp;
  g.ksz = (int)s.ksz;
  g.in_c = (ll)s.in_c;
  return g;
}

class Scratch {
 public:
  Scratch(int dev, uint64_t floats)
      : dev_(dev), bytes_(floats * 4),
        p_(floats ? static_cast<float *>(alloc(dev, floats * 4)) : nullptr) {}
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() {
    if (p_) dealloc(dev_, p_, bytes_);
  }
  float *get() const { return p_; }

 private:
  int dev_;
  uint64_t bytes_;
  float *p_;
};

// A 2-D grid: x over `items` per row (kThreads per block), y over `rows` (grid-stride past 65535).
dim3 grid2(uint64_t items, uint64_t rows) {
  const uint64_t bx = std::min<uint64_t>((items + kThreads - 1) / kThreads, 0x7FFFFFFFull);
  const uint64_t by = std::min<uint64_t>(rows, 65535);
  return dim3((unsigned)std::max<uint64_t>(bx, 1), (unsigned)std::max<uint64_t>(by, 1), 1);
}

// ---- kernels ------------------------------------------------------------------------------------

// cols[row][q] for rows = images * in_c * ksz of the chunk: row = (image * in_c + c) * ksz + j.
template <int R>
__global__ void im2col_kernel(Geo g, const float *__restrict__ x, float *__restrict__ cols,
                              ull rows) {
  const int rank = R ? R : g.rank;
  for (ull row = blockIdx.y; row < rows; row += gridDim.y) {
    const ull img_c = row / (ull)g.ksz;
    int jf = (int)(row - img_c * (ull)g.ksz);
    int j[kConvMaxRank];
#pragma unroll
    for (int d = kConvMaxRank - 1; d >= 0; --d) {
      if (d >= rank) continue;
      j[d] = jf % g.k[d];
      jf /= g.k[d];
    }
    const float *__restrict__ xc = x + img_c * (ull)g.in_sp;
    float *__restrict__ dst = cols + row * (ull)g.out_sp;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < g.out_sp;
         q += blockDim.x * gridDim.x) {
      int qq = q;
      ll off = 0, mul = 1;
      bool ok = true;
#pragma unroll
      for (int d = kConvMaxRank - 1; d >= 0; --d) {
        if (d >= rank) continue;
        const int qd = qq % g.out[d];
        qq /= g.out[d];
        const ll i = (ll)qd * g.stride[d] - g.pad[d] + (ll)j[d] * g.dil[d];
        ok = ok && i >= 0 && i < g.in[d];
        if (ok) off += i * mul;  // mul < in_sp: no overflow while every coordinate is valid
        mul *= g.in[d];
      }
      dst[q] = ok ? __ldg(xc + off) : 0.0f;
    }
  }
}

// dx[(image * in_c + c) * in_sp + pos] = (bias ? bias[c] : 0) + the sum, over window offsets j in
// increasing order, of dcols[(image * in_c + c) * ksz + j][q(pos, j)] where q is on the lattice.
template <int R>
__global__ void col2im_kernel(Geo g, const float *__restrict__ dcols,
                              const float *__restrict__ bias, float *__restrict__ dx, ull rows) {
  const int rank = R ? R : g.rank;
  const bool small = g.in_sp <= 0x7FFFFFFFll;
  for (ull row = blockIdx.y; row < rows; row += gridDim.y) {
    const float *__restrict__ src = dcols + row * (ull)g.ksz * (ull)g.out_sp;
    const float b = bias ? bias[row % (ull)g.in_c] : 0.0f;
    for (ull pos = (ull)blockIdx.x * blockDim.x + threadIdx.x; pos < (ull)g.in_sp;
         pos += (ull)blockDim.x * gridDim.x) {
      ll i[kConvMaxRank];
      if (small) {
        unsigned p = (unsigned)pos;
#pragma unroll
        for (int d = kConvMaxRank - 1; d >= 0; --d) {
          if (d >= rank) continue;
          i[d] = (ll)(p % (unsigned)g.in[d]);
          p /= (unsigned)g.in[d];
        }
      } else {
        ull p = pos;
#pragma unroll
        for (int d = kConvMaxRank - 1; d >= 0; --d) {
          if (d >= rank) continue;
          i[d] = (ll)(p % (ull)g.in[d]);
          p /= (ull)g.in[d];
        }
      }
      float acc = 0.0f;
      int j[kConvMaxRank];
#pragma unroll
      for (int d = 0; d < kConvMaxRank; ++d) j[d] = 0;
      for (int jf = 0; jf < g.ksz; ++jf) {
        int q = 0;
        bool ok = true;
#pragma unroll
        for (int d = 0; d < kConvMaxRank; ++d) {
          if (d >= rank) continue;
          const ll t = i[d] + g.pad[d] - (ll)j[d] * g.dil[d];
          ll qd = t;
          if (g.stride[d] != 1) {
            qd = t / g.stride[d];
            ok = ok && qd * g.stride[d] == t;
          }
          ok = ok && t >= 0 && qd < (ll)g.out[d];
          q = ok ? q * g.out[d] + (int)qd : 0;  // < out_sp while valid
        }
        if (ok) acc += src[(ull)jf * (ull)g.out_sp + (ull)q];
#pragma unroll
        for (int d = kConvMaxRank - 1; d >= 0; --d) {  // odometer, row-major
          if (d >= rank) continue;
          if (++j[d] < g.k[d]) break;
          j[d] = 0;
        }
      }
      dx[row * (ull)g.in_sp + pos] = bias ? acc + b : acc;
    }
  }
}

// t[(n * channels + c) * spatial + l] += bias[c] (add) or = bias[c] (fill), rows = n * channels.
template <bool ADD>
__global__ void bias_kernel(float *__restrict__ t, const float *__restrict__ bias, ull rows,
                            ull channels, ull spatial) {
  for (ull row = blockIdx.y; row < rows; row += gridDim.y) {
    const float b = bias[row % channels];
    float *r = t + row * spatial;
    for (ull l = (ull)blockIdx.x * blockDim.x + threadIdx.x; l < spatial;
         l += (ull)blockDim.x * gridDim.x)
      r[l] = ADD ? r[l] + b : b;
  }
}

// Block (xsplit, c): partial[c * split + xsplit] = sum over e in its range of the channel's
// batch * spatial values (e = n * spatial + l), thread-strided then a shared-memory tree.
__global__ void channel_sum_kernel(const float *__restrict__ t, ull batch, ull channels,
                                   ull spatial, ull per_block, unsigned split,
                                   float *__restrict__ partial) {
  __shared__ float sh[kThreads];
  const ull total = batch * spatial;
  for (ull c = blockIdx.y; c < channels; c += gridDim.y) {
    const ull e0 = (ull)blockIdx.x * per_block;
    const ull e1 = e0 + per_block < total ? e0 + per_block : total;
    float acc = 0.0f;
    ull e = e0 + threadIdx.x;
    ull n = e / spatial, l = e - n * spatial;
    for (; e < e1; e += kThreads) {
      acc += t[(n * channels + c) * spatial + l];
      l += kThreads;
      while (l >= spatial) {
        l -= spatial;
        ++n;
      }
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned h = kThreads / 2; h > 0; h /= 2) {
      if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];
      __syncthreads();
    }
    if (threadIdx.x == 0) partial[c * split + blockIdx.x] = sh[0];
    __syncthreads();
  }
}

__global__ void channel_sum_final(const float *__restrict__ partial, ull channels,
                                  unsigned split, float *__restrict__ out) {
  for (ull c = (ull)blockIdx.x * blockDim.x + threadIdx.x; c < channels;
       c += (ull)blockDim.x * gridDim.x) {
    float acc = partial[c * split];
    for (unsigned k = 1; k < split; ++k) acc += partial[c * split + k];
    out[c] = acc;
  }
}

// dw[i] = (accumulate ? dw[i] + part[0][i] : part[0][i]) + part[1][i] + ... + part[cnt - 1][i].
__global__ void sum_images_kernel(const float *__restrict__ part, ull cnt, ull size,
                                  bool accumulate, float *__restrict__ dw) {
  for (ull i = (ull)blockIdx.x * blockDim.x + threadIdx.x; i < size;
       i += (ull)blockDim.x * gridDim.x) {
    float acc = accumulate ? dw[i] + part[i] : part[i];
    for (ull k = 1; k < cnt; ++k) acc += part[k * size + i];
    dw[i] = acc;
  }
}

// ---- host side ------------------------------------------------------------------------------------

bool direct(const ConvShape &s) {
  for (uint32_t d = 0; d < s.rank; ++d)
    if (s.kernel[d] != 1 || s.stride[d] != 1 || s.pad[d] != 0) return false;
  return true;
}

// Images per chunk: per_image floats of scratch each, within the budget, at least 1.
uint64_t chunk_of(uint64_t batch, uint64_t per_image_floats) {
  uint64_t c = per_image_floats == 0 ? batch : kScratchBudget / (per_image_floats * 4);
  c = std::max<uint64_t>(c, 1);
  c = std::min<uint64_t>(c, batch);
  return std::min<uint64_t>(c, (uint64_t)INT_MAX);
}

template <int R>
void launch_im2col(const Geo &g, const float *x, float *cols, uint64_t rows, cudaStream_t st) {
  im2col_kernel<R><<<grid2((uint64_t)g.out_sp, rows), kThreads, 0, st>>>(g, x, cols, rows);
}

void im2col(const Geo &g, const float *x, float *cols, uint64_t images, cudaStream_t st) {
  const uint64_t rows = images * (uint64_t)g.in_c * (uint64_t)g.ksz;
  switch (g.rank) {
    case 1: launch_im2col<1>(g, x, cols, rows, st); break;
    case 2: launch_im2col<2>(g, x, cols, rows, st); break;
    case 3: launch_im2col<3>(g, x, cols, rows, st); break;
    default: launch_im2col<0>(g, x, cols, rows, st); break;
  }
  check_launch("im2col_kernel");
}

template <int R>
void launch_col2im(const Geo &g, const float *dcols, const float *bias, float *dx, uint64_t rows,
                   cudaStream_t st) {
  col2im_kernel<R><<<grid2((uint64_t)g.in_sp, rows), kThreads, 0, st>>>(g, dcols, bias, dx, rows);
}

void col2im(const Geo &g, const float *dcols, const float *bias, float *dx, uint64_t images,
            cudaStream_t st) {
  const uint64_t rows = images * (uint64_t)g.in_c;
  switch (g.rank) {
    case 1: launch_col2im<1>(g, dcols, bias, dx, rows, st); break;
    case 2: launch_col2im<2>(g, dcols, bias, dx, rows, st); break;
    case 3: launch_col2im<3>(g, dcols, bias, dx, rows, st); break;
    default: launch_col2im<0>(g, dcols, bias, dx, rows, st); break;
  }
  check_launch("col2im_kernel");
}

void bias_pass(bool add, float *t, const float *bias, uint64_t batch, uint64_t channels,
               uint64_t spatial, cudaStream_t st) {
  const uint64_t rows = batch * channels;
  const dim3 grid = grid2(spatial, rows);
  if (add)
    bias_kernel<true><<<grid, kThreads, 0, st>>>(t, bias, rows, channels, spatial);
  else
    bias_kernel<false><<<grid, kThreads, 0, st>>>(t, bias, rows, channels, spatial);
  check_launch("bias_kernel");
}

// Row-major batched product: for q < count, C_q (m, p) = op(A_q) (m, n) * op(B_q) (n, p) (+ beta
// C_q); lda, ldb, ldc are the stored row lengths, sa, sb, sc the strides between the q. Mapped to
// column-major cuBLAS as C^T = op(B)^T op(A)^T (see abi/tlrt_blas.h).
void gemm_rm(cublasHandle_t h, bool ta, bool tb, int m, int n, int p, const float *a, int lda,
             ll sa, const float *b, int ldb, ll sb, float *c, int ldc, ll sc, int count,
             float beta) {
  const float one = 1.0f;
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (count == 1) {
    cublas_check(cublasSgemm(h, opb, opa, p, m, n, &one, b, ldb, a, lda, &beta, c, ldc),
                 "cublasSgemm");
    return;
  }
  cublas_check(cublasSgemmStridedBatched(h, opb, opa, p, m, n, &one, b, ldb, sb, a, lda, sa,
                                         &beta, c, ldc, sc, count),
               "cublasSgemmStridedBatched");
}

}  // namespace

void conv_fwd(int dev, const ConvShape &s, const float *x, const float *w, const float *bias,
              bool allow_tf32, float *y) {
  const cudaStream_t st = stream(dev);
  const cublasHandle_t h = cublas_handle(dev, allow_tf32);
  const Geo g = geo_of(s);
  const uint64_t icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  const bool dir = direct(s);
  const uint64_t col_img = dir ? 0 : s.in_c * s.ksz * s.out_sp;  // floats per image
  const uint64_t chunk = chunk_of(s.batch, col_img);
  Scratch cols(dev, chunk * col_img);
  const uint64_t x_img = s.in_c * s.in_sp, y_img = s.out_c * s.out_sp;
  for (uint64_t n0 = 0; n0 < s.batch; n0 += chunk) {
    const uint64_t cnt = std::min(chunk, s.batch - n0);
    const float *src = x + n0 * x_img;
    ll src_img = (ll)x_img;
    if (!dir) {
      im2col(g, src, cols.get(), cnt, st);
      src = cols.get();
      src_img = (ll)col_img;
    }
    for (uint64_t gi = 0; gi < s.groups; ++gi)
      gemm_rm(h, false, false, (int)ocg, (int)kg, (int)s.out_sp, w + gi * ocg * kg, (int)kg, 0,
              src + gi * kg * s.out_sp, (int)s.out_sp, src_img,
              y + n0 * y_img + gi * ocg * s.out_sp, (int)s.out_sp, (ll)y_img, (int)cnt, 0.0f);
  }
  if (bias) bias_pass(true, y, bias, s.batch, s.out_c, s.out_sp, st);
}

void conv_bwd_input(int dev, const ConvShape &s, const float *dy, const float *w,
                    const float *bias_in, bool allow_tf32, float *dx) {
  const cudaStream_t st = stream(dev);
  const cublasHandle_t h = cublas_handle(dev, allow_tf32);
  const Geo g = geo_of(s);
  const uint64_t icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  const bool dir = direct(s);
  const uint64_t col_img = dir ? 0 : s.in_c * s.ksz * s.out_sp;
  const uint64_t chunk = chunk_of(s.batch, col_img);
  Scratch dcols(dev, chunk * col_img);
  const uint64_t x_img = s.in_c * s.in_sp, y_img = s.out_c * s.out_sp;
  for (uint64_t n0 = 0; n0 < s.batch; n0 += chunk) {
    const uint64_t cnt = std::min(chunk, s.batch - n0);
    // direct: in_sp == out_sp and the column matrix is dx itself.
    float *dst = dir ? dx + n0 * x_img : dcols.get();
    const ll dst_img = dir ? (ll)x_img : (ll)col_img;
    for (uint64_t gi = 0; gi < s.groups; ++gi)
      gemm_rm(h, true, false, (int)kg, (int)ocg, (int)s.out_sp, w + gi * ocg * kg, (int)kg, 0,
              dy + n0 * y_img + gi * ocg * s.out_sp, (int)s.out_sp, (ll)y_img,
              dst + gi * kg * s.out_sp, (int)s.out_sp, dst_img, (int)cnt, 0.0f);
    if (!dir) col2im(g, dcols.get(), bias_in, dx + n0 * x_img, cnt, st);
  }
  if (dir && bias_in) bias_pass(true, dx, bias_in, s.batch, s.in_c, s.in_sp, st);
}

void conv_bwd_kernel(int dev, const ConvShape &s, const float *x, const float *dy,
                     bool allow_tf32, float *dw) {
  const cudaStream_t st = stream(dev);
  const cublasHandle_t h = cublas_handle(dev, allow_tf32);
  const Geo g = geo_of(s);
  const uint64_t icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  const bool dir = direct(s);
  const uint64_t col_img = dir ? 0 : s.in_c * s.ksz * s.out_sp;
  const uint64_t w_size = s.out_c * kg;
  // Partials are needed only for chunks of more than one image.
  const uint64_t chunk = chunk_of(s.batch, col_img + (s.batch > 1 ? w_size : 0));
  Scratch cols(dev, chunk * col_img);
  Scratch part(dev, chunk > 1 ? chunk * w_size : 0);
  const uint64_t x_img = s.in_c * s.in_sp, y_img = s.out_c * s.out_sp;
  for (uint64_t n0 = 0; n0 < s.batch; n0 += chunk) {
    const uint64_t cnt = std::min(chunk, s.batch - n0);
    const float *src = x + n0 * x_img;
    ll src_img = (ll)x_img;
    if (!dir) {
      im2col(g, src, cols.get(), cnt, st);
      src = cols.get();
      src_img = (ll)col_img;
    }
    const bool into_dw = cnt == 1;  // beta = 0 for the first image, 1 after: in order
    float *dst = into_dw ? dw : part.get();
    const float beta = into_dw && n0 != 0 ? 1.0f : 0.0f;
    for (uint64_t gi = 0; gi < s.groups; ++gi)
      gemm_rm(h, false, true, (int)ocg, (int)s.out_sp, (int)kg,
              dy + n0 * y_img + gi * ocg * s.out_sp, (int)s.out_sp, (ll)y_img,
              src + gi * kg * s.out_sp, (int)s.out_sp, src_img, dst + gi * ocg * kg, (int)kg,
              (ll)w_size, (int)cnt, beta);
    if (!into_dw) {
      sum_images_kernel<<<grid_for(w_size, kThreads, dev), kThreads, 0, st>>>(
          part.get(), cnt, w_size, n0 != 0, dw);
      check_launch("sum_images_kernel");
    }
  }
}

void channel_sum(int dev, const float *t, uint64_t batch, uint64_t channels, uint64_t spatial,
                 float *out) {
  const cudaStream_t st = stream(dev);
  const uint64_t total = batch * spatial;
  // Enough blocks to fill the device (4 per SM over all channels), each at least 4096 values.
  uint64_t split = ((uint64_t)sm_count(dev) * 4 + channels - 1) / channels;
  split = std::min<uint64_t>(split, (total + 4095) / 4096);
  split = std::max<uint64_t>(std::min<uint64_t>(split, 65535), 1);
  const uint64_t per_block = (total + split - 1) / split;
  Scratch partial(dev, channels * split);
  const dim3 grid((unsigned)split, (unsigned)std::min<uint64_t>(channels, 65535), 1);
  channel_sum_kernel<<<grid, kThreads, 0, st>>>(t, batch, channels, spatial, per_block,
                                                (unsigned)split, partial.get());
  check_launch("channel_sum_kernel");
  channel_sum_final<<<grid_for(channels, kThreads, dev), kThreads, 0, st>>>(
      partial.get(), channels, (unsigned)split, out);
  check_launch("channel_sum_final");
}

void channel_fill(int dev, const float *bias, uint64_t batch, uint64_t channels,
                  uint64_t spatial, float *out) {
  bias_pass(false, out, bias, batch, channels, spatial, stream(dev));
}

}  // namespace cuda
}  // namespace tlrt
