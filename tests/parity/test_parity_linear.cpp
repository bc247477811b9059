// Suite 'parity': the linear layer of abi/tlrt_blas.h (tlrt_linear_fwd / tlrt_linear_bwd) on
// TLRT_DEVICE_CPU and TLRT_DEVICE_CUDA(0) with the same seeded inputs. Numeric class "library"
// for the products and the bias gradient, shared math for the activation, so per backend:
//   - pre against a float64 reference: |pre - exact| <= 2 in u S + u |exact| + 2^-149 with
//     S(i, j) = sum_k |x(i, k)| |w(j, k)| + |b(j)| (the bias added once);
//   - y bitwise tlrt_gelu(pre) of the same backend (TLRT_ACT_GELU), y == pre (TLRT_ACT_NONE, and
//     *pre the same buffer);
//   - dpre = tlrt_gelu_bwd(pre, dy) of the same backend; dx, dw against float64 products of that
//     dpre (2 n u S, n the summed length), db against its float64 column sums (2 rows u S);
//   - on the CPU, dx, dw, db bitwise tlrt_matmul / tlrt_reduce_sum_axis0 of dpre (the header's
//     definitions); on CUDA db bitwise the tree when dw is not requested (with dw it is
//     cuBLASLt's sum, held to the bound), and then equal across backends where dpre is
//     (TLRT_ACT_NONE);
//   - CPU against CUDA: pre, dx, dw, db within twice the per-backend bound.
// Shapes: 1 x 1 x 1, odd sizes (leading dimensions not multiples of 4), in == 0, a GPT block's
// projections (qkv 4096 x 384 -> 1152, MLP 4096 x 384 -> 1536 and back), an LM head (512 x 768 ->
// 50257), with and without bias, TF32 off (the default). Elements of outputs above 2^16 are
// sampled (4096 of them). The CPU-only build (the unit test) skips the shapes above 2^24
// multiply-adds.
//
// Exits 77 (skipped) unless a CUDA device is usable. Built with -DTLRT_PARITY_SELFTEST both sides
// run on the CPU (the unit test of this file's logic and of the CPU backend).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using th::Buf;
using u64 = uint64_t;
constexpr double kU = 0x1p-24;

struct Case {
  u64 rows, in, out;
  bool bias;
  uint32_t act;
};

std::string name(const Case &c) {
  char b[160];
  std::snprintf(b, sizeof b, "linear %llu x %llu -> %llu%s%s", (unsigned long long)c.rows,
                (unsigned long long)c.in, (unsigned long long)c.out, c.bias ? " +b" : "",
                c.act == TLRT_ACT_GELU ? " gelu" : "");
  return b;
}

struct Worst {
  double pre = 0, dx = 0, dw = 0, db = 0, cross = 0;
} g_worst;

bool same(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!th::same_bits(a[i], b[i])) return false;
  return true;
}

// The indices of an n-element output to check: all, or 4096 spread over it.
std::vector<u64> picks(u64 n) {
  std::vector<u64> v;
  if (n <= (u64{1} << 16)) {
    for (u64 i = 0; i < n; ++i) v.push_back(i);
  } else {
    for (u64 i = 0; i < 4096; ++i) v.push_back((i * 2654435761ull + i * i * 97) % n);
  }
  return v;
}

// |got - want| <= bound, reporting the worst ratio into *worst.
void within(const std::string &what, u64 i, float got, double want, double bound,
            double *worst) {
  const double err = std::fabs((double)got - want);
  const double ratio = bound > 0 ? err / bound : (err == 0 ? 0 : INFINITY);
  if (ratio > *worst) *worst = ratio;
  TH_CHECK_MSG(err <= bound, "%s [%llu]: %.9g, float64 %.17g, error %.3g > bound %.3g",
               what.c_str(), (unsigned long long)i, got, want, err, bound);
}

struct Outs {
  std::vector<float> pre, y, dpre, dx, dw, db;
  bool ok = false;
};

