// Entry points, indexing: gather and scatter-add with host index lists: validate, allocate the outputs, dispatch.
#include "abi/tlrt_index.h"
