//===- RuleBridge.cpp - MLIR rules <-> Analysis predicates ----------------===//
//
// The bridge between the IR and the Analysis library (RuleBridge.h):
// importPredicate turns a guard or rule region into an Analysis predicate,
// importSlots reads the slot form back, exportDNF and exportSlots write them
// as ops (TermEmitter.h), and emitAnalysisError locates the Analysis
// library's errors at the op they came from.
//
//===----------------------------------------------------------------------===//

#include "cmask/Dialect/CMask/Transforms/RuleBridge.h"
#include "cmask/Dialect/CMask/Transforms/TermEmitter.h"

#include "mlir/IR/Builders.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::cmask;
using ::cmask::CmpKind;
using ::cmask::Expr;
using ::cmask::ExprContext;
using ::cmask::ExprKind;
using ::cmask::Pred;
using ::cmask::PredKind;
using ::cmask::Slot;

//===----------------------------------------------------------------------===//
// Import
//===----------------------------------------------------------------------===//

static ::cmask::Var toVar(Builtin b) {
  switch (b) {
  case Builtin::i:
    return ::cmask::Var::I;
  case Builtin::j:
    return ::cmask::Var::J;
  case Builtin::b:
    return ::cmask::Var::B;
  case Builtin::q_len:
    return ::cmask::Var::QLen;
  case Builtin::k_len:
    return ::cmask::Var::KLen;
  }
  llvm_unreachable("unknown builtin");
}

static CmpKind toCmpKind(CmpPredicate p) {
  switch (p) {
  case CmpPredicate::eq:
    return CmpKind::EQ;
  case CmpPredicate::ne:
    return CmpKind::NE;
  case CmpPredicate::lt:
    return CmpKind::LT;
  case CmpPredicate::le:
    return CmpKind::LE;
  case CmpPredicate::gt:
    return CmpKind::GT;
  case CmpPredicate::ge:
    return CmpKind::GE;
  }
  llvm_unreachable("unknown predicate");
}

namespace {
/// Maps the SSA values of a verified rule body to analysis terms.
class Importer {
public:
  explicit Importer(ExprContext &ctx) : ctx(ctx) {}

  void importBlock(Block &block) {
    for (Operation &op : block)
      importOp(&op);
  }

  const Expr *expr(Value v) { return exprs.lookup(v); }
  const Pred *pred(Value v) { return preds.lookup(v); }

