/* A host program as a user writes it against an installed libtorchlean_rt: the documented
 * include line, one op, its result checked. Built by run_consumers.sh through pkg-config (shared
 * and static) and through CMake's find_package. */
#include <stdio.h>
#include <torchlean_rt/torchlean_rt.h>

int main(void) {
  const float a[3] = {1.0f, 2.0f, 3.0f}, b[3] = {10.0f, 20.0f, 30.0f};
  tlrt_buffer *x = NULL, *y = NULL, *z = NULL;
  float out[3] = {0};
  if (tlrt_buffer_from_f32(TLRT_DEVICE_CPU, a, 3, &x) != TLRT_OK ||
      tlrt_buffer_from_f32(TLRT_DEVICE_CPU, b, 3, &y) != TLRT_OK ||
      tlrt_add(x, y, &z) != TLRT_OK || tlrt_buffer_to_f32(z, out, 3) != TLRT_OK) {
    fprintf(stderr, "consumer: %s\n", tlrt_last_error());
    return 1;
  }
  tlrt_buffer_free(x);
  tlrt_buffer_free(y);
  tlrt_buffer_free(z);
  if (out[0] != 11.0f || out[1] != 22.0f || out[2] != 33.0f) {
    fprintf(stderr, "consumer: wrong sum %g %g %g\n", out[0], out[1], out[2]);
    return 1;
  }
  printf("consumer: abi %u.%u, 1+10 2+20 3+30 = %g %g %g\n", tlrt_abi_version() >> 16,
         tlrt_abi_version() & 0xFFFFu, out[0], out[1], out[2]);
  return 0;
}
