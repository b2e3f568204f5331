// Tile-list entries hold slot indices in 7 bits: a spec with more than 127
// slots per row is refused with a located error, not silently mis-encoded.
// RUN: not cmask-translate %s --cmask-to-ptx 2>&1 | FileCheck %s
// RUN: not cmask-translate %s --cmask-to-descriptor-json --metadata=%S/../Inputs/causal.json 2>&1 | FileCheck %s
// CHECK: too-many-slots.mlir:[[# @LINE + 3]]:3: error: 'cmask.region' op has 128 slots per row; the descriptor supports at most 127

cmask.spec @wide {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.any %d in [0, 127] {
      %c3 = cmask.constant 3 : i64
      %s = cmask.mul %d, %c3
      %x = cmask.add %i, %s
      %e = cmask.cmp eq, %j, %x
      cmask.yield %e : i1
    }
    cmask.yield %v : i1
  }
}
