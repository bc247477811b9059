// Allocation failure on every allocating entry point (tlrt_debug_fail_nth_allocation): for each
// call and n = 1, 2, ... the n-th allocation of the call fails. The call must then return
// TLRT_ERR_OUT_OF_MEMORY, leave every out-parameter NULL, name the injected failure in
// tlrt_last_error(), and leave live bytes and handles where they were; the same call without a
// fault must then succeed (nothing stays broken). The sweep over n ends at the first n the call
// does not reach (it made fewer allocations), where the call must succeed.
// On the CPU, and on CUDA(0) too where a GPU is usable.
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tlrt_testing.h"

namespace {

using th::Buf;
using Outs = std::vector<tlrt_buffer **>;
// Calls the entry point writing its outputs through the given out-parameters.
using Call = std::function<tlrt_status(const Outs &)>;

struct Case {
  std::string name;
  unsigned outputs;  // number of tlrt_buffer ** out-parameters
  Call call;
};

uint64_t g_failures_injected = 0;

void sweep(const Case &c, tlrt_device dev) {
  const std::string where = c.name + (dev == TLRT_DEVICE_CPU ? " (cpu)" : " (cuda)");
  for (uint64_t n = 1; n <= 64; ++n) {
    const tlrt_allocator_stats before = th::stats(dev);
    std::vector<tlrt_buffer *> out(c.outputs, reinterpret_cast<tlrt_buffer *>(uintptr_t{1}));
    Outs ptrs;
    for (auto &o : out) ptrs.push_back(&o);
    tlrt_debug_fail_nth_allocation(n);
    const tlrt_status st = c.call(ptrs);
    const bool met = tlrt_debug_fail_nth_allocation(0) == 0;
    const std::string msg = tlrt_last_error();
    if (!met) {  // fewer than n allocations: the call ran normally
      TH_CHECK_MSG(st == TLRT_OK, "%s: without a fault (n = %llu) it returned %s: %s",
                   where.c_str(), (unsigned long long)n, tlrt_status_string(st), msg.c_str());
      for (tlrt_buffer *o : out)
        if (o != reinterpret_cast<tlrt_buffer *>(uintptr_t{1})) tlrt_buffer_free(o);
      TH_CHECK_MSG(n > 1, "%s: no allocation at all", where.c_str());
      return;
    }
    ++g_failures_injected;
    TH_CHECK_MSG(st == TLRT_ERR_OUT_OF_MEMORY, "%s: allocation %llu failed, the call returned %s",
                 where.c_str(), (unsigned long long)n, tlrt_status_string(st));
    TH_CHECK_MSG(msg.find("injected") != std::string::npos, "%s: message \"%s\"", where.c_str(),
                 msg.c_str());
    for (size_t k = 0; k < out.size(); ++k) {
      TH_CHECK_MSG(out[k] == nullptr, "%s: out-parameter %zu not cleared after allocation %llu "
                   "failed", where.c_str(), k, (unsigned long long)n);
      if (out[k] != nullptr && out[k] != reinterpret_cast<tlrt_buffer *>(uintptr_t{1}))
        tlrt_buffer_free(out[k]);
    }
    const tlrt_allocator_stats after = th::stats(dev);
    TH_CHECK_MSG(after.live_bytes == before.live_bytes && after.live_handles == before.live_handles,
                 "%s: allocation %llu failed and the call leaked (%llu -> %llu bytes, %llu -> %llu "
                 "handles)", where.c_str(), (unsigned long long)n,
                 (unsigned long long)before.live_bytes, (unsigned long long)after.live_bytes,
                 (unsigned long long)before.live_handles, (unsigned long long)after.live_handles);
    // Nothing stays broken: the same call works right after.
    std::vector<tlrt_buffer *> again(c.outputs, nullptr);
    Outs ptrs2;
    for (auto &o : again) ptrs2.push_back(&o);
    const tlrt_status st2 = c.call(ptrs2);
    TH_CHECK_MSG(st2 == TLRT_OK, "%s: after the injected failure the call returned %s: %s",
                 where.c_str(), tlrt_status_string(st2), tlrt_last_error());
    for (tlrt_buffer *o : again) tlrt_buffer_free(o);
  }
  TH_CHECK_MSG(false, "%s: still allocating after 64 allocations", where.c_str());
}

std::vector<Case> cases(tlrt_device dev, const tlrt_buffer *a, const tlrt_buffer *b,
                        const tlrt_buffer *g, const tlrt_buffer *pos) {
  std::vector<Case> v;
  const std::vector<float> host(12, 1.5f);
  const std::vector<double> host64(12, 2.5);
  const std::vector<uint8_t> bytes(48, 0x3f);
  v.push_back({"tlrt_buffer_from_f32", 1, [=](const Outs &o) {
                 return tlrt_buffer_from_f32(dev, host.data(), host.size(), o[0]);
               }});
  v.push_back({"tlrt_buffer_from_f64", 1, [=](const Outs &o) {
                 return tlrt_buffer_from_f64(dev, host64.data(), host64.size(), o[0]);
               }});
  v.push_back({"tlrt_buffer_from_bytes", 1, [=](const Outs &o) {
                 return tlrt_buffer_from_bytes(dev, bytes.data(), bytes.size(), o[0]);
               }});
  v.push_back({"tlrt_buffer_zeros", 1,
               [=](const Outs &o) { return tlrt_buffer_zeros(dev, 12, o[0]); }});
  v.push_back({"tlrt_buffer_full", 1,
               [=](const Outs &o) { return tlrt_buffer_full(dev, 12, 0.5, o[0]); }});
  v.push_back({"tlrt_buffer_copy", 1, [=](const Outs &o) { return tlrt_buffer_copy(a, o[0]); }});
  v.push_back({"tlrt_buffer_to_device", 1,
               [=](const Outs &o) { return tlrt_buffer_to_device(a, dev, o[0]); }});
  v.push_back({"tlrt_rand_uniform", 1,
               [=](const Outs &o) { return tlrt_rand_uniform(dev, 12, 7, o[0]); }});
  v.push_back({"tlrt_rand_normal", 1,
               [=](const Outs &o) { return tlrt_rand_normal(dev, 12, 0.0, 1.0, 7, o[0]); }});
  v.push_back({"tlrt_bernoulli_mask", 1,
               [=](const Outs &o) { return tlrt_bernoulli_mask(dev, 12, 0.5, 7, o[0]); }});

  using U = tlrt_status (*)(const tlrt_buffer *, tlrt_buffer **);
  const std::pair<const char *, U> unary[] = {
      {"tlrt_abs", tlrt_abs}, {"tlrt_neg", tlrt_neg},         {"tlrt_sqrt", tlrt_sqrt},
      {"tlrt_inv", tlrt_inv}, {"tlrt_relu", tlrt_relu},       {"tlrt_exp", tlrt_exp},
      {"tlrt_log", tlrt_log}, {"tlrt_sigmoid", tlrt_sigmoid}, {"tlrt_tanh", tlrt_tanh},
      {"tlrt_softplus", tlrt_softplus}, {"tlrt_gelu", tlrt_gelu}, {"tlrt_silu", tlrt_silu},
      {"tlrt_reduce_sum", tlrt_reduce_sum}, {"tlrt_reduce_mean", tlrt_reduce_mean}};
  for (const auto &u : unary)
    v.push_back({u.first, 1, [=](const Outs &o) { return u.second(pos, o[0]); }});
  v.push_back({"tlrt_scale", 1, [=](const Outs &o) { return tlrt_scale(a, 3.0, o[0]); }});
  v.push_back({"tlrt_clamp", 1, [=](const Outs &o) { return tlrt_clamp(a, -0.5, 0.5, o[0]); }});
  v.push_back({"tlrt_safe_log", 1, [=](const Outs &o) { return tlrt_safe_log(a, 1e-6, o[0]); }});

  using B = tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **);
  const std::pair<const char *, B> binary[] = {
      {"tlrt_add", tlrt_add},         {"tlrt_sub", tlrt_sub},
      {"tlrt_mul", tlrt_mul},         {"tlrt_div", tlrt_div},
      {"tlrt_max", tlrt_max},         {"tlrt_min", tlrt_min},
      {"tlrt_abs_bwd", tlrt_abs_bwd}, {"tlrt_sqrt_bwd", tlrt_sqrt_bwd},
      {"tlrt_inv_bwd", tlrt_inv_bwd}, {"tlrt_log_bwd", tlrt_log_bwd},
      {"tlrt_relu_bwd", tlrt_relu_bwd}, {"tlrt_exp_bwd", tlrt_exp_bwd},
      {"tlrt_sigmoid_bwd", tlrt_sigmoid_bwd}, {"tlrt_tanh_bwd", tlrt_tanh_bwd},
      {"tlrt_softplus_bwd", tlrt_softplus_bwd}, {"tlrt_gelu_bwd", tlrt_gelu_bwd},
      {"tlrt_silu_bwd", tlrt_silu_bwd}};
  for (const auto &f : binary)
    v.push_back({f.first, 1, [=](const Outs &o) { return f.second(pos, g, o[0]); }});
  v.push_back({"tlrt_axpy", 1, [=](const Outs &o) { return tlrt_axpy(a, b, 2.0, o[0]); }});
  v.push_back({"tlrt_clamp_bwd", 1,
               [=](const Outs &o) { return tlrt_clamp_bwd(a, g, -0.5, 0.5, o[0]); }});
  v.push_back({"tlrt_safe_log_bwd", 1,
               [=](const Outs &o) { return tlrt_safe_log_bwd(a, g, 1e-6, o[0]); }});
  v.push_back({"tlrt_max_bwd", 2,
               [=](const Outs &o) { return tlrt_max_bwd(a, b, g, o[0], o[1]); }});
  v.push_back({"tlrt_min_bwd", 2,
               [=](const Outs &o) { return tlrt_min_bwd(a, b, g, o[0], o[1]); }});

