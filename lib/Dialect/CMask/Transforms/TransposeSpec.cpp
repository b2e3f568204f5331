//===- TransposeSpec.cpp - cmask-transpose-spec ---------------------------===//
//
// Builds the column direction of a MaskSpec as a spec of its own
// (cmask/Dialect/CMask/Transforms/Transpose.h): the regions' first-match
// semantics become one rule, then i <-> j and q_len <-> k_len. Whether that
// rule can be isolated (and so lowered to column slots) is for the usual
// pipeline to say.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/Transforms/Passes.h"
#include "cmask/Dialect/CMask/Transforms/Transpose.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::cmask {
#define GEN_PASS_DEF_TRANSPOSESPECPASS
#include "cmask/Dialect/CMask/Transforms/Passes.h.inc"
} // namespace mlir::cmask

using namespace mlir;
using namespace mlir::cmask;

std::string mlir::cmask::getColumnSpecName(SpecOp spec) {
  return spec.getSymName().str() + "__columns";
}

/// The exchanged built-in: i <-> j, q_len <-> k_len, b unchanged.
static Builtin transposed(Builtin kind) {
  switch (kind) {
  case Builtin::i:
    return Builtin::j;
  case Builtin::j:
    return Builtin::i;
  case Builtin::q_len:
    return Builtin::k_len;
  case Builtin::k_len:
    return Builtin::q_len;
  case Builtin::b:
    return Builtin::b;
  }
  llvm_unreachable("unknown builtin");
}

/// Clones the body of `region` (a guard or a rule) at `b`'s insertion point
/// and returns the value it yields.
static Value cloneBody(OpBuilder &b, Region &region) {
  IRMapping map;
  for (Operation &op : region.front().without_terminator())
    b.clone(op, map);
  auto yield = cast<YieldOp>(region.front().getTerminator());
  return map.lookupOrDefault(yield.getValue());
}

static Value conjunction(OpBuilder &b, Location loc, ValueRange values) {
  if (values.size() == 1)
    return values.front();
  return AndOp::create(b, loc, b.getI1Type(), values);
}

FailureOr<SpecOp> mlir::cmask::buildTransposedSpec(SpecOp spec,
                                                   llvm::StringRef name) {
  for (RegionOp region : spec.getRegions())
    if (region.hasSlots())
      return spec.emitOpError()
             << "is in slot form; transpose it before cmask-lower-to-intervals";
  Location loc = spec.getLoc();
  if (Operation *parent = spec->getParentOp())
    if (SymbolTable::lookupSymbolIn(SymbolTable::getNearestSymbolTable(parent),
                                    name))
      return spec.emitOpError() << "cannot add its column spec @" << name
                                << ": the symbol exists already";
  OpBuilder b(spec.getContext());
  b.setInsertionPointAfter(spec);
  auto columns = SpecOp::create(b, loc, name);
  b.setInsertionPointToEnd(&columns.getBody().front());
  for (MetadataOp m : spec.getMetadata())
    b.clone(*m.getOperation());
  auto region =
      RegionOp::create(b, loc, b.getStringAttr("columns"), IntegerAttr());

  b.createBlock(&region.getGuard());
  YieldOp::create(
      b, loc, ConstantOp::create(b, loc, b.getI1Type(), b.getBoolAttr(true)));

  b.createBlock(&region.getRule());
  llvm::SmallVector<Value> earlierGuards, disjuncts;
  for (RegionOp r : spec.getRegions()) {
    llvm::SmallVector<Value> terms;
    for (Value earlier : earlierGuards)
      terms.push_back(NotOp::create(b, r.getLoc(), b.getI1Type(), earlier));
    Value guard = cloneBody(b, r.getGuard());
    terms.push_back(guard);
    terms.push_back(cloneBody(b, r.getRule()));
    disjuncts.push_back(conjunction(b, r.getLoc(), terms));
    earlierGuards.push_back(guard);
  }
  Value rule = disjuncts.size() == 1
                   ? disjuncts.front()
                   : OrOp::create(b, loc, b.getI1Type(), disjuncts).getResult();
  YieldOp::create(b, loc, rule);

  region.getRule().walk(
      [](VarOp var) { var.setKind(transposed(var.getKind())); });
  if (failed(columns.verify()) || failed(region.verify()))
    return failure();
  return columns;
}

namespace {
struct TransposeSpecPass
    : public mlir::cmask::impl::TransposeSpecPassBase<TransposeSpecPass> {
  void runOnOperation() override {
    llvm::SmallVector<SpecOp> specs(getOperation().getOps<SpecOp>());
    SymbolTable symbols(getOperation());
    for (SpecOp spec : specs) {
      std::string name = getColumnSpecName(spec);
      if (symbols.lookup(name)) // this spec's column spec exists already
        continue;
      if (failed(buildTransposedSpec(spec, name)))
        return signalPassFailure();
    }
  }
};
} // namespace