// db alone (dx and dw NULL) for TLRT_ACT_NONE: the ordered tree of dy's columns on both backends.
std::vector<float> db_alone(tlrt_device dev, const Case &c, const std::vector<float> &x,
                            const std::vector<float> &w, const std::vector<float> &dy) {
  Buf X(th::upload(x, dev)), W(th::upload(w, dev)), G(th::upload(dy, dev)), DB;
  TH_OK(tlrt_linear_bwd(G.get(), X.get(), W.get(), nullptr, c.rows, c.in, c.out, TLRT_ACT_NONE,
                        nullptr, nullptr, DB.out()));
  return DB.get() ? th::download(DB.get()) : std::vector<float>{};
}

Outs run_on(tlrt_device dev, const Case &c, const std::vector<float> &x,
            const std::vector<float> &w, const std::vector<float> &b,
            const std::vector<float> &dy) {
  Outs o;
  const std::string what = name(c) + (dev == TLRT_DEVICE_CPU ? " cpu" : " cuda");
  Buf X(th::upload(x, dev)), W(th::upload(w, dev)), B(c.bias ? th::upload(b, dev) : nullptr),
      G(th::upload(dy, dev)), Y, P;
  const tlrt_status s =
      tlrt_linear_fwd(X.get(), W.get(), B.get(), c.rows, c.in, c.out, c.act, Y.out(), P.out());
  TH_CHECK_MSG(s == TLRT_OK, "%s: forward status %d (%s)", what.c_str(), (int)s,
               tlrt_last_error());
  if (s != TLRT_OK) return o;
  o.y = th::download(Y.get());
  o.pre = th::download(P.get());
  if (c.act == TLRT_ACT_NONE) {
    TH_CHECK_MSG(P.get() == Y.get(), "%s: *pre is not *y's buffer", what.c_str());
  } else {
    Buf A;
    TH_OK(tlrt_gelu(P.get(), A.out()));
    TH_CHECK_MSG(same(th::download(A.get()), o.y), "%s: y is not tlrt_gelu(pre)",
                 what.c_str());
  }
  // dpre as the header defines it, on the same backend.
  Buf DP;
  if (c.act == TLRT_ACT_GELU) {
    TH_OK(tlrt_gelu_bwd(P.get(), G.get(), DP.out()));
  } else {
    TH_OK(tlrt_buffer_retain(G.get()));
    *DP.out() = G.get();
  }
  o.dpre = th::download(DP.get());
  Buf DX, DW, DB;
  const tlrt_status sb =
      tlrt_linear_bwd(G.get(), X.get(), W.get(), c.act == TLRT_ACT_GELU ? P.get() : nullptr,
                      c.rows, c.in, c.out, c.act, DX.out(), DW.out(), c.bias ? DB.out() : nullptr);
  TH_CHECK_MSG(sb == TLRT_OK, "%s: backward status %d (%s)", what.c_str(), (int)sb,
               tlrt_last_error());
  if (sb != TLRT_OK) return o;
  o.dx = th::download(DX.get());
  o.dw = th::download(DW.get());
  if (c.bias) o.db = th::download(DB.get());
  // The header's definitions, bitwise where they must be.
  Buf RX, RW, RB;
  TH_OK(tlrt_matmul(DP.get(), W.get(), c.rows, c.out, c.in, false, false, RX.out()));
  TH_OK(tlrt_matmul(DP.get(), X.get(), c.out, c.rows, c.in, true, false, RW.out()));
  TH_OK(tlrt_reduce_sum_axis0(DP.get(), c.rows, c.out, RB.out()));
  if (dev == TLRT_DEVICE_CPU) {
    TH_CHECK_MSG(same(th::download(RX.get()), o.dx), "%s: dx is not tlrt_matmul's",
                 what.c_str());
    TH_CHECK_MSG(same(th::download(RW.get()), o.dw), "%s: dw is not tlrt_matmul's",
                 what.c_str());
  }
  if (c.bias && dev == TLRT_DEVICE_CPU)
    TH_CHECK_MSG(same(th::download(RB.get()), o.db), "%s: db is not tlrt_reduce_sum_axis0's",
                 what.c_str());
  if (c.bias) {  // db alone (no dw): the ordered tree on both backends
    Buf DB2;
    TH_OK(tlrt_linear_bwd(G.get(), X.get(), W.get(), c.act == TLRT_ACT_GELU ? P.get() : nullptr,
                          c.rows, c.in, c.out, c.act, nullptr, nullptr, DB2.out()));
    TH_CHECK_MSG(same(th::download(RB.get()), th::download(DB2.get())),
                 "%s: db without dw is not tlrt_reduce_sum_axis0's", what.c_str());
  }
  o.ok = true;
  return o;
}

