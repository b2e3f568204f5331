//===- Preprocess.cpp - The mask-specific preprocess in scf form ----------===//
//
// Emits the row phase of the preprocess (docs/descriptor.md): for one packed
// row, find its sequence, apply the first region whose guard holds, and
// store its K slots clamped to [0, k_len], empty slots as (0, 0). Guards and
// slot expressions come from the Analysis library (the same terms the passes
// produced) and are emitted as 64-bit arith with the MaskSpec's integer
// semantics: floordiv/mod round toward negative infinity, a zero divisor
// gives 0, isqrt of a negative number is 0, lookups out of range give 0.
//
//===----------------------------------------------------------------------===//

#include "cmask/Conversion/CMaskToGPU/Preprocess.h"
#include "cmask/Conversion/CMaskToGPU/LowerToPTX.h"

#include "Emitter.h"
#include "KernelSignature.h"
#include "PreprocessPhases.h"

#include "cmask/Analysis/Normalize.h"
#include "cmask/Dialect/CMask/Transforms/RuleBridge.h"
#include "cmask/Dialect/CMask/Transforms/TermEmitter.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/LLVMIR/Transforms/InlinerInterfaceImpl.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::cmask;
using ::cmask::CmpKind;
using ::cmask::Expr;
using ::cmask::ExprKind;
using ::cmask::Pred;
using ::cmask::PredKind;

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

/// Where field `field` of sequence `b`'s window lies in its cu_seqlens buffer
/// (after the num_seqs + 1 starts; KernelABI.h, row_group_head).
static Value windowField(Emitter &e, Value numSeqs, Value b, int64_t field) {
  return e.add(
      e.add(numSeqs, e.c64(1)),
      e.add(e.mul(b, e.c64(::cmask::abi::kWindowFields)), e.c64(field)));
}

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

/// Limits of the tile-list entry word (docs/descriptor.md).
static constexpr int64_t kMaxSlots = kMaxDescriptorSlots;

std::optional<llvm::SmallVector<TileShape>>
mlir::cmask::parseTileShapeList(llvm::StringRef text, std::string &bad) {
  llvm::SmallVector<TileShape> shapes;
  for (llvm::StringRef item : llvm::split(text, ',')) {
    auto [a, b] = item.trim().split('x');
    TileShape shape;
    if (a.getAsInteger(10, shape.q) || b.getAsInteger(10, shape.k) ||
        shape.q <= 0 || shape.k <= 0) {
      bad = item.str();
      return std::nullopt;
    }
    shapes.push_back(shape);
  }
  return shapes;
}

PreprocessNames
mlir::cmask::getPreprocessNames(SpecOp spec, llvm::ArrayRef<TileShape> shapes) {
  std::string base = ("cmask_" + spec.getSymName()).str();
  PreprocessNames names;
  names.rows = base + "_rows";
  names.check = base + "_check";
  for (const TileShape &shape : shapes) {
    std::string p = base + "_" + shape.str();
    names.tiles.push_back({shape, p, p + "_seqs", p + "_envinit", p + "_env",
                           p + "_tiles", p + "_pack", p + "_count", p + "_scan",
                           p + "_fill"});
  }
  return names;
}

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

std::vector<std::pair<std::string, ::cmask::abi::MetadataRole>>
mlir::cmask::getABIMetadata(SpecOp spec) {
  std::vector<std::pair<std::string, ::cmask::abi::MetadataRole>> out;
  for (MetadataOp m : spec.getMetadata()) {
    using Role = ::cmask::abi::MetadataRole;
    Role role = m.getRole() == MetadataRole::scalar         ? Role::Scalar
                : m.getRole() == MetadataRole::per_sequence ? Role::PerSequence
                                                            : Role::Offsets;
    out.push_back({m.getSymName().str(), role});
  }
  return out;
}

std::vector<::cmask::abi::NamedArg>
mlir::cmask::getStageKernelArgs(const StageKernel &kernel, SpecOp spec) {
  return ::cmask::abi::stageKernelArgs(kernel.stages, getABIMetadata(spec));
}

/// The phases in launch order, grouped into stages of phases that do not
/// depend on each other (docs/descriptor.md, "Phases").
static const std::vector<std::vector<Phase>> kStages = {
    {Phase::Check, Phase::Rows, Phase::Seqs, Phase::EnvInit},
    {Phase::Env},
    {Phase::Tiles},
    {Phase::Pack},
    {Phase::Count},
    {Phase::Scan},
    {Phase::Fill}};

