// The CUDA attention kernels (cuda/kernels/attention.cuh, the very source nvcc compiles) run on
// the CPU under tests/emu/cuda_emu.hpp and compared bit for bit with the CPU backend
// (tlrt_flash_attention_* on CPU buffers), so that the kernels' index arithmetic, boundary tiles,
// causal skipping, barriers and asynchronous copies are checked without a GPU. Every case runs
// under several schedules (fibers resumed in ascending, descending and random order; cp.async
// copies landing at issue or only at the wait): a missing barrier or wait changes the bits.
// The shapes reach every kernel instantiation (d = 0, 1, 5, 32, 33, 64, 100, 128, 200, 256),
// n = 1, odd n and n across the 32/64/128-row block edges and the 64-key tiles; masks none /
// per problem / broadcast / causal / causal + mask / fully blocked rows with both fill
// conventions; the fused backward and its three single-gradient forms; special values.
// The geometry entry points (tlrt_attention_fwd / _bwd on CPU buffers as the reference): grouped
// heads, len_q != len_k (decode steps, len_q > len_k, no keys, no queries), q / k / v and the
// gradients read and written in place in token-major, fused and padded (misaligned) layouts, the
// gradient buffers compared whole (nothing outside the views written); and the layout copies of
// the tensor-core modes (restride_kernel) against a host loop. Each case also runs as on a device with less shared memory (sm_86/89 for d <= 64, sm_80 for
// d <= 128), where the plans pick the smaller-block variants. TLRT_EMU_FULL=1 runs every schedule
// on every case (the default rotates them). Skipped (77) under valgrind, ASan and TSan, which do
// not follow the emulator's stack switches unannotated (the plain builds run it).
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "../attention_geom.hpp"
#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/attention.cuh"

namespace {

using emu_check::full;
using emu_check::same;

namespace attn = tlrt::attn;
namespace ak = tlrt::cuda::attn_kernels;

// Shared memory per block of the emulated device: sm_90, sm_80, sm_86/89 (the plans pick
// smaller-block variants below sm_90; d > 64 needs sm_80's, d > 128 sm_90's, as before).
constexpr size_t kSmemLimits[] = {232448, 166912, 101376};

using EmuLaunch = emu_check::Launch;

const emu::Policy kPolicies[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1},
    {emu::Order::Descending, emu::Copy::Early, 2},
    {emu::Order::Random, emu::Copy::Late, 3},
    {emu::Order::Descending, emu::Copy::Late, 4},
    {emu::Order::Random, emu::Copy::Early, 5},
};
constexpr int kNumPolicies = sizeof kPolicies / sizeof kPolicies[0];

struct Case {
  uint64_t bh, n, d;
  int mk;  // 0 none, 1 per problem, 2 broadcast, 3 causal, 4 causal + broadcast, 5 full rows
  double fill;
  th::Dist dist;
  bool odd = false;  // tensors 4 bytes past 16-byte alignment (element-wise copies and stores);
                     // the grid then has 2 blocks along y, so blocks loop over problems
  // The geometry entry points: hq, hkv, nq, nk (0: the (bh, n, d) entry points, one head of n
  // rows per problem) and where q, k, v and the gradients lie.
  uint64_t hq = 0, hkv = 0, nq = 0, nk = 0;
  attgeo::Layout layout = attgeo::Layout::HeadMajor;
};

// The mask of kind mk for `problems` problems of nq x nk: empty, one per problem or broadcast.
std::vector<float> make_mask(int mk, uint64_t problems, uint64_t nq, uint64_t nk, uint64_t salt) {
  std::vector<float> mask;
  if (mk == 1 || mk == 2 || mk == 4 || mk == 5) {
    mask = th::make(th::Dist::Positive, (mk == 2 || mk == 4) ? nq * nk : problems * nq * nk, salt);
    for (auto &x : mask) x = x < 0.3f ? (x < 0.15f ? 0.0f : -0.0f) : (x < 0.33f ? NAN : 1.0f);
    if (mk == 5)
      for (uint64_t j = 0; j < nk; ++j) mask[(nq / 2) * nk + j] = 0.0f;
  }
  return mask;
}

