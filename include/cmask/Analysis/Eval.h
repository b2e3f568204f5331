//===- Eval.h - Evaluate expressions on concrete values ---------*- C++ -*-===//
//
// The concrete meaning of expressions and predicates: the values of i, j,
// b, the lengths and the metadata for one (row, key) pair (Env), the
// segment helpers, and evaluate(), which the oracle, the host twin and the
// differential tests share.
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_ANALYSIS_EVAL_H
#define CMASK_ANALYSIS_EVAL_H

#include "cmask/Analysis/Expr.h"

namespace cmask {

/// Concrete values of the built-ins and metadata for one (row, key) pair.
class Env {
public:
  virtual ~Env();
  virtual int64_t var(Var var) const = 0;
  virtual int64_t scalar(llvm::StringRef name) const = 0;
  /// Per-sequence value at `index` (0 out of range).
  virtual int64_t lookup(llvm::StringRef name, int64_t index) const = 0;
  /// This sequence's boundaries of an offsets metadata.
  virtual llvm::ArrayRef<int64_t> offsets(llvm::StringRef name) const = 0;
};

/// Segment helpers with the MaskSpec semantics: seg(p) counts boundaries
/// <= p; boundary k is 0 for k < 0 and `length` for k >= n.
int64_t segmentIndex(llvm::ArrayRef<int64_t> bounds, int64_t position);
int64_t segmentBoundary(llvm::ArrayRef<int64_t> bounds, int64_t k,
                        int64_t length);

/// Evaluates with union variables bound in `unionValues` (id -> value).
int64_t evaluate(const Expr *expr, const Env &env,
                 const llvm::DenseMap<int64_t, int64_t> &unionValues);
bool evaluate(const Pred *pred, const Env &env,
              const llvm::DenseMap<int64_t, int64_t> &unionValues);
int64_t evaluate(const Expr *expr, const Env &env);
bool evaluate(const Pred *pred, const Env &env);

} // namespace cmask

#endif // CMASK_ANALYSIS_EVAL_H
