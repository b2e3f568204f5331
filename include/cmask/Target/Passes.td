//===- Passes.td - cmask target passes ---------------------*- tablegen -*-===//
//
// Passes over whole specs that need the evaluator (lib/Target).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_TARGET_PASSES_TD
#define CMASK_TARGET_PASSES_TD

include "mlir/Pass/PassBase.td"

def DeriveColumnsPass : Pass<"cmask-derive-columns", "::mlir::ModuleOp"> {
  let summary = "Add the column direction of every spec the way cmask-translate does";
  let description = [{
    For every `cmask.spec @s` in rule form, decides its column direction
    (docs/descriptor.md, "Column direction") and records it on the spec as
    `cmask.columns`:

    * `derived`: the transposed spec (`cmask-transpose-spec`) lowers to
      slots; it is added, in slot form, as `@s__columns`;
    * `symmetric`: it does not, but `@s` declares `symmetric` (checked on
      random small batches; a counterexample is an error at the spec): `@s`
      itself, lowered, is added as `@s__columns`;
    * `rows`: neither; nothing is added, and a remark says why. The
      backward kernels then check the row intervals.

    `convert-cmask-to-gpu` builds the preprocess of `@s__columns` beside
    `@s` and picks the backward kernels by what it finds. Run it before
    `cmask-lower-to-intervals` (`cmask-spec-to-gpu` does).

    ```mlir
    // cmask-opt interleaved.mlir --cmask-derive-columns
    // remark: column direction: rows (the transposed rule (i: key, j: query
    //         row): 'cmask.mod' op cannot isolate j: ...)
    cmask.spec @interleaved attributes {cmask.columns = "rows"} { ... }
    ```
  }];
}

#endif // CMASK_TARGET_PASSES_TD
