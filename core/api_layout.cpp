// Entry points, layout: concatenation, slices, broadcasts, transposes and permutations: validate, allocate the outputs, dispatch.
#include "abi/tlrt_layout.h"
