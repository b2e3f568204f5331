//===- CMaskDialect.td - cmask dialect definition ----------*- tablegen -*-===//

#ifndef CMASK_DIALECT_CMASK_IR_CMASKDIALECT_TD
#define CMASK_DIALECT_CMASK_IR_CMASKDIALECT_TD

include "mlir/IR/OpBase.td"

def CMask_Dialect : Dialect {
  let name = "cmask";
  let cppNamespace = "::mlir::cmask";
  let summary = "Attention-mask specifications (MaskSpecs) and their intervals";
  let description = [{
    The `cmask` dialect describes which keys each query row of an attention
    operator may see. A `cmask.spec` declares named runtime metadata and an
    ordered list of `cmask.region`s; each region has a *row guard* (which
    query rows it applies to, a predicate of `i`, built-ins and metadata) and
    a *visibility rule* (which keys `j` those rows see). The first region
    whose guard holds applies to a row.

    `i` and `j` are relative to the start of their sequence; `b` is the
    sequence index and `q_len`/`k_len` this sequence's lengths. Integers are
    64-bit; `floordiv` and `mod` round toward negative infinity.

    The compiler rewrites every rule into a disjunction of conjunctions,
    isolates `j` in every atom (`j >= lo(i)`, `j < hi(i)`), extracts one
    half-open interval *slot* per conjunct and canonicalizes the slots: the
    number of slots K is derived from the rule, never fixed.

    ```mlir
    cmask.spec @causal {
      cmask.region @all guard {
        %t = cmask.constant true
        cmask.yield %t : i1
      } rule {
        %i = cmask.var i
        %j = cmask.var j
        %v = cmask.cmp le, %j, %i
        cmask.yield %v : i1
      }
    }
    ```
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 0;
}

#endif // CMASK_DIALECT_CMASK_IR_CMASKDIALECT_TD
