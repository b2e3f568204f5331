//===- Expr.cpp - Integer expressions and predicates of a rule ------------===//
//
// Uniquing and simplifying constructors of the analysis' expressions and
// predicates, and their printers.
//
//===----------------------------------------------------------------------===//

#include "cmask/Analysis/Expr.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace cmask;

//===----------------------------------------------------------------------===//
// Integer semantics
//===----------------------------------------------------------------------===//

int64_t arith::add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
int64_t arith::sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) -
                              static_cast<uint64_t>(b));
}
int64_t arith::mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) *
                              static_cast<uint64_t>(b));
}
int64_t arith::floorDiv(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return sub(0, a);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0)))
    --q;
  return q;
}
int64_t arith::mod(int64_t a, int64_t b) {
  if (b == 0 || b == -1)
    return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}
int64_t arith::isqrt(int64_t a) {
  if (a <= 0)
    return 0;
  auto s = static_cast<uint64_t>(std::sqrt(static_cast<long double>(a)));
  auto x = static_cast<uint64_t>(a);
  while (s * s > x)
    --s;
  while ((s + 1) * (s + 1) <= x)
    ++s;
  return static_cast<int64_t>(s);
}

//===----------------------------------------------------------------------===//
// Comparison kinds
//===----------------------------------------------------------------------===//

CmpKind cmask::negate(CmpKind kind) {
  switch (kind) {
  case CmpKind::EQ:
    return CmpKind::NE;
  case CmpKind::NE:
    return CmpKind::EQ;
  case CmpKind::LT:
    return CmpKind::GE;
  case CmpKind::LE:
    return CmpKind::GT;
  case CmpKind::GT:
    return CmpKind::LE;
  case CmpKind::GE:
    return CmpKind::LT;
  }
  llvm_unreachable("unknown comparison");
}

CmpKind cmask::swapOperands(CmpKind kind) {
  switch (kind) {
  case CmpKind::EQ:
    return CmpKind::EQ;
  case CmpKind::NE:
    return CmpKind::NE;
  case CmpKind::LT:
    return CmpKind::GT;
  case CmpKind::LE:
    return CmpKind::GE;
  case CmpKind::GT:
    return CmpKind::LT;
  case CmpKind::GE:
    return CmpKind::LE;
  }
  llvm_unreachable("unknown comparison");
}

llvm::StringRef cmask::spelling(CmpKind kind) {
  switch (kind) {
  case CmpKind::EQ:
    return "==";
  case CmpKind::NE:
    return "!=";
  case CmpKind::LT:
    return "<";
  case CmpKind::LE:
    return "<=";
  case CmpKind::GT:
    return ">";
  case CmpKind::GE:
    return ">=";
  }
  llvm_unreachable("unknown comparison");
}

bool cmask::holds(CmpKind kind, int64_t a, int64_t b) {
  switch (kind) {
  case CmpKind::EQ:
    return a == b;
  case CmpKind::NE:
    return a != b;
  case CmpKind::LT:
    return a < b;
  case CmpKind::LE:
    return a <= b;
  case CmpKind::GT:
    return a > b;
  case CmpKind::GE:
    return a >= b;
  }
  llvm_unreachable("unknown comparison");
}

//===----------------------------------------------------------------------===//
// Profiles and printing
//===----------------------------------------------------------------------===//

void Expr::Profile(llvm::FoldingSetNodeID &fid) const {
  fid.AddInteger(static_cast<unsigned>(kind));
  fid.AddInteger(value);
  fid.AddString(name);
  fid.AddPointer(cond);
  for (const Expr *op : operands)
    fid.AddPointer(op);
}

void Pred::Profile(llvm::FoldingSetNodeID &fid) const {
  fid.AddInteger(static_cast<unsigned>(kind));
  fid.AddInteger(static_cast<unsigned>(cmp));
  fid.AddPointer(exprs[0]);
  fid.AddPointer(exprs[1]);
  fid.AddInteger(unionVar);
  fid.AddInteger(lower);
  fid.AddInteger(upper);
  for (const Pred *op : operands)
    fid.AddPointer(op);
}

