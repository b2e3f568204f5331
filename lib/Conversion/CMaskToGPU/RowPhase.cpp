//===- RowPhase.cpp - The preprocess's row phase -------------------------===//
//
// Emits the row phase of the preprocess (docs/descriptor.md): for one packed
// row, find its sequence, apply the first region whose guard holds, and
// store its K slots clamped to [0, k_len], empty slots as (0, 0), then the
// row's merged slots. Guards and slot expressions come from the Analysis
// library (the same terms the passes produced) and are emitted as 64-bit
// arith with the MaskSpec's integer semantics: floordiv/mod round toward
// negative infinity, a zero divisor gives 0, isqrt of a negative number is
// 0, lookups out of range give 0.
//
//===----------------------------------------------------------------------===//

#include "Emitter.h"
#include "KernelSignature.h"
#include "PreprocessPhases.h"

#include "cmask/Analysis/Normalize.h"
#include "cmask/Dialect/CMask/Transforms/RuleBridge.h"
#include "cmask/Dialect/CMask/Transforms/TermEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::cmask;
using ::cmask::CmpKind;
using ::cmask::Expr;
using ::cmask::ExprKind;
using ::cmask::Pred;
using ::cmask::PredKind;

/// Where field `field` of sequence `b`'s window lies in its cu_seqlens buffer
/// (after the num_seqs + 1 starts; KernelABI.h, row_group_head).
Value preprocess::windowField(Emitter &e, Value numSeqs, Value b,
                              int64_t field) {
  return e.add(
      e.add(numSeqs, e.c64(1)),
      e.add(e.mul(b, e.c64(::cmask::abi::kWindowFields)), e.c64(field)));
}

namespace {

/// The metadata arguments of a preprocess function, by name.
struct MetadataArgs {
  struct Entry {
    MetadataRole role;
    Value scalar;         ///< scalar: i32
    Value values, starts; ///< per_sequence: values [B]; offsets: values, starts
  };
  llvm::StringMap<Entry> byName;
};

/// The sequence-level values of the row being processed (all i64).
/// `i`, `qLen` and `kLen` are in the whole sequence; the keys present
/// (the column window, docs/descriptor.md "Windows") are `kPresent` keys from
/// `kShift` on, which the stored slots are relative to.
struct RowValues {
  Value i, b, qLen, kLen, numSeqs;
  Value kShift, kPresent;
};

/// Emits analysis terms as arith ops in one block (memoized per block).
class ArithEmitter : public Emitter, public TermEmitter<ArithEmitter> {
  friend class TermEmitter<ArithEmitter>;

public:
  ArithEmitter(OpBuilder &builder, Location loc, const MetadataArgs &meta,
               const RowValues &row, PreprocessTarget target)
      : Emitter(builder, loc), meta(meta), row(row), target(target) {}

  /// `cond ? buffer[index] : otherwise`, loading only when cond holds.
  Value guardedLoad(Value cond, Value buffer, Value index, Value otherwise) {
    return ifElse(
        cond, {i64},
        [&] { return llvm::SmallVector<Value>{loadBuffer(buffer, index)}; },
        [&] { return llvm::SmallVector<Value>{otherwise}; })[0];
  }

private:
  /// floordiv / mod with the MaskSpec's semantics (no UB for 0 or -1).
  Value division(const Expr *e, bool isMod) {
    Value x = emit(e->getOperand(0)), y = emit(e->getOperand(1));
    Value zero = c64(0), one = c64(1), minusOne = c64(-1);
    Value yIsZero = cmp(arith::CmpIPredicate::eq, y, zero);
    Value yIsMinusOne = cmp(arith::CmpIPredicate::eq, y, minusOne);
    Value special = arith::OrIOp::create(b, loc, yIsZero, yIsMinusOne);
    Value safeY = select(special, one, y);
    Value general;
    if (isMod) {
      Value r = arith::RemSIOp::create(b, loc, x, safeY);
      Value rNeg = cmp(arith::CmpIPredicate::slt, r, zero);
      Value yNeg = cmp(arith::CmpIPredicate::slt, safeY, zero);
      Value adjust =
          arith::AndIOp::create(b, loc, cmp(arith::CmpIPredicate::ne, r, zero),
                                cmp(arith::CmpIPredicate::ne, rNeg, yNeg));
      general = select(adjust, arith::AddIOp::create(b, loc, r, safeY), r);
      return select(special, zero, general);
    }
    general = arith::FloorDivSIOp::create(b, loc, x, safeY);
    Value negX = arith::SubIOp::create(b, loc, zero, x);
    return select(yIsZero, zero, select(yIsMinusOne, negX, general));
  }

