// CUDA backend, fused attention: the call's precision (from core/api_attention.cpp) picks the
// kernels; where a tensor-core kernel does not take the problem or the device, the exact ones run.
//   Exact: cuda/kernels/attention.cuh, FlashAttention-2 in float32 SIMT, bit for bit the CPU; it
//     reads every geometry in place (strided views, grouped heads, len_q != len_k).
//   SplitTf32 (default): forward cuda/kernels/attention_mma.cuh (3xTF32 mma.sync, sm_80+,
//     d <= 128), backward cuda/sm90a/attention.cu (3xTF32 wgmma, compute capability 9.0,
//     32 < d <= 128).
//   Tf32: the mma.sync forward with one product; the unmasked backward on
//     cuda/kernels/attention_tc.cuh (WMMA TF32, sm_80+, d <= 128).
// The tensor-core kernels take problems of one length (len_q == len_k; otherwise the exact
// kernels run). The 3xTF32 forward and the wgmma backward read and write a geometry's strided
// views in place (attn::RowMap: e.g. q, k, v as column blocks of one fused projection, out and
// dout token-major), except that the backward of grouped heads (hkv < hq), whose dk and dv sum
// over each group, and the WMMA TF32 backward take the packed (bh, n, d) layout: the views are
// copied into it first (restride_kernel: k and v with each key / value head repeated for its query
// heads) and the results copied back (dk, dv summed over each group's heads). Strategy, FLOPs and
// bytes: each kernel file's top comment. Scratch: the stream-ordered pool.
// Last measured: bench/results/2026-11-29-h200-attention-views.md
#include "cuda/kernels/attention_mma.cuh"
#include "cuda/kernels/attention_tc.cuh"

#include "core/backend/attention.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/common/runtime.cuh"
#if TLRT_HAVE_WGMMA
#include "cuda/sm90a/attention.cuh"
#endif