static bool isAtomic(const Expr *e) {
  switch (e->getKind()) {
  case ExprKind::Add:
  case ExprKind::Mul:
  case ExprKind::FloorDiv:
  case ExprKind::Mod:
    return false;
  case ExprKind::Const:
    return e->getValue() >= 0;
  default:
    return true;
  }
}

static std::string paren(const Expr *e) {
  return isAtomic(e) ? e->str() : "(" + e->str() + ")";
}

static llvm::StringRef varName(Var v) {
  switch (v) {
  case Var::I:
    return "i";
  case Var::J:
    return "j";
  case Var::B:
    return "b";
  case Var::QLen:
    return "q_len";
  case Var::KLen:
    return "k_len";
  }
  llvm_unreachable("unknown variable");
}

std::string Expr::str() const {
  std::string out;
  llvm::raw_string_ostream os(out);
  auto list = [&](llvm::StringRef fn) {
    os << fn << "(";
    llvm::interleaveComma(operands, os, [&](const Expr *e) { os << e->str(); });
    os << ")";
  };
  switch (kind) {
  case ExprKind::Const:
    os << value;
    break;
  case ExprKind::Var:
    os << varName(getVar());
    break;
  case ExprKind::UnionVar:
    os << "d" << value;
    break;
  case ExprKind::Scalar:
    os << name;
    break;
  case ExprKind::Lookup:
    os << name << "[" << operands[0]->str() << "]";
    break;
  case ExprKind::Seg:
    os << "seg(" << name << ", " << operands[0]->str() << ")";
    break;
  case ExprKind::SegStart:
    os << "seg_start(" << name << ", " << operands[0]->str() << ")";
    break;
  case ExprKind::SegEnd:
    os << "seg_end(" << name << ", " << operands[0]->str() << ")";
    break;
  case ExprKind::Add: {
    bool first = true;
    for (const Expr *op : operands) {
      int64_t coeff = 1;
      const Expr *term = op;
      if (op->kind == ExprKind::Mul && op->operands[0]->isConst()) {
        coeff = op->operands[0]->value;
        term = op->operands[1];
      } else if (op->isConst()) {
        coeff = op->value;
        term = nullptr;
      }
      if (!first)
        os << (coeff < 0 ? " - " : " + ");
      else if (coeff < 0)
        os << "-";
      first = false;
      uint64_t mag = coeff < 0 ? 0 - static_cast<uint64_t>(coeff) : coeff;
      if (!term)
        os << mag;
      else if (mag == 1)
        os << paren(term);
      else
        os << mag << "*" << paren(term);
    }
    break;
  }
  case ExprKind::Mul:
    os << paren(operands[0]) << "*" << paren(operands[1]);
    break;
  case ExprKind::FloorDiv:
    os << paren(operands[0]) << " floordiv " << paren(operands[1]);
    break;
  case ExprKind::Mod:
    os << paren(operands[0]) << " mod " << paren(operands[1]);
    break;
  case ExprKind::Min:
    list("min");
    break;
  case ExprKind::Max:
    list("max");
    break;
  case ExprKind::Select:
    os << "select(" << cond->str() << ", " << operands[0]->str() << ", "
       << operands[1]->str() << ")";
    break;
  case ExprKind::Isqrt:
    os << "isqrt(" << operands[0]->str() << ")";
    break;
  }
  return out;
}