  // a as a (3, 4) matrix and a (2, 3, 2) array.
  v.push_back({"tlrt_reduce_sum_axis0", 1,
               [=](const Outs &o) { return tlrt_reduce_sum_axis0(a, 3, 4, o[0]); }});
  v.push_back({"tlrt_reduce_sum_axis1", 1,
               [=](const Outs &o) { return tlrt_reduce_sum_axis1(a, 3, 4, o[0]); }});
  v.push_back({"tlrt_reduce_max_axis0", 1,
               [=](const Outs &o) { return tlrt_reduce_max_axis0(a, 3, 4, o[0]); }});
  v.push_back({"tlrt_reduce_max_axis1", 1,
               [=](const Outs &o) { return tlrt_reduce_max_axis1(a, 3, 4, o[0]); }});
  v.push_back({"tlrt_reduce_sum_axis", 1, [=](const Outs &o) {
                 const uint64_t dims[] = {2, 3, 2};
                 return tlrt_reduce_sum_axis(a, dims, 3, 1, o[0]);
               }});
  v.push_back({"tlrt_reduce_from_broadcast", 1, [=](const Outs &o) {
                 const uint64_t in_dims[] = {3, 1};
                 const uint64_t out_dims[] = {3, 4};
                 const uint32_t map[] = {1, 2};
                 return tlrt_reduce_from_broadcast(a, in_dims, 2, out_dims, 2, map, o[0]);
               }});
  return v;
}

