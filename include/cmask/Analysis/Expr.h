//===- Expr.h - Integer expressions and predicates of a rule ----*- C++ -*-===//
//
// The plain C++ (LLVM ADT only) representation of a MaskSpec rule that the
// analysis works on: hash-consed integer expressions and boolean predicates,
// built through an ExprContext that folds constants and keeps sums in a
// canonical linear form, so that structurally equal terms are pointer-equal.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_ANALYSIS_EXPR_H
#define CMASK_ANALYSIS_EXPR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/FoldingSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Allocator.h"

#include <cstdint>
#include <string>
#include <utility>

namespace cmask {

class Pred;

/// Built-in variables of a rule.
enum class Var : uint8_t { I, J, B, QLen, KLen };

enum class ExprKind : uint8_t {
  Const,    ///< an integer literal
  Var,      ///< i, j, b, q_len or k_len
  UnionVar, ///< the variable of a bounded union (`any d in [lo, hi]`)
  Scalar,   ///< scalar metadata
  Lookup,   ///< per-sequence metadata value at an index
  Seg,      ///< segment index of a position in an offsets metadata
  SegStart, ///< start of a segment
  SegEnd,   ///< end of a segment
  Add,      ///< sum of two or more terms (canonical linear form)
  Mul,      ///< product; `c * t` for a constant c, or of two non-constants
  FloorDiv, ///< division rounding toward negative infinity
  Mod,      ///< remainder with the sign of the divisor
  Min,      ///< minimum of two or more operands
  Max,      ///< maximum of two or more operands
  Select,   ///< cond ? a : b
  Isqrt,    ///< integer square root, 0 for negative operands
};

/// An integer expression. Immutable and uniqued by its ExprContext: two
/// structurally equal expressions of one context are the same pointer.
class Expr : public llvm::FoldingSetNode {
public:
  ExprKind getKind() const { return kind; }
  /// The literal (Const) or the union-variable id (UnionVar).
  int64_t getValue() const { return value; }
  Var getVar() const { return static_cast<Var>(value); }
  /// The metadata name (Scalar, Lookup, Seg, SegStart, SegEnd).
  llvm::StringRef getName() const { return name; }
  llvm::ArrayRef<const Expr *> getOperands() const { return operands; }
  const Expr *getOperand(unsigned idx) const { return operands[idx]; }
  /// The condition of a Select.
  const Pred *getCond() const { return cond; }
  /// True if the expression mentions `j`.
  bool dependsOnJ() const { return mentionsJ; }
  /// True if the expression mentions no variable, metadata or union variable.
  bool isConst() const { return kind == ExprKind::Const; }
  /// A unique number, in creation order (stable sort key).
  unsigned getId() const { return id; }

  void Profile(llvm::FoldingSetNodeID &fid) const;
  /// Prints in the MaskSpec's mathematical notation, e.g. `max(0, i - w)`.
  std::string str() const;

private:
  friend class ExprContext;
  Expr() = default;
  ExprKind kind = ExprKind::Const;
  bool mentionsJ = false;
  int64_t value = 0;
  llvm::StringRef name;
  llvm::ArrayRef<const Expr *> operands;
  const Pred *cond = nullptr;
  unsigned id = 0;
};

enum class CmpKind : uint8_t { EQ, NE, LT, LE, GT, GE };

/// The comparison that holds exactly when `kind` does not.
CmpKind negate(CmpKind kind);
/// The comparison with its operands swapped (`a < b` is `b > a`).
CmpKind swapOperands(CmpKind kind);
llvm::StringRef spelling(CmpKind kind);
/// Whether `a <kind> b` holds.
bool holds(CmpKind kind, int64_t a, int64_t b);

enum class PredKind : uint8_t { True, False, Cmp, And, Or, Not, Any };

/// A boolean predicate. Uniqued like Expr.
class Pred : public llvm::FoldingSetNode {
public:
  PredKind getKind() const { return kind; }
  CmpKind getCmpKind() const { return cmp; }
  const Expr *getLHS() const { return exprs[0]; }
  const Expr *getRHS() const { return exprs[1]; }
  llvm::ArrayRef<const Pred *> getOperands() const { return operands; }
  /// Any: the union variable id and its inclusive static bounds.
  int64_t getUnionVar() const { return unionVar; }
  int64_t getLower() const { return lower; }
  int64_t getUpper() const { return upper; }
  const Pred *getBody() const { return operands[0]; }
  bool dependsOnJ() const { return mentionsJ; }
  bool isTrue() const { return kind == PredKind::True; }
  bool isFalse() const { return kind == PredKind::False; }
  unsigned getId() const { return id; }

  void Profile(llvm::FoldingSetNodeID &fid) const;
  std::string str() const;

private:
  friend class ExprContext;
  Pred() = default;
  PredKind kind = PredKind::True;
  CmpKind cmp = CmpKind::EQ;
  bool mentionsJ = false;
  const Expr *exprs[2] = {nullptr, nullptr};
  llvm::ArrayRef<const Pred *> operands;
  int64_t unionVar = 0, lower = 0, upper = 0;
  unsigned id = 0;
};

/// A linear combination `sum(coeff * term) + constant` of opaque terms
/// (anything that is not a sum, a constant or a constant multiple). Terms
/// are sorted by id and have non-zero coefficients.
struct LinearForm {
  llvm::SmallVector<std::pair<const Expr *, int64_t>, 4> terms;
  int64_t constant = 0;

  /// The coefficient of `term` (0 when absent).
  int64_t coefficient(const Expr *term) const;
  bool isConstant() const { return terms.empty(); }
};

/// Owns and uniques expressions and predicates. All builders simplify:
/// constants fold, sums are kept in canonical linear form, commutative
/// operands are sorted, and/or flatten and drop neutral elements.
class ExprContext {
public:
  ExprContext();
  ~ExprContext();
  ExprContext(const ExprContext &) = delete;
  ExprContext &operator=(const ExprContext &) = delete;

