// Entry points, fused layer normalisation, forward and backward: validate, allocate the outputs, dispatch.
#include "abi/tlrt_layer_norm.h"
