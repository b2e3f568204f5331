// RUN: cmask-opt %masks/causal.mlir --cmask-transpose-spec --cmask-lower-to-intervals --convert-cmask-to-gpu="tile-shapes=128x64 attention-head-dims=" | FileCheck %s
// The output is valid IR (it parses and verifies again).
// RUN: cmask-opt %masks/causal.mlir --cmask-transpose-spec --cmask-lower-to-intervals --convert-cmask-to-gpu | cmask-opt | FileCheck %s --check-prefix=TWO
// RUN: cmask-opt %s --convert-cmask-to-gpu --verify-diagnostics
// RUN: not cmask-opt %masks/causal.mlir --cmask-lower-to-intervals --convert-cmask-to-gpu=tile-shapes=128 2>&1 | FileCheck %s --check-prefix=SHAPES

// The launch plan: seven stages; stage 0 fuses both directions' checks, row
// phases and seqs/envinit phases.
// CHECK: cmask.spec @causal attributes {cmask.stages = {{\[\[}}{kernel = "cmask_causal_s0", phases = {{\[\[}}"check", 0, -1], ["check", 1, -1], ["rows", 0, -1], ["rows", 1, -1], ["seqs", 0, 0], ["seqs", 1, 0], ["envinit", 0, 0], ["envinit", 1, 0]]}]
// CHECK-SAME: {kernel = "cmask_causal_s6", phases = {{\[\[}}"fill", 0, 0], ["fill", 1, 0]]}]]
// CHECK: gpu.module @cmask_preprocess {
// CHECK-DAG: func.func private @cmask_causal_rows_item(%{{.*}}: index, %{{.*}}: i32,
// CHECK-DAG: func.func private @cmask_causal__columns_rows_item(
// CHECK-DAG: func.func private @cmask_causal_128x64_tiles_item(
// The column direction's shapes default to the rows'.
// CHECK-DAG: func.func private @cmask_causal__columns_128x64_tiles_item(
// Stage 0: one item count per phase, then the argument groups.
// CHECK: gpu.func @cmask_causal_s0(%{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: i32, %{{.*}}: memref<?xi32>
// CHECK:   gpu.block_id x
// CHECK:   scf.if
// CHECK:     func.call @cmask_causal_check_item(
// CHECK:     func.call @cmask_causal__columns_check_item(
// CHECK:     func.call @cmask_causal_rows_item(
// CHECK:     func.call @cmask_causal__columns_rows_item(
// CHECK: gpu.func @cmask_causal_s6(
// CHECK:     func.call @cmask_causal_128x64_fill_item(
// CHECK:     func.call @cmask_causal__columns_128x64_fill_item(
// TWO: gpu.func @cmask_causal_s6(
// SHAPES: error: convert-cmask-to-gpu: tile-shapes: '128' is not QxK with positive integers
// RUN: echo "" | not cmask-opt --convert-cmask-to-gpu 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: error: convert-cmask-to-gpu: no cmask.spec in the input

// A spec must be in slot form.
// expected-error @+1 {{'cmask.spec' op is not in slot form; run cmask-lower-to-intervals first}}
cmask.spec @rules {
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