// The later families, one or two allocating entry points each, on small shapes: a is a (3, 4)
// matrix (and a (3, 4) image, a (3, 4) scan of 4 channels, a (1, 3, 4) attention problem), v4 a
// 4-vector, v6 a 6-vector (a (2, 3) pooled/convolved output), v9 a (1, 3, 3) spectral weight, v3
// a 3-vector. The optimizer steps allocate nothing and are not listed.
struct Small {
  const tlrt_buffer *a, *b, *g, *pos, *v3, *v4, *v6, *v9;
};

std::vector<Case> later_cases(const Small &t) {
  std::vector<Case> v;
  v.push_back({"tlrt_concat1d", 1,
               [=](const Outs &o) { return tlrt_concat1d(t.a, t.b, 12, 12, o[0]); }});
  v.push_back({"tlrt_transpose2d", 1,
               [=](const Outs &o) { return tlrt_transpose2d(t.a, 3, 4, o[0]); }});
  v.push_back({"tlrt_permute", 1, [=](const Outs &o) {
                 const uint64_t dims[] = {2, 3, 2};
                 const uint32_t perm[] = {2, 0, 1};
                 return tlrt_permute(t.a, dims, 3, perm, o[0]);
               }});
  v.push_back({"tlrt_gather_rows", 1, [=](const Outs &o) {
                 const uint64_t idx[] = {2, 0};
                 return tlrt_gather_rows(t.a, 3, 4, idx, 2, o[0]);
               }});
  v.push_back({"tlrt_scatter_add_rows", 1, [=](const Outs &o) {
                 const uint64_t idx[] = {0, 2, 0};
                 return tlrt_scatter_add_rows(t.a, t.b, 3, 4, idx, 3, o[0]);
               }});
  v.push_back({"tlrt_softmax", 1, [=](const Outs &o) { return tlrt_softmax(t.a, 3, 4, o[0]); }});
  v.push_back({"tlrt_log_softmax", 1,
               [=](const Outs &o) { return tlrt_log_softmax(t.a, 3, 4, o[0]); }});
  v.push_back({"tlrt_layer_norm_fwd", 3, [=](const Outs &o) {
                 return tlrt_layer_norm_fwd(t.a, t.v4, t.v4, 3, 4, 1e-5, o[0], o[1], o[2]);
               }});
  v.push_back({"tlrt_rms_norm_fwd", 2, [=](const Outs &o) {
                 return tlrt_rms_norm_fwd(t.a, t.v4, 3, 4, 1e-5, o[0], o[1]);
               }});
  v.push_back({"tlrt_rms_norm_fwd (no gamma)", 2, [=](const Outs &o) {
                 return tlrt_rms_norm_fwd(t.a, nullptr, 3, 4, 1e-5, o[0], o[1]);
               }});
  v.push_back({"tlrt_rms_norm_bwd", 2, [=](const Outs &o) {
                 return tlrt_rms_norm_bwd(t.b, t.a, t.v4, t.v3, 3, 4, o[0], o[1]);
               }});
  v.push_back({"tlrt_rms_norm_bwd (no gamma, no dgamma)", 1, [=](const Outs &o) {
                 return tlrt_rms_norm_bwd(t.b, t.a, nullptr, t.v3, 3, 4, o[0], nullptr);
               }});
  v.push_back({"tlrt_matmul", 1,
               [=](const Outs &o) { return tlrt_matmul(t.a, t.b, 3, 4, 3, false, true, o[0]); }});
  v.push_back({"tlrt_bmm", 1,
               [=](const Outs &o) { return tlrt_bmm(t.a, t.b, 1, 3, 4, 3, false, true, o[0]); }});
  v.push_back({"tlrt_rfft1d_packed", 1,
               [=](const Outs &o) { return tlrt_rfft1d_packed(t.a, 3, 4, o[0]); }});
  v.push_back({"tlrt_irfft1d_packed", 1,
               [=](const Outs &o) { return tlrt_irfft1d_packed(t.a, 2, 4, o[0]); }});
  v.push_back({"tlrt_spectral_conv1d_rfft_fwd", 1, [=](const Outs &o) {
                 return tlrt_spectral_conv1d_rfft_fwd(t.a, t.v9, t.v9, 4, 3, 1, o[0]);
               }});
  v.push_back({"tlrt_spectral_conv1d_rfft_bwd_w", 2, [=](const Outs &o) {
                 return tlrt_spectral_conv1d_rfft_bwd_w(t.a, t.v9, t.v9, t.g, 4, 3, 1, o[0], o[1]);
               }});
  v.push_back({"tlrt_selective_scan_diag_fwd", 1, [=](const Outs &o) {
                 return tlrt_selective_scan_diag_fwd(t.v4, t.v4, t.a, t.v4, 3, 4, o[0]);
               }});
  v.push_back({"tlrt_selective_scan_diag_bwd", 4, [=](const Outs &o) {
                 return tlrt_selective_scan_diag_bwd(t.v4, t.v4, t.a, t.v4, t.b, t.g, 3, 4, o[0],
                                                     o[1], o[2], o[3]);
               }});
  v.push_back({"tlrt_maxpool2d_fwd", 1, [=](const Outs &o) {
                 return tlrt_maxpool2d_fwd(t.a, 1, 1, 3, 4, 2, 2, 1, 1, 0, 0, o[0]);
               }});
  v.push_back({"tlrt_maxpool2d_bwd", 1, [=](const Outs &o) {
                 return tlrt_maxpool2d_bwd(t.a, t.v6, 1, 1, 3, 4, 2, 2, 1, 1, 0, 0, o[0]);
               }});
  v.push_back({"tlrt_avgpool2d_fwd", 1, [=](const Outs &o) {
                 return tlrt_avgpool2d_fwd(t.a, 1, 1, 3, 4, 2, 2, 1, 1, 0, 0, true, o[0]);
               }});
  v.push_back({"tlrt_conv2d_fwd", 1, [=](const Outs &o) {
                 return tlrt_conv2d_fwd(t.v4, nullptr, t.a, 1, 1, 3, 4, 1, 2, 2, 1, 1, 0, 0, 1, 1,
                                        1, o[0]);
               }});
  v.push_back({"tlrt_conv2d_bwd", 3, [=](const Outs &o) {
                 return tlrt_conv2d_bwd(t.v4, t.a, t.v6, 1, 1, 3, 4, 1, 2, 2, 1, 1, 0, 0, 1, 1, 1,
                                        o[0], o[1], o[2]);
               }});
  v.push_back({"tlrt_flash_attention_fwd", 2, [=](const Outs &o) {
                 return tlrt_flash_attention_fwd(t.a, t.b, t.g, nullptr, 1, 3, 4, 0.5, false,
                                                 -1000.0, o[0], o[1]);
               }});
  v.push_back({"tlrt_flash_attention_bwd", 3, [=](const Outs &o) {
                 return tlrt_flash_attention_bwd(t.a, t.b, t.g, nullptr, t.pos, t.a, t.v3, 1, 3, 4,
                                                 0.5, false, -1000.0, o[0], o[1], o[2]);
               }});
  return v;
}

