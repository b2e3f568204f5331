// The column direction when the transposed rule defeats isolation: without
// `symmetric` it falls back to the row intervals (mode "rows", and why);
// a wrong `symmetric` claim is refuted with a counterexample.
// RUN: split-file %s %t
// RUN: rm -rf %t/rows && cmask-translate %t/rows.mlir --cmask-to-artifact -o %t/rows --tile-shapes=64x64 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: FileCheck %s --input-file=%t/rows/manifest.json --check-prefix=ROWSJSON
// RUN: not cmask-translate %t/claim.mlir --cmask-to-artifact -o %t/claim 2>&1 | FileCheck %s --check-prefix=CLAIM

// ROWS: cmask: compiling @even_rows (K = 1; columns: rows) for sm_90a
// ROWS: the transposed rule (i: key, j: query row): 'cmask.mod' op cannot isolate j
// ROWS-SAME: the backward pass will check row intervals
// ROWSJSON: "columns": {
// ROWSJSON-NEXT: "mode": "rows",
// ROWSJSON-NEXT: "reason": "the transposed rule (i: key, j: query row): 'cmask.mod' op cannot isolate j
// ROWSJSON-NEXT: },

// CLAIM: claim.mlir:1:1: error: 'cmask.spec' op is declared symmetric, but in sequence {{[0-9]+}} (q_len = {{[0-9]+}}, k_len = {{[0-9]+}}) row {{[0-9]+}} sees key {{[0-9]+}} while, with q_len and k_len swapped, row {{[0-9]+}} does not see key {{[0-9]+}}; remove `symmetric`
// A claim that fails only past the first sequence of a batch is refuted too.
// RUN: not cmask-translate %t/per-sequence.mlir --cmask-to-artifact -o %t/per-sequence 2>&1 | FileCheck %s --check-prefix=SEQ
// SEQ: error: 'cmask.spec' op is declared symmetric, but in sequence {{[1-9]}} (
//--- rows.mlir
// Even rows are causal, odd rows see nothing.
cmask.spec @even_rows {
  cmask.region @even guard {
    %i = cmask.var i
    %c2 = cmask.constant 2 : i64
    %c0 = cmask.constant 0 : i64
    %m = cmask.mod %i, %c2
    %g = cmask.cmp eq, %m, %c0
    cmask.yield %g : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp le, %j, %i
    cmask.yield %v : i1
  }
}
//--- claim.mlir
cmask.spec @even_rows attributes {symmetric} {
  cmask.region @even guard {
    %i = cmask.var i
    %c2 = cmask.constant 2 : i64
    %c0 = cmask.constant 0 : i64
    %m = cmask.mod %i, %c2
    %g = cmask.cmp eq, %m, %c0
    cmask.yield %g : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp le, %j, %i
    cmask.yield %v : i1
  }
}
//--- per-sequence.mlir
// Sequence 0 sees everything (symmetric); the others: even rows causal.
cmask.spec @first_full attributes {symmetric} {
  cmask.region @first guard {
    %b = cmask.var b
    %c0 = cmask.constant 0 : i64
    %g = cmask.cmp eq, %b, %c0
    cmask.yield %g : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
  cmask.region @even guard {
    %i = cmask.var i
    %c2 = cmask.constant 2 : i64
    %c0 = cmask.constant 0 : i64
    %m = cmask.mod %i, %c2
    %g = cmask.cmp eq, %m, %c0
    cmask.yield %g : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp le, %j, %i
    cmask.yield %v : i1
  }
}
