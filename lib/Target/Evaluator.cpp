//===- Evaluator.cpp - Evaluate a MaskSpec on concrete metadata -----------===//
//
// A region body is compiled once into a flat instruction list (one register
// per op result) and run per row or per (row, key) pair, fast enough to
// evaluate masks element by element in the differential tests.
//
//===----------------------------------------------------------------------===//

#include "cmask/Target/Evaluator.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::cmask;

//===----------------------------------------------------------------------===//
// Integer semantics (independent of the Analysis library on purpose)
//===----------------------------------------------------------------------===//

static int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
static int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
static int64_t wrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
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
// Metadata files
//===----------------------------------------------------------------------===//

static llvm::Error metadataError(llvm::StringRef where, const llvm::Twine &field,
                                 const llvm::Twine &message) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      (where + (where.empty() ? "" : ": ") + field + ": " + message).str());
}

/// Metadata values and lengths are int32, as in the device buffers the
/// runtime reads; that keeps rule arithmetic far from 64-bit overflow, which
/// the compiler's rewrites assume never happens.
static std::optional<int64_t> asInt(const llvm::json::Value &v) {
  std::optional<int64_t> n = v.getAsInteger();
  if (n && (*n < INT32_MIN || *n > INT32_MAX))
    return std::nullopt;
  return n;
}

llvm::Expected<BatchMetadata>
mlir::cmask::parseBatchMetadata(const llvm::json::Value &json, SpecOp spec,
                                llvm::StringRef where) {
  BatchMetadata batch;
  const llvm::json::Object *root = json.getAsObject();
  if (!root)
    return metadataError(where, "batch", "must be a JSON object with "
                                         "\"sequences\" and \"metadata\"");
  for (auto &kv : *root)
    if (kv.first != "sequences" && kv.first != "metadata")
      return metadataError(where, kv.first.str(),
                           "unknown key; a batch has only \"sequences\" and "
                           "\"metadata\"");
  const llvm::json::Array *seqs = root->getArray("sequences");
  if (!seqs)
    return metadataError(where, "sequences",
                         "missing or not an array of {\"q_len\", \"k_len\"}");
  for (auto [b, entry] : llvm::enumerate(*seqs)) {
    std::string field = "sequences[" + std::to_string(b) + "]";
    const llvm::json::Object *obj = entry.getAsObject();
    if (!obj)
      return metadataError(where, field, "must be an object with q_len and k_len");
    BatchMetadata::Sequence seq;
    for (auto [key, dst] : {std::pair<const char *, int64_t *>{"q_len", &seq.qLen},
                            {"k_len", &seq.kLen}}) {
      const llvm::json::Value *v = obj->get(key);
      std::optional<int64_t> n = v ? asInt(*v) : std::nullopt;
      if (!n)
        return metadataError(where, field + "." + key,
                             "missing or not a 32-bit integer");
      if (*n < 0)
        return metadataError(where, field + "." + key,
                             "must not be negative (got " + llvm::Twine(*n) + ")");
      *dst = *n;
    }
    for (auto &kv : *obj)
      if (kv.first != "q_len" && kv.first != "k_len")
        return metadataError(where, field + "." + kv.first.str(),
                             "unknown key; a sequence has only q_len and k_len");
    batch.sequences.push_back(seq);
  }

  const llvm::json::Object *meta = root->getObject("metadata");
  llvm::json::Object empty;
  if (!meta) {
    if (root->get("metadata"))
      return metadataError(where, "metadata", "must be an object");
    meta = &empty;
  }
  llvm::StringMap<MetadataRole> declared;
  for (MetadataOp decl : spec.getMetadata())
    declared[decl.getSymName()] = decl.getRole();
  for (auto &kv : *meta)
    if (!declared.count(kv.first.str()))
      return metadataError(where, "metadata." + kv.first.str(),
                           "is not declared by spec @" + spec.getSymName());
  size_t numSeqs = batch.sequences.size();
  for (MetadataOp decl : spec.getMetadata()) {
    llvm::StringRef name = decl.getSymName();
    std::string field = ("metadata." + name).str();
    const llvm::json::Value *v = meta->get(name);
    llvm::StringRef role = stringifyMetadataRole(decl.getRole());
    if (!v)
      return metadataError(where, field,
                           ("missing (declared as " + role + ")").str());
    switch (decl.getRole()) {
    case MetadataRole::scalar: {
      auto n = asInt(*v);
      if (!n)
        return metadataError(where, field, "is scalar metadata: must be a 32-bit integer");
      batch.scalars[name] = *n;
      break;
    }
    case MetadataRole::per_sequence: {
      const llvm::json::Array *arr = v->getAsArray();
      if (!arr)
        return metadataError(where, field,
                             "is per_sequence metadata: must be an array "
                             "with one integer per sequence");
      if (arr->size() != numSeqs)
        return metadataError(where, field,
                             "has " + llvm::Twine(arr->size()) +
                                 " entries but the batch has " +
                                 llvm::Twine(numSeqs) + " sequences");
      std::vector<int64_t> values;
      for (auto [k, e] : llvm::enumerate(*arr)) {
        auto n = asInt(e);
        if (!n)
          return metadataError(where, field + "[" + llvm::Twine(k) + "]",
                               "must be a 32-bit integer");
        values.push_back(*n);
      }
      batch.perSequence[name] = std::move(values);
      break;
    }
    case MetadataRole::offsets: {
      const llvm::json::Array *arr = v->getAsArray();
      if (!arr)
        return metadataError(where, field,
                             "is offsets metadata: must be an array with one "
                             "array of boundaries per sequence");
      if (arr->size() != numSeqs)
        return metadataError(where, field,
                             "has " + llvm::Twine(arr->size()) +
                                 " entries but the batch has " +
                                 llvm::Twine(numSeqs) + " sequences");
      std::vector<std::vector<int64_t>> lists;
      for (auto [b, e] : llvm::enumerate(*arr)) {
        std::string sub = field + "[" + std::to_string(b) + "]";
        const llvm::json::Array *inner = e.getAsArray();
        if (!inner)
          return metadataError(where, sub,
                               "must be an array of boundaries (integers)");
        int64_t length =
            std::max(batch.sequences[b].qLen, batch.sequences[b].kLen);
        std::vector<int64_t> bounds;
        for (auto [k, x] : llvm::enumerate(*inner)) {
          std::string at = sub + "[" + std::to_string(k) + "]";
          auto n = asInt(x);
          if (!n)
            return metadataError(where, at, "must be a 32-bit integer");
          if (*n < 0)
            return metadataError(where, at,
                                 "offsets must not be negative (got " +
                                     llvm::Twine(*n) + ")");
          if (*n > length)
            return metadataError(where, at,
                                 "offset " + llvm::Twine(*n) +
                                     " is past the sequence's length " +
                                     llvm::Twine(length));
          if (!bounds.empty() && *n < bounds.back())
            return metadataError(where, at,
                                 "offsets must be non-decreasing (" +
                                     llvm::Twine(*n) + " after " +
                                     llvm::Twine(bounds.back()) + ")");
          bounds.push_back(*n);
        }
        lists.push_back(std::move(bounds));
      }
      batch.offsets[name] = std::move(lists);
      break;
    }
    }
  }
  return batch;
}

