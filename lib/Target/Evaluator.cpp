//===- Evaluator.cpp - Evaluate a MaskSpec on concrete metadata -----------===//
//
// A region body is compiled once into a flat instruction list (one register
// per op result) and run per row or per (row, key) pair, fast enough to
// evaluate masks element by element in the differential tests.
//
//===----------------------------------------------------------------------===//

#include "cmask/Target/Evaluator.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::cmask;

//===----------------------------------------------------------------------===//
// Integer semantics (independent of the Analysis library on purpose)
//===----------------------------------------------------------------------===//

static int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
static int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) -
                              static_cast<uint64_t>(b));
}
static int64_t wrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) *
                              static_cast<uint64_t>(b));
}
static int64_t pyFloorDiv(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return wrapSub(0, a);
  int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
static int64_t pyMod(int64_t a, int64_t b) {
  if (b == 0 || b == -1)
    return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static int64_t floorSqrt(int64_t a) {
  if (a <= 0)
    return 0;
  uint64_t x = static_cast<uint64_t>(a);
  uint64_t s = static_cast<uint64_t>(std::sqrt(static_cast<long double>(x)));
  while (s * s > x)
    --s;
  while ((s + 1) * (s + 1) <= x)
    ++s;
  return static_cast<int64_t>(s);
}

//===----------------------------------------------------------------------===//
// Compiled regions
//===----------------------------------------------------------------------===//

namespace mlir::cmask {
/// A region body as a flat instruction list, one register per result.
class CompiledRegion {
public:
  enum class Kind : uint8_t {
    Const,
    Var,
    Meta,
    Lookup,
    Seg,
    SegStart,
    SegEnd,
    Add,
    Sub,
    Mul,
    FloorDiv,
    Mod,
    Min,
    Max,
    Isqrt,
    Select,
    Cmp,
    And,
    Or,
    Not,
    Any,
    UnionArg,
    Slot
  };
  struct Instr {
    Kind kind;
    int64_t imm = 0, imm2 = 0; // literal / builtin / predicate / bounds
    int32_t a = -1, b = -1, c = -1;
    std::vector<int32_t> list; // and/or operands
    int32_t end = 0;           // any: one past its body
    std::string metadata;
    // Resolved per sequence:
    int64_t scalar = 0;
    const std::vector<int64_t> *values = nullptr;
    const std::vector<int64_t> *bounds = nullptr;
  };

  explicit CompiledRegion(Region &region) {
    compileBlock(region.front());
    regs.resize(code.size());
  }

  void resolve(const BatchMetadata &batch, int64_t seq) {
    static const std::vector<int64_t> none;
    for (Instr &in : code) {
      if (in.metadata.empty())
        continue;
      if (auto it = batch.scalars.find(in.metadata); it != batch.scalars.end())
        in.scalar = it->second;
      if (auto it = batch.perSequence.find(in.metadata);
          it != batch.perSequence.end())
        in.values = &it->second;
      if (auto it = batch.offsets.find(in.metadata); it != batch.offsets.end())
        in.bounds = &it->second[seq];
      else
        in.bounds = &none;
    }
    const BatchMetadata::Sequence &s = batch.sequences[seq];
    vars[0] = 0;
    vars[2] = seq;
    vars[3] = s.qLen;
    vars[4] = s.kLen;
  }

  /// Runs the body for row i and key j (j is ignored by j-free bodies).
  void run(int64_t i, int64_t j) {
    vars[0] = i;
    vars[1] = j;
    exec(0, static_cast<int32_t>(code.size()));
  }

  int64_t result() const { return regs[resultReg]; }
  const std::vector<int32_t> &slotRegs() const { return slots; }
  const Instr &instr(int32_t k) const { return code[k]; }
  int64_t reg(int32_t k) const { return regs[k]; }
  int64_t kLen() const { return vars[4]; }

private:
  int32_t add(Instr in) {
    code.push_back(std::move(in));
    return static_cast<int32_t>(code.size() - 1);
  }

  void compileBlock(Block &block) {
    for (Operation &op : block)
      compileOp(&op);
  }

  void compileOp(Operation *op) {
    auto r = [&](Value v) { return regOf.lookup(v); };
    auto bin = [&](Kind k, Value x, Value y) {
      Instr in{k};
      in.a = r(x);
      in.b = r(y);
      return add(std::move(in));
    };
    auto meta = [&](Kind k, llvm::StringRef name, Value arg) {
      Instr in{k};
      in.metadata = name.str();
      if (arg)
        in.a = r(arg);
      return add(std::move(in));
    };
    int32_t reg = -1;
    llvm::TypeSwitch<Operation *>(op)
        .Case([&](ConstantOp c) {
          Instr in{Kind::Const};
          in.imm = cast<IntegerAttr>(c.getValue()).getValue().getSExtValue();
          if (c.getType().isInteger(1))
            in.imm = in.imm != 0;
          reg = add(std::move(in));
        })
        .Case([&](VarOp v) {
          Instr in{Kind::Var};
          in.imm = static_cast<int64_t>(v.getKind());
          reg = add(std::move(in));
        })
        .Case(
            [&](MetaOp o) { reg = meta(Kind::Meta, o.getMetadata(), Value()); })
        .Case([&](LookupOp o) {
          reg = meta(Kind::Lookup, o.getMetadata(), o.getIndex());
        })
        .Case([&](SegOp o) {
          reg = meta(Kind::Seg, o.getMetadata(), o.getPosition());
        })
        .Case([&](SegStartOp o) {
          reg = meta(Kind::SegStart, o.getMetadata(), o.getSegment());
        })
        .Case([&](SegEndOp o) {
          reg = meta(Kind::SegEnd, o.getMetadata(), o.getSegment());
        })
        .Case([&](AddOp o) { reg = bin(Kind::Add, o.getLhs(), o.getRhs()); })
        .Case([&](SubOp o) { reg = bin(Kind::Sub, o.getLhs(), o.getRhs()); })
        .Case([&](MulOp o) { reg = bin(Kind::Mul, o.getLhs(), o.getRhs()); })
        .Case([&](FloorDivOp o) {
          reg = bin(Kind::FloorDiv, o.getLhs(), o.getRhs());
        })
        .Case([&](ModOp o) { reg = bin(Kind::Mod, o.getLhs(), o.getRhs()); })
        .Case([&](MinOp o) { reg = bin(Kind::Min, o.getLhs(), o.getRhs()); })
        .Case([&](MaxOp o) { reg = bin(Kind::Max, o.getLhs(), o.getRhs()); })
        .Case([&](IsqrtOp o) {
          reg = bin(Kind::Isqrt, o.getOperand(), o.getOperand());
        })
        .Case([&](SelectOp o) {
          Instr in{Kind::Select};
          in.a = r(o.getCond());
          in.b = r(o.getTrueValue());
          in.c = r(o.getFalseValue());
          reg = add(std::move(in));
        })
        .Case([&](CmpOp o) {
          reg = bin(Kind::Cmp, o.getLhs(), o.getRhs());
          code[reg].imm = static_cast<int64_t>(o.getPredicate());
        })
        .Case([&](AndOp o) {
          Instr in{Kind::And};
          for (Value v : o.getOperands())
            in.list.push_back(r(v));
          reg = add(std::move(in));
        })
        .Case([&](OrOp o) {
          Instr in{Kind::Or};
          for (Value v : o.getOperands())
            in.list.push_back(r(v));
          reg = add(std::move(in));
        })
        .Case([&](NotOp o) {
          reg = bin(Kind::Not, o.getOperand(), o.getOperand());
        })
        .Case([&](AnyOp o) {
          Instr in{Kind::Any};
          in.imm = o.getLower();
          in.imm2 = o.getUpper();
          reg = add(std::move(in));
          regOf[o.getInductionVar()] = add(Instr{Kind::UnionArg});
          Block &body = o.getBody().front();
          compileBlock(body);
          code[reg].a = r(cast<YieldOp>(body.getTerminator()).getValue());
          code[reg].end = static_cast<int32_t>(code.size());
        })
        .Case([&](SlotOp o) {
          Instr in{Kind::Slot};
          in.a = r(o.getLo());
          in.b = r(o.getHi());
          in.c = r(o.getCond());
          reg = add(std::move(in));
        })
        .Case([&](YieldOp o) {
          if (!isa<AnyOp>(o->getParentOp()))
            resultReg = r(o.getValue());
        })
        .Case([&](SlotsOp o) {
          for (Value v : o.getSlots())
            slots.push_back(r(v));
        });
    if (reg >= 0 && op->getNumResults() == 1)
      regOf[op->getResult(0)] = reg;
  }

  int64_t length() const { return std::max(vars[3], vars[4]); }

  static int64_t boundary(const std::vector<int64_t> &bounds, int64_t k,
                          int64_t length) {
    if (k < 0)
      return 0;
    if (k >= static_cast<int64_t>(bounds.size()))
      return length;
    return bounds[k];
  }

  void exec(int32_t from, int32_t to) {
    for (int32_t k = from; k < to; ++k) {
      Instr &in = code[k];
      int64_t x = in.a >= 0 ? regs[in.a] : 0;
      int64_t y = in.b >= 0 ? regs[in.b] : 0;
      int64_t &out = regs[k];
      switch (in.kind) {
      case Kind::Const:
        out = in.imm;
        break;
      case Kind::Var:
        out = vars[in.imm];
        break;
      case Kind::Meta:
        out = in.scalar;
        break;
      case Kind::Lookup:
        out =
            (x >= 0 && in.values && x < static_cast<int64_t>(in.values->size()))
                ? (*in.values)[x]
                : 0;
        break;
      case Kind::Seg:
        out = std::count_if(in.bounds->begin(), in.bounds->end(),
                            [&](int64_t o) { return o <= x; });
        break;
      case Kind::SegStart:
        out = boundary(*in.bounds, wrapSub(x, 1), length());
        break;
      case Kind::SegEnd:
        out = boundary(*in.bounds, x, length());
        break;
      case Kind::Add:
        out = wrapAdd(x, y);
        break;
      case Kind::Sub:
        out = wrapSub(x, y);
        break;
      case Kind::Mul:
        out = wrapMul(x, y);
        break;
      case Kind::FloorDiv:
        out = pyFloorDiv(x, y);
        break;
      case Kind::Mod:
        out = pyMod(x, y);
        break;
      case Kind::Min:
        out = std::min(x, y);
        break;
      case Kind::Max:
        out = std::max(x, y);
        break;
      case Kind::Isqrt:
        out = floorSqrt(x);
        break;
      case Kind::Select:
        out = x ? y : regs[in.c];
        break;
      case Kind::Cmp:
        switch (static_cast<CmpPredicate>(in.imm)) {
        case CmpPredicate::eq:
          out = x == y;
          break;
        case CmpPredicate::ne:
          out = x != y;
          break;
        case CmpPredicate::lt:
          out = x < y;
          break;
        case CmpPredicate::le:
          out = x <= y;
          break;
        case CmpPredicate::gt:
          out = x > y;
          break;
        case CmpPredicate::ge:
          out = x >= y;
          break;
        }
        break;
      case Kind::And:
        out = std::all_of(in.list.begin(), in.list.end(),
                          [&](int32_t r) { return regs[r] != 0; });
        break;
      case Kind::Or:
        out = std::any_of(in.list.begin(), in.list.end(),
                          [&](int32_t r) { return regs[r] != 0; });
        break;
      case Kind::Not:
        out = !x;
        break;
      case Kind::Any: {
        bool found = false;
        for (int64_t d = in.imm; d <= in.imm2 && !found; ++d) {
          regs[k + 1] = d;
          exec(k + 2, in.end);
          found = regs[in.a] != 0;
        }
        out = found;
        k = in.end - 1;
        break;
      }
      case Kind::UnionArg:
        break;
      case Kind::Slot:
        break;
      }
    }
  }

  std::vector<Instr> code;
  std::vector<int64_t> regs;
  llvm::DenseMap<Value, int32_t> regOf;
  int32_t resultReg = -1;
  std::vector<int32_t> slots;
  int64_t vars[5] = {0, 0, 0, 0, 0}; // i, j, b, q_len, k_len (Builtin order)
};
} // namespace mlir::cmask

//===----------------------------------------------------------------------===//
// SpecEvaluator
//===----------------------------------------------------------------------===//

SpecEvaluator::SpecEvaluator(SpecOp spec) {
  for (RegionOp region : spec.getRegions()) {
    guards.push_back(std::make_unique<CompiledRegion>(region.getGuard()));
    rules.push_back(std::make_unique<CompiledRegion>(region.getRule()));
  }
}

SpecEvaluator::~SpecEvaluator() = default;

void SpecEvaluator::setSequence(const BatchMetadata &batchMeta, int64_t seq) {
  batch = &batchMeta;
  b = seq;
  for (auto &g : guards)
    g->resolve(batchMeta, seq);
  for (auto &r : rules)
    r->resolve(batchMeta, seq);
}

int SpecEvaluator::regionFor(int64_t i) {
  for (size_t k = 0; k < guards.size(); ++k) {
    guards[k]->run(i, 0);
    if (guards[k]->result())
      return static_cast<int>(k);
  }
  return -1;
}

bool SpecEvaluator::sees(int region, int64_t i, int64_t j) {
  CompiledRegion &rule = *rules[region];
  rule.run(i, j);
  return rule.result() != 0;
}

void SpecEvaluator::slots(
    int region, int64_t i,
    llvm::SmallVectorImpl<std::pair<int64_t, int64_t>> &out) {
  CompiledRegion &rule = *rules[region];
  rule.run(i, 0);
  int64_t kLen = rule.kLen();
  auto clamp = [&](int64_t v) {
    return std::min(std::max<int64_t>(v, 0), kLen);
  };
  for (int32_t reg : rule.slotRegs()) {
    const CompiledRegion::Instr &slot = rule.instr(reg);
    int64_t lo = clamp(rule.reg(slot.a)), hi = clamp(rule.reg(slot.b));
    if (!rule.reg(slot.c) || lo >= hi)
      out.push_back({0, 0});
    else
      out.push_back({lo, hi});
  }
}

BatchMetadata mlir::cmask::randomSmallBatch(SpecOp spec, std::mt19937_64 &rng,
                                            int64_t maxLen, bool varyKeys) {
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  BatchMetadata batch;
  int64_t numSeqs = uniform(1, 3);
  for (int64_t b = 0; b < numSeqs; ++b) {
    int64_t q = uniform(0, maxLen), k = varyKeys ? uniform(0, maxLen) : q;
    batch.sequences.push_back({q, k});
  }
  for (MetadataOp m : spec.getMetadata()) {
    llvm::StringRef name = m.getSymName();
    switch (m.getRole()) {
    case MetadataRole::scalar:
      batch.scalars[name] = uniform(-2, maxLen + 2);
      break;
    case MetadataRole::per_sequence:
      for (int64_t b = 0; b < numSeqs; ++b)
        batch.perSequence[name].push_back(uniform(-2, maxLen + 2));
      break;
    case MetadataRole::offsets:
      for (const auto &seq : batch.sequences) {
        std::vector<int64_t> bounds(uniform(0, 4));
        for (int64_t &v : bounds)
          v = uniform(0, std::max(seq.qLen, seq.kLen));
        llvm::sort(bounds);
        batch.offsets[name].push_back(bounds);
      }
      break;
    }
  }
  return batch;
}
