//===- RequireSpec.cpp - cmask-require-spec -------------------------------===//
//
// Rejects inputs that hold no MaskSpec, so that an empty or unrelated file
// given to cmask-lower-to-intervals is an error instead of a silent no-op.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::cmask {
#define GEN_PASS_DEF_REQUIRESPECPASS
#include "cmask/Dialect/CMask/Transforms/Passes.h.inc"
} // namespace mlir::cmask

using namespace mlir;
using namespace mlir::cmask;

namespace {
struct RequireSpecPass
    : public mlir::cmask::impl::RequireSpecPassBase<RequireSpecPass> {
  void runOnOperation() override {
    if (getOperation().getOps<SpecOp>().empty()) {
      getOperation().emitError()
          << "no cmask.spec to lower in the input; a MaskSpec file holds a "
             "`cmask.spec @name { ... }`";
      signalPassFailure();
    }
  }
};
} // namespace
