// The fast CUDA pooling kernels EXECUTED ON THE CPU: cuda/kernels/pool.cuh holds their per-thread
// bodies and the launch choice as __host__ __device__ code; this test runs them over the whole
// launch grid that cuda/pool.cu uses (every thread of every block; the tile kernel block by block,
// phase 1 for all threads, then phase 2, as __syncthreads orders them) and compares every output
// BIT FOR BIT (th::same_bits) with the CPU backend (tlrt_* on TLRT_DEVICE_CPU), for max, average
// (both padding modes) and smooth max pooling (beta > 0 and < 0), forward and backward.
//
// Paths: scatter (disjoint windows), stream (max and average of overlapping rank-2 windows with
// equal strides: k3 s1 p1, k3 s2 p1; for max k3 s1 p1 its kernels are sep_kernel and band_kernel,
// reported as the path "sep"), tile (the other overlapping rank-2 windows, smooth max); each
// geometry names the path it must take, so a changed dispatch fails here.
// Covered: every compiled configuration (k2 s2 p0, k3 s2 p1, k3 s1 p1 on the last two axes) at
// rank 2 and 3; the float4 paths (rows a multiple of 4) and the scalar ones; partial groups of 4
// at row ends; padding at both ends; tails of cells in no window; leading strides above, equal to
// and below the kernel (gaps, disjoint slabs, overlapping tile); several tiles across and down a
// plane; N, C > 1; every th::Dist, an input made of ties (+0 / -0, equal values, -inf
// windows, several NaNs per window), one made mostly of signed zeros (the max forward's
// maxNum pass and its exact second pass) and one mostly of -inf (windows whose real cells are all
// -inf next to the padding: the first real cell must win). The stream kernel's prefetches are
// checked to stay
// inside their plane (emu_check). Each output is computed twice
// over buffers pre-filled with two different patterns, so a cell that no thread writes fails.
// Shared memory is pre-filled with garbage, so a window read before phase 1 wrote it fails. An
// out-of-range shared-memory index or an unaligned float4 access aborts (emu_check).
// Also: FastDiv against '/' on edge and random operands; div_by (the average backward's
// constant-divisor division) against '/' for every divisor div_by_verified admits; the stream
// path again with 1, 5 and 4096 rows per run and prefetch distances 0, 2 and 8 (StreamOpt;
// the default distance is 1). The separable-argmax max backward (sep_core: the max k3 s1 p1
// backward of the stream path) on every stream geometry it takes (k3 s1 p1, float4 and scalar
// bodies; sep_kernel on the first pass over a pre-filled output, band_kernel on the second
// wherever band_plan applies, whether or not the library's band_takes would choose it, with
// several bands per plane on rows of 256 and 301 columns) with every input kind at the default
// run height and distance, and with ties, zeros, -inf and Dist::Bits at run heights 1, 2, 3, 5,
// 4096 and prefetch distances 0, 2, 8 (max k3 s2 p1 on the stream kernel alike); its
// shared-memory rings start as garbage, so a slot read before the thread cleared it fails.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/kernels/pool.cuh"
#include "harness.hpp"