// Float64 checks of one backend's outputs.
void check_reference(const std::string &what, const Case &c, const std::vector<float> &x,
                     const std::vector<float> &w, const std::vector<float> &b, const Outs &o) {
  for (u64 q : picks(c.rows * c.out)) {
    const u64 i = q / c.out, j = q % c.out;
    double acc = c.bias ? b[j] : 0.0, s = c.bias ? std::fabs(b[j]) : 0.0;
    for (u64 k = 0; k < c.in; ++k) {
      acc += (double)x[i * c.in + k] * w[j * c.in + k];
      s += std::fabs((double)x[i * c.in + k] * w[j * c.in + k]);
    }
    within(what + " pre", q, o.pre[q], acc, 2.0 * c.in * kU * s + kU * std::fabs(acc) + 0x1p-149,
           &g_worst.pre);
  }
  for (u64 q : picks(c.rows * c.in)) {  // dx = dpre w
    const u64 i = q / c.in, k = q % c.in;
    double acc = 0, s = 0;
    for (u64 j = 0; j < c.out; ++j) {
      acc += (double)o.dpre[i * c.out + j] * w[j * c.in + k];
      s += std::fabs((double)o.dpre[i * c.out + j] * w[j * c.in + k]);
    }
    within(what + " dx", q, o.dx[q], acc, 2.0 * c.out * kU * s + 0x1p-149, &g_worst.dx);
  }
  for (u64 q : picks(c.out * c.in)) {  // dw = dpre^T x
    const u64 j = q / c.in, k = q % c.in;
    double acc = 0, s = 0;
    for (u64 i = 0; i < c.rows; ++i) {
      acc += (double)o.dpre[i * c.out + j] * x[i * c.in + k];
      s += std::fabs((double)o.dpre[i * c.out + j] * x[i * c.in + k]);
    }
    within(what + " dw", q, o.dw[q], acc, 2.0 * c.rows * kU * s + 0x1p-149, &g_worst.dw);
  }
  if (!c.bias) return;
  for (u64 j = 0; j < c.out; ++j) {
    double acc = 0, s = 0;
    for (u64 i = 0; i < c.rows; ++i) {
      acc += o.dpre[i * c.out + j];
      s += std::fabs((double)o.dpre[i * c.out + j]);
    }
    within(what + " db", j, o.db[j], acc, 2.0 * c.rows * kU * s + 0x1p-149, &g_worst.db);
  }
}

void run_case(const Case &c, u64 salt) {
  if ((c.rows * c.in > parity::max_n() || c.out * c.in > parity::max_n() ||
       c.rows * c.out > parity::max_n()))
    return;
#ifdef TLRT_PARITY_SELFTEST
  if (c.rows * c.in * c.out > (u64{1} << 24)) return;  // the CPU-only unit run: small shapes
#endif
  th::Rng rng(salt);
  const std::vector<float> x = rng.vec(c.rows * c.in, -1, 1), w = rng.vec(c.out * c.in, -1, 1),
                           b = rng.vec(c.out, -1, 1), dy = rng.vec(c.rows * c.out, -1, 1);
  const Outs cpu = run_on(parity::kCpu, c, x, w, b, dy);
  const Outs gpu = run_on(parity::kGpu, c, x, w, b, dy);
  ++parity::summary().runs;
  if (!cpu.ok || !gpu.ok) {
    ++parity::summary().failed_runs;
    return;
  }
  check_reference(name(c) + " cpu", c, x, w, b, cpu);
  check_reference(name(c) + " cuda", c, x, w, b, gpu);
  // CPU against CUDA: within twice a backend's bound, which the two checks above imply; here the
  // sizes and the special positions must agree.
  TH_CHECK(cpu.pre.size() == gpu.pre.size() && cpu.dx.size() == gpu.dx.size() &&
           cpu.dw.size() == gpu.dw.size() && cpu.db.size() == gpu.db.size());
  if (c.act == TLRT_ACT_NONE && c.bias) {  // dpre = dy on both: db alone is the same tree
    const std::vector<float> cpu_db = db_alone(parity::kCpu, c, x, w, dy),
                             gpu_db = db_alone(parity::kGpu, c, x, w, dy);
    TH_CHECK_MSG(same(cpu_db, gpu_db), "%s: db (without dw) differs between the backends",
                 name(c).c_str());
  }
  parity::summary().elements += cpu.pre.size() + cpu.dx.size() + cpu.dw.size() + cpu.db.size();
}

