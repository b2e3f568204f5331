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

// With attention tile shapes the artifact has backward kernels that read the
// rows: "intervals": "rows", the row tile shape whose tiles they list
// (128x128 when present, else 128x64) and the longest query sequence their
// shared-memory list holds.
// RUN: rm -rf %t/rowsbwd && cmask-translate %t/rows.mlir --cmask-to-artifact -o %t/rowsbwd --tile-shapes=128x128,128x64 --head-dims=64 --dtypes=bf16 2>&1 | FileCheck %s --check-prefix=ROWSBWD
// RUN: FileCheck %s --input-file=%t/rowsbwd/manifest.json --check-prefix=ROWSBWDJSON
// RUN: rm -rf %t/rows64 && cmask-translate %t/rows.mlir --cmask-to-artifact -o %t/rows64 --tile-shapes=128x64 --head-dims=64 --dtypes=bf16
// RUN: FileCheck %s --input-file=%t/rows64/manifest.json --check-prefix=ROWS64
// RUN: rm -rf %t/rowsnone && cmask-translate %t/rows.mlir --cmask-to-artifact -o %t/rowsnone --tile-shapes=64x64 2>&1 | FileCheck %s --check-prefix=ROWSNONE
// ROWSBWD: cmask: building 1 attention backward kernels (row intervals)
// ROWSBWDJSON: "intervals": "rows"
// ROWSBWDJSON-NEXT: "kernel": "cmask_even_rows_bwd_bf16_d64"
// ROWSBWDJSON-NEXT: "max_seqlen_q": 524288
// ROWSBWDJSON-NEXT: "module": 0
// ROWSBWDJSON-NEXT: "pass": "backward"
// ROWSBWDJSON: "tile_shape": "128x128"
// ROWS64: "pass": "backward"
// ROWS64: "tile_shape": "128x64"
// ROWSNONE: no attention kernels: none of the tile shapes is 128x64 or 128x128
// ROWSNONE-NOT: backward kernels

// CLAIM: claim.mlir:1:1: error: 'cmask.spec' op is declared symmetric, but in sequence {{[0-9]+}} (q_len = {{[0-9]+}}, k_len = {{[0-9]+}}) row {{[0-9]+}} sees key {{[0-9]+}} while, with q_len and k_len swapped, row {{[0-9]+}} does not see key {{[0-9]+}}; remove `symmetric`
// A claim that fails only past the first sequence of a batch is refuted too.
// RUN: not cmask-translate %t/per-sequence.mlir --cmask-to-artifact -o %t/per-sequence 2>&1 | FileCheck %s --check-prefix=SEQ
// SEQ: error: 'cmask.spec' op is declared symmetric, but in sequence {{[1-9]}} (

// The same decisions as a pass (cmask-derive-columns), recorded on the spec.
// RUN: cmask-opt %t/rows.mlir --cmask-derive-columns 2>&1 | FileCheck %s --check-prefix=PASSROWS
// RUN: cmask-opt %masks/clear.mlir --cmask-derive-columns 2>&1 | FileCheck %s --check-prefix=PASSSYM
// RUN: cmask-opt %masks/causal.mlir --cmask-derive-columns 2>&1 | FileCheck %s --check-prefix=PASSDERIVED
// RUN: not cmask-opt %t/claim.mlir --cmask-derive-columns 2>&1 | FileCheck %s --check-prefix=CLAIM
// PASSROWS: rows.mlir:2:1: remark: column direction: rows (the transposed rule (i: key, j: query row): 'cmask.mod' op cannot isolate j
// PASSROWS: cmask.spec @even_rows attributes {cmask.columns = "rows"}
// PASSROWS-NOT: cmask.spec @even_rows__columns
// PASSSYM: remark: column direction: symmetric (the transposed rule
// PASSSYM: cmask.spec @clear attributes {cmask.columns = "symmetric"
// PASSSYM: cmask.spec @clear__columns
// PASSSYM-SAME: num_slots = 34
// PASSDERIVED-NOT: remark
// PASSDERIVED: cmask.spec @causal attributes {cmask.columns = "derived"}
// PASSDERIVED: cmask.spec @causal__columns
// PASSDERIVED: cmask.slot
// In slot form it is too late: the error says to run it first.
// RUN: cmask-opt %masks/causal.mlir --cmask-lower-to-intervals | not cmask-opt --cmask-derive-columns 2>&1 | FileCheck %s --check-prefix=LATE
// LATE: error: 'cmask.spec' op is in slot form; transpose it before cmask-lower-to-intervals
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