  llvm::SmallVector<Slot, 4> slots;

private:
  void importOp(Operation *op) {
    // Constant folding that overflows is reported at the op.
    ctx.setCurrentOrigin(op);
    auto setExpr = [&](const Expr *e) { exprs[op->getResult(0)] = e; };
    auto setPred = [&](const Pred *p) {
      ctx.setOrigin(p, op);
      preds[op->getResult(0)] = p;
    };
    auto list = [&](ValueRange values) {
      llvm::SmallVector<const Pred *, 4> out;
      for (Value v : values)
        out.push_back(pred(v));
      return out;
    };
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](VarOp v) { setExpr(ctx.getVar(toVar(v.getKind()))); })
        .Case([&](ConstantOp c) {
          auto attr = cast<IntegerAttr>(c.getValue());
          if (attr.getType().isInteger(1))
            setPred(ctx.getBool(attr.getValue().getBoolValue()));
          else
            setExpr(ctx.getConst(attr.getValue().getSExtValue()));
        })
        .Case([&](AddOp o) {
          setExpr(ctx.getAdd(expr(o.getLhs()), expr(o.getRhs())));
        })
        .Case([&](SubOp o) {
          setExpr(ctx.getSub(expr(o.getLhs()), expr(o.getRhs())));
        })
        .Case([&](MulOp o) {
          setExpr(ctx.getMul(expr(o.getLhs()), expr(o.getRhs())));
        })
        .Case([&](FloorDivOp o) {
          setExpr(ctx.getFloorDiv(expr(o.getLhs()), expr(o.getRhs())));
        })
        .Case([&](ModOp o) {
          setExpr(ctx.getMod(expr(o.getLhs()), expr(o.getRhs())));
        })
        .Case([&](MinOp o) {
          setExpr(ctx.getMin(expr(o.getLhs()), expr(o.getRhs())));
        })
        .Case([&](MaxOp o) {
          setExpr(ctx.getMax(expr(o.getLhs()), expr(o.getRhs())));
        })
        .Case([&](IsqrtOp o) { setExpr(ctx.getIsqrt(expr(o.getOperand()))); })
        .Case([&](SelectOp o) {
          setExpr(ctx.getSelect(pred(o.getCond()), expr(o.getTrueValue()),
                                expr(o.getFalseValue())));
        })
        .Case([&](MetaOp o) { setExpr(ctx.getScalar(o.getMetadata())); })
        .Case([&](LookupOp o) {
          setExpr(ctx.getLookup(o.getMetadata(), expr(o.getIndex())));
        })
        .Case([&](SegOp o) {
          setExpr(ctx.getSeg(o.getMetadata(), expr(o.getPosition())));
        })
        .Case([&](SegStartOp o) {
          setExpr(ctx.getSegStart(o.getMetadata(), expr(o.getSegment())));
        })
        .Case([&](SegEndOp o) {
          setExpr(ctx.getSegEnd(o.getMetadata(), expr(o.getSegment())));
        })
        .Case([&](CmpOp o) {
          setPred(ctx.getCmp(toCmpKind(o.getPredicate()), expr(o.getLhs()),
                             expr(o.getRhs())));
        })
        .Case([&](AndOp o) { setPred(ctx.getAnd(list(o.getOperands()))); })
        .Case([&](OrOp o) { setPred(ctx.getOr(list(o.getOperands()))); })
        .Case([&](NotOp o) { setPred(ctx.getNot(pred(o.getOperand()))); })
        .Case([&](AnyOp o) {
          int64_t id = nextUnionVar++;
          exprs[o.getInductionVar()] = ctx.getUnionVar(id);
          Block &body = o.getBody().front();
          importBlock(body);
          auto yield = cast<YieldOp>(body.getTerminator());
          setPred(ctx.getAny(id, o.getLower(), o.getUpper(),
                             pred(yield.getValue())));
        })
        .Case([&](SlotOp o) {
          slotOf[o.getResult()] = {pred(o.getCond()), expr(o.getLo()),
                                   expr(o.getHi())};
        })
        .Case([&](SlotsOp o) {
          for (Value v : o.getSlots())
            slots.push_back(slotOf.lookup(v));
        })
        .Case([&](YieldOp) {})
        .Default([](Operation *op) {
          llvm_unreachable("unexpected op in a verified cmask rule");
        });
  }

  ExprContext &ctx;
  llvm::DenseMap<Value, const Expr *> exprs;
  llvm::DenseMap<Value, const Pred *> preds;
  llvm::DenseMap<Value, Slot> slotOf;
  int64_t nextUnionVar = 0;
};
} // namespace

const Pred *mlir::cmask::importPredicate(ExprContext &ctx, Region &region) {
  Importer importer(ctx);
  Block &block = region.front();
  importer.importBlock(block);
  return importer.pred(cast<YieldOp>(block.getTerminator()).getValue());
}

llvm::SmallVector<Slot, 4> mlir::cmask::importSlots(ExprContext &ctx,
                                                    Region &region) {
  Importer importer(ctx);
  importer.importBlock(region.front());
  return importer.slots;
}

//===----------------------------------------------------------------------===//
// Export
//===----------------------------------------------------------------------===//

static Builtin toBuiltin(::cmask::Var v) {
  switch (v) {
  case ::cmask::Var::I:
    return Builtin::i;
  case ::cmask::Var::J:
    return Builtin::j;
  case ::cmask::Var::B:
    return Builtin::b;
  case ::cmask::Var::QLen:
    return Builtin::q_len;
  case ::cmask::Var::KLen:
    return Builtin::k_len;
  }
  llvm_unreachable("unknown variable");
}