void run_case(const Case &c, uint64_t salt, int policy_index, size_t limit) {
  const bool flash = c.hq == 0;
  const attgeo::Shape S = flash ? attgeo::Shape{c.bh, 1, 1, c.n, c.n, c.d}
                                : attgeo::Shape{c.bh, c.hq, c.hkv, c.nq, c.nk, c.d};
  const attgeo::Placement P = attgeo::place(S, flash ? attgeo::Layout::HeadMajor : c.layout);
  const uint64_t NQ = S.q_elems(), NK = S.kv_elems();
  const std::vector<float> q = th::make(c.dist, NQ, salt + 1), k = th::make(c.dist, NK, salt + 2),
                           v = th::make(c.dist, NK, salt + 3),
                           dout = th::make(th::Dist::Uniform, NQ, salt + 4);
  const std::vector<float> mask = make_mask(c.mk, S.batch * S.hq, S.nq, S.nk, salt + 5);
  const bool causal = c.mk == 3 || c.mk == 4;
  const double scale = 1.0 / std::sqrt((double)std::max<uint64_t>(c.d, 1));
  char tag[256];
  std::snprintf(tag, sizeof tag, "%s %s mask %d fill %g %s policy %d smem %zu%s",
                flash ? "flash" : "geometry", attgeo::shape_str(S).c_str(), c.mk, c.fill,
                th::dist_name(c.dist), policy_index, limit,
                flash ? "" : (std::string(" ") + attgeo::layout_name(c.layout)).c_str());
  const std::string w = tag;
  const std::vector<std::vector<float>> hb = attgeo::host_buffers(S, P, q, k, v, 3.0f);
  const tlrt_attention_geometry geo = attgeo::geometry(S, P);

  // CPU backend through the public API: out, lse and the three gradients, the gradients written
  // into buffers of the inputs' layout (7.0 where no view reaches) for the geometry entry points.
  th::Buf DO(th::upload(dout)), M, O, L;
  if (!mask.empty()) M = th::Buf(th::upload(mask));
  std::vector<std::vector<float>> grads(3);  // contents of the gradient buffers 0, 1, 2
  if (flash) {
    th::Buf Q(th::upload(q)), K(th::upload(k)), V(th::upload(v)), dq, dk, dv;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), M.get(), c.bh, c.n, c.d, scale,
                                   causal, c.fill, O.out(), L.out()));
    TH_OK(tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), M.get(), DO.get(), O.get(),
                                   L.get(), c.bh, c.n, c.d, scale, causal, c.fill, dq.out(),
                                   dk.out(), dv.out()));
    grads = {th::download(dq.get()), th::download(dk.get()), th::download(dv.get())};
  } else {
    th::Buf B[3], G[3];
    for (int i = 0; i < 3; ++i) {
      B[i] = th::Buf(th::upload(hb[i]));
      G[i] = th::Buf(th::upload(std::vector<float>(P.size[i], 7.0f)));
    }
    TH_OK(tlrt_attention_fwd(B[P.v[0].buf].get(), B[P.v[1].buf].get(), B[P.v[2].buf].get(),
                             M.get(), &geo, scale, causal, c.fill, O.out(), L.out()));
    TH_OK(tlrt_attention_bwd(B[P.v[0].buf].get(), B[P.v[1].buf].get(), B[P.v[2].buf].get(),
                             M.get(), DO.get(), O.get(), L.get(), &geo, scale, causal, c.fill,
                             G[P.v[0].buf].get(), G[P.v[1].buf].get(), G[P.v[2].buf].get(), &geo));
    for (int i = 0; i < 3; ++i) grads[i] = th::download(G[i].get());
  }
  const std::vector<float> out = th::download(O.get()), lse = th::download(L.get());

  // The CUDA kernels, emulated, on the same values (the geometry as core builds it).
  attn::Geometry g{};
  g.batch = S.batch;
  g.hq = S.hq;
  g.hkv = S.hkv;
  g.nq = S.nq;
  g.nk = S.nk;
  g.d = S.d;
  g.q = attn::View{P.v[0].sb, P.v[0].st, P.v[0].sh};
  g.k = attn::View{P.v[1].sb, P.v[1].st, P.v[1].sh};
  g.v = attn::View{P.v[2].sb, P.v[2].st, P.v[2].sh};
  if (c.d == 0) g.q = g.k = g.v = attn::View{0, 0, 0};  // as core passes empty views
  g.mask = mask.empty() ? nullptr : mask.data();  // (masks are read element by element)
  g.mask_stride =
      (!mask.empty() && mask.size() != S.nq * S.nk && S.batch * S.hq > 1) ? S.nq * S.nk : 0;
  g.scale = (float)scale;
  g.fill = (float)c.fill;
  g.causal = causal;
  EmuLaunch launch{kPolicies[policy_index], limit, c.odd ? 2u : 65535u};
  // Device-side copies, shifted by one float when c.odd.
  const size_t sh = c.odd ? 1 : 0;
  auto dev = [&](const std::vector<float> &x) {
    std::vector<float> y(x.size() + sh + 1, 5.0f);
    std::copy(x.begin(), x.end(), y.begin() + sh);
    return y;
  };
  std::vector<std::vector<float>> db(3);
  for (int i = 0; i < 3; ++i) db[i] = dev(hb[i]);
  const float *Qp = db[P.v[0].buf].data() + sh + P.v[0].off,
              *Kp = db[P.v[1].buf].data() + sh + P.v[1].off,
              *Vp = db[P.v[2].buf].data() + sh + P.v[2].off;
  std::vector<float> ddo = dev(dout), dout_ = dev(out), dlse = dev(lse);
  const float *DOp = ddo.data() + sh, *Op = dout_.data() + sh, *Lp = dlse.data() + sh;
  std::vector<float> o1 = dev(std::vector<float>(NQ, 7.0f)), o4 = dev(std::vector<float>(S.lse_elems()));
  auto res = [&](const std::vector<float> &o, size_t count) {
    return std::vector<float>(o.begin() + sh, o.begin() + sh + count);
  };
  if (S.nq != 0) ak::fwd_plan(launch, g, Qp, Kp, Vp, o1.data() + sh, o4.data() + sh);
  same(w + " fwd out", out, res(o1, NQ));
  same(w + " fwd lse", lse, res(o4, S.lse_elems()));
  std::vector<float> D(S.batch * S.nq * S.hq);
  // The gradient buffers of the placement (7.0 outside the views), as the CPU's.
  const uint64_t gsize[3] = {flash ? NQ : P.size[0], flash ? NK : P.size[1], flash ? NK : P.size[2]};
  const int gbuf[3] = {flash ? 0 : P.v[0].buf, flash ? 1 : P.v[1].buf, flash ? 2 : P.v[2].buf};
  auto check_grads = [&](bool wq, bool wk, bool wv, const char *what) {
    std::vector<std::vector<float>> gb(3);
    for (int i = 0; i < 3; ++i) gb[i] = dev(std::vector<float>(gsize[i], 7.0f));
    attn::Grads gr{wq ? gb[gbuf[0]].data() + sh + P.v[0].off : nullptr,
                   wk ? gb[gbuf[1]].data() + sh + P.v[1].off : nullptr,
                   wv ? gb[gbuf[2]].data() + sh + P.v[2].off : nullptr, g.q, g.k, g.v};
    ak::bwd_plan(launch, g, Qp, Kp, Vp, Op, DOp, Lp, D.data(), gr);
    const bool want[3] = {wq, wk, wv};
    for (int i = 0; i < 3; ++i) {
      if (!want[i]) continue;
      const int bi = gbuf[i];
      if (flash || (wq && wk && wv)) {
        same(w + " bwd " + what + " buffer " + std::to_string(bi), grads[bi],
             res(gb[bi], gsize[bi]));
      } else {  // only view i was written: compare its elements, and 7.0 elsewhere unless shared
        const uint64_t T = i == 0 ? S.nq : S.nk, H = i == 0 ? S.hq : S.hkv;
        same(w + " bwd " + what + " " + "qkv"[i],
             attgeo::gather(grads[bi], S.batch, T, H, S.d, P.v[i]),
             attgeo::gather(res(gb[bi], gsize[bi]), S.batch, T, H, S.d, P.v[i]));
      }
    }
  };
  check_grads(true, true, true, "all");
  // The single-gradient paths (each kernel alone; dv alone skips D and dS).
  check_grads(false, false, true, "dv alone");
  check_grads(false, true, false, "dk alone");
  check_grads(true, false, false, "dq alone");
}

