// The portable kernels: plain C++ element loops with no intrinsics. They define the results
// every other instruction set must reproduce bit for bit (the compiler may still vectorize
// them for the baseline x86-64 target; that does not change a result).
#include "kernels/reduce_loops.h"

namespace hoop::kernels::detail {

const IsaKernels kScalarKernels = make_kernels<ScalarLanes>("scalar");

}  // namespace hoop::kernels::detail