static CmpPredicate toCmpPredicate(CmpKind k) {
  switch (k) {
  case CmpKind::EQ:
    return CmpPredicate::eq;
  case CmpKind::NE:
    return CmpPredicate::ne;
  case CmpKind::LT:
    return CmpPredicate::lt;
  case CmpKind::LE:
    return CmpPredicate::le;
  case CmpKind::GT:
    return CmpPredicate::gt;
  case CmpKind::GE:
    return CmpPredicate::ge;
  }
  llvm_unreachable("unknown comparison");
}

namespace {
/// Emits analysis terms as cmask ops at the end of a block, each term once.
class Exporter : public TermEmitter<Exporter> {
  friend class TermEmitter<Exporter>;

public:
  Exporter(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value constant(int64_t v) {
    return ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(v));
  }

  Value emitAll(PredKind kind, llvm::ArrayRef<const Pred *> ops) {
    llvm::SmallVector<Value, 4> values;
    for (const Pred *op : ops)
      values.push_back(emit(op));
    if (kind == PredKind::And)
      return AndOp::create(b, loc, b.getI1Type(), values);
    return OrOp::create(b, loc, b.getI1Type(), values);
  }

private:
  Value build(const Expr *e) {
    auto op = [&](unsigned k) { return emit(e->getOperand(k)); };
    auto chain = [&](auto tag) {
      using OpT = decltype(tag);
      Value acc = op(0);
      for (const Expr *o : e->getOperands().drop_front())
        acc = OpT::create(b, loc, b.getI64Type(), acc, emit(o));
      return acc;
    };
    switch (e->getKind()) {
    case ExprKind::Const:
      return constant(e->getValue());
    case ExprKind::Var:
      return VarOp::create(b, loc, b.getI64Type(), toBuiltin(e->getVar()));
    case ExprKind::UnionVar:
      llvm_unreachable("unions are unrolled before terms are exported");
    case ExprKind::Scalar:
      return MetaOp::create(b, loc, b.getI64Type(), e->getName());
    case ExprKind::Lookup:
      return LookupOp::create(b, loc, b.getI64Type(), e->getName(), op(0));
    case ExprKind::Seg:
      return SegOp::create(b, loc, b.getI64Type(), e->getName(), op(0));
    case ExprKind::SegStart:
      return SegStartOp::create(b, loc, b.getI64Type(), e->getName(), op(0));
    case ExprKind::SegEnd:
      return SegEndOp::create(b, loc, b.getI64Type(), e->getName(), op(0));
    case ExprKind::Add:
      return buildSum(e);
    case ExprKind::Mul:
      return MulOp::create(b, loc, b.getI64Type(), op(0), op(1));
    case ExprKind::FloorDiv:
      return FloorDivOp::create(b, loc, b.getI64Type(), op(0), op(1));
    case ExprKind::Mod:
      return ModOp::create(b, loc, b.getI64Type(), op(0), op(1));
    case ExprKind::Min:
      return chain(MinOp());
    case ExprKind::Max:
      return chain(MaxOp());
    case ExprKind::Select:
      return SelectOp::create(b, loc, b.getI64Type(), emit(e->getCond()), op(0),
                              op(1));
    case ExprKind::Isqrt:
      return IsqrtOp::create(b, loc, b.getI64Type(), op(0));
    }
    llvm_unreachable("unknown expression kind");
  }

  /// `t1 + t2 - 3*t3 + 4`: positive terms first, then subtractions.
  Value buildSum(const Expr *e) {
    llvm::SmallVector<std::pair<int64_t, const Expr *>, 4> parts;
    int64_t offset = 0;
    for (const Expr *o : e->getOperands()) {
      if (o->isConst())
        offset = o->getValue();
      else if (o->getKind() == ExprKind::Mul && o->getOperand(0)->isConst())
        parts.push_back({o->getOperand(0)->getValue(), o->getOperand(1)});
      else
        parts.push_back({1, o});
    }
    std::stable_partition(parts.begin(), parts.end(),
                          [](auto &p) { return p.first > 0; });
    Value acc;
    auto magnitude = [&](int64_t c, const Expr *t) -> Value {
      uint64_t mag = c < 0 ? 0 - static_cast<uint64_t>(c) : c;
      if (!t)
        return constant(static_cast<int64_t>(mag));
      return mag == 1
                 ? emit(t)
                 : MulOp::create(b, loc, b.getI64Type(),
                                 constant(static_cast<int64_t>(mag)), emit(t));
    };
    auto accumulate = [&](int64_t c, const Expr *t) {
      Value v = magnitude(c, t);
      if (!acc)
        acc = c < 0 ? SubOp::create(b, loc, b.getI64Type(), constant(0), v) : v;
      else
        acc = c < 0 ? Value(SubOp::create(b, loc, b.getI64Type(), acc, v))
                    : Value(AddOp::create(b, loc, b.getI64Type(), acc, v));
    };
    for (auto &[c, t] : parts)
      accumulate(c, t);
    if (offset != 0)
      accumulate(offset, nullptr);
    return acc;
  }

