//===- Emitter.h - The builders of the cmask GPU code -----------*- C++ -*-===//
//
// Internal to lib/Conversion/CMaskToGPU: the one set of terse IR builders
// under the preprocess phases (RowPhase.cpp, CheckPhase.cpp, TilePhases.cpp,
// PreprocessStages.cpp) and the
// attention kernels (HopperEmitter.h adds the sm_90a parts), so that each
// reads close to the algorithm it implements:
//   - constants, integer and float arithmetic and comparisons, conversions
//     (integers keep their operands' type);
//   - the preprocess's int32 buffers (memref<?xi32>), read as i64;
//   - structured control flow (scf.for / scf.if) with carried values;
//   - the tile-list entry word's fields (cmask_runtime/DescriptorLayout.h).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_LIB_CONVERSION_CMASKTOGPU_EMITTER_H
#define CMASK_LIB_CONVERSION_CMASKTOGPU_EMITTER_H

#include "cmask_runtime/DescriptorLayout.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace mlir::cmask {

/// Builds at `b`'s insertion point.
class Emitter {
public:
  Emitter(OpBuilder &b, Location loc)
      : b(b), loc(loc), ctx(b.getContext()), i1(b.getI1Type()),
        i32(b.getI32Type()), i64(b.getI64Type()), f32(b.getF32Type()),
        index(b.getIndexType()) {}

  OpBuilder &builder() { return b; }
  Location location() { return loc; }