namespace tlrt {
namespace cuda {

namespace {

// The plans' launcher: the library stream of `dev`; a kernel's dynamic shared memory and carveout
// (all shared, so that two ~105 KB blocks fit per SM) are set once per device.
struct Launch {
  int dev;
  unsigned max_grid_y() const { return kMaxGridY; }
  size_t smem_limit() const { return smem_optin(dev); }  // cached per device
  template <auto K, class... A>
  void operator()(const char *name, attn_kernels::Kernel<K>, dim3 grid, unsigned threads,
                  size_t smem, A... args) const {
    static SmemAllowed size, carveout;
    cudaStream_t st = stream(dev);  // makes dev current: the attributes are per device
    if (smem != 0) {
      size.ensure(dev, K, smem, "attention: cudaFuncSetAttribute");
      carveout.ensure(dev, K, cudaFuncAttributePreferredSharedMemoryCarveout,
                      (int)cudaSharedmemCarveoutMaxShared, "attention: cudaFuncSetAttribute");
    }
    launch(name, K, grid, dim3(threads), smem, st, args...);
  }
};

bool tensor_cores(int dev) { return cc_major(dev) >= 8; }  // mma.sync / WMMA TF32: sm_80+

// The geometry as the tensor-core kernels' problem: batch * hq sequences of n = nq = nk rows.
attn::Problem packed_problem(const attn::Geometry &g) {
  attn::Problem p{};
  p.bh = g.batch * g.hq;
  p.n = g.nq;
  p.d = g.d;
  p.mask = g.mask;
  p.mask_stride = g.mask_stride;  // per problem b * hq + h, the packed problem's index
  p.scale = g.scale;
  p.fill = g.fill;
  p.causal = g.causal;
  return p;
}

// The packed layout (batch * hq, n, d) as a (batch, token, head) view of hq heads.
attn::View packed_view(const attn::Geometry &g) {
  return attn::View{g.hq * g.nq * g.d, g.d, g.nq * g.d};
}
// out and dout: (batch, nq, hq, d).
attn::View token_major(const attn::Geometry &g) {
  return attn::View{g.nq * g.hq * g.d, g.hq * g.d, g.d};
}

// A view that is already the packed layout of a one-head geometry.
bool packed_as_is(const attn::Geometry &g, const attn::View &v) {
  return v.token == g.d && (g.batch == 1 || v.batch == g.nq * g.d);
}
bool contiguous(const attn::Geometry &g) {
  return g.hq == 1 && g.hkv == 1 && g.nq == g.nk && packed_as_is(g, g.q) &&
         packed_as_is(g, g.k) && packed_as_is(g, g.v);
}
bool grads_contiguous(const attn::Geometry &g, const attn::Grads &gr) {
  return (!gr.dq || packed_as_is(g, gr.q)) && (!gr.dk || packed_as_is(g, gr.k)) &&
         (!gr.dv || packed_as_is(g, gr.v));
}

// Rounds a float count up to a multiple of 4 (16-byte aligned parts of one scratch block).
uint64_t round4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

// src (a view of `heads` heads) into the packed layout (hq heads, each reading head h / (hq /
// heads)); and back: packed into dst (a view of `heads` heads, each the sum of its hq / heads
// packed heads, ascending).
void pack(const Launch &launch, const attn::Geometry &g, const float *src, const attn::View &sv,
          uint64_t heads, float *dst) {
  attn_kernels::restride_plan(
      launch,
      attn_kernels::Restride{g.batch, g.nq, g.hq, g.d, sv, packed_view(g), 1,
                             (unsigned)(g.hq / heads)},
      src, dst);
}
void unpack(const Launch &launch, const attn::Geometry &g, const float *src, float *dst,
            const attn::View &dv, uint64_t heads) {
  attn_kernels::restride_plan(
      launch,
      attn_kernels::Restride{g.batch, g.nq, heads, g.d, packed_view(g), dv,
                             (unsigned)(g.hq / heads), 1},
      src, dst);
}

}  // namespace

void attention_fwd(int dev, const attn::Geometry &g, const float *q, const float *k,
                   const float *v, Precision precision, float *out, float *lse) {
  Launch launch{dev};
  if (precision != Precision::Exact && tensor_cores(dev) && g.nq == g.nk && g.nq > 0 &&
      g.hq <= UINT32_MAX) {
    const bool split = precision == Precision::SplitTf32;
    const attn::Problem p = packed_problem(g);
    const uint64_t pf = attn_kernels::fwd_mma_planes_floats(launch, p, split);
    if (pf != 0) {
      FloatScratch planes(dev, pf);
      if (attn_kernels::fwd_mma_plan(launch, p, split, q, attn::rows_of(g, g.q, g.hq), k,
                                     attn::rows_of(g, g.k, g.hkv), v,
                                     attn::rows_of(g, g.v, g.hkv), out,
                                     attn::token_major_rows(g), lse, planes.get()))
        return;
    }
  }
  attn_kernels::fwd_plan(launch, g, q, k, v, out, lse);
}

void attention_bwd(int dev, const attn::Geometry &g, const float *q, const float *k,
                   const float *v, const float *out, const float *dout, const float *lse,
                   Precision precision, const attn::Grads &gr) {
  Launch launch{dev};
  const bool want_ds = gr.dq || gr.dk;  // for dS only: dv alone reads no D
  if (precision != Precision::Exact && g.nq == g.nk && g.nq > 0) {
    const attn::Problem p = packed_problem(g);
    bool wgmma = false;
#if TLRT_HAVE_WGMMA
    wgmma = precision == Precision::SplitTf32 && cc_major(dev) == 9 && cc_minor(dev) == 0 &&
            attn_wgmma::bwd_applies(p);
#endif
    const bool tc = !wgmma && precision == Precision::Tf32 && p.mask == nullptr &&
                    tensor_cores(dev) && attn_kernels::bwd_tc_applies(launch, p);
#if TLRT_HAVE_WGMMA
    if (wgmma && g.hq == g.hkv && g.hq <= UINT32_MAX) {  // the views in place
      const attn::RowMap om = attn::token_major_rows(g);
      FloatScratch D(dev, want_ds ? p.bh * p.n : 1);
      if (want_ds) attn_kernels::d_map_plan(launch, p.bh, p.n, p.d, out, om, dout, om, D.get());
      FloatScratch planes(dev, attn_wgmma::bwd_planes_floats(p));
      const attn_wgmma::Rows rows{attn::rows_of(g, g.q, g.hq),  attn::token_major_rows(g),
                                  attn::rows_of(g, g.k, g.hkv), attn::rows_of(g, g.v, g.hkv),
                                  attn::rows_of(g, gr.q, g.hq), attn::rows_of(g, gr.k, g.hkv),
                                  attn::rows_of(g, gr.v, g.hkv)};
      attn_wgmma::bwd(dev, p, rows, q, k, v, dout, lse, want_ds ? D.get() : nullptr, planes.get(),
                      gr.dq, gr.dk, gr.dv);
      return;
    }
#endif
    if (wgmma || tc) {
      const bool direct = contiguous(g) && grads_contiguous(g, gr);
      const uint64_t n4 = round4(p.bh * p.n * p.d);
      FloatScratch s(dev, direct ? 0 : 8 * n4);  // packed q, k, v, out, dout, dq, dk, dv
      const float *pq = q, *pk = k, *pv = v, *po = out, *pdo = dout;
      float *pdq = gr.dq, *pdk = gr.dk, *pdv = gr.dv;
      if (!direct) {
        float *b = s.get();
        pack(launch, g, q, g.q, g.hq, b);
        pack(launch, g, k, g.k, g.hkv, b + n4);
        pack(launch, g, v, g.v, g.hkv, b + 2 * n4);
        if (want_ds) pack(launch, g, out, token_major(g), g.hq, b + 3 * n4);
        pack(launch, g, dout, token_major(g), g.hq, b + 4 * n4);
        pq = b, pk = b + n4, pv = b + 2 * n4, po = b + 3 * n4, pdo = b + 4 * n4;
        pdq = gr.dq ? b + 5 * n4 : nullptr;
        pdk = gr.dk ? b + 6 * n4 : nullptr;
        pdv = gr.dv ? b + 7 * n4 : nullptr;
      }
      FloatScratch D(dev, want_ds ? p.bh * p.n : 1);
#if TLRT_HAVE_WGMMA
      if (wgmma) {
        if (want_ds) attn_kernels::d_plan(launch, p, po, pdo, D.get());
        FloatScratch planes(dev, attn_wgmma::bwd_planes_floats(p));
        const attn::RowMap m = attn::packed_rows(p.n, p.d);
        attn_wgmma::bwd(dev, p, attn_wgmma::Rows{m, m, m, m, m, m, m}, pq, pk, pv, pdo, lse,
                        want_ds ? D.get() : nullptr, planes.get(), pdq, pdk, pdv);
      }
#endif
      if (tc) attn_kernels::bwd_tc_plan(launch, p, pq, pk, pv, po, pdo, lse, D.get(), pdq, pdk, pdv);
      if (!direct) {
        if (gr.dq) unpack(launch, g, pdq, gr.dq, gr.q, g.hq);
        if (gr.dk) unpack(launch, g, pdk, gr.dk, gr.k, g.hkv);
        if (gr.dv) unpack(launch, g, pdv, gr.dv, gr.v, g.hkv);
      }
      return;
    }
  }
  FloatScratch D(dev, want_ds && g.nq > 0 ? g.batch * g.nq * g.hq : 1);
  attn_kernels::bwd_plan(launch, g, q, k, v, out, dout, lse, D.get(), gr);
}

}  // namespace cuda
}  // namespace tlrt
