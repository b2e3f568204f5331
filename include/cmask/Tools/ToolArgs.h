//===- ToolArgs.h - Command-line defaults of the cmask tools ----*- C++ -*-===//
//
// Command-line defaults that cmask-opt and cmask-translate share (one
// located message per error, not a dump of the spec).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_TOOLS_TOOLARGS_H
#define CMASK_TOOLS_TOOLARGS_H

#include "llvm/ADT/StringRef.h"

#include <vector>

namespace mlir::cmask {

/// argv with `--mlir-print-op-on-diagnostic=false` inserted unless the user
/// chose a value: a located error about a MaskSpec is one message, not a
/// dump of the whole spec in generic form.
inline std::vector<char *> withQuietDiagnostics(int argc, char **argv) {
  static char quiet[] = "--mlir-print-op-on-diagnostic=false";
  std::vector<char *> args(argv, argv + argc);
  for (int k = 1; k < argc; ++k)
    if (llvm::StringRef(argv[k]).contains("print-op-on-diagnostic"))
      return args;
  args.insert(args.begin() + 1, quiet);
  return args;
}

} // namespace mlir::cmask

#endif // CMASK_TOOLS_TOOLARGS_H