namespace {

using namespace tlrt;
using namespace tlrt::pool::fast;
using th::Dist;

struct Geo {
  uint64_t N, C;
  std::vector<uint64_t> in, k, s, p;
  const char *expect_bwd;  // "scatter", "tile", "stream" (max and average; smooth: "tile") or
                           // "generic"
};

ConvGeometry geometry(const Geo &q) {
  ConvGeometry g{};
  g.rank = (uint32_t)q.in.size();
  g.nc = q.N * q.C;
  g.in_spatial = g.out_spatial = g.window = 1;
  for (uint32_t d = 0; d < g.rank; ++d) {
    g.in[d] = q.in[d];
    g.kernel[d] = q.k[d];
    g.stride[d] = q.s[d];
    g.pad[d] = q.p[d];
    g.dilation[d] = 1;
    g.out[d] = (q.in[d] + 2 * q.p[d] - q.k[d]) / q.s[d] + 1;
    g.in_spatial *= g.in[d];
    g.out_spatial *= g.out[d];
    g.window *= g.kernel[d];
  }
  g.in_elems = g.nc * g.in_spatial;
  g.out_elems = g.nc * g.out_spatial;
  return g;
}

std::string name(const Geo &q) {
  std::string t = "(" + std::to_string(q.N) + ", " + std::to_string(q.C);
  for (auto v : q.in) t += ", " + std::to_string(v);
  t += ") k";
  for (auto v : q.k) t += " " + std::to_string(v);
  t += " s";
  for (auto v : q.s) t += " " + std::to_string(v);
  t += " p";
  for (auto v : q.p) t += " " + std::to_string(v);
  return t;
}

// 16-byte aligned float storage (the CUDA pool's blocks are at least that aligned).
struct Aligned {
  std::vector<float> raw;
  float *p = nullptr;
  explicit Aligned(size_t n, uint32_t fill) : raw(n + 4) {
    p = raw.data();
    while ((uintptr_t)p & 15u) ++p;
    for (size_t i = 0; i < n; ++i) std::memcpy(p + i, &fill, 4);
  }
};

const uint32_t kFills[2] = {0x7f7fd00du, 0xff7fbeefu};  // finite, unlikely, different

// Emulated launches (the lambdas mirror the kernels of cuda/pool.cu one for one).
template <Kind K>
bool emu_fwd(const ConvGeometry &g, const float *x, float *y, bool pad, float beta) {
  return fwd_path(g, x, y, [&](auto c, auto r, uint32_t blocks, const pool::Dims<uint32_t> &m,
                               const Plan &p) {
    using C = decltype(c);
    for (uint32_t t = 0; t < blocks * kThreads; ++t)
      if (t < p.total) fwd_thread<K, C, decltype(r)::value>(m, p, x, y, t, pad, beta);
  });
}

int sep_runs = 0;   // backward runs of sep_core (max k3 s1 p1 on the stream path)
int band_runs = 0;  // of them, runs of the band kernel

// The kernels of the max k3 s1 p1 backward (cuda/pool.cu): sep_kernel, or band_kernel wherever
// band_plan applies (sep_kernel where it declines). The library takes band_kernel only where
// band_takes also holds; both kernels must give the CPU backend's bits everywhere.
enum class SepForm { plain, band };

template <Kind K>
const char *emu_bwd(const ConvGeometry &g, const float *x, const float *dy, float *dx, bool pad,
                    float beta, const StreamOpt &o, SepForm form) {
  const char *path = "generic";
  bwd_path(
      g, K, x, dy, dx,
      [&](auto c, auto r, uint32_t blocks, const pool::Dims<uint32_t> &m, const Plan &p) {
        using C = decltype(c);
        path = "scatter";
        for (uint32_t t = 0; t < blocks * kThreads; ++t)
          if (t < p.total) scatter_thread<K, C, decltype(r)::value>(m, p, x, dy, pad, beta, dx, t);
      },
      [&](auto c, uint32_t blocks, const pool::Dims<uint32_t> &m, const Plan &p) {
        using C = decltype(c);
        path = "tile";
        std::vector<float> smem((tile_smem_bytes<K>(p) + 3) / 4);
        for (uint32_t b = 0; b < blocks; ++b) {
          std::memset(smem.data(), 0xEE, smem.size() * 4);  // garbage (a NaN pattern, code 0xEE)
          const Tile T = tile_of<C>(m, p, b);
          for (uint32_t tid = 0; tid < kThreads; ++tid)
            for (uint32_t i = tid; i < p.wr * p.wc; i += kThreads)
              tile_window<K, C>(m, p, T, x, dy, pad, beta, smem.data(), i);
          for (uint32_t tid = 0; tid < kThreads; ++tid)
            tile_cells<K, C>(m, p, T, x, beta, smem.data(), tid, dx);
        }
      },
      [&](auto c, uint32_t blocks, const pool::Dims<uint32_t> &m, const Plan &p) {
        using C = decltype(c);
        path = "stream";
        // As cuda/pool.cu's launcher: sep_kernel for max k3 s1 p1 (chosen at compile time).
        if constexpr (K == Kind::Max && sep_cfg<C>()) {
          path = "sep";  // the stream path's max k3 s1 p1 kernel (cuda/pool.cu sep_kernel)
          ++sep_runs;
          BandPlan bp;
          if (form == SepForm::band && band_plan(m, bp)) {
            // band_kernel: per block, the staged rows and the rings in one shared array, garbage
            // before the launch; phase 1 (the copies) for every thread, then phase 2.
            ++band_runs;
            const bool vec = p.vec_in && p.vec_out;
            Aligned smem(bp.floats, 0xEEEEEEEEu);
            for (uint32_t blk = 0; blk < bp.blocks; ++blk) {
              std::memset(smem.p, 0xEE, bp.floats * 4);
              const uint32_t plane = blk / bp.bands, bi = blk % bp.bands;
              for (uint32_t tid = 0; tid < kBandThreads; ++tid) {
                auto cp16 = [](float *d, const float *s) {
                  emu_check(aligned16(d) && aligned16(s), "band: unaligned 16-byte copy");
                  std::memcpy(d, s, 16);
                };
                auto cp4 = [](float *d, const float *s) { std::memcpy(d, s, 4); };
                if (vec)
                  band_stage<true>(m, bp, plane, bi, x, dy, smem.p, tid, cp16, cp4);
                else
                  band_stage<false>(m, bp, plane, bi, x, dy, smem.p, tid, cp16, cp4);
              }
              for (uint32_t tid = 0; tid < kBandThreads; ++tid) {
                if (vec)
                  band_run<C, true>(m, bp, plane, bi, smem.p, dx, tid);
                else
                  band_run<C, false>(m, bp, plane, bi, smem.p, dx, tid);
              }
            }
            return;
          }
          // The block's shared accumulator rings, garbage before the launch (a thread must
          // clear the slots it reads).
          std::vector<float> ring(kSepSlots * kSepStride);
          std::memset(ring.data(), 0xEE, ring.size() * 4);
          // sep_kernel: the float4 body where every row is aligned, as cuda/pool.cu chooses.
          const bool vec = p.vec_in && p.vec_out;
          for (uint32_t t = 0; t < blocks * kThreads; ++t) {
            if (t >= p.stotal) continue;
            float *r = ring.data() + t % kThreads;
            if (vec)
              sep_body<C, true>(m, p, x, dy, dx, t, r);
            else
              sep_body<C, false>(m, p, x, dy, dx, t, r);
          }
        } else if constexpr (K != Kind::Smooth && C::SW < C::KW && 4 % C::SW == 0 &&
                             C::SW <= C::KH) {
          for (uint32_t t = 0; t < blocks * kThreads; ++t)
            if (t < p.stotal) stream_thread<K, C>(m, p, x, dy, pad, dx, t);
        }
      },
      o);
  return path;
}

void compare(const std::string &what, const std::vector<float> &ref, const float *got) {
  ++th::checks();
  for (size_t i = 0; i < ref.size(); ++i)
    if (!th::same_bits(ref[i], got[i])) {
      th::report(__FILE__, __LINE__,
                 what + ": element " + std::to_string(i) + " is " + th::hex(got[i]) +
                     ", the CPU backend gives " + th::hex(ref[i]));
      return;
    }
}

int fast_fwd = 0, paths_checked = 0;
StreamOpt stream_opt;  // the stream kernel's run height and prefetch distance under test

template <Kind K>
void one_kind(const Geo &q, const ConvGeometry &g, const std::vector<float> &x,
              const std::vector<float> &dy, bool pad, double beta, const std::string &w) {
  const uint32_t R = g.rank;
  const uint64_t *in = q.in.data(), *k = q.k.data(), *s = q.s.data(), *p = q.p.data();
  th::Buf bx(th::upload(x)), bdy(th::upload(dy)), ry, rdx;
  const float b32 = (float)beta;
  if (K == Kind::Max) {
    TH_OK(tlrt_maxpool_fwd(bx.get(), q.N, q.C, in, R, k, s, p, ry.out()));
    TH_OK(tlrt_maxpool_bwd(bx.get(), bdy.get(), q.N, q.C, in, R, k, s, p, rdx.out()));
  } else if (K == Kind::Avg) {
    TH_OK(tlrt_avgpool_fwd(bx.get(), q.N, q.C, in, R, k, s, p, pad, ry.out()));
    TH_OK(tlrt_avgpool_bwd(bdy.get(), q.N, q.C, in, R, k, s, p, pad, rdx.out()));
  } else {
    TH_OK(tlrt_smooth_maxpool_fwd(bx.get(), q.N, q.C, in, R, k, s, p, beta, ry.out()));
    TH_OK(tlrt_smooth_maxpool_bwd(bx.get(), bdy.get(), q.N, q.C, in, R, k, s, p, beta,
                                  rdx.out()));
  }
  const std::vector<float> ref_y = th::download(ry.get()), ref_dx = th::download(rdx.get());
  Aligned ax(x.size(), 0), ady(dy.size(), 0);
  std::memcpy(ax.p, x.data(), x.size() * 4);
  std::memcpy(ady.p, dy.data(), dy.size() * 4);
  // The max k3 s1 p1 backward's kernels, one per pass: sep_kernel, band_kernel.
  for (int pass = 0; pass < 2; ++pass) {
    const uint32_t fill = kFills[pass];
    const SepForm form = pass == 0 ? SepForm::plain : SepForm::band;
    Aligned y(g.out_elems, fill), dx(g.in_elems, fill);
    if (emu_fwd<K>(g, ax.p, y.p, pad, b32)) {
      compare(w + " fwd", ref_y, y.p);
      ++fast_fwd;
    }
    const char *path =
        emu_bwd<K>(g, K == Kind::Avg ? nullptr : ax.p, ady.p, dx.p, pad, b32, stream_opt, form);
    // The stream path's kernel by kind: smooth max takes the tile kernel, max with a k3 s1 p1
    // last axis sep_core (the stream geometries have kernel 3 and the last axis' stride on the
    // rows too).
    const bool k3s1p1 = q.k.back() == 3 && q.s.back() == 1 && q.p.back() == 1;
    const char *expect = q.expect_bwd;
    if (std::strcmp(expect, "stream") == 0 && K == Kind::Smooth) expect = "tile";
    if (std::strcmp(expect, "stream") == 0 && K == Kind::Max && k3s1p1) expect = "sep";
    ++th::checks();
    if (std::strcmp(path, expect) != 0)
      th::report(__FILE__, __LINE__, w + ": backward took the " + path + " path, expected " +
                                         expect);
    if (std::strcmp(path, "generic") != 0) {
      compare(w + " bwd (" + path + ")", ref_dx, dx.p);
      ++paths_checked;
    }
  }
}

// Ties everywhere: +0 and -0, equal values, -inf windows, several NaNs (with different payloads)
// in one window: the first-maximum / first-NaN rules and the sign of zero sums are decided here.
std::vector<float> ties(uint64_t n, uint64_t salt) {
  const float inf = INFINITY;
  const float pool[] = {0.0f, -0.0f, 0.0f, -0.0f, 1.0f, 1.0f, -inf, -inf, 2.0f, -1.0f};
  th::Rng rng(salt);
  std::vector<float> v(n);
  for (auto &x : v) {
    const uint64_t r = rng.gen() % 64;
    if (r == 0) {
      const uint32_t u = 0x7fc00000u | (uint32_t)(rng.gen() & 0xffff);  // a NaN, random payload
      std::memcpy(&x, &u, 4);
    } else {
      x = pool[r % 10];
    }
  }
  return v;
}

// Mostly signed zeros (and -inf, -1, a rare NaN): most windows' maximum is a zero, so the max
// forward's maxNum pass (which may return either zero) hands most threads to its exact select
// pass, next to threads that keep the maxNum result; the backward's terms are +-0 sums.
std::vector<float> zeros(uint64_t n, uint64_t salt) {
  const float pool[] = {0.0f, -0.0f, -0.0f, 0.0f, -0.0f, -INFINITY, -1.0f, -0.0f};
  th::Rng rng(salt);
  std::vector<float> v(n);
  for (auto &x : v) {
    const uint64_t r = rng.gen() % 97;
    if (r == 0) {
      const uint32_t u = 0x7fc00001u;
      std::memcpy(&x, &u, 4);
    } else {
      x = pool[r % 8];
    }
  }
  return v;
}

// Mostly -inf (and a few zeros, +-1, a rare NaN): whole windows, rows and columns of -inf next to
// the padding, where the max rule selects the window's first REAL cell (padding reads as -inf and
// must never win that tie).
std::vector<float> infs(uint64_t n, uint64_t salt) {
  const float pool[] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                        -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0.0f,
                        -0.0f,     1.0f,      -1.0f,     -INFINITY};
  th::Rng rng(salt);
  std::vector<float> v(n);
  for (auto &x : v) {
    const uint64_t r = rng.gen() % 211;
    if (r == 0) {
      const uint32_t u = 0x7fc00002u;
      std::memcpy(&x, &u, 4);
    } else {
      x = pool[r % 16];
    }
  }
  return v;
}