// The layout copies (restride_kernel) against a host loop: packing with repeated heads, unpacking
// with summed heads, copies between odd strides.
void check_restride() {
  struct R {
    uint64_t B, T, H, d;
    attn::View src, dst;
    unsigned Rn, E;
    uint64_t src_heads;
  };
  const R cases[] = {
      {2, 5, 4, 3, {5 * 2 * 3, 2 * 3, 3}, {4 * 5 * 3, 3, 5 * 3}, 1, 2, 2},     // pack, E = 2
      {2, 5, 2, 3, {4 * 5 * 3, 3, 5 * 3}, {5 * 2 * 3 + 1, 2 * 3, 3}, 2, 1, 4},  // unpack, R = 2
      {1, 70, 3, 64, {3 * 64 + 9, 3 * 64 + 9, 64}, {3 * 70 * 64, 64, 70 * 64}, 1, 1, 3},
      {3, 1, 6, 1, {0, 7, 1}, {6, 6, 1}, 3, 1, 18}};
  int k = 0;
  for (const R &c : cases) {
    const uint64_t sn = c.src.batch * c.B + c.src.token * c.T + c.src.head * c.src_heads + c.d;
    const uint64_t dn = c.dst.batch * c.B + c.dst.token * c.T + c.dst.head * c.H + c.d;
    const std::vector<float> src = th::make(th::Dist::Edge, sn, 900 + k);
    std::vector<float> want(dn, 7.0f), got(dn, 7.0f);
    for (uint64_t b = 0; b < c.B; ++b)
      for (uint64_t t = 0; t < c.T; ++t)
        for (uint64_t h = 0; h < c.H; ++h)
          for (uint64_t e = 0; e < c.d; ++e) {
            const float *f = src.data() + b * c.src.batch + t * c.src.token + e;
            float acc = f[(h * c.Rn) / c.E * c.src.head];
            for (unsigned r = 1; r < c.Rn; ++r) acc = acc + f[(h * c.Rn + r) / c.E * c.src.head];
            want[b * c.dst.batch + t * c.dst.token + h * c.dst.head + e] = acc;
          }
    EmuLaunch launch{kPolicies[k % kNumPolicies], kSmemLimits[0], 65535u};
    ak::restride_plan(launch, ak::Restride{c.B, c.T, c.H, c.d, c.src, c.dst, c.Rn, c.E},
                      src.data(), got.data());
    same("restride case " + std::to_string(k), want, got);
    ++k;
  }
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_attention_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_attention_emu: skipped under valgrind\n");
    return 77;
  }
  struct Dims {
    uint64_t bh, n, d;
  };
  const bool all = full();
  uint64_t salt = 1;
  int rot = 0;
  auto go = [&](const Case &c) {
    salt += 10;
    for (size_t limit : kSmemLimits) {
      // The smallest device that still runs d; below sm_90 the plans differ only there.
      const size_t low = c.d <= 64 ? kSmemLimits[2] : c.d <= 128 ? kSmemLimits[1] : kSmemLimits[0];
      if (limit != kSmemLimits[0] && limit != low) continue;
      if (all)
        for (int pi = 0; pi < kNumPolicies; ++pi) run_case(c, salt, pi, limit);
      else
        run_case(c, salt, rot++ % kNumPolicies, limit);
    }
  };
  for (Dims s : {Dims{2, 70, 0}, Dims{1, 1, 1}, Dims{2, 1, 64}, Dims{1, 3, 5}, Dims{3, 17, 32},
                 Dims{2, 64, 64}, Dims{1, 65, 64}, Dims{2, 100, 33}, Dims{1, 129, 128},
                 Dims{1, 70, 100}, Dims{1, 67, 256}, Dims{1, 50, 200}, Dims{1, 200, 64},
                 Dims{1, 130, 32}})
    for (int mk = 0; mk < 6; ++mk)
      for (double fill : {-(double)INFINITY, -1000.0})
        go(Case{s.bh, s.n, s.d, mk, fill, th::Dist::Uniform});
  // Longer rows: several key tiles after the diagonal block, both skipping rules.
  go(Case{1, 300, 64, 3, -(double)INFINITY, th::Dist::Uniform});
  go(Case{2, 257, 128, 4, -(double)INFINITY, th::Dist::Uniform});
  go(Case{1, 160, 256, 3, -(double)INFINITY, th::Dist::Uniform});
  go(Case{1, 193, 64, 1, -1000.0, th::Dist::Uniform});
  // Misaligned tensors (element-wise paths of the exact kernels) and blocks looping over problems.
  for (Dims s : {Dims{3, 70, 64}, Dims{3, 129, 128}, Dims{3, 33, 32}, Dims{3, 40, 256}})
    for (int mk : {0, 1, 4}) {
      Case c{s.bh, s.n, s.d, mk, -(double)INFINITY, th::Dist::Uniform};
      c.odd = true;
      go(c);
    }
  // Special values: NaN / inf / subnormal inputs, and magnitudes where the order matters.
  for (th::Dist dist : {th::Dist::Edge, th::Dist::Wide, th::Dist::Bits})
    for (int mk : {0, 3, 1})
      for (Dims s : {Dims{1, 70, 64}, Dims{1, 33, 5}, Dims{1, 129, 128}})
        go(Case{s.bh, s.n, s.d, mk, -(double)INFINITY, dist});
  // The geometry entry points: grouped heads (hq = 4 over hkv = 1 or 2), len_q != len_k (decode
  // steps of one query, more queries than keys: causal rows without keys, no keys at all, no
  // queries), views read and written in place (token-major, one fused qkv buffer, padded and
  // misaligned with blocks looping over problems), every kernel width.
  struct GDims {
    uint64_t B, hq, hkv, nq, nk, d;
  };
  for (GDims s : {GDims{1, 4, 1, 1, 70, 64}, GDims{2, 4, 2, 1, 130, 32}, GDims{1, 4, 2, 70, 70, 64},
                  GDims{1, 2, 1, 65, 200, 80}, GDims{1, 4, 1, 130, 67, 128},
                  GDims{2, 2, 2, 33, 33, 1}, GDims{1, 4, 4, 17, 5, 33}, GDims{1, 2, 1, 40, 40, 256},
                  GDims{1, 4, 2, 129, 129, 32}, GDims{1, 2, 1, 5, 0, 32},
                  GDims{1, 2, 1, 0, 50, 64}})
    for (attgeo::Layout l :
         {attgeo::Layout::TokenMajor, attgeo::Layout::Fused, attgeo::Layout::Padded}) {
      if (l == attgeo::Layout::Fused && s.nq != s.nk) continue;
      for (int mk : {0, 1, 2, 3, 4})
        for (double fill : {-(double)INFINITY, -1000.0}) {
          if (fill == -1000.0 && mk != 1 && mk != 3) continue;
          Case c{s.B, 0, s.d, mk, fill, th::Dist::Uniform};
          c.hq = s.hq, c.hkv = s.hkv, c.nq = s.nq, c.nk = s.nk, c.layout = l;
          c.odd = l == attgeo::Layout::Padded;
          go(c);
        }
    }
  for (th::Dist dist : {th::Dist::Edge, th::Dist::Bits})
    for (GDims s : {GDims{1, 4, 2, 70, 70, 64}, GDims{1, 4, 1, 1, 70, 64}, GDims{1, 2, 1, 100, 40, 33}})
      for (int mk : {0, 3}) {
        Case c{s.B, 0, s.d, mk, -(double)INFINITY, dist};
        c.hq = s.hq, c.hkv = s.hkv, c.nq = s.nq, c.nk = s.nk, c.layout = attgeo::Layout::TokenMajor;
        go(c);
      }
  check_restride();
  std::printf("test_attention_emu: %d runs with differences (%s schedules)\n",
              emu_check::mismatch_runs(), all ? "all" : "rotated");
  return th::finish("test_attention_emu");
}