  /// The correctly rounded square root of an f64: llvm.intr.sqrt on the CPU
  /// (sqrtsd); on the GPU the PTX instruction sqrt.rn.f64 (the NVVM lowering
  /// would turn the intrinsic into a libdevice call). IEEE round-to-nearest:
  /// the same result on both.
  Value sqrtRN(Value x) {
    Type f64 = b.getF64Type();
    if (target == PreprocessTarget::CPU)
      return LLVM::SqrtOp::create(b, loc, f64, x);
    return LLVM::InlineAsmOp::create(
               b, loc, f64, ValueRange{x}, "sqrt.rn.f64 $0, $1;", "=d,d",
               /*has_side_effects=*/false, /*is_align_stack=*/false,
               LLVM::TailCallKind::None, LLVM::AsmDialectAttr(),
               /*operand_attrs=*/ArrayAttr())
        .getResult(0);
  }

  /// floor(sqrt(max(x, 0))): the correctly rounded double square root
  /// (sqrtRN) is within one of it for any 64-bit x; one correction step each
  /// way makes it exact. (r + 1)^2 is only formed below sqrt(2^63).
  Value isqrt(Value x) {
    Type f64 = b.getF64Type();
    constexpr int64_t kMaxRoot = 3037000499; // floor(sqrt(2^63 - 1))
    Value v = maxs(x, c64(0));
    Value root = sqrtRN(arith::SIToFPOp::create(b, loc, f64, v));
    Value r = mins(arith::FPToSIOp::create(b, loc, i64, root), c64(kMaxRoot));
    r = select(lt(v, mul(r, r)), sub(r, c64(1)), r);
    Value up = add(r, c64(1));
    Value fits =
        bitAnd(le(up, c64(kMaxRoot)),
               le(mul(mins(up, c64(kMaxRoot)), mins(up, c64(kMaxRoot))), v));
    return select(fits, up, r);
  }

  /// This sequence's boundaries of offsets metadata `name`: [s0, s1).
  /// Clamped to the values buffer, so inconsistent starts never read out of
  /// bounds (the check phase reports them).
  std::pair<Value, Value> bounds(llvm::StringRef name) {
    const MetadataArgs::Entry &m = meta.byName.lookup(name);
    Value size = bufferSize(m.values);
    Value s0 = clamp(loadBuffer(m.starts, row.b), c64(0), size);
    Value s1 = clamp(loadBuffer(m.starts, add(row.b, c64(1))), s0, size);
    return {s0, s1};
  }

  /// Number of boundaries <= pos.
  Value segIndex(llvm::StringRef name, Value pos) {
    auto [s0, s1] = bounds(name);
    Value values = meta.byName.lookup(name).values;
    Type idx = b.getIndexType();
    Value lo = arith::IndexCastOp::create(b, loc, idx, s0);
    Value hi = arith::IndexCastOp::create(b, loc, idx, s1);
    Value step = arith::ConstantIndexOp::create(b, loc, 1);
    auto loop = scf::ForOp::create(b, loc, lo, hi, step, ValueRange{c64(0)});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value v = arith::ExtSIOp::create(
          b, loc, b.getI64Type(),
          memref::LoadOp::create(b, loc, values,
                                 ValueRange{loop.getInductionVar()}));
      Value le = cmp(arith::CmpIPredicate::sle, v, pos);
      Value inc = arith::ExtUIOp::create(b, loc, b.getI64Type(), le);
      scf::YieldOp::create(b, loc,
                           ValueRange{arith::AddIOp::create(
                               b, loc, loop.getRegionIterArgs()[0], inc)});
    }
    return loop.getResult(0);
  }

