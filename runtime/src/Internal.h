//===- Internal.h - Helpers shared by the runtime's sources -----*- C++ -*-===//
//
// What the runtime's sources share and do not export: driver errors as
// Status, file reading, the ABI and layout headers.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_SRC_INTERNAL_H
#define CMASK_RUNTIME_SRC_INTERNAL_H

#include "cmask_runtime/Runtime.h"

#include <string>

namespace cmask::rt {

/// "call: CUDA_ERROR_NAME (description)" for a failed driver call.
Status cudaError(const char *call, CUresult r);

/// The whole file at `path`.
Status readFile(const std::string &path, std::string &out);

} // namespace cmask::rt

/// The kernel ABI and descriptor layout (KernelABI.h, DescriptorLayout.h),
/// in the runtime's sources.
namespace abi = cmask::abi;

/// Returns the failure of a driver call as a Status.
#define CMASK_CU(call)                                                         \
  do {                                                                         \
    CUresult cmask_r = (call);                                                 \
    if (cmask_r != CUDA_SUCCESS)                                               \
      return ::cmask::rt::cudaError(#call, cmask_r);                           \
  } while (0)

#endif // CMASK_RUNTIME_SRC_INTERNAL_H
