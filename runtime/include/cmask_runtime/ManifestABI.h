//===- ManifestABI.h - The kernel ABI an artifact was built for -*- C++ -*-===//
//
// The manifest's "kernel_abi" (docs/artifact.md): every kernel's argument
// list as the compiler emitted it. The runtime reads it when it loads an
// artifact and compares each kernel it will launch with its own list
// (KernelABI.h), refusing the artifact at the first difference. No CUDA:
// the unit tests run it without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_RUNTIME_MANIFESTABI_H
#define CMASK_RUNTIME_MANIFESTABI_H

#include "cmask_runtime/KernelABI.h"

#include <map>
#include <string>
#include <vector>

namespace cmask::rt {

namespace json {
struct Value;
} // namespace json

/// The argument lists of an artifact's kernels, by kernel name.
class ManifestABI {
public:
  /// Reads `manifest`'s "kernel_abi"; on failure returns false and sets
  /// `error` (which names what is wrong, after `where`).
  bool read(const json::Value &manifest, const std::string &where,
            std::string &error);

  /// "" when the artifact's kernel `kernel` takes `expected` (this runtime's
  /// list); else why the artifact is refused, naming the first differing
  /// argument and saying to rebuild it.
  std::string check(const std::string &kernel,
                    const std::vector<abi::NamedArg> &expected) const;

private:
  std::string where;
  std::map<std::string, std::vector<abi::NamedArg>> kernels;
};

} // namespace cmask::rt

#endif // CMASK_RUNTIME_MANIFESTABI_H