  /// Boundary k: 0 for k < 0, L = max(q_len, k_len) for k >= n.
  Value boundary(llvm::StringRef name, Value k) {
    auto [s0, s1] = bounds(name);
    Value n = arith::SubIOp::create(b, loc, s1, s0);
    Value zero = c64(0);
    Value length = arith::MaxSIOp::create(b, loc, row.qLen, row.kLen);
    Value inRange =
        arith::AndIOp::create(b, loc, cmp(arith::CmpIPredicate::sge, k, zero),
                              cmp(arith::CmpIPredicate::slt, k, n));
    Value outside =
        select(cmp(arith::CmpIPredicate::slt, k, zero), zero, length);
    return guardedLoad(inRange, meta.byName.lookup(name).values,
                       arith::AddIOp::create(b, loc, s0, k), outside);
  }

  Value build(const Expr *e) {
    auto op = [&](unsigned k) { return emit(e->getOperand(k)); };
    auto fold = [&](auto tag) {
      using OpT = decltype(tag);
      Value acc = op(0);
      for (const Expr *o : e->getOperands().drop_front())
        acc = OpT::create(b, loc, acc, emit(o));
      return acc;
    };
    switch (e->getKind()) {
    case ExprKind::Const:
      return c64(e->getValue());
    case ExprKind::Var:
      switch (e->getVar()) {
      case ::cmask::Var::I:
        return row.i;
      case ::cmask::Var::B:
        return row.b;
      case ::cmask::Var::QLen:
        return row.qLen;
      case ::cmask::Var::KLen:
        return row.kLen;
      case ::cmask::Var::J:
        break;
      }
      llvm_unreachable("slot expressions are free of j");
    case ExprKind::UnionVar:
      llvm_unreachable("unions are unrolled before emission");
    case ExprKind::Scalar:
      return arith::ExtSIOp::create(b, loc, b.getI64Type(),
                                    meta.byName.lookup(e->getName()).scalar);
    case ExprKind::Lookup: {
      Value index = op(0);
      Value inRange = arith::AndIOp::create(
          b, loc, cmp(arith::CmpIPredicate::sge, index, c64(0)),
          cmp(arith::CmpIPredicate::slt, index, row.numSeqs));
      return guardedLoad(inRange, meta.byName.lookup(e->getName()).values,
                         index, c64(0));
    }
    case ExprKind::Seg:
      return segIndex(e->getName(), op(0));
    case ExprKind::SegStart:
      return boundary(e->getName(),
                      arith::SubIOp::create(b, loc, op(0), c64(1)));
    case ExprKind::SegEnd:
      return boundary(e->getName(), op(0));
    case ExprKind::Add:
      return fold(arith::AddIOp());
    case ExprKind::Mul:
      return arith::MulIOp::create(b, loc, op(0), op(1));
    case ExprKind::FloorDiv:
      return division(e, /*isMod=*/false);
    case ExprKind::Mod:
      return division(e, /*isMod=*/true);
    case ExprKind::Min:
      return fold(arith::MinSIOp());
    case ExprKind::Max:
      return fold(arith::MaxSIOp());
    case ExprKind::Select:
      return select(emit(e->getCond()), op(0), op(1));
    case ExprKind::Isqrt:
      return isqrt(op(0));
    }
    llvm_unreachable("unknown expression kind");
  }

  Value build(const Pred *p) {
    auto boolConst = [&](bool v) {
      return arith::ConstantOp::create(b, loc, b.getBoolAttr(v));
    };
    switch (p->getKind()) {
    case PredKind::True:
      return boolConst(true);
    case PredKind::False:
      return boolConst(false);
    case PredKind::Cmp: {
      static const arith::CmpIPredicate kinds[] = {
          arith::CmpIPredicate::eq,  arith::CmpIPredicate::ne,
          arith::CmpIPredicate::slt, arith::CmpIPredicate::sle,
          arith::CmpIPredicate::sgt, arith::CmpIPredicate::sge};
      return cmp(kinds[static_cast<int>(p->getCmpKind())], emit(p->getLHS()),
                 emit(p->getRHS()));
    }
    case PredKind::And:
    case PredKind::Or: {
      Value acc = emit(p->getOperands()[0]);
      for (const Pred *o : p->getOperands().drop_front())
        acc = p->getKind() == PredKind::And
                  ? Value(arith::AndIOp::create(b, loc, acc, emit(o)))
                  : Value(arith::OrIOp::create(b, loc, acc, emit(o)));
      return acc;
    }
    case PredKind::Not:
      return arith::XOrIOp::create(b, loc, emit(p->getOperands()[0]),
                                   boolConst(true));
    case PredKind::Any:
      llvm_unreachable("unions are unrolled before emission");
    }
    llvm_unreachable("unknown predicate kind");
  }