// d = -1: the ties() input; d = -2: the zeros() input; d = -3: the infs() input. max_only: max
// pooling alone (the separable-backward sweep: sep_core is max pooling's).
void one(const Geo &q, int d, uint64_t salt, bool max_only = false) {
  const ConvGeometry g = geometry(q);
  const Dist dist = d < 0 ? Dist::Uniform : (Dist)d;
  const std::vector<float> x = d == -1   ? ties(g.in_elems, salt)
                               : d == -2 ? zeros(g.in_elems, salt)
                               : d == -3 ? infs(g.in_elems, salt)
                                         : th::make(dist, g.in_elems, salt);
  const std::vector<float> dy =
      d == -1   ? ties(g.out_elems, salt + 1)
      : d == -2 ? zeros(g.out_elems, salt + 1)
                : th::make(dist == Dist::Bits ? Dist::Bits : Dist::Uniform, g.out_elems, salt + 1);
  const std::string w =
      name(q) + " " +
      (d == -1 ? "ties" : d == -2 ? "zeros" : d == -3 ? "infs" : th::dist_name(dist));
  one_kind<Kind::Max>(q, g, x, dy, false, 0.0, w + " max");
  if (max_only) return;
  for (bool pad : {true, false})
    one_kind<Kind::Avg>(q, g, x, dy, pad, 0.0, w + (pad ? " avg" : " avg (no pad)"));
  const double beta = salt % 2 ? 1.5 : -0.75;
  one_kind<Kind::Smooth>(q, g, x, dy, false, beta, w + " smooth beta " + std::to_string(beta));
}

