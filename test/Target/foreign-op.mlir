// A non-cmask op inside a rule must be rejected with a located diagnostic by
// the verifier (the rule importer and the evaluator only know cmask ops).
// Neither tool may crash or silently evaluate it.

// RUN: not cmask-opt %S/Inputs/foreign-op.mlir 2>&1 | FileCheck %s --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-opt %S/Inputs/foreign-op.mlir --cmask-lower-to-intervals 2>&1 | FileCheck %s --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-translate %S/Inputs/foreign-op.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// RUN: not cmask-translate %S/Inputs/foreign-op.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal.json 2>&1 | FileCheck %s --implicit-check-not="Stack dump" --implicit-check-not="PLEASE submit"
// CHECK: foreign-op.mlir:7:{{[0-9]+}}: error:
