//===- CheckPhase.cpp - The preprocess's metadata check -------------------===//
//
// Emits the check phase of the preprocess (docs/descriptor.md): one item per
// sequence that validates the batch's cu_seqlens, windows and offsets
// metadata and ORs what it finds into error[0].
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"
#include "PreprocessPhases.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::cmask;

/// The check: one item per sequence; ORs into error[0]: 1 when cu_seqlens
/// decrease or pass the interval table, 2 when an offsets metadata's
/// per-sequence starts are inconsistent, 4 when boundaries decrease or lie
/// outside [0, max(q_len, k_len)]. The other phases clamp what they read
/// and write, so such metadata never leads out of bounds; this phase says so.
func::FuncOp preprocess::buildCheckItem(OpBuilder &b, Location loc, SpecOp spec,
                                        llvm::StringRef name,
                                        int64_t numSlots) {
  namespace row_head = ::cmask::abi::row_group_head;
  namespace row_tail = ::cmask::abi::row_group_tail;
  func::FuncOp check = addRowGroupItem(b, loc, spec, name);
  {
    OpBuilder::InsertionGuard guard(b);
    Block *body = check.addEntryBlock();
    b.setInsertionPointToStart(body);
    Emitter e(b, loc);
    auto args = body->getArguments();
    Value seq = e.fromIndex(args[0]);
    Value next = e.add(seq, e.c64(1));
    Value cuQ = rowHeadArg(args, row_head::CuSeqlensRows);
    Value cuK = rowHeadArg(args, row_head::CuSeqlensCols);
    Value error = rowTailArg(args, row_tail::Error);
    Value intervals = rowTailArg(args, row_tail::Intervals);
    Value q0 = e.loadBuffer(cuQ, seq), q1 = e.loadBuffer(cuQ, next);
    Value k0 = e.loadBuffer(cuK, seq), k1 = e.loadBuffer(cuK, next);
    Value rows =
        e.divPos(e.bufferSize(intervals), 2 * std::max<int64_t>(numSlots, 1));
    Value badLengths = e.bitOr(e.bitOr(e.lt(q1, q0), e.lt(k1, k0)),
                               e.bitOr(e.lt(q0, e.c64(0)), e.lt(rows, q1)));
    if (numSlots == 0) // no table to bound the rows by
      badLengths =
          e.bitOr(e.bitOr(e.lt(q1, q0), e.lt(k1, k0)), e.lt(q0, e.c64(0)));
    Value flags = e.select(badLengths, e.c64(1), e.c64(0));
    // Windows: 16 when the present rows (keys) are not inside the whole
    // sequence; the metadata's boundaries lie in the whole sequence.
    Value wholeQ = e.sub(q1, q0), wholeK = e.sub(k1, k0);
    Value numSeqs = e.sext64(rowHeadArg(args, row_head::NumSeqs));
    for (auto [buffer, present, whole] :
         {std::tuple{cuQ, e.sub(q1, q0), &wholeQ},
          std::tuple{cuK, e.sub(k1, k0), &wholeK}}) {
      Value at = preprocess::windowField(e, numSeqs, seq, 0);
      Value has = e.lt(e.add(at, e.c64(1)), e.bufferSize(buffer));
      Type i64 = b.getI64Type();
      auto checked = e.ifElse(
          has, {i64, i64},
          [&] {
            Value offset = e.loadBuffer(buffer, at);
            Value length = e.loadBuffer(buffer, e.add(at, e.c64(1)));
            Value outside = e.bitOr(e.lt(offset, e.c64(0)),
                                    e.lt(length, e.add(offset, present)));
            return llvm::SmallVector<Value>{
                e.select(outside, e.c64(16), e.c64(0)),
                e.select(outside, *whole, length)};
          },
          [&] { return llvm::SmallVector<Value>{e.c64(0), *whole}; });
      flags = e.bitOr(flags, checked[0]);
      *whole = checked[1];
    }
    Value length = e.maxs(wholeQ, wholeK);
    unsigned a = 1 + row_head::kNumArgs;
    for (MetadataOp m : spec.getMetadata()) {
      if (m.getRole() != MetadataRole::offsets) {
        ++a;
        continue;
      }
      Value values = args[a], starts = args[a + 1];
      a += 2;
      Value s0 = e.loadBuffer(starts, seq), s1 = e.loadBuffer(starts, next);
      Value badStarts = e.bitOr(e.bitOr(e.lt(s0, e.c64(0)), e.lt(s1, s0)),
                                e.lt(e.bufferSize(values), s1));
      flags = e.ifElse(
          badStarts, {b.getI64Type()},
          [&] { return llvm::SmallVector<Value>{e.bitOr(flags, e.c64(2))}; },
          [&] {
            return e.loop(s0, s1, {flags}, [&](Value t, auto f) {
              Value v = e.loadBuffer(values, t);
              Value prev = e.ifElse(
                  e.lt(s0, t), {b.getI64Type()},
                  [&] {
                    return llvm::SmallVector<Value>{
                        e.loadBuffer(values, e.sub(t, e.c64(1)))};
                  },
                  [&] { return llvm::SmallVector<Value>{v}; })[0];
              Value bad = e.bitOr(e.bitOr(e.lt(v, e.c64(0)), e.lt(length, v)),
                                  e.lt(v, prev));
              return llvm::SmallVector<Value>{
                  e.select(bad, e.bitOr(f[0], e.c64(4)), f[0])};
            });
          })[0];
    }
    e.ifThen(e.ne(flags, e.c64(0)), [&] {
      memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::ori,
                                  e.trunc32(flags), error,
                                  ValueRange{e.toIndex(e.c64(0))});
    });
    func::ReturnOp::create(b, loc);
  }
  return check;
}