  const MetadataArgs &meta;
  const RowValues &row;
  PreprocessTarget target;
};

/// A region's guard (unions unrolled) and slots, as analysis terms.
struct RegionTerms {
  const Pred *guard;
  llvm::SmallVector<::cmask::Slot, 4> slots;
};

/// Emits the region cascade from region `r` on: yields 2K i32 values.
llvm::SmallVector<Value>
emitRegions(OpBuilder &b, Location loc, llvm::ArrayRef<RegionTerms> regions,
            size_t r, int64_t numSlots, const MetadataArgs &meta,
            const RowValues &row, PreprocessTarget target) {
  ArithEmitter ex(b, loc, meta, row, target);
  Type i32 = b.getI32Type();
  auto zeros = [&] {
    Value z = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    return llvm::SmallVector<Value>(2 * numSlots, z);
  };
  if (numSlots == 0) // no row sees anything: nothing to store
    return {};
  if (r == regions.size())
    return zeros();
  Value applies = ex.emit(regions[r].guard);
  llvm::SmallVector<Type> types(2 * numSlots, i32);
  auto ifOp =
      scf::IfOp::create(b, loc, types, applies, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  {
    ArithEmitter inner(b, loc, meta, row, target);
    Value zero = inner.c64(0);
    llvm::SmallVector<Value> out;
    for (const ::cmask::Slot &s : regions[r].slots) {
      // In the window's keys: [0, k_len) shifted by the window, clamped to
      // the keys present (the whole sequence: a shift of 0, k_len keys).
      auto clamp = [&](Value v) {
        return inner.clamp(inner.sub(v, row.kShift), zero, row.kPresent);
      };
      Value lo = clamp(inner.emit(s.lo)), hi = clamp(inner.emit(s.hi));
      Value empty = arith::OrIOp::create(
          b, loc,
          arith::XOrIOp::create(
              b, loc, inner.emit(s.cond),
              arith::ConstantOp::create(b, loc, b.getBoolAttr(true))),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, lo, hi));
      for (Value v : {lo, hi}) {
        Value kept = arith::SelectOp::create(b, loc, empty, zero, v);
        out.push_back(arith::TruncIOp::create(b, loc, i32, kept));
      }
    }
    Value z32 = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    out.resize(2 * numSlots, z32);
    scf::YieldOp::create(b, loc, out);
  }
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(
      b, loc, emitRegions(b, loc, regions, r + 1, numSlots, meta, row, target));
  return llvm::SmallVector<Value>(ifOp.getResults());
}

} // namespace