/// The host-wrapper / kernel name of a phase (its item function is
/// `<name>_item`).
static const std::string &phaseName(const PreprocessNames &names, Phase phase,
                                    int shape) {
  if (phase == Phase::Check)
    return names.check;
  if (phase == Phase::Rows)
    return names.rows;
  const PreprocessNames::Tiles &t = names.tiles[shape];
  switch (phase) {
  case Phase::Seqs:
    return t.seqs;
  case Phase::EnvInit:
    return t.envinit;
  case Phase::Env:
    return t.env;
  case Phase::Tiles:
    return t.tiles;
  case Phase::Pack:
    return t.pack;
  case Phase::Count:
    return t.count;
  case Phase::Scan:
    return t.scan;
  case Phase::Fill:
    return t.fill;
  default:
    llvm_unreachable("not a tile phase");
  }
}

/// At most the bytes of kernel parameters a value of `type` takes once
/// lowered: a memref<?xi32> is five 8-byte words; an i32 is counted as 8,
/// the padding it may need before the next 8-byte word included.
static int64_t paramBytes(Type type) {
  if (isa<MemRefType>(type))
    return 5 * 8;
  return 8;
}

/// Kernel parameters stay under CUDA's 4 KB limit (with room for alignment).
static constexpr int64_t kParamBudget = 4000;

/// Plans the preprocess kernels of `parts` (named after the first spec):
/// one kernel running the seven stages for every argument group (a
/// direction's row group, each of its tile shapes' tile group) while the
/// parameters stay under the budget; else the groups, in order (a
/// direction's row group before its tile groups), are packed into
/// successive kernels that each run every stage for their groups. A tile
/// phase then reads rows an earlier kernel built, and the phases of
/// different groups of one stage never depend on each other. `itemFn`
/// gives the item function of a phase. Fails (with `why`) when one group
/// alone passes the budget.
static FailureOr<LaunchPlan>
planStages(llvm::ArrayRef<PreprocessNames> parts, llvm::StringRef base,
           llvm::function_ref<func::FuncOp(const StageKernel::Item &)> itemFn,
           std::string &why) {
  // The groups in order, and the parameter bytes of each: its arguments
  // and the item count of each of its phases.
  std::vector<std::pair<int, int>> groups;
  for (int d = 0; d < static_cast<int>(parts.size()); ++d)
    for (int shape = -1; shape < static_cast<int>(parts[d].tiles.size());
         ++shape)
      groups.push_back({d, shape});
  auto phasesOf = [](const std::pair<int, int> &group) {
    int64_t n = 0;
    for (const std::vector<Phase> &stage : kStages)
      for (Phase phase : stage)
        n += ::cmask::abi::isRowPhase(phase) == (group.second < 0);
    return n;
  };
  auto bytesOf = [&](const std::pair<int, int> &group) {
    StageKernel::Item any{group.second < 0 ? Phase::Rows : Phase::Seqs,
                          group.first, group.second};
    int64_t bytes = 8 * phasesOf(group);
    for (Type t : itemFn(any).getFunctionType().getInputs().drop_front())
      bytes += paramBytes(t);
    return bytes;
  };
  constexpr int64_t kSyncBytes = 5 * 8; // a memref, as paramBytes counts it
  std::vector<std::vector<std::pair<int, int>>> bins;
  int64_t bytes = 0;
  for (const std::pair<int, int> &group : groups) {
    int64_t groupBytes = bytesOf(group);
    if (kSyncBytes + groupBytes > kParamBudget) {
      why = "the preprocess kernel's parameters of one argument group (" +
            std::to_string(groupBytes) +
            " bytes: its metadata) pass CUDA's 4 KB; declare fewer metadata "
            "inputs";
      return failure();
    }
    if (bins.empty() || bytes + groupBytes > kParamBudget) {
      bins.emplace_back();
      bytes = kSyncBytes;
    }
    bins.back().push_back(group);
    bytes += groupBytes;
  }
  LaunchPlan plan;
  for (const std::vector<std::pair<int, int>> &bin : bins) {
    StageKernel kernel;
    for (const std::vector<Phase> &stage : kStages) {
      ::cmask::abi::Stage items;
      for (Phase phase : stage)
        for (auto [d, shape] : bin)
          if (::cmask::abi::isRowPhase(phase) == (shape < 0))
            items.push_back({phase, d, shape});
      if (!items.empty())
        kernel.stages.push_back(std::move(items));
    }
    plan.push_back(std::move(kernel));
  }
  for (auto [k, kernel] : llvm::enumerate(plan)) {
    kernel.name = (base + "_preprocess").str();
    if (plan.size() > 1)
      kernel.name += std::to_string(k);
  }
  return plan;
}