void run_device(tlrt_device dev) {
  th::Rng rng(11);
  Buf a(th::upload(rng.vec(12, -1.0f, 1.0f), dev));
  Buf b(th::upload(rng.vec(12, -1.0f, 1.0f), dev));
  Buf g(th::upload(rng.vec(12, -1.0f, 1.0f), dev));
  Buf pos(th::upload(rng.vec(12, 0.5f, 2.0f), dev));
  Buf v3(th::upload(rng.vec(3, 0.5f, 2.0f), dev));
  Buf v4(th::upload(rng.vec(4, 0.5f, 1.0f), dev));
  Buf v6(th::upload(rng.vec(6, -1.0f, 1.0f), dev));
  Buf v9(th::upload(rng.vec(9, -1.0f, 1.0f), dev));
  const tlrt_allocator_stats start = th::stats(dev);
  for (const Case &c : cases(dev, a.get(), b.get(), g.get(), pos.get())) sweep(c, dev);
  const Small t{a.get(), b.get(), g.get(), pos.get(), v3.get(), v4.get(), v6.get(), v9.get()};
  for (const Case &c : later_cases(t)) sweep(c, dev);
  const tlrt_allocator_stats end = th::stats(dev);
  TH_CHECK_MSG(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles,
               "leak over the whole sweep: %llu -> %llu bytes",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes);
}

}  // namespace

int main() {
  run_device(TLRT_DEVICE_CPU);
  if (th::cuda_ready()) run_device(TLRT_DEVICE_CUDA(0));
  std::printf("test_faults: %llu injected allocation failures, each returned "
              "TLRT_ERR_OUT_OF_MEMORY without a leak\n",
              (unsigned long long)g_failures_injected);
  return th::finish("test_faults");
}