// NaN and infinity propagate through the product and the bias on both backends.
void run_special() {
  const Case c{3, 4, 2, true, TLRT_ACT_NONE};
  std::vector<float> x(12, 1.0f), w(8, 0.5f), b = {0.0f, 1.0f}, dy(6, 1.0f);
  x[1] = NAN;                 // row 0: every output NaN
  w[4] = INFINITY;            // output 1 of rows 1, 2: +inf
  for (tlrt_device dev : {parity::kCpu, parity::kGpu}) {
    Buf X(th::upload(x, dev)), W(th::upload(w, dev)), B(th::upload(b, dev)), Y;
    TH_OK(tlrt_linear_fwd(X.get(), W.get(), B.get(), c.rows, c.in, c.out, c.act, Y.out(),
                          nullptr));
    const std::vector<float> y = th::download(Y.get());
    TH_CHECK(y.size() == 6 && std::isnan(y[0]) && std::isnan(y[1]) && y[2] == 2.0f &&
             y[3] == INFINITY && y[4] == 2.0f && y[5] == INFINITY);
  }
}

// Degenerate shapes: rows, out or in == 0 on both backends.
void run_empty() {
  for (tlrt_device dev : {parity::kCpu, parity::kGpu}) {
    {  // in == 0: pre = b; dx and dw empty; db = column sums of dy
      Buf X(th::upload({}, dev)), W(th::upload({}, dev)), B(th::upload({1.5f, -2.0f}, dev)),
          G(th::upload({1, 2, 3, 4, 5, 6}, dev)), Y, DX, DW, DB;
      TH_OK(tlrt_linear_fwd(X.get(), W.get(), B.get(), 3, 0, 2, TLRT_ACT_NONE, Y.out(),
                            nullptr));
      TH_CHECK((th::download(Y.get()) == std::vector<float>{1.5f, -2, 1.5f, -2, 1.5f, -2}));
      Buf Y2;
      TH_OK(tlrt_linear_fwd(X.get(), W.get(), nullptr, 3, 0, 2, TLRT_ACT_GELU, Y2.out(),
                            nullptr));
      TH_CHECK(same(th::download(Y2.get()), std::vector<float>(6, 0.0f)));
      TH_OK(tlrt_linear_bwd(G.get(), X.get(), W.get(), nullptr, 3, 0, 2, TLRT_ACT_NONE, DX.out(),
                            DW.out(), DB.out()));
      uint64_t n = 7;
      TH_OK(tlrt_buffer_size(DX.get(), &n));
      TH_CHECK(n == 0);
      TH_OK(tlrt_buffer_size(DW.get(), &n));
      TH_CHECK(n == 0);
      TH_CHECK((th::download(DB.get()) == std::vector<float>{9, 12}));
    }
    {  // rows == 0: empty y and dx; dw and db zeros
      Buf X(th::upload({}, dev)), W(th::upload({1, 2, 3, 4}, dev)), B(th::upload({1, 1}, dev)),
          G(th::upload({}, dev)), Y, DX, DW, DB;
      TH_OK(tlrt_linear_fwd(X.get(), W.get(), B.get(), 0, 2, 2, TLRT_ACT_GELU, Y.out(),
                            nullptr));
      uint64_t n = 7;
      TH_OK(tlrt_buffer_size(Y.get(), &n));
      TH_CHECK(n == 0);
      TH_OK(tlrt_linear_bwd(G.get(), X.get(), W.get(), G.get(), 0, 2, 2, TLRT_ACT_GELU, DX.out(),
                            DW.out(), DB.out()));
      TH_OK(tlrt_buffer_size(DX.get(), &n));
      TH_CHECK(n == 0);
      TH_CHECK(same(th::download(DW.get()), std::vector<float>(4, 0.0f)));
      TH_CHECK(same(th::download(DB.get()), std::vector<float>(2, 0.0f)));
    }
    {  // out == 0: empty y, dw, db; dx zeros
      Buf X(th::upload({1, 2, 3, 4, 5, 6}, dev)), W(th::upload({}, dev)),
          B(th::upload({}, dev)), G(th::upload({}, dev)), Y, DX, DW, DB;
      TH_OK(tlrt_linear_fwd(X.get(), W.get(), B.get(), 2, 3, 0, TLRT_ACT_NONE, Y.out(),
                            nullptr));
      TH_OK(tlrt_linear_bwd(G.get(), X.get(), W.get(), nullptr, 2, 3, 0, TLRT_ACT_NONE, DX.out(),
                            DW.out(), DB.out()));
      TH_CHECK(same(th::download(DX.get()), std::vector<float>(6, 0.0f)));
    }
  }
}