/// One PTX statement for its side effect (a fence, a sleep), with a memory
/// clobber so that no load or store moves across it; `operands` ($0, ...)
/// as `constraints` says.
static void emitPTXStatement(OpBuilder &b, Location loc, llvm::StringRef code,
                             ValueRange operands = {},
                             llvm::StringRef constraints = "") {
  std::string clobbers = constraints.empty()
                             ? std::string("~{memory}")
                             : (constraints + ",~{memory}").str();
  LLVM::InlineAsmOp::create(b, loc, TypeRange{}, operands, code, clobbers,
                            /*has_side_effects=*/true,
                            /*is_align_stack=*/false,
                            LLVM::tailcallkind::TailCallKind::None,
                            LLVM::AsmDialectAttr(), ArrayAttr());
}

/// Waits until the i32 at `address` (a global address) reaches `need`
/// (unsigned): relaxed loads at gpu scope between sleeps growing from 32 ns
/// to 512 ns, then an acquire fence (the loads read L2; an atomic per poll
/// would contend with the counting it waits for).
static void emitWaitForCount(Emitter &e, Value address, Value need) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Type i32 = b.getI32Type();
  e.whileLoop(
      ValueRange{e.c32(32)}, TypeRange{i32},
      [&](llvm::SmallVector<Value> sleep) {
        Value count = LLVM::InlineAsmOp::create(
                          b, loc, i32, ValueRange{address},
                          "ld.relaxed.gpu.u32 $0, [$1];", "=r,l",
                          /*has_side_effects=*/true, /*is_align_stack=*/false,
                          LLVM::tailcallkind::TailCallKind::None,
                          LLVM::AsmDialectAttr(), ArrayAttr())
                          .getResult(0);
        return llvm::SmallVector<Value>{
            e.cmp(arith::CmpIPredicate::ult, count, need), sleep[0]};
      },
      [&](llvm::SmallVector<Value> sleep) {
        emitPTXStatement(b, loc, "nanosleep.u32 $0;", sleep[0], "r");
        return llvm::SmallVector<Value>{arith::MinUIOp::create(
            b, loc, e.add(sleep[0], sleep[0]), e.c32(512))};
      });
  emitPTXStatement(b, loc, "fence.acq_rel.gpu;");
}