/// Writes the row's non-empty slots, sorted by start and merged where they
/// touch or overlap, to merged[base .. base + 2K), padded with (0, 0).
static void emitMergedSlots(Emitter &e, Value intervals, Value merged,
                            Value base, int64_t numSlots) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  auto lo = [&](Value x) { return e.add(base, e.mul(x, e.c64(2))); };
  auto hi = [&](Value x) { return e.add(lo(x), e.c64(1)); };
  // Compact the non-empty slots.
  auto n =
      e.loop(e.c64(0), e.c64(numSlots), {e.c64(0)}, [&](Value k, auto carried) {
        Value a = e.loadBuffer(intervals, lo(k)),
              c = e.loadBuffer(intervals, hi(k));
        Value nonEmpty = e.lt(a, c);
        e.ifThen(nonEmpty, [&] {
          e.storeBuffer(a, merged, lo(carried[0]));
          e.storeBuffer(c, merged, hi(carried[0]));
        });
        return llvm::SmallVector<Value>{e.add(carried[0], e.zext64(nonEmpty))};
      })[0];
  // Insertion sort by start (linear on already sorted slots).
  Type i64 = b.getI64Type();
  e.forEach(e.c64(1), n, [&](Value x) {
    Value keyLo = e.loadBuffer(merged, lo(x)),
          keyHi = e.loadBuffer(merged, hi(x));
    auto shift = scf::WhileOp::create(b, loc, TypeRange{i64}, ValueRange{x});
    {
      OpBuilder::InsertionGuard guard(b);
      Block *before = b.createBlock(&shift.getBefore(), {}, {i64}, {loc});
      Value y = before->getArgument(0);
      Value prev = e.sub(y, e.c64(1));
      Value positive = e.lt(e.c64(0), y);
      Value prevLo = e.ifElse(
          positive, {i64},
          [&] {
            return llvm::SmallVector<Value>{e.loadBuffer(merged, lo(prev))};
          },
          [&] { return llvm::SmallVector<Value>{keyLo}; })[0];
      scf::ConditionOp::create(b, loc, e.bitAnd(positive, e.lt(keyLo, prevLo)),
                               ValueRange{y});
      Block *after = b.createBlock(&shift.getAfter(), {}, {i64}, {loc});
      y = after->getArgument(0);
      prev = e.sub(y, e.c64(1));
      e.storeBuffer(e.loadBuffer(merged, lo(prev)), merged, lo(y));
      e.storeBuffer(e.loadBuffer(merged, hi(prev)), merged, hi(y));
      scf::YieldOp::create(b, loc, ValueRange{prev});
    }
    e.storeBuffer(keyLo, merged, lo(shift.getResult(0)));
    e.storeBuffer(keyHi, merged, hi(shift.getResult(0)));
  });
  // Merge in place (the output never passes the input).
  auto out = e.loop(e.c64(0), n, {e.c64(0)}, [&](Value x, auto carried) {
    Value o = carried[0];
    Value a = e.loadBuffer(merged, lo(x)), c = e.loadBuffer(merged, hi(x));
    Value last = e.sub(o, e.c64(1));
    Value joins = e.bitAnd(
        e.lt(e.c64(0), o),
        e.ifElse(
            e.lt(e.c64(0), o), {b.getI1Type()},
            [&] {
              return llvm::SmallVector<Value>{
                  e.le(a, e.loadBuffer(merged, hi(last)))};
            },
            [&] { return llvm::SmallVector<Value>{e.cBool(false)}; })[0]);
    return e.ifElse(
        joins, {i64},
        [&] {
          e.storeBuffer(e.maxs(e.loadBuffer(merged, hi(last)), c), merged,
                        hi(last));
          return llvm::SmallVector<Value>{o};
        },
        [&] {
          e.storeBuffer(a, merged, lo(o));
          e.storeBuffer(c, merged, hi(o));
          return llvm::SmallVector<Value>{e.add(o, e.c64(1))};
        });
  })[0];
  e.forEach(out, e.c64(numSlots), [&](Value x) {
    e.storeBuffer(e.c64(0), merged, lo(x));
    e.storeBuffer(e.c64(0), merged, hi(x));
  });
}

func::FuncOp preprocess::addRowGroupItem(OpBuilder &b, Location loc,
                                         SpecOp spec, llvm::StringRef name) {
  llvm::SmallVector<Type> types = {b.getIndexType()};
  types.append(
      getABITypes(b, ::cmask::abi::rowGroupArgs(getABIMetadata(spec))));
  auto item = func::FuncOp::create(b, loc, (name + "_item").str(),
                                   b.getFunctionType(types, {}));
  item.setPrivate();
  return item;
}

