// Load-time ISA selection for the CPU backend's hot loops: each marked function is compiled for
// the baseline, x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512) and the best is picked by an ifunc
// resolver. Every clone performs the same IEEE operations in the same order (-ffp-contract=off,
// no reassociation), so they agree bit for bit with each other and with the CUDA backend.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TLRT_CPU_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define TLRT_CPU_CLONES
#endif
