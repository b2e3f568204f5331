//===- DeriveColumns.cpp - cmask-derive-columns ---------------------------===//
//
// The pass form of deriveColumns (Columns.h): every spec in rule form gets
// its column direction (derived, symmetric or rows), recorded on it as
// `cmask.columns`, and its column spec in slot form beside it.
//
//===----------------------------------------------------------------------===//

#include "cmask/Target/Passes.h"

#include "cmask/Dialect/CMask/Transforms/Transpose.h"
#include "cmask/Target/Columns.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::cmask {
#define GEN_PASS_DEF_DERIVECOLUMNSPASS
#include "cmask/Target/Passes.h.inc"
} // namespace mlir::cmask

using namespace mlir;
using namespace mlir::cmask;

namespace {
struct DeriveColumnsPass
    : public mlir::cmask::impl::DeriveColumnsPassBase<DeriveColumnsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The specs as written: column specs already here are left alone.
    llvm::SmallVector<SpecOp> specs;
    SymbolTable symbols(module);
    for (SpecOp spec : module.getOps<SpecOp>()) {
      llvm::StringRef name = spec.getSymName();
      if (name.ends_with("__columns") &&
          symbols.lookup(name.drop_back(strlen("__columns"))))
        continue;
      if (symbols.lookup(getColumnSpecName(spec)))
        continue;
      specs.push_back(spec);
    }
    Builder b(module.getContext());
    for (SpecOp spec : specs) {
      auto columns = deriveColumns(spec, module);
      if (failed(columns))
        return signalPassFailure();
      spec->setAttr("cmask.columns",
                    b.getStringAttr(stringifyColumnMode(columns->mode)));
      if (columns->mode != ColumnMode::Derived)
        spec.emitRemark() << "column direction: "
                          << stringifyColumnMode(columns->mode) << " ("
                          << columns->reason << ")";
    }
  }
};
} // namespace