/// Adds the preprocess kernel `kernel` (see StageKernel): its stages in one
/// launch, each block running the stage of its ticket after the stage
/// before has finished (abi::stageBlocks has the protocol).
static gpu::GPUFuncOp addStageKernel(
    OpBuilder &b, Location loc, const StageKernel &kernel,
    llvm::function_ref<func::FuncOp(const StageKernel::Item &)> itemFn) {
  std::vector<StageKernel::Item> phases =
      ::cmask::abi::stagePhases(kernel.stages);
  // Argument groups in order of first use, and where each starts.
  llvm::SmallVector<std::pair<int, int>> groups;
  llvm::SmallVector<Type> types(phases.size(), b.getIndexType());
  llvm::SmallVector<unsigned> groupStart, phaseGroup;
  for (const StageKernel::Item &item : phases) {
    std::pair<int, int> group{item.direction, item.shape};
    auto *it = llvm::find(groups, group);
    if (it == groups.end()) {
      groups.push_back(group);
      groupStart.push_back(types.size());
      auto inputs = itemFn(item).getFunctionType().getInputs().drop_front();
      types.append(inputs.begin(), inputs.end());
      it = groups.end() - 1;
    }
    phaseGroup.push_back(groupStart[it - groups.begin()]);
  }
  Type i32 = b.getI32Type();
  types.push_back(MemRefType::get({ShapedType::kDynamic}, i32)); // sync
  auto gpuFunc =
      gpu::GPUFuncOp::create(b, loc, kernel.name, b.getFunctionType(types, {}));
  gpuFunc->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  Value ticketSlot = gpuFunc.addWorkgroupAttribution(
      MemRefType::get({1}, i32, MemRefLayoutAttrInterface(),
                      gpu::AddressSpaceAttr::get(b.getContext(),
                                                 gpu::AddressSpace::Workgroup)),
      loc);
  OpBuilder::InsertionGuard guard(b);
  Block *body = &gpuFunc.getBody().front();
  b.setInsertionPointToStart(body);
  Emitter e(b, loc);
  Value sync = body->getArgument(types.size() - 1);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value threads = gpu::BlockDimOp::create(b, loc, gpu::Dimension::x);
  Value zero = e.cIdx(0), one = e.cIdx(1);
  Value lead =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, zero);
  auto atomicAdd = [&](Value word, int64_t value) {
    return memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi,
                                       e.c32(value), sync, ValueRange{word})
        .getResult();
  };
  // The ticket, through shared memory to the whole block.
  e.ifThen(lead, [&] {
    memref::StoreOp::create(b, loc, atomicAdd(zero, 1), ticketSlot,
                            ValueRange{zero});
  });
  gpu::BarrierOp::create(b, loc);
  Value ticket = arith::IndexCastUIOp::create(
      b, loc, b.getIndexType(),
      memref::LoadOp::create(b, loc, ticketSlot, ValueRange{zero}));
  Value start = zero, previousBlocks;
  unsigned p = 0; // the first phase of the stage
  for (auto [s, stage] : llvm::enumerate(kernel.stages)) {
    Value items = zero;
    for (unsigned k = 0; k < stage.size(); ++k)
      items = e.add(items, body->getArgument(p + k));
    // abi::stageBlocks: at least one block, so that the next stage's wait
    // covers this stage's.
    Value blocks = arith::MaxUIOp::create(
        b, loc, one, arith::CeilDivUIOp::create(b, loc, items, threads));
    Value local = e.sub(ticket, start); // wraps for tickets before `start`
    e.ifThen(e.cmp(arith::CmpIPredicate::ult, local, blocks), [&] {
      if (s > 0) {
        // Wait for the stage before: its finished blocks in sync[s]. The
        // runtime passes `sync` with offset 0 and stride 1
        // (KernelParams::buffer): word s is at the aligned pointer + 4s.
        Value need = e.fromIndex(previousBlocks, i32);
        e.ifThen(lead, [&] {
          Value base = arith::IndexCastOp::create(
              b, loc, b.getI64Type(),
              memref::ExtractAlignedPointerAsIndexOp::create(b, loc, sync));
          emitWaitForCount(e, e.add(base, e.c64(4 * static_cast<int64_t>(s))),
                           need);
        });
        gpu::BarrierOp::create(b, loc);
      }
      // if (id < n0) phase0(id) else { id -= n0; if (id < n1) ... }
      Value id = e.add(e.mul(local, threads), tid);
      {
        OpBuilder::InsertionGuard dispatch(b);
        for (unsigned k = 0; k < stage.size(); ++k) {
          Value count = body->getArgument(p + k);
          Value inRange = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::ult, id, count);
          auto ifOp =
              scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/true);
          b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
          func::FuncOp fn = itemFn(stage[k]);
          llvm::SmallVector<Value> args = {id};
          unsigned n = fn.getFunctionType().getNumInputs() - 1;
          for (unsigned a = 0; a < n; ++a)
            args.push_back(body->getArgument(phaseGroup[p + k] + a));
          func::CallOp::create(b, loc, fn, args);
          b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
          id = arith::SubIOp::create(b, loc, id, count);
        }
      }
      // The block's items are done: count it finished (release).
      gpu::BarrierOp::create(b, loc);
      e.ifThen(lead, [&] {
        emitPTXStatement(b, loc, "fence.acq_rel.gpu;");
        atomicAdd(e.cIdx(1 + s), 1);
      });
    });
    p += stage.size();
    start = e.add(start, blocks);
    previousBlocks = blocks;
  }
  b.setInsertionPointToEnd(body);
  gpu::ReturnOp::create(b, loc);
  return gpuFunc;
}