void fastdiv() {
  th::Rng rng(5);
  std::vector<uint32_t> ds = {1, 2, 3, 5, 7, 14, 28, 56, 112, 255, 256, 257, 3136, 12544,
                              65535, 65536, 65537, 0x7fffffffu, 0x40000000u, 0x40000001u};
  for (int i = 0; i < 2000; ++i) ds.push_back(1 + (uint32_t)(rng.gen() % 0x7fffffffu));
  for (int i = 0; i < 2000; ++i) ds.push_back(1 + (uint32_t)(rng.gen() % 5000));
  for (uint32_t d : ds) {
    const FastDiv f = make_fastdiv(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, 0x7fffffffu, 0x7ffffffeu};
    if (d < 0x7fffffffu) ns.push_back(d + 1);
    for (int i = 0; i < 64; ++i) ns.push_back((uint32_t)(rng.gen() % 0x80000000u));
    for (int i = 0; i < 16; ++i) {
      const uint64_t mlt = (uint64_t)d * (rng.gen() % (0x80000000ull / d + 1));
      if (mlt < 0x80000000ull) {
        ns.push_back((uint32_t)mlt);
        ns.push_back((uint32_t)(mlt ? mlt - 1 : 0));
      }
    }
    ++th::checks();
    for (uint32_t n : ns)
      if (n < 0x80000000u && fdiv(f, n) != n / d) {
        th::report(__FILE__, __LINE__, "fdiv(" + std::to_string(n) + ", " + std::to_string(d) +
                                           ") = " + std::to_string(fdiv(f, n)));
        break;
      }
  }
}