  //===--- Expressions ----------------------------------------------------===//
  const Expr *getConst(int64_t value);
  const Expr *getVar(Var var);
  const Expr *getUnionVar(int64_t id);
  const Expr *getScalar(llvm::StringRef name);
  const Expr *getLookup(llvm::StringRef name, const Expr *index);
  const Expr *getSeg(llvm::StringRef name, const Expr *position);
  const Expr *getSegStart(llvm::StringRef name, const Expr *segment);
  const Expr *getSegEnd(llvm::StringRef name, const Expr *segment);
  const Expr *getAdd(const Expr *lhs, const Expr *rhs);
  const Expr *getSub(const Expr *lhs, const Expr *rhs);
  const Expr *getNeg(const Expr *operand);
  const Expr *getMul(const Expr *lhs, const Expr *rhs);
  const Expr *getFloorDiv(const Expr *lhs, const Expr *rhs);
  /// `ceil(lhs / divisor)` for a positive constant divisor.
  const Expr *getCeilDiv(const Expr *lhs, int64_t divisor);
  const Expr *getMod(const Expr *lhs, const Expr *rhs);
  const Expr *getMin(llvm::ArrayRef<const Expr *> operands);
  const Expr *getMax(llvm::ArrayRef<const Expr *> operands);
  const Expr *getMin(const Expr *a, const Expr *b) { return getMin({a, b}); }
  const Expr *getMax(const Expr *a, const Expr *b) { return getMax({a, b}); }
  const Expr *getSelect(const Pred *cond, const Expr *a, const Expr *b);
  const Expr *getIsqrt(const Expr *operand);

  /// The linear form of `expr`, and back.
  LinearForm linearize(const Expr *expr);
  const Expr *fromLinear(const LinearForm &form);

  //===--- Predicates -----------------------------------------------------===//
  const Pred *getTrue();
  const Pred *getFalse();
  const Pred *getBool(bool value) { return value ? getTrue() : getFalse(); }
  const Pred *getCmp(CmpKind kind, const Expr *lhs, const Expr *rhs);
  const Pred *getAnd(llvm::ArrayRef<const Pred *> operands);
  const Pred *getOr(llvm::ArrayRef<const Pred *> operands);
  const Pred *getNot(const Pred *operand);
  const Pred *getAny(int64_t unionVar, int64_t lower, int64_t upper,
                     const Pred *body);

  //===--- Substitution ---------------------------------------------------===//
  /// Replaces the union variable `id` by `value` everywhere, re-simplifying.
  const Expr *substitute(const Expr *expr, int64_t id, int64_t value);
  const Pred *substitute(const Pred *pred, int64_t id, int64_t value);

  /// True once linear arithmetic on constants (folding, coefficients) has
  /// left 64 bits: the analysis then no longer matches 64-bit evaluation
  /// and the rule must be rejected (normalizeRule does).
  bool hasOverflowed() const { return overflowed; }
  /// What the terms being built come from (an opaque origin, e.g. the
  /// operation being imported or the atom being rewritten): the first
  /// overflow is attributed to it (getOverflowOrigin).
  void setCurrentOrigin(const void *origin) { currentOrigin = origin; }
  const void *getCurrentOrigin() const { return currentOrigin; }
  /// The current origin when linear arithmetic first overflowed (null when
  /// it has not, or none was set).
  const void *getOverflowOrigin() const { return overflowOrigin; }

  //===--- Origins --------------------------------------------------------===//
  /// Predicates remember an opaque origin (e.g. the MLIR operation that
  /// produced them) so that diagnostics can point at user source. setOrigin
  /// replaces the origin; derived predicates inherit the origin of what they
  /// were derived from unless they already have one.
  void setOrigin(const Pred *pred, const void *origin);
  void inheritOrigin(const Pred *derived, const Pred *from);
  const void *getOrigin(const Pred *pred) const;

private:
  const Expr *unique(Expr &proto);
  const Pred *unique(Pred &proto);
  /// The unique expression of `kind` with these fields (unique(Expr &)).
  const Expr *getNode(ExprKind kind, llvm::ArrayRef<const Expr *> operands = {},
                      llvm::StringRef name = {}, int64_t value = 0,
                      const Pred *cond = nullptr);
  template <typename T> llvm::ArrayRef<T> copy(llvm::ArrayRef<T> values);
  const Expr *getMinMax(ExprKind kind, llvm::ArrayRef<const Expr *> operands);
  const Pred *getAndOr(PredKind kind, llvm::ArrayRef<const Pred *> operands);
  /// `a + scale * b` (linear forms), recording the first overflow.
  LinearForm combineChecked(const LinearForm &a, const LinearForm &b,
                            int64_t scale);

  llvm::BumpPtrAllocator allocator;
  llvm::FoldingSet<Expr> exprs;
  llvm::FoldingSet<Pred> preds;
  llvm::DenseMap<const Pred *, const void *> origins;
  unsigned nextId = 0;
  bool overflowed = false;
  const void *currentOrigin = nullptr, *overflowOrigin = nullptr;
};

/// Integer semantics shared by every evaluator (64-bit, wrapping; floordiv
/// and mod round toward negative infinity; division by zero gives 0).
namespace arith {
int64_t add(int64_t a, int64_t b);
int64_t sub(int64_t a, int64_t b);
int64_t mul(int64_t a, int64_t b);
int64_t floorDiv(int64_t a, int64_t b);
int64_t mod(int64_t a, int64_t b);
int64_t isqrt(int64_t a);
} // namespace arith

} // namespace cmask

#endif // CMASK_ANALYSIS_EXPR_H
