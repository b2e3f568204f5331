// 200 distinct slots: the slot canonicalization's proof budget runs out
// (one warning) and the descriptor refuses the region (one error), in every
// translation that builds kernels; neither dumps the spec.
// RUN: not cmask-translate %s --cmask-to-ptx 2>&1 | FileCheck %s --implicit-check-not=warning: --implicit-check-not=error: --implicit-check-not="see current operation"
// RUN: not cmask-translate %s --cmask-to-descriptor-json --metadata=%S/../Inputs/causal.json 2>&1 | FileCheck %s --implicit-check-not=warning: --implicit-check-not=error: --implicit-check-not="see current operation"
// RUN: rm -rf %t.art && not cmask-translate %s --cmask-to-artifact -o %t.art 2>&1 | FileCheck %s --implicit-check-not=warning: --implicit-check-not=error: --implicit-check-not="see current operation"
// CHECK: too-many-slots-budget.mlir:[[# @LINE + 3]]:3: warning: canonicalization stopped after 200000 proofs: the region's 200 slots are exact but K may not be minimal
// CHECK: too-many-slots-budget.mlir:[[# @LINE + 2]]:3: error: 'cmask.region' op has 200 slots per row; the descriptor supports at most 127 (split the rule into regions or narrow its unions)
cmask.spec @many {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %two = cmask.constant 2 : i64
    %u = cmask.any %d in [0, 199] {
      %m = cmask.mul %d, %two
      %s = cmask.add %i, %m
      %c = cmask.cmp eq, %j, %s
      cmask.yield %c : i1
    }
    cmask.yield %u : i1
  }
}