llvm::Expected<std::vector<BatchMetadata>>
mlir::cmask::readMetadataFile(llvm::StringRef path, SpecOp spec,
                              bool &isArray) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(),
                                   "cannot read the metadata file: " +
                                       buffer.getError().message());
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "not valid JSON: " +
            llvm::toString(json.takeError()));
  std::vector<BatchMetadata> batches;
  isArray = json->getAsArray() != nullptr;
  if (!isArray) {
    auto batch = parseBatchMetadata(*json, spec, "");
    if (!batch)
      return batch.takeError();
    batches.push_back(std::move(*batch));
    return batches;
  }
  for (auto [k, entry] : llvm::enumerate(*json->getAsArray())) {
    auto batch = parseBatchMetadata(entry, spec,
                                    ("batch " + llvm::Twine(k)).str());
    if (!batch)
      return batch.takeError();
    batches.push_back(std::move(*batch));
  }
  return batches;
}

//===----------------------------------------------------------------------===//
// Compiled regions
//===----------------------------------------------------------------------===//

namespace mlir::cmask {
/// A region body as a flat instruction list, one register per result.
class CompiledRegion {
public:
  enum class Kind : uint8_t {
    Const, Var, Meta, Lookup, Seg, SegStart, SegEnd, Add, Sub, Mul, FloorDiv,
    Mod, Min, Max, Isqrt, Select, Cmp, And, Or, Not, Any, UnionArg, Slot
  };
  struct Instr {
    Kind kind;
    int64_t imm = 0, imm2 = 0; // literal / builtin / predicate / bounds
    int32_t a = -1, b = -1, c = -1;
    std::vector<int32_t> list;  // and/or operands
    int32_t end = 0;            // any: one past its body
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
        .Case([&](MetaOp o) { reg = meta(Kind::Meta, o.getMetadata(), Value()); })
        .Case([&](LookupOp o) { reg = meta(Kind::Lookup, o.getMetadata(), o.getIndex()); })
        .Case([&](SegOp o) { reg = meta(Kind::Seg, o.getMetadata(), o.getPosition()); })
        .Case([&](SegStartOp o) {
          reg = meta(Kind::SegStart, o.getMetadata(), o.getSegment());
        })
        .Case([&](SegEndOp o) { reg = meta(Kind::SegEnd, o.getMetadata(), o.getSegment()); })
        .Case([&](AddOp o) { reg = bin(Kind::Add, o.getLhs(), o.getRhs()); })
        .Case([&](SubOp o) { reg = bin(Kind::Sub, o.getLhs(), o.getRhs()); })
        .Case([&](MulOp o) { reg = bin(Kind::Mul, o.getLhs(), o.getRhs()); })
        .Case([&](FloorDivOp o) { reg = bin(Kind::FloorDiv, o.getLhs(), o.getRhs()); })
        .Case([&](ModOp o) { reg = bin(Kind::Mod, o.getLhs(), o.getRhs()); })
        .Case([&](MinOp o) { reg = bin(Kind::Min, o.getLhs(), o.getRhs()); })
        .Case([&](MaxOp o) { reg = bin(Kind::Max, o.getLhs(), o.getRhs()); })
        .Case([&](IsqrtOp o) { reg = bin(Kind::Isqrt, o.getOperand(), o.getOperand()); })
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
        .Case([&](NotOp o) { reg = bin(Kind::Not, o.getOperand(), o.getOperand()); })
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
      case Kind::Const: out = in.imm; break;
      case Kind::Var: out = vars[in.imm]; break;
      case Kind::Meta: out = in.scalar; break;
      case Kind::Lookup:
        out = (x >= 0 && in.values && x < static_cast<int64_t>(in.values->size()))
                  ? (*in.values)[x]
                  : 0;
        break;
      case Kind::Seg:
        out = std::count_if(in.bounds->begin(), in.bounds->end(),
                            [&](int64_t o) { return o <= x; });
        break;
      case Kind::SegStart: out = boundary(*in.bounds, wrapSub(x, 1), length()); break;
      case Kind::SegEnd: out = boundary(*in.bounds, x, length()); break;
      case Kind::Add: out = wrapAdd(x, y); break;
      case Kind::Sub: out = wrapSub(x, y); break;
      case Kind::Mul: out = wrapMul(x, y); break;
      case Kind::FloorDiv: out = pyFloorDiv(x, y); break;
      case Kind::Mod: out = pyMod(x, y); break;
      case Kind::Min: out = std::min(x, y); break;
      case Kind::Max: out = std::max(x, y); break;
      case Kind::Isqrt: out = floorSqrt(x); break;
      case Kind::Select: out = x ? y : regs[in.c]; break;
      case Kind::Cmp:
        switch (static_cast<CmpPredicate>(in.imm)) {
        case CmpPredicate::eq: out = x == y; break;
        case CmpPredicate::ne: out = x != y; break;
        case CmpPredicate::lt: out = x < y; break;
        case CmpPredicate::le: out = x <= y; break;
        case CmpPredicate::gt: out = x > y; break;
        case CmpPredicate::ge: out = x >= y; break;
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
      case Kind::Not: out = !x; break;
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
      case Kind::UnionArg: break;
      case Kind::Slot: break;
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

void SpecEvaluator::slots(int region, int64_t i,
                          llvm::SmallVectorImpl<std::pair<int64_t, int64_t>> &out) {
  CompiledRegion &rule = *rules[region];
  rule.run(i, 0);
  int64_t kLen = rule.kLen();
  auto clamp = [&](int64_t v) { return std::min(std::max<int64_t>(v, 0), kLen); };
  for (int32_t reg : rule.slotRegs()) {
    const CompiledRegion::Instr &slot = rule.instr(reg);
    int64_t lo = clamp(rule.reg(slot.a)), hi = clamp(rule.reg(slot.b));
    if (!rule.reg(slot.c) || lo >= hi)
      out.push_back({0, 0});
    else
      out.push_back({lo, hi});
  }
}