  // --- constants -------------------------------------------------------------
  Value c64(int64_t x) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(x));
  }
  Value c32(int64_t x) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(x));
  }
  Value cIdx(int64_t x) { return arith::ConstantIndexOp::create(b, loc, x); }
  Value cF32(double x) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(x));
  }
  Value cBool(bool x) {
    return arith::ConstantOp::create(b, loc, b.getBoolAttr(x));
  }

  // --- integers (of the operands' type) --------------------------------------
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value mins(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value maxs(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value divu(Value x, Value y) { return arith::DivUIOp::create(b, loc, x, y); }
  Value remu(Value x, Value y) { return arith::RemUIOp::create(b, loc, x, y); }
  Value divs(Value x, Value y) { return arith::DivSIOp::create(b, loc, x, y); }
  Value rems(Value x, Value y) { return arith::RemSIOp::create(b, loc, x, y); }
  /// floor(x / d) for x >= 0 and a positive constant d (i64).
  Value divPos(Value x, int64_t d) { return divs(x, c64(d)); }
  /// ceil(x / d) for x >= 0 and a positive constant d (i64).
  Value ceilDivPos(Value x, int64_t d) { return divPos(add(x, c64(d - 1)), d); }
  /// min(max(v, lo), hi).
  Value clamp(Value v, Value lo, Value hi) { return mins(maxs(v, lo), hi); }
  Value bitAnd(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value bitOr(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value bitXor(Value x, Value y) { return arith::XOrIOp::create(b, loc, x, y); }
  /// Logical not of an i1.
  Value bitNot(Value x) { return bitXor(x, cBool(true)); }
  Value shl(Value x, Value y) { return arith::ShLIOp::create(b, loc, x, y); }
  /// Logical shift right.
  Value shr(Value x, Value y) { return arith::ShRUIOp::create(b, loc, x, y); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value lt(Value x, Value y) { return cmp(arith::CmpIPredicate::slt, x, y); }
  /// Whether the global pointer `ptr` is not null (an optional argument).
  Value nonNull(Value ptr) {
    return cmp(arith::CmpIPredicate::ne,
               LLVM::PtrToIntOp::create(b, loc, i64, ptr), c64(0));
  }
  Value le(Value x, Value y) { return cmp(arith::CmpIPredicate::sle, x, y); }
  Value eq(Value x, Value y) { return cmp(arith::CmpIPredicate::eq, x, y); }
  Value ne(Value x, Value y) { return cmp(arith::CmpIPredicate::ne, x, y); }

  // --- conversions -----------------------------------------------------------
  Value sext64(Value x) { return arith::ExtSIOp::create(b, loc, i64, x); }
  /// Zero extension to i64 (of an i1: 0 or 1).
  Value zext64(Value x) { return arith::ExtUIOp::create(b, loc, i64, x); }
  Value trunc32(Value x) { return arith::TruncIOp::create(b, loc, i32, x); }
  Value toIndex(Value x) {
    return arith::IndexCastOp::create(b, loc, index, x);
  }
  /// An index as `type` (i64 by default).
  Value fromIndex(Value x, Type type = {}) {
    return arith::IndexCastOp::create(b, loc, type ? type : i64, x);
  }

  // --- floats ----------------------------------------------------------------
  Value addf(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value mulf(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value maxf(Value x, Value y) {
    return arith::MaxNumFOp::create(b, loc, x, y);
  }
  Value fma(Value x, Value y, Value z) {
    return LLVM::FMAOp::create(b, loc, x, y, z);
  }
  /// 2^x (ex2.approx.ftz).
  Value ex2(Value x) {
    return LLVM::CallIntrinsicOp::create(
               b, loc, f32, b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"),
               ValueRange{x})
        .getResult(0);
  }
  /// One PTX instruction with a result ($0) and read-only operands ($1...).
  Value ptx(llvm::StringRef code, Type result, ValueRange args) {
    return NVVM::InlinePtxOp::create(b, loc, TypeRange{result}, args,
                                     ValueRange{}, code, Value())
        .getResult(0);
  }
  /// `x` (i64) through an opaque `mov`: LLVM cannot hoist what is derived
  /// from it out of the loop that makes the copy (hoisted descriptor
  /// constants would stay live across the loop and spill).
  Value opaque(Value x) {
    return LLVM::InlineAsmOp::create(
               b, loc, x.getType(), ValueRange{x}, "mov.b64 $0, $1;", "=l,l",
               /*has_side_effects=*/true,
               /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
               LLVM::AsmDialectAttr(), ArrayAttr())
        .getResult(0);
  }

  // --- int32 buffers (memref<?xi32>), values as i64 --------------------------
  /// The number of elements of a buffer.
  Value bufferSize(Value buffer) {
    return fromIndex(memref::DimOp::create(b, loc, buffer, 0));
  }
  /// buffer[i] (i64 index) as i64.
  Value loadBuffer(Value buffer, Value i) {
    return sext64(
        memref::LoadOp::create(b, loc, buffer, ValueRange{toIndex(i)}));
  }
  /// buffer[i] = value (i64, truncated to i32).
  void storeBuffer(Value value, Value buffer, Value i) {
    memref::StoreOp::create(b, loc, trunc32(value), buffer,
                            ValueRange{toIndex(i)});
  }

  // --- structured control flow -----------------------------------------------
  /// for (v = lo; v < hi; ++v) carrying `init` (i64 bounds and counter);
  /// body(v, carried) -> next.
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
    if (init.empty() && next.empty()) // ForOp::build added the terminator
      return {};
    scf::YieldOp::create(b, loc, next);
    return llvm::SmallVector<Value>(forOp.getResults());
  }
  /// for (v = lo; v < hi; ++v) body(v), nothing carried.
  template <typename Body> void forEach(Value lo, Value hi, Body body) {
    loop(lo, hi, {}, [&](Value v, llvm::SmallVector<Value>) {
      body(v);
      return llvm::SmallVector<Value>();
    });
  }
  /// while loop carrying `init`: before(carried) returns the condition then
  /// the values (of `passed` types) handed to body, which returns the next
  /// carried values. Returns the values passed when the condition failed.
  template <typename Before, typename Body>
  llvm::SmallVector<Value> whileLoop(ValueRange init, TypeRange passed,
                                     Before before, Body body) {
    auto whileOp = scf::WhileOp::create(b, loc, passed, init);
    OpBuilder::InsertionGuard guard(b);
    llvm::SmallVector<Location> initLocs(init.size(), loc);
    Block *head =
        b.createBlock(&whileOp.getBefore(), {}, init.getTypes(), initLocs);
    llvm::SmallVector<Value> cond =
        before(llvm::SmallVector<Value>(head->getArguments()));
    scf::ConditionOp::create(b, loc, cond.front(),
                             ValueRange(cond).drop_front());
    llvm::SmallVector<Location> passedLocs(passed.size(), loc);
    Block *bodyBlock =
        b.createBlock(&whileOp.getAfter(), {}, passed, passedLocs);
    scf::YieldOp::create(
        b, loc, body(llvm::SmallVector<Value>(bodyBlock->getArguments())));
    return llvm::SmallVector<Value>(whileOp.getResults());
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

  // --- tile-list entries (DescriptorLayout.h) --------------------------------
  /// Field `f` of entry words `word` (any integer type).
  Value entryField(Value word, ::cmask::abi::EntryField f) {
    Type type = word.getType();
    Value x = f.shift ? shr(word, constant(type, f.shift)) : word;
    return f.isTop() ? x : bitAnd(x, constant(type, f.mask()));
  }
  /// The entry word of key tile `tile` (any integer type; the fields fit).
  Value encodeEntry(Value tile, Value state, Value firstSlot, Value slotCount) {
    Type type = tile.getType();
    using namespace ::cmask::abi;
    static_assert(kEntryTile.shift == 0, "the key tile is the low field");
    return bitOr(bitOr(tile, shl(state, constant(type, kEntryState.shift))),
                 bitOr(shl(firstSlot, constant(type, kEntryFirstSlot.shift)),
                       shl(slotCount, constant(type, kEntrySlotCount.shift))));
  }
  /// The fields of an entry without its key tile: state, first slot and
  /// slot count, in place (or-ed with the tile to make the word).
  Value entryFields(Value state, Value firstSlot, Value slotCount) {
    Type type = state.getType();
    using namespace ::cmask::abi;
    return bitOr(shl(state, constant(type, kEntryState.shift)),
                 bitOr(shl(firstSlot, constant(type, kEntryFirstSlot.shift)),
                       shl(slotCount, constant(type, kEntrySlotCount.shift))));
  }
  /// A constant of integer `type`.
  Value constant(Type type, int64_t x) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, x));
  }

protected:
  OpBuilder &b;
  Location loc;
  MLIRContext *ctx;
  Type i1, i32, i64, f32, index;
};

} // namespace mlir::cmask

#endif // CMASK_LIB_CONVERSION_CMASKTOGPU_EMITTER_H