// div_by against '/' for every verified divisor: edge operands (signed zeros, subnormals, the
// largest finite, infinities, NaN) and every 4099th bit pattern (~1M per divisor); all 2^32
// patterns with TLRT_POOL_DIV_EXHAUSTIVE=1 (~45 s per divisor: how the list was established).
void divby() {
  const bool all = std::getenv("TLRT_POOL_DIV_EXHAUSTIVE") != nullptr;
  std::vector<uint64_t> ds;
  for (uint64_t d = 1; d <= 4096; ++d)
    if (div_by_verified(d)) ds.push_back(d);
  const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu,
                           0x807fffffu, 0x00800000u, 0x80800000u, 0x7f7fffffu, 0xff7fffffu,
                           0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x3f800000u,
                           0x41100000u, 0x00000009u, 0x00000012u, 0x01000000u};
  for (uint64_t d : ds) {
    const float df = (float)d, r = 1.0f / df;
    ++th::checks();
    auto check = [&](uint32_t u) {
      float x;
      std::memcpy(&x, &u, 4);
      const float got = div_by(x, df, r), ref = x / df;
      if (th::same_bits(got, ref) || (got != got && ref != ref)) return true;
      th::report(__FILE__, __LINE__, "div_by(" + th::hex(x) + ", " + std::to_string(d) +
                                         ") = " + th::hex(got) + ", '/' gives " + th::hex(ref));
      return false;
    };
    bool ok = true;
    for (uint32_t u : edge) ok = ok && check(u);
    const uint64_t step = all ? 1 : 4099;
    for (uint64_t u = 0; ok && u <= 0xffffffffull; u += step) ok = check((uint32_t)u);
  }
  ++th::checks();
  if (!div_by_verified(9) || div_by_verified(0) || div_by_verified(11))
    th::report(__FILE__, __LINE__, "div_by_verified: 9 must be in the list, 0 and 11 not");
}

}  // namespace