std::string Pred::str() const {
  std::string out;
  llvm::raw_string_ostream os(out);
  auto join = [&](llvm::StringRef sep) {
    os << "(";
    llvm::interleave(operands, os, [&](const Pred *p) { os << p->str(); }, sep);
    os << ")";
  };
  switch (kind) {
  case PredKind::True:
    os << "true";
    break;
  case PredKind::False:
    os << "false";
    break;
  case PredKind::Cmp:
    os << exprs[0]->str() << " " << spelling(cmp) << " " << exprs[1]->str();
    break;
  case PredKind::And:
    join(" and ");
    break;
  case PredKind::Or:
    join(" or ");
    break;
  case PredKind::Not:
    os << "not (" << operands[0]->str() << ")";
    break;
  case PredKind::Any:
    os << "any d" << unionVar << " in [" << lower << ", " << upper
       << "]: " << operands[0]->str();
    break;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// LinearForm
//===----------------------------------------------------------------------===//

int64_t LinearForm::coefficient(const Expr *term) const {
  for (auto &[t, c] : terms)
    if (t == term)
      return c;
  return 0;
}

/// a * b + c, setting `overflow` when the exact result does not fit in 64
/// bits (the result then wraps).
static int64_t mulAdd(int64_t a, int64_t b, int64_t c, bool &overflow) {
  int64_t product, sum;
  overflow |= __builtin_mul_overflow(a, b, &product);
  overflow |= __builtin_add_overflow(product, c, &sum);
  return sum;
}

/// `a + scale * b`, keeping terms sorted by id and dropping zeros; sets
/// `overflow` when a coefficient or the constant leaves 64 bits.
static LinearForm combine(const LinearForm &a, const LinearForm &b,
                          int64_t scale, bool &overflow) {
  LinearForm out;
  out.constant = mulAdd(scale, b.constant, a.constant, overflow);
  size_t x = 0, y = 0;
  while (x < a.terms.size() || y < b.terms.size()) {
    if (y == b.terms.size() ||
        (x < a.terms.size() &&
         a.terms[x].first->getId() < b.terms[y].first->getId())) {
      out.terms.push_back(a.terms[x++]);
    } else if (x == a.terms.size() ||
               b.terms[y].first->getId() < a.terms[x].first->getId()) {
      out.terms.push_back(
          {b.terms[y].first, mulAdd(scale, b.terms[y].second, 0, overflow)});
      ++y;
    } else {
      int64_t c = mulAdd(scale, b.terms[y].second, a.terms[x].second, overflow);
      if (c != 0)
        out.terms.push_back({a.terms[x].first, c});
      ++x;
      ++y;
    }
  }
  llvm::erase_if(out.terms, [](auto &t) { return t.second == 0; });
  return out;
}

//===----------------------------------------------------------------------===//
// ExprContext
//===----------------------------------------------------------------------===//

ExprContext::ExprContext() = default;
ExprContext::~ExprContext() = default;

template <typename T>
llvm::ArrayRef<T> ExprContext::copy(llvm::ArrayRef<T> values) {
  if (values.empty())
    return {};
  T *mem = allocator.Allocate<T>(values.size());
  std::uninitialized_copy(values.begin(), values.end(), mem);
  return llvm::ArrayRef<T>(mem, values.size());
}

const Expr *ExprContext::unique(Expr &proto) {
  llvm::FoldingSetNodeID fid;
  proto.Profile(fid);
  void *insertPos = nullptr;
  if (Expr *existing = exprs.FindNodeOrInsertPos(fid, insertPos))
    return existing;
  auto *node = new (allocator.Allocate<Expr>()) Expr(proto);
  node->operands = copy(proto.operands);
  if (!proto.name.empty()) {
    llvm::ArrayRef<char> chars =
        copy(llvm::ArrayRef<char>(proto.name.data(), proto.name.size()));
    node->name = llvm::StringRef(chars.data(), chars.size());
  }
  node->id = nextId++;
  node->mentionsJ = (proto.kind == ExprKind::Var && proto.getVar() == Var::J) ||
                    (proto.cond && proto.cond->dependsOnJ()) ||
                    llvm::any_of(proto.operands,
                                 [](const Expr *e) { return e->dependsOnJ(); });
  exprs.InsertNode(node, insertPos);
  return node;
}

const Expr *ExprContext::getNode(ExprKind kind,
                                 llvm::ArrayRef<const Expr *> operands,
                                 llvm::StringRef name, int64_t value,
                                 const Pred *cond) {
  Expr e;
  e.kind = kind;
  e.operands = operands;
  e.name = name;
  e.value = value;
  e.cond = cond;
  return unique(e);
}

const Pred *ExprContext::unique(Pred &proto) {
  llvm::FoldingSetNodeID fid;
  proto.Profile(fid);
  void *insertPos = nullptr;
  if (Pred *existing = preds.FindNodeOrInsertPos(fid, insertPos))
    return existing;
  auto *node = new (allocator.Allocate<Pred>()) Pred(proto);
  node->operands = copy(proto.operands);
  node->id = nextId++;
  node->mentionsJ = (proto.exprs[0] && proto.exprs[0]->dependsOnJ()) ||
                    (proto.exprs[1] && proto.exprs[1]->dependsOnJ()) ||
                    llvm::any_of(proto.operands,
                                 [](const Pred *p) { return p->dependsOnJ(); });
  preds.InsertNode(node, insertPos);
  return node;
}

const Expr *ExprContext::getConst(int64_t value) {
  return getNode(ExprKind::Const, {}, {}, value);
}

const Expr *ExprContext::getVar(Var var) {
  return getNode(ExprKind::Var, {}, {}, static_cast<int64_t>(var));
}

const Expr *ExprContext::getUnionVar(int64_t id) {
  return getNode(ExprKind::UnionVar, {}, {}, id);
}

const Expr *ExprContext::getScalar(llvm::StringRef name) {
  return getNode(ExprKind::Scalar, {}, name);
}

const Expr *ExprContext::getLookup(llvm::StringRef name, const Expr *index) {
  return getNode(ExprKind::Lookup, index, name);
}

const Expr *ExprContext::getSeg(llvm::StringRef name, const Expr *position) {
  return getNode(ExprKind::Seg, position, name);
}

const Expr *ExprContext::getSegStart(llvm::StringRef name,
                                     const Expr *segment) {
  // seg_start(s + c) is seg_end(s + c - 1): keep one spelling, so that
  // `seg(j) <= seg(i)` yields seg_end(seg(i)) and compares with it.
  LinearForm form = linearize(segment);
  if (!form.isConstant() && form.constant >= 1) {
    --form.constant;
    return getSegEnd(name, fromLinear(form));
  }
  return getNode(ExprKind::SegStart, segment, name);
}

const Expr *ExprContext::getSegEnd(llvm::StringRef name, const Expr *segment) {
  return getNode(ExprKind::SegEnd, segment, name);
}

LinearForm ExprContext::combineChecked(const LinearForm &a, const LinearForm &b,
                                       int64_t scale) {
  bool overflow = false;
  LinearForm out = combine(a, b, scale, overflow);
  if (overflow && !overflowed)
    overflowOrigin = currentOrigin;
  overflowed |= overflow;
  return out;
}

LinearForm ExprContext::linearize(const Expr *expr) {
  LinearForm form;
  switch (expr->getKind()) {
  case ExprKind::Const:
    form.constant = expr->getValue();
    return form;
  case ExprKind::Add:
    for (const Expr *op : expr->getOperands())
      form = combineChecked(form, linearize(op), 1);
    return form;
  case ExprKind::Mul:
    if (expr->getOperand(0)->isConst()) {
      LinearForm inner = linearize(expr->getOperand(1));
      return combineChecked(form, inner, expr->getOperand(0)->getValue());
    }
    break;
  default:
    break;
  }
  form.terms.push_back({expr, 1});
  return form;
}

const Expr *ExprContext::fromLinear(const LinearForm &form) {
  if (form.terms.empty())
    return getConst(form.constant);
  llvm::SmallVector<const Expr *, 4> ops;
  for (auto &[term, coeff] : form.terms) {
    if (coeff == 1) {
      ops.push_back(term);
      continue;
    }
    Expr mul;
    mul.kind = ExprKind::Mul;
    const Expr *pair[2] = {getConst(coeff), term};
    mul.operands = pair;
    ops.push_back(unique(mul));
  }
  if (form.constant != 0)
    ops.push_back(getConst(form.constant));
  if (ops.size() == 1)
    return ops.front();
  Expr add;
  add.kind = ExprKind::Add;
  add.operands = ops;
  return unique(add);
}

const Expr *ExprContext::getAdd(const Expr *lhs, const Expr *rhs) {
  return fromLinear(combineChecked(linearize(lhs), linearize(rhs), 1));
}

const Expr *ExprContext::getSub(const Expr *lhs, const Expr *rhs) {
  return fromLinear(combineChecked(linearize(lhs), linearize(rhs), -1));
}

const Expr *ExprContext::getNeg(const Expr *operand) {
  return fromLinear(combineChecked(LinearForm(), linearize(operand), -1));
}

const Expr *ExprContext::getMul(const Expr *lhs, const Expr *rhs) {
  if (rhs->isConst())
    std::swap(lhs, rhs);
  if (lhs->isConst())
    return fromLinear(
        combineChecked(LinearForm(), linearize(rhs), lhs->getValue()));
  if (rhs->getId() < lhs->getId())
    std::swap(lhs, rhs);
  return getNode(ExprKind::Mul, {lhs, rhs});
}

const Expr *ExprContext::getFloorDiv(const Expr *lhs, const Expr *rhs) {
  if (lhs->isConst() && rhs->isConst())
    return getConst(arith::floorDiv(lhs->getValue(), rhs->getValue()));
  if (rhs->isConst() && rhs->getValue() == 1)
    return lhs;
  if (rhs->isConst() && rhs->getValue() == 0)
    return getConst(0);
  if (lhs->isConst() && lhs->getValue() == 0)
    return lhs;
  return getNode(ExprKind::FloorDiv, {lhs, rhs});
}

const Expr *ExprContext::getCeilDiv(const Expr *lhs, int64_t divisor) {
  return getNeg(getFloorDiv(getNeg(lhs), getConst(divisor)));
}

const Expr *ExprContext::getMod(const Expr *lhs, const Expr *rhs) {
  if (lhs->isConst() && rhs->isConst())
    return getConst(arith::mod(lhs->getValue(), rhs->getValue()));
  if (rhs->isConst() &&
      (rhs->getValue() == 1 || rhs->getValue() == -1 || rhs->getValue() == 0))
    return getConst(0);
  return getNode(ExprKind::Mod, {lhs, rhs});
}

const Expr *ExprContext::getMinMax(ExprKind kind,
                                   llvm::ArrayRef<const Expr *> operands) {
  bool isMin = kind == ExprKind::Min;
  llvm::SmallVector<const Expr *, 4> flat;
  bool haveConst = false;
  int64_t best = 0;
  for (const Expr *op : operands) {
    llvm::ArrayRef<const Expr *> parts(op);
    if (op->getKind() == kind)
      parts = op->getOperands();
    for (const Expr *part : parts) {
      if (part->isConst()) {
        int64_t v = part->getValue();
        best = !haveConst ? v : (isMin ? std::min(best, v) : std::max(best, v));
        haveConst = true;
      } else if (!llvm::is_contained(flat, part)) {
        flat.push_back(part);
      }
    }
  }
  if (haveConst)
    flat.push_back(getConst(best));
  assert(!flat.empty() && "min/max of nothing");
  if (flat.size() == 1)
    return flat.front();
  llvm::sort(flat, [](const Expr *a, const Expr *b) {
    return a->getId() < b->getId();
  });
  return getNode(kind, flat);
}

const Expr *ExprContext::getMin(llvm::ArrayRef<const Expr *> operands) {
  return getMinMax(ExprKind::Min, operands);
}

const Expr *ExprContext::getMax(llvm::ArrayRef<const Expr *> operands) {
  return getMinMax(ExprKind::Max, operands);
}

const Expr *ExprContext::getSelect(const Pred *cond, const Expr *a,
                                   const Expr *b) {
  if (cond->isTrue() || a == b)
    return a;
  if (cond->isFalse())
    return b;
  return getNode(ExprKind::Select, {a, b}, {}, 0, cond);
}

const Expr *ExprContext::getIsqrt(const Expr *operand) {
  if (operand->isConst())
    return getConst(arith::isqrt(operand->getValue()));
  return getNode(ExprKind::Isqrt, operand);
}

//===----------------------------------------------------------------------===//
// Predicates
//===----------------------------------------------------------------------===//

const Pred *ExprContext::getTrue() {
  Pred p;
  p.kind = PredKind::True;
  return unique(p);
}

const Pred *ExprContext::getFalse() {
  Pred p;
  p.kind = PredKind::False;
  return unique(p);
}

const Pred *ExprContext::getCmp(CmpKind kind, const Expr *lhs,
                                const Expr *rhs) {
  // Compare constants directly: their difference may wrap around.
  if (lhs->isConst() && rhs->isConst())
    return getBool(holds(kind, lhs->getValue(), rhs->getValue()));
  LinearForm diff = combineChecked(linearize(lhs), linearize(rhs), -1);
  if (diff.isConstant())
    return getBool(holds(kind, diff.constant, 0));
  Pred p;
  p.kind = PredKind::Cmp;
  p.cmp = kind;
  p.exprs[0] = lhs;
  p.exprs[1] = rhs;
  return unique(p);
}

const Pred *ExprContext::getAndOr(PredKind kind,
                                  llvm::ArrayRef<const Pred *> operands) {
  bool isAnd = kind == PredKind::And;
  const Pred *absorbing = isAnd ? getFalse() : getTrue();
  llvm::SmallVector<const Pred *, 4> flat;
  for (const Pred *op : operands) {
    llvm::ArrayRef<const Pred *> parts(op);
    if (op->getKind() == kind)
      parts = op->getOperands();
    for (const Pred *part : parts) {
      if (part == absorbing)
        return absorbing;
      if (part->getKind() == (isAnd ? PredKind::True : PredKind::False))
        continue;
      flat.push_back(part);
    }
  }
  // Operands in id order without duplicates: sorting first keeps wide
  // disjunctions (unrolled unions) at n log n.
  llvm::sort(flat, [](const Pred *a, const Pred *b) {
    return a->getId() < b->getId();
  });
  flat.erase(std::unique(flat.begin(), flat.end()), flat.end());
  if (flat.empty())
    return isAnd ? getTrue() : getFalse();
  if (flat.size() == 1)
    return flat.front();
  Pred p;
  p.kind = kind;
  p.operands = flat;
  return unique(p);
}

const Pred *ExprContext::getAnd(llvm::ArrayRef<const Pred *> operands) {
  return getAndOr(PredKind::And, operands);
}

const Pred *ExprContext::getOr(llvm::ArrayRef<const Pred *> operands) {
  return getAndOr(PredKind::Or, operands);
}

const Pred *ExprContext::getNot(const Pred *operand) {
  switch (operand->getKind()) {
  case PredKind::True:
    return getFalse();
  case PredKind::False:
    return getTrue();
  case PredKind::Not:
    return operand->getOperands()[0];
  case PredKind::Cmp: {
    const Pred *neg = getCmp(negate(operand->getCmpKind()), operand->getLHS(),
                             operand->getRHS());
    inheritOrigin(neg, operand);
    return neg;
  }
  default:
    break;
  }
  Pred p;
  p.kind = PredKind::Not;
  p.operands = llvm::ArrayRef<const Pred *>(operand);
  const Pred *result = unique(p);
  inheritOrigin(result, operand);
  return result;
}

const Pred *ExprContext::getAny(int64_t unionVar, int64_t lower, int64_t upper,
                                const Pred *body) {
  if (lower > upper)
    return getFalse();
  Pred p;
  p.kind = PredKind::Any;
  p.unionVar = unionVar;
  p.lower = lower;
  p.upper = upper;
  p.operands = llvm::ArrayRef<const Pred *>(body);
  const Pred *result = unique(p);
  inheritOrigin(result, body);
  return result;
}

//===----------------------------------------------------------------------===//
// Substitution
//===----------------------------------------------------------------------===//

namespace {
/// Rebuilds expressions and predicates with one union variable replaced.
class Substituter {
public:
  Substituter(ExprContext &ctx, int64_t id, int64_t value)
      : ctx(ctx), id(id), value(value) {}

  ExprContext &ctx;
  int64_t id;
  int64_t value;
  llvm::DenseMap<const Expr *, const Expr *> exprMemo;
  llvm::DenseMap<const Pred *, const Pred *> predMemo;

  const Expr *run(const Expr *e) {
    if (auto it = exprMemo.find(e); it != exprMemo.end())
      return it->second;
    const Expr *r = rebuild(e);
    exprMemo[e] = r;
    return r;
  }

  const Expr *rebuild(const Expr *e) {
    auto op = [&](unsigned k) { return run(e->getOperand(k)); };
    auto ops = [&] {
      llvm::SmallVector<const Expr *, 4> out;
      for (const Expr *o : e->getOperands())
        out.push_back(run(o));
      return out;
    };
    switch (e->getKind()) {
    case ExprKind::Const:
    case ExprKind::Var:
    case ExprKind::Scalar:
      return e;
    case ExprKind::UnionVar:
      return e->getValue() == id ? ctx.getConst(value) : e;
    case ExprKind::Lookup:
      return ctx.getLookup(e->getName(), op(0));
    case ExprKind::Seg:
      return ctx.getSeg(e->getName(), op(0));
    case ExprKind::SegStart:
      return ctx.getSegStart(e->getName(), op(0));
    case ExprKind::SegEnd:
      return ctx.getSegEnd(e->getName(), op(0));
    case ExprKind::Add: {
      const Expr *sum = ctx.getConst(0);
      for (const Expr *o : ops())
        sum = ctx.getAdd(sum, o);
      return sum;
    }
    case ExprKind::Mul:
      return ctx.getMul(op(0), op(1));
    case ExprKind::FloorDiv:
      return ctx.getFloorDiv(op(0), op(1));
    case ExprKind::Mod:
      return ctx.getMod(op(0), op(1));
    case ExprKind::Min:
      return ctx.getMin(ops());
    case ExprKind::Max:
      return ctx.getMax(ops());
    case ExprKind::Select:
      return ctx.getSelect(run(e->getCond()), op(0), op(1));
    case ExprKind::Isqrt:
      return ctx.getIsqrt(op(0));
    }
    llvm_unreachable("unknown expression kind");
  }

  const Pred *run(const Pred *p) {
    if (auto it = predMemo.find(p); it != predMemo.end())
      return it->second;
    const Pred *r = rebuild(p);
    ctx.inheritOrigin(r, p);
    predMemo[p] = r;
    return r;
  }

  const Pred *rebuild(const Pred *p) {
    llvm::SmallVector<const Pred *, 4> ops;
    for (const Pred *o : p->getOperands())
      ops.push_back(run(o));
    switch (p->getKind()) {
    case PredKind::True:
    case PredKind::False:
      return p;
    case PredKind::Cmp:
      return ctx.getCmp(p->getCmpKind(), run(p->getLHS()), run(p->getRHS()));
    case PredKind::And:
      return ctx.getAnd(ops);
    case PredKind::Or:
      return ctx.getOr(ops);
    case PredKind::Not:
      return ctx.getNot(ops[0]);
    case PredKind::Any:
      return ctx.getAny(p->getUnionVar(), p->getLower(), p->getUpper(), ops[0]);
    }
    llvm_unreachable("unknown predicate kind");
  }
};
} // namespace

const Expr *ExprContext::substitute(const Expr *expr, int64_t id,
                                    int64_t value) {
  return Substituter(*this, id, value).run(expr);
}

const Pred *ExprContext::substitute(const Pred *pred, int64_t id,
                                    int64_t value) {
  return Substituter(*this, id, value).run(pred);
}

//===----------------------------------------------------------------------===//
// Origins
//===----------------------------------------------------------------------===//

void ExprContext::setOrigin(const Pred *pred, const void *origin) {
  if (origin)
    origins[pred] = origin;
}

void ExprContext::inheritOrigin(const Pred *derived, const Pred *from) {
  if (const void *origin = getOrigin(from))
    origins.try_emplace(derived, origin);
}

const void *ExprContext::getOrigin(const Pred *pred) const {
  auto it = origins.find(pred);
  return it == origins.end() ? nullptr : it->second;
}