  Value build(const Pred *p) {
    switch (p->getKind()) {
    case PredKind::True:
    case PredKind::False:
      return ConstantOp::create(b, loc, b.getI1Type(),
                                b.getBoolAttr(p->isTrue()));
    case PredKind::Cmp:
      return CmpOp::create(b, loc, b.getI1Type(),
                           toCmpPredicate(p->getCmpKind()), emit(p->getLHS()),
                           emit(p->getRHS()));
    case PredKind::And:
    case PredKind::Or:
      return emitAll(p->getKind(), p->getOperands());
    case PredKind::Not:
      return NotOp::create(b, loc, b.getI1Type(), emit(p->getOperands()[0]));
    case PredKind::Any:
      llvm_unreachable("unions are unrolled before predicates are exported");
    }
    llvm_unreachable("unknown predicate kind");
  }

  OpBuilder &b;
  Location loc;
};

/// Replaces the body of `region` by a fresh block filled by `fill`.
template <typename Fn> void rebuild(Region &region, Location loc, Fn fill) {
  Block *old = &region.front();
  auto *fresh = new Block();
  region.push_back(fresh);
  OpBuilder b = OpBuilder::atBlockEnd(fresh);
  Exporter exporter(b, loc);
  fill(b, exporter);
  old->dropAllDefinedValueUses();
  old->dropAllReferences();
  old->erase();
}
} // namespace

void mlir::cmask::exportDNF(Region &rule, const ::cmask::DNF &dnf,
                            Location loc) {
  rebuild(rule, loc, [&](OpBuilder &b, Exporter &ex) {
    llvm::SmallVector<Value, 4> disjuncts;
    for (const ::cmask::Conjunct &c : dnf.conjuncts)
      disjuncts.push_back(c.empty()
                              ? Value(ConstantOp::create(b, loc, b.getI1Type(),
                                                         b.getBoolAttr(true)))
                              : ex.emitAll(PredKind::And, c));
    Value result = disjuncts.empty()
                       ? Value(ConstantOp::create(b, loc, b.getI1Type(),
                                                  b.getBoolAttr(false)))
                       : Value(OrOp::create(b, loc, b.getI1Type(), disjuncts));
    YieldOp::create(b, loc, result);
  });
}

void mlir::cmask::exportSlots(Region &rule, llvm::ArrayRef<Slot> slots,
                              Location loc) {
  rebuild(rule, loc, [&](OpBuilder &b, Exporter &ex) {
    llvm::SmallVector<Value, 4> values;
    for (const Slot &s : slots) {
      Value lo = ex.emit(s.lo), hi = ex.emit(s.hi), cond = ex.emit(s.cond);
      values.push_back(SlotOp::create(b, loc, lo, hi, cond));
    }
    SlotsOp::create(b, loc, values);
  });
}

InFlightDiagnostic mlir::cmask::emitAnalysisError(llvm::Error error,
                                                  Operation *fallback) {
  Operation *at = fallback;
  std::string message;
  llvm::handleAllErrors(
      std::move(error),
      [&](const ::cmask::AnalysisError &e) {
        if (e.getOrigin())
          at = static_cast<Operation *>(const_cast<void *>(e.getOrigin()));
        message = e.getMessage();
      },
      [&](const llvm::ErrorInfoBase &e) { message = e.message(); });
  return at->emitError(message);
}