// Known answers: x = [[1, 2]], w = [[1, 0], [0, 1], [1, 1]], b = [0.5, 0, -1]:
// pre = [1.5, 2, 2]; with dy = [1, 1, 1]: dx = [2, 2], dw = [[1, 2], [1, 2], [1, 2]], db = 1s.
void run_known() {
  for (tlrt_device dev : {parity::kCpu, parity::kGpu}) {
    Buf X(th::upload({1, 2}, dev)), W(th::upload({1, 0, 0, 1, 1, 1}, dev)),
        B(th::upload({0.5f, 0, -1}, dev)), G(th::upload({1, 1, 1}, dev)), Y, P, DX, DW, DB;
    TH_OK(tlrt_linear_fwd(X.get(), W.get(), B.get(), 1, 2, 3, TLRT_ACT_NONE, Y.out(), P.out()));
    TH_CHECK((th::download(Y.get()) == std::vector<float>{1.5f, 2, 2}));
    TH_OK(tlrt_linear_bwd(G.get(), X.get(), W.get(), nullptr, 1, 2, 3, TLRT_ACT_NONE, DX.out(),
                          DW.out(), DB.out()));
    TH_CHECK((th::download(DX.get()) == std::vector<float>{2, 2}));
    TH_CHECK((th::download(DW.get()) == std::vector<float>{1, 2, 1, 2, 1, 2}));
    TH_CHECK((th::download(DB.get()) == std::vector<float>{1, 1, 1}));
    // GELU: y = gelu(pre) (tlrt_gelu's values), dx from dpre = gelu'(pre).
    Buf YG, PG, GP, DXG;
    TH_OK(tlrt_linear_fwd(X.get(), W.get(), B.get(), 1, 2, 3, TLRT_ACT_GELU, YG.out(),
                          PG.out()));
    TH_CHECK((th::download(PG.get()) == std::vector<float>{1.5f, 2, 2}));
    TH_OK(tlrt_gelu_bwd(PG.get(), G.get(), GP.out()));
    const std::vector<float> gp = th::download(GP.get());
    TH_OK(tlrt_linear_bwd(G.get(), X.get(), W.get(), PG.get(), 1, 2, 3, TLRT_ACT_GELU, DXG.out(),
                          nullptr, nullptr));
    const std::vector<float> dx = th::download(DXG.get());
    TH_CHECK(dx.size() == 2 && dx[0] == gp[0] + gp[2] && dx[1] == gp[1] + gp[2]);
  }
}

}  // namespace

int main() {
  if (!parity::start("parity_linear")) return 77;
  const std::vector<Case> shapes = {
      {1, 1, 1, true, 0},      {3, 5, 4, true, 0},        {7, 3, 5, false, 0},
      {33, 17, 65, true, 0},   {128, 64, 96, true, 0},    {257, 129, 63, true, 0},
      {64, 384, 1152, true, 0}, {4096, 384, 1536, true, 0}, {4096, 1536, 384, true, 0},
      {1024, 768, 2304, false, 0}, {512, 768, 50257, false, 0}, {2, 3000, 3, true, 0},
  };
  u64 salt = 1;
  for (Case c : shapes)
    for (uint32_t act : {TLRT_ACT_NONE, TLRT_ACT_GELU}) {
      c.act = act;
      run_case(c, salt++);
    }
  run_known();
  run_special();
  run_empty();
  std::printf("largest error / bound: pre %.3g, dx %.3g, dw %.3g, db %.3g\n", g_worst.pre,
              g_worst.dx, g_worst.dw, g_worst.db);
  parity::print_summary("parity_linear");
  return th::finish("parity_linear");
}