/// Adds `name`: for (item = 0; item < n; ++item) call(item, args...).
static void addHostWrapper(OpBuilder &b, Location loc, func::FuncOp item,
                           llvm::StringRef name) {
  llvm::SmallVector<Type> types(item.getFunctionType().getInputs());
  auto host = func::FuncOp::create(b, loc, name, b.getFunctionType(types, {}));
  host->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  OpBuilder::InsertionGuard guard(b);
  Block *body = host.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ForOp::create(b, loc, zero, body->getArgument(0), one);
  b.setInsertionPointToStart(loop.getBody());
  llvm::SmallVector<Value> args = {loop.getInductionVar()};
  for (BlockArgument arg : body->getArguments().drop_front())
    args.push_back(arg);
  func::CallOp::create(b, loc, item, args);
  b.setInsertionPointAfter(loop);
  func::ReturnOp::create(b, loc);
}

static constexpr llvm::StringLiteral kGPUModuleName = "cmask_preprocess";

LogicalResult mlir::cmask::buildPreprocess(SpecOp spec, ModuleOp module,
                                           llvm::ArrayRef<TileShape> shapes,
                                           PreprocessTarget target) {
  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect,
                   memref::MemRefDialect, scf::SCFDialect>();
  // The module may live in another context than the spec (the host twin
  // JITs it in its own): build with a location of the module's context.
  Location loc = NameLoc::get(StringAttr::get(ctx, spec.getSymName()));
  if (!spec.getNumSlots())
    return spec.emitOpError()
           << "is not in slot form; run cmask-lower-to-intervals first";
  int64_t numSlots = *spec.getNumSlots();
  // Tile-list entries hold slot indices and counts in 7 bits.
  if (numSlots > kMaxSlots)
    return spec.emitOpError()
           << "has " << numSlots
           << " slots per row; the descriptor supports at "
           << "most " << kMaxSlots << " (split the rule into regions or narrow "
           << "its unions)";

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

  PreprocessNames names = getPreprocessNames(spec, shapes);
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  if (target == PreprocessTarget::GPU) {
    ctx->loadDialect<gpu::GPUDialect>();
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    // One GPU module holds the kernels of every spec built into `module`
    // (the row and the column direction): one PTX file.
    auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kGPUModuleName);
    if (!gpuModule)
      gpuModule = gpu::GPUModuleOp::create(b, loc, kGPUModuleName);
    b.setInsertionPointToEnd(gpuModule.getBody());
  }
  // On the GPU, compilePreprocessToPTX wraps the item functions in stage
  // kernels.
  auto addEntry = [&](func::FuncOp item, llvm::StringRef name) {
    if (target == PreprocessTarget::CPU)
      addHostWrapper(b, loc, item, name);
  };
  Type index = b.getIndexType();

  // The item, then the row group (cmask_runtime/KernelABI.h): num_seqs,
  // cu_seqlens_rows, cu_seqlens_cols, the metadata, intervals, merged,
  // error.
  namespace row_head = ::cmask::abi::row_group_head;
  namespace row_tail = ::cmask::abi::row_group_tail;
  llvm::SmallVector<Type> itemTypes = {index};
  itemTypes.append(
      getABITypes(b, ::cmask::abi::rowGroupArgs(getABIMetadata(spec))));
  // Argument k of the group's head, of its tail.
  auto head = [](auto args, int k) { return args[1 + k]; };
  auto tail = [](auto args, int k) {
    return args[args.size() - row_tail::kNumArgs + k];
  };
  auto item = func::FuncOp::create(b, loc, names.rows + "_item",
                                   b.getFunctionType(itemTypes, {}));
  item.setPrivate();
  {
    OpBuilder::InsertionGuard guard(b);
    Block *body = item.addEntryBlock();
    b.setInsertionPointToStart(body);
    auto args = body->getArguments();
    Value rowIdx = args[0];
    Value cuQ = head(args, row_head::CuSeqlensRows);
    Value cuK = head(args, row_head::CuSeqlensCols);
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
    Value intervals = tail(args, row_tail::Intervals);
    Value merged = tail(args, row_tail::Merged);

    RowValues row;
    ArithEmitter ex(b, loc, meta, row, target);
    Type i64 = b.getI64Type();
    Value rowI64 = arith::IndexCastOp::create(b, loc, i64, rowIdx);
    row.numSeqs =
        arith::ExtSIOp::create(b, loc, i64, head(args, row_head::NumSeqs));
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
      Value at = windowField(ex, row.numSeqs, row.b, field);
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
  addEntry(item, names.rows);

  // check: one item per sequence; ORs into error[0]: 1 when cu_seqlens
  // decrease or pass the interval table, 2 when an offsets metadata's
  // per-sequence starts are inconsistent, 4 when boundaries decrease or lie
  // outside [0, max(q_len, k_len)]. The other phases clamp what they read
  // and write, so such metadata never leads out of bounds; this phase says so.
  auto check = func::FuncOp::create(b, loc, names.check + "_item",
                                    b.getFunctionType(itemTypes, {}));
  check.setPrivate();
  {
    OpBuilder::InsertionGuard guard(b);
    Block *body = check.addEntryBlock();
    b.setInsertionPointToStart(body);
    Emitter e(b, loc);
    auto args = body->getArguments();
    Value seq = e.fromIndex(args[0]);
    Value next = e.add(seq, e.c64(1));
    Value cuQ = head(args, row_head::CuSeqlensRows);
    Value cuK = head(args, row_head::CuSeqlensCols);
    Value error = tail(args, row_tail::Error);
    Value intervals = tail(args, row_tail::Intervals);
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
    Value numSeqs = e.sext64(head(args, row_head::NumSeqs));
    for (auto [buffer, present, whole] :
         {std::tuple{cuQ, e.sub(q1, q0), &wholeQ},
          std::tuple{cuK, e.sub(k1, k0), &wholeK}}) {
      Value at = windowField(e, numSeqs, seq, 0);
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
  addEntry(check, names.check);

  for (const PreprocessNames::Tiles &t : names.tiles) {
    auto items = preprocess::buildTilePhases(b, loc, t.prefix, t.shape.q,
                                             t.shape.k, numSlots);
    for (auto [fn, host] :
         llvm::zip_equal(items, std::array<const std::string *, 8>{
                                    &t.seqs, &t.envinit, &t.env, &t.tiles,
                                    &t.pack, &t.count, &t.scan, &t.fill}))
      addEntry(fn, *host);
  }
  return success();
}

FailureOr<LaunchPlan>
mlir::cmask::buildGPUPreprocess(llvm::ArrayRef<PreprocessPart> parts,
                                ModuleOp module) {
  assert(!parts.empty() && "nothing to build");
  SpecOp spec = parts.front().spec;
  llvm::SmallVector<PreprocessNames> names;
  for (const PreprocessPart &part : parts) {
    if (failed(buildPreprocess(part.spec, module, part.shapes,
                               PreprocessTarget::GPU)))
      return failure();
    names.push_back(getPreprocessNames(part.spec, part.shapes));
  }
  auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kGPUModuleName);
  auto itemFn = [&](const StageKernel::Item &item) {
    return gpuModule.lookupSymbol<func::FuncOp>(
        phaseName(names[item.direction], item.phase, item.shape) + "_item");
  };
  std::string why;
  FailureOr<LaunchPlan> planned =
      planStages(names, ("cmask_" + spec.getSymName()).str(), itemFn, why);
  if (failed(planned))
    return spec.emitOpError() << why;
  LaunchPlan plan = std::move(*planned);
  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Location loc =
      NameLoc::get(StringAttr::get(module.getContext(), spec.getSymName()));
  for (const StageKernel &kernel : plan) {
    gpu::GPUFuncOp func = addStageKernel(b, loc, kernel, itemFn);
    // The signature is the item functions' groups; it must be the one the
    // kernel ABI lists (the manifest's, the runtime's).
    if (func.getArgumentTypes() !=
        ArrayRef<Type>(getABITypes(b, getStageKernelArgs(kernel, spec))))
      return func.emitOpError()
             << "internal error: the stage kernel's arguments differ from "
                "the kernel ABI's list (cmask_runtime/KernelABI.h)";
  }
  return plan;
}

FailureOr<CompiledPreprocess>
mlir::cmask::compilePreprocessToPTX(llvm::ArrayRef<PreprocessPart> parts,
                                    llvm::StringRef chip) {
  assert(!parts.empty() && "nothing to compile");
  SpecOp spec = parts.front().spec;
  DialectRegistry registry;
  registerGPULowering(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  CompiledPreprocess result;
  auto plan = buildGPUPreprocess(parts, *module);
  if (failed(plan))
    return failure();
  result.plan = std::move(*plan);

  auto ptx = lowerToPTX(*module, chip, spec.getLoc());
  if (failed(ptx))
    return failure();
  result.ptx = std::move(*ptx);
  return result;
}

LogicalResult mlir::cmask::lowerPreprocessToLLVM(ModuleOp module) {
  PassManager pm(module.getContext());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(module);
}
