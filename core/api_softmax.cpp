// Entry points, softmax, log-softmax and the hard-masked row softmax, with backward kernels: validate, allocate the outputs, dispatch.
#include "abi/tlrt_softmax.h"