FailureOr<func::FuncOp> preprocess::buildRowItem(OpBuilder &b, Location loc,
                                                 SpecOp spec,
                                                 llvm::StringRef name,
                                                 int64_t numSlots,
                                                 PreprocessTarget target) {
  // Analysis terms of every region.
  ::cmask::ExprContext terms;
  llvm::SmallVector<RegionTerms> regions;
  for (RegionOp region : spec.getRegions()) {
    if (!region.hasSlots())
      return region.emitOpError()
             << "is not in slot form; run cmask-lower-to-intervals first";
    auto guard =
        ::cmask::unrollUnions(terms, importPredicate(terms, region.getGuard()));
    if (!guard)
      return emitAnalysisError(guard.takeError(), region);
    regions.push_back({*guard, importSlots(terms, region.getRule())});
  }

  namespace row_head = ::cmask::abi::row_group_head;
  namespace row_tail = ::cmask::abi::row_group_tail;
  func::FuncOp item = addRowGroupItem(b, loc, spec, name);
  {
    OpBuilder::InsertionGuard guard(b);
    Block *body = item.addEntryBlock();
    b.setInsertionPointToStart(body);
    auto args = body->getArguments();
    Value rowIdx = args[0];
    Value cuQ = rowHeadArg(args, row_head::CuSeqlensRows);
    Value cuK = rowHeadArg(args, row_head::CuSeqlensCols);
    MetadataArgs meta;
    unsigned a = 1 + row_head::kNumArgs;
    for (MetadataOp m : spec.getMetadata()) {
      MetadataArgs::Entry entry{m.getRole(), {}, {}, {}};
      if (m.getRole() == MetadataRole::scalar)
        entry.scalar = args[a++];
      else if (m.getRole() == MetadataRole::per_sequence)
        entry.values = args[a++];
      else {
        entry.values = args[a++];
        entry.starts = args[a++];
      }
      meta.byName[m.getSymName()] = entry;
    }
    Value intervals = rowTailArg(args, row_tail::Intervals);
    Value merged = rowTailArg(args, row_tail::Merged);

    RowValues row;
    ArithEmitter ex(b, loc, meta, row, target);
    Type i64 = b.getI64Type();
    Value rowI64 = arith::IndexCastOp::create(b, loc, i64, rowIdx);
    row.numSeqs = arith::ExtSIOp::create(b, loc, i64,
                                         rowHeadArg(args, row_head::NumSeqs));
    // The sequence: the largest b < B with cu_seqlens_q[b] <= row.
    auto search = scf::WhileOp::create(b, loc, TypeRange{i64, i64},
                                       ValueRange{ex.c64(0), row.numSeqs});
    {
      OpBuilder::InsertionGuard g(b);
      Block *before =
          b.createBlock(&search.getBefore(), {}, {i64, i64}, {loc, loc});
      Value lo = before->getArgument(0), hi = before->getArgument(1);
      Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                         arith::SubIOp::create(b, loc, hi, lo),
                                         ex.c64(1));
      scf::ConditionOp::create(b, loc, more, ValueRange{lo, hi});
      Block *after =
          b.createBlock(&search.getAfter(), {}, {i64, i64}, {loc, loc});
      lo = after->getArgument(0);
      hi = after->getArgument(1);
      Value mid = arith::ShRSIOp::create(
          b, loc, arith::AddIOp::create(b, loc, lo, hi), ex.c64(1));
      Value atMid = ex.loadBuffer(cuQ, mid);
      Value le = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, atMid,
                                       rowI64);
      scf::YieldOp::create(
          b, loc,
          ValueRange{arith::SelectOp::create(b, loc, le, mid, lo),
                     arith::SelectOp::create(b, loc, le, hi, mid)});
    }
    row.b = search.getResult(0);
    Value next = arith::AddIOp::create(b, loc, row.b, ex.c64(1));
    Value qStart = ex.loadBuffer(cuQ, row.b);
    Value qPresent = ex.sub(ex.loadBuffer(cuQ, next), qStart);
    row.kPresent = ex.sub(ex.loadBuffer(cuK, next), ex.loadBuffer(cuK, row.b));
    // Windows: the present rows (keys) are a range of the whole sequence,
    // whose position and length follow the cu_seqlens (KernelABI.h).
    auto window = [&](Value cu, int64_t field, Value otherwise) {
      Value at = preprocess::windowField(ex, row.numSeqs, row.b, field);
      return ex.guardedLoad(ex.lt(at, ex.bufferSize(cu)), cu, at, otherwise);
    };
    row.i = ex.add(ex.sub(rowI64, qStart), window(cuQ, 0, ex.c64(0)));
    row.qLen = window(cuQ, 1, qPresent);
    row.kShift = window(cuK, 0, ex.c64(0));
    row.kLen = window(cuK, 1, row.kPresent);

    llvm::SmallVector<Value> values =
        emitRegions(b, loc, regions, 0, numSlots, meta, row, target);
    Value base = arith::MulIOp::create(
        b, loc, rowIdx, arith::ConstantIndexOp::create(b, loc, 2 * numSlots));
    for (auto [k, v] : llvm::enumerate(values)) {
      Value at = arith::AddIOp::create(
          b, loc, base, arith::ConstantIndexOp::create(b, loc, k));
      memref::StoreOp::create(b, loc, v, intervals, ValueRange{at});
    }
    Emitter e(b, loc);
    emitMergedSlots(e, intervals, merged, e.fromIndex(base), numSlots);
    func::ReturnOp::create(b, loc);
  }
  return item;
}