int main() {
  fastdiv();
  divby();
  const std::vector<Geo> geos = {
      // k2 s2 p0: disjoint -> scatter (rank 2 and 3), float4 and scalar, tails, partial groups
      {2, 3, {8, 16}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      {1, 2, {9, 13}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      {1, 2, {6, 12}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      {2, 1, {7, 36}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      {1, 2, {9, 16}, {2, 2}, {3, 2}, {1, 0}, "scatter"},  // row gaps, padded first row
      {1, 1, {3, 4}, {2, 2}, {2, 2}, {1, 0}, "scatter"},
      {2, 2, {4, 6, 8}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, "scatter"},
      {1, 2, {6, 8, 16}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, "scatter"},
      {1, 2, {7, 5, 11}, {2, 2, 2}, {3, 2, 2}, {1, 1, 0}, "scatter"},
      {2, 2, {4, 64}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      // k2 s(1, 2): overlapping rows -> tile with the k2 s2 configuration
      {2, 2, {7, 20}, {2, 2}, {1, 2}, {0, 0}, "tile"},
      // k3 s2 p1 (the stem pool): tile; k3 s1 p1: tile
      {2, 2, {11, 12}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {1, 3, {10, 16}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {2, 2, {9, 9}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {1, 2, {12, 10}, {3, 3}, {4, 2}, {1, 1}, "tile"},  // rows in no window
      {1, 2, {14, 14}, {3, 3}, {1, 2}, {0, 1}, "tile"},
      {2, 2, {13, 8}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 2, {6, 7}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 2, {9, 5}, {3, 3}, {2, 1}, {0, 1}, "tile"},
      {1, 1, {5, 300}, {3, 3}, {1, 1}, {1, 1}, "stream"},  // several tiles across
      {1, 1, {40, 260}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {1, 1, {70, 3}, {3, 3}, {1, 1}, {1, 1}, "stream"},  // several tiles down, 1 thread per row
      {1, 2, {1, 1}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 2, {2, 2}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      // stream (stride 1 on both axes): H, W not multiples of the run or of 4, N C = 1, one
      // column group, several runs down (16 rows at most each), float4 rows, no row padding
      {1, 1, {17, 29}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 1, {2, 2}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 1, {3, 1}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 1, {1, 9}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 3, {33, 12}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 1, {16, 16}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {2, 1, {35, 64}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 1, {31, 4}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 2, {9, 8}, {3, 3}, {1, 1}, {0, 1}, "stream"},
      {1, 1, {20, 13}, {3, 3}, {1, 1}, {0, 1}, "stream"},
      // max k3 s1 p1 with several bands per plane on the band kernel (rows of 256 and 301
      // columns leave room for 5 to 9 rows per band), float4 and scalar rows,
      // row padding 1 and 0
      {1, 2, {40, 256}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 1, {30, 301}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 1, {41, 256}, {3, 3}, {1, 1}, {0, 1}, "stream"},
      // stream with stride 2 (the stem pool's geometry): odd sizes, one plane, several runs
      {1, 1, {7, 5}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {1, 1, {1, 1}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {1, 1, {2, 3}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {2, 1, {37, 21}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {1, 1, {33, 64}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {1, 2, {64, 8}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {1, 1, {10, 9}, {3, 3}, {2, 2}, {0, 1}, "stream"},
      {1, 1, {11, 16}, {3, 3}, {2, 2}, {0, 1}, "stream"},
      // scatter, two windows per thread: float4 rows (W even), scalar rows, one plane
      {1, 1, {5, 20}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      {1, 1, {4, 6}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      {3, 1, {6, 4}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      {1, 1, {3, 5, 12}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, "scatter"},
      // the benchmark shapes, small batch
      {1, 2, {112, 112}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      {1, 2, {112, 112}, {2, 2}, {2, 2}, {0, 0}, "scatter"},
      {1, 2, {56, 56}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 2, {8, 64, 64}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, "scatter"},
      // rank 3 with overlapping windows: fast forward, generic backward
      {1, 2, {5, 7, 9}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, "generic"},
      {1, 2, {4, 6, 8}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}, "generic"},
      {2, 1, {5, 6, 12}, {2, 2, 2}, {1, 2, 2}, {0, 0, 0}, "generic"},
      // forward rows outside the input above and below one window row (loaded as the identity,
      // no branch), rank 3 with depth padding; stream backward with 1 and 2 rows, one column
      {1, 1, {2, 5}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 1, {2, 1}, {3, 3}, {1, 1}, {1, 1}, "stream"},
      {1, 1, {3, 1, 7}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, "generic"},
      {1, 1, {2, 3, 8}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, "generic"},
      {3, 1, {1, 4}, {3, 3}, {2, 2}, {1, 1}, "stream"},
      // no fast path at all
      {1, 2, {9, 9}, {3, 3}, {3, 3}, {1, 1}, "generic"},
      {1, 2, {9}, {2}, {2}, {0}, "generic"},
  };
  uint64_t salt = 100;
  for (const Geo &q : geos)
    for (int d : {-3, -2, -1, (int)Dist::Uniform, (int)Dist::Wide, (int)Dist::Bits,
                  (int)Dist::Edge, (int)Dist::Positive})
      one(q, d, salt += 3);
  // The stream path (stream_run; sep_core for max k3 s1 p1) with other run heights
  // (StreamOpt::rows): one row per run (every run a halo), 5 (runs ending mid-plane at odd
  // rows), 4096 (one run).
  for (uint32_t rows : {1u, 5u, 4096u}) {
    stream_opt = StreamOpt{};
    stream_opt.rows = rows;
    for (const Geo &q : geos)
      if (std::strcmp(q.expect_bwd, "stream") == 0)
        for (int d : {-1, (int)Dist::Bits}) one(q, d, salt += 3);
  }
  // Other prefetch distances (StreamOpt::ahead): none, 2, 8 (past the run's last row).
  for (int ahead : {0, 2, 8}) {
    stream_opt = StreamOpt{};
    stream_opt.ahead = ahead;
    for (const Geo &q : geos)
      if (std::strcmp(q.expect_bwd, "stream") == 0) one(q, (int)Dist::Bits, salt += 3);
  }
  // The separable-argmax max backward (sep_core, max pooling on the k3 s1 p1 stream geometries;
  // max k3 s2 p1 runs the stream kernel here too) at other run heights and prefetch distances:
  // ties with NaNs, signed zeros, -inf next to the padding and Dist::Bits. Its default run
  // height and distance with every input kind (ties, zeros, -inf, every th::Dist) are the first
  // sweep's. Under memcheck (which
  // adds nothing to the bit comparisons here, only to the memory accesses) the default run
  // height and distance only, i.e. the first sweep (the whole sweep was most of this test's
  // time there).
  if (!th::under_valgrind()) {
    std::vector<StreamOpt> opts;  // one of run height and distance away from its default
    for (uint32_t rows : {1u, 2u, 3u, 5u, 4096u}) {
      opts.emplace_back();
      opts.back().rows = rows;
    }
    for (int ahead : {0, 2, 8}) {
      opts.emplace_back();
      opts.back().ahead = ahead;
    }
    for (const StreamOpt &o : opts) {
      stream_opt = o;
      for (const Geo &q : geos)
        if (std::strcmp(q.expect_bwd, "stream") == 0)
          for (int d : {-3, -2, -1, (int)Dist::Bits}) one(q, d, salt += 3, true);
    }
  }
  stream_opt = StreamOpt{};
  // Which max k3 s1 p1 planes the library gives band_kernel (band_takes: band_plan applies and
  // at least half of the block's threads are busy), on the planes the choice was measured on.
  struct Choice {
    uint64_t h, w;
    bool band;
  };
  for (const Choice &c : {Choice{7, 7, false}, Choice{14, 14, false}, Choice{28, 28, true},
                          Choice{56, 56, true}, Choice{112, 112, true}, Choice{75, 301, true},
                          Choice{64, 640, false}, Choice{1, 1, false}, Choice{300, 20, true}}) {
    const Geo q{2, 3, {c.h, c.w}, {3, 3}, {1, 1}, {1, 1}, "stream"};
    BandPlan bp;
    ++th::checks();
    if (band_takes(tlrt::pool::make_dims<uint32_t>(geometry(q)), bp) != c.band)
      th::report(__FILE__, __LINE__,
                 "band_takes(" + std::to_string(c.h) + " x " + std::to_string(c.w) + ") is not " +
                     (c.band ? "true" : "false"));
  }
  std::printf("pool_kernels: %d fast forward and %d fast backward runs compared, %d of them "
              "separable max backward (%d on the band kernel)\n", fast_fwd, paths_checked,
              sep_runs, band_runs);
  return th::finish("test_pool_kernels");
}
