//===- TermEmitter.h - Memoized emission of analysis terms ------*- C++ -*-===//
//
// Shared by the emitters that turn Analysis terms into MLIR values (the
// passes' cmask-op exporter, the preprocess' arith emitter): each term is
// built once per emitter, by Derived::build(const Expr *) and
// Derived::build(const Pred *).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_DIALECT_CMASK_TRANSFORMS_TERMEMITTER_H
#define CMASK_DIALECT_CMASK_TRANSFORMS_TERMEMITTER_H

#include "cmask/Analysis/Expr.h"

#include "mlir/IR/Value.h"

#include "llvm/ADT/DenseMap.h"

namespace mlir::cmask {

template <typename Derived> class TermEmitter {
public:
  Value emit(const ::cmask::Expr *e) {
    if (Value v = exprs.lookup(e))
      return v;
    Value v = static_cast<Derived *>(this)->build(e);
    exprs[e] = v;
    return v;
  }

  Value emit(const ::cmask::Pred *p) {
    if (Value v = preds.lookup(p))
      return v;
    Value v = static_cast<Derived *>(this)->build(p);
    preds[p] = v;
    return v;
  }

private:
  llvm::DenseMap<const ::cmask::Expr *, Value> exprs;
  llvm::DenseMap<const ::cmask::Pred *, Value> preds;
};

} // namespace mlir::cmask

#endif // CMASK_DIALECT_CMASK_TRANSFORMS_TERMEMITTER_H
