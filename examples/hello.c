/* hello: the smallest complete libtorchlean_rt program (C99).
 *
 *   build/examples/hello          runs on the CPU backend (always present)
 *   build/examples/hello --cuda   runs on CUDA device 0; without a CUDA build or without a GPU it
 *                                 fails loudly (status name + message, exit 1): the library never
 *                                 falls back to the CPU behind your back.
 *
 * It uploads two vectors, computes a + b, gelu(a) and eight normal random numbers, downloads and
 * prints them, and checks every status. a + b is exact (IEEE binary32), so it is also verified. */
#include <stdio.h>
#include <string.h>

#include "torchlean_rt.h"

/* Every fallible call returns a tlrt_status; on failure tlrt_last_error() says why. */
#define TRY(call)                                                                          \
  do {                                                                                     \
    tlrt_status st_ = (call);                                                              \
    if (st_ != TLRT_OK) {                                                                  \
      fflush(stdout);                                                                      \
      fprintf(stderr, "hello: %s\n  failed with %s: %s\n", #call, tlrt_status_string(st_), \
              tlrt_last_error());                                                          \
      goto done;                                                                           \
    }                                                                                      \
  } while (0)

enum { N = 6, NRAND = 8 };

static void print_vec(const char *name, const float *v, int n) {
  int i;
  printf("%-12s", name);
  for (i = 0; i < n; ++i) printf(" %10.6f", (double)v[i]);
  printf("\n");
}

int main(int argc, char **argv) {
  const float a[N] = {-2.0f, -0.5f, 0.0f, 0.5f, 1.0f, 3.0f};
  const float b[N] = {0.25f, 1.0f, -1.0f, 2.0f, 0.125f, -3.0f};
  float sum[N], gelu[N], noise[NRAND];
  tlrt_device dev = TLRT_DEVICE_CPU;
  tlrt_buffer *da = NULL, *db = NULL, *dsum = NULL, *dgelu = NULL, *dnoise = NULL;
  uint64_t size = 0;
  int i, rc = 1;

  for (i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--cuda") == 0) {
      dev = TLRT_DEVICE_CUDA(0);
    } else {
      fprintf(stderr, "usage: %s [--cuda]\n", argv[0]);
      return 2;
    }
  }

  printf("%s\n", tlrt_build_info());
  printf("device: %s\n", dev == TLRT_DEVICE_CPU ? "cpu" : "cuda:0");

  /* Upload: a fresh buffer on `dev` holding a copy of the host values. */
  TRY(tlrt_buffer_from_f32(dev, a, N, &da));
  TRY(tlrt_buffer_from_f32(dev, b, N, &db));

  /* Ops return fresh buffers on the device of their inputs. */
  TRY(tlrt_add(da, db, &dsum));
  TRY(tlrt_gelu(da, &dgelu));
  TRY(tlrt_rand_normal(dev, NRAND, 0.0, 1.0, /*key=*/42, &dnoise));

  /* Download: n must equal the buffer's size; this waits for the device's queued work. */
  TRY(tlrt_buffer_size(dsum, &size));
  TRY(tlrt_buffer_to_f32(dsum, sum, size));
  TRY(tlrt_buffer_to_f32(dgelu, gelu, N));
  TRY(tlrt_buffer_to_f32(dnoise, noise, NRAND));

  print_vec("a", a, N);
  print_vec("b", b, N);
  print_vec("a + b", sum, N);
  print_vec("gelu(a)", gelu, N);
  print_vec("normal(42)", noise, NRAND);

  for (i = 0; i < N; ++i) {
    if (sum[i] != a[i] + b[i]) {
      fprintf(stderr, "hello: a + b is wrong at %d: %g != %g\n", i, (double)sum[i],
              (double)(a[i] + b[i]));
      goto done;
    }
  }
  if (gelu[2] != 0.0f || !(gelu[5] > 2.99f && gelu[5] <= 3.0f)) {
    fprintf(stderr, "hello: gelu(0) = %g, gelu(3) = %g look wrong\n", (double)gelu[2],
            (double)gelu[5]);
    goto done;
  }
  printf("ok\n");
  rc = 0;

done:
  /* Drop our references; NULL is fine. */
  tlrt_buffer_free(da);
  tlrt_buffer_free(db);
  tlrt_buffer_free(dsum);
  tlrt_buffer_free(dgelu);
  tlrt_buffer_free(dnoise);
  return rc;
}
