//===- ScfEmitter.h - Terse builders for the preprocess phases --*- C++ -*-===//
//
// Internal to lib/Conversion/CMaskToGPU: 64-bit integer arithmetic, int32
// buffer access and structured loops/branches, so that each preprocess phase
// reads close to the algorithm it implements.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_SCFEMITTER_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_SCFEMITTER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace mlir::cmask::preprocess {

/// Builds at `b`'s insertion point. All integers are i64 unless named i32.
class ScfEmitter {
public:
  ScfEmitter(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  OpBuilder &builder() { return b; }
  Location location() { return loc; }

  Value c(int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
  }
  Value cBool(bool v) {
    return arith::ConstantOp::create(b, loc, b.getBoolAttr(v));
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value shl(Value x, int64_t n) {
    return arith::ShLIOp::create(b, loc, x, c(n));
  }
  Value bitOr(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value bitAnd(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  /// Logical not of an i1.
  Value bitNot(Value x) {
    return arith::XOrIOp::create(b, loc, x, cBool(true));
  }
  /// floor(x / d) for x >= 0 and a positive constant d.
  Value divPos(Value x, int64_t d) {
    return arith::DivSIOp::create(b, loc, x, c(d));
  }
  /// ceil(x / d) for x >= 0 and a positive constant d.
  Value ceilDivPos(Value x, int64_t d) { return divPos(add(x, c(d - 1)), d); }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value lt(Value x, Value y) { return cmp(arith::CmpIPredicate::slt, x, y); }
  Value le(Value x, Value y) { return cmp(arith::CmpIPredicate::sle, x, y); }
  Value eq(Value x, Value y) { return cmp(arith::CmpIPredicate::eq, x, y); }
  Value ne(Value x, Value y) { return cmp(arith::CmpIPredicate::ne, x, y); }
  Value toI64(Value i1) {
    return arith::ExtUIOp::create(b, loc, b.getI64Type(), i1);
  }
  Value fromIndex(Value v) {
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
  }
  Value toIndex(Value v) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }
  Value fromI32(Value v) {
    return arith::ExtSIOp::create(b, loc, b.getI64Type(), v);
  }
  Value toI32(Value v) {
    return arith::TruncIOp::create(b, loc, b.getI32Type(), v);
  }

  /// The number of elements of a buffer (its memref size), as i64.
  Value dim(Value buffer) {
    return fromIndex(memref::DimOp::create(b, loc, buffer, 0));
  }
  /// min(max(v, lo), hi).
  Value clamp(Value v, Value lo, Value hi) { return min(max(v, lo), hi); }

  /// buffer[index] of an int32 buffer, as i64.
  Value load(Value buffer, Value index) {
    return fromI32(
        memref::LoadOp::create(b, loc, buffer, ValueRange{toIndex(index)}));
  }
  /// buffer[index] = value (i64, truncated to i32).
  void store(Value value, Value buffer, Value index) {
    memref::StoreOp::create(b, loc, toI32(value), buffer,
                            ValueRange{toIndex(index)});
  }

  /// for (v = lo; v < hi; ++v) carrying `init`; body(v, carried) -> next.
  template <typename Body>
  llvm::SmallVector<Value> loop(Value lo, Value hi, ValueRange init,
                                Body body) {
    auto forOp =
        scf::ForOp::create(b, loc, toIndex(lo), toIndex(hi),
                           arith::ConstantIndexOp::create(b, loc, 1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    llvm::SmallVector<Value> next =
        body(fromIndex(forOp.getInductionVar()),
             llvm::SmallVector<Value>(forOp.getRegionIterArgs()));
    if (init.empty() && next.empty()) {
      // ForOp::build added the terminator already.
      return {};
    }
    scf::YieldOp::create(b, loc, next);
    return llvm::SmallVector<Value>(forOp.getResults());
  }

  /// for (v = lo; v < hi; ++v) body(v), no carried values.
  template <typename Body> void forEach(Value lo, Value hi, Body body) {
    loop(lo, hi, {}, [&](Value v, llvm::SmallVector<Value>) {
      body(v);
      return llvm::SmallVector<Value>();
    });
  }

  /// if (cond) then(); no results.
  template <typename Then> void ifThen(Value cond, Then then) {
    auto ifOp = scf::IfOp::create(b, loc, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    then();
  }

  /// cond ? then() : otherwise(), each returning values of `types`.
  template <typename Then, typename Else>
  llvm::SmallVector<Value> ifElse(Value cond, TypeRange types, Then then,
                                  Else otherwise) {
    auto ifOp = scf::IfOp::create(b, loc, types, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    scf::YieldOp::create(b, loc, then());
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, loc, otherwise());
    return llvm::SmallVector<Value>(ifOp.getResults());
  }

private:
  OpBuilder &b;
  Location loc;
};

} // namespace mlir::cmask::preprocess

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_SCFEMITTER_H
