// RUN: cmask-opt %s -split-input-file --cmask-extract-intervals | FileCheck %s

// cmask-extract-intervals: each DNF conjunct becomes one slot: its j-free
// atoms form the row condition, the max of its lower bounds (0 when none)
// and the min of its upper bounds (k_len when none) form [lo, hi).

// CHECK-LABEL: cmask.spec @sliding_window
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[W:%.+]] = cmask.meta @window
// CHECK-DAG:     [[LO:%.+]] = cmask.sub [[I]], [[W]]
// CHECK-DAG:     [[HI:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[LO]], [[HI]]) if [[T]]
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK-NOT:     cmask.var j
// CHECK-NOT:     cmask.yield
// CHECK:       }
cmask.spec @sliding_window {
  cmask.metadata @window : scalar
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %c1 = cmask.constant 1 : i64
    %ip1 = cmask.add %i, %c1
    %j = cmask.var j
    %hi = cmask.cmp lt, %j, %ip1
    %w = cmask.meta @window
    %lo = cmask.sub %i, %w
    %ge = cmask.cmp ge, %j, %lo
    %and = cmask.and %hi, %ge
    %or = cmask.or %and
    cmask.yield %or : i1
  }
}

// -----

// Defaults: no lower bound gives lo = 0, no upper bound gives hi = k_len; the
// j-free atoms of a conjunct become its row condition; several bounds give
// max of the lowers and min of the uppers.
// CHECK-LABEL: cmask.spec @defaults
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[P:%.+]] = cmask.meta @p
// CHECK-DAG:     [[KL:%.+]] = cmask.var k_len
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK-DAG:     [[ROW:%.+]] = cmask.cmp ge, [[I]], [[P]]
// CHECK-DAG:     [[S0:%.+]] = cmask.slot {{\[}}[[C0]], [[P]]) if [[T]]
// CHECK-DAG:     [[S1:%.+]] = cmask.slot {{\[}}[[I]], [[KL]]) if [[ROW]]
// CHECK-DAG:     [[MAX:%.+]] = cmask.max [[I]], [[P]]
// CHECK-DAG:     [[MIN:%.+]] = cmask.min [[I]], [[P]]
// CHECK-DAG:     [[S2:%.+]] = cmask.slot {{\[}}[[MAX]], [[MIN]]) if [[ROW]]
// CHECK:         cmask.slots [[S0]], [[S1]], [[S2]]{{$}}
cmask.spec @defaults {
  cmask.metadata @p : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %p = cmask.meta @p
    %a = cmask.cmp lt, %j, %p
    %b = cmask.cmp ge, %j, %i
    %c = cmask.cmp ge, %i, %p
    %d = cmask.cmp ge, %j, %p
    %x = cmask.cmp lt, %j, %i
    // [0, p)
    %c0 = cmask.and %a
    // [i, k_len) if i >= p
    %c1 = cmask.and %b, %c
    // [max(i, p), min(i, p)) if i >= p
    %c2 = cmask.and %c, %d, %b, %a, %x
    %v = cmask.or %c0, %c1, %c2
    cmask.yield %v : i1
  }
}

// -----

// A lone atom or a lone `and` is a DNF too; `true` is [0, k_len) and `false`
// has no slot.
// CHECK-LABEL: cmask.spec @degenerate
// CHECK:       cmask.region @atom guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[I]]) if [[T]]
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK:       cmask.region @conjunct guard {
// CHECK:       } rule {
// CHECK-DAG:     [[KL:%.+]] = cmask.var k_len
// CHECK-DAG:     [[QL:%.+]] = cmask.var q_len
// CHECK-DAG:     [[ROW:%.+]] = cmask.cmp lt, [[QL]], [[KL]]
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[QL]], [[KL]]) if [[ROW]]
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK:       cmask.region @everything guard {
// CHECK:       } rule {
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[KL:%.+]] = cmask.var k_len
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[C0]], [[KL]]) if [[T]]
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
// CHECK:       cmask.region @nothing guard {
// CHECK:       } rule {
// CHECK-NEXT:    cmask.slots{{$}}
// CHECK-NEXT:  }
cmask.spec @degenerate {
  cmask.region @atom guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp lt, %j, %i
    cmask.yield %v : i1
  }
  cmask.region @conjunct guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %ql = cmask.var q_len
    %kl = cmask.var k_len
    %row = cmask.cmp lt, %ql, %kl
    %lo = cmask.cmp ge, %j, %ql
    %v = cmask.and %row, %lo
    cmask.yield %v : i1
  }
  cmask.region @everything guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
  cmask.region @nothing guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %f = cmask.constant false
    cmask.yield %f : i1
  }
}

// -----

// Regions already in slot form are left alone.
// CHECK-LABEL: cmask.spec @already_slots
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[KL:%.+]] = cmask.var k_len
// CHECK-DAG:     [[T:%.+]] = cmask.constant true
// CHECK:         [[S:%.+]] = cmask.slot {{\[}}[[I]], [[KL]]) if [[T]]
// CHECK-NEXT:    cmask.slots [[S]]{{$}}
cmask.spec @already_slots {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %kl = cmask.var k_len
    %t = cmask.constant true
    %s = cmask.slot [%i, %kl) if %t
    cmask.slots %s
  }
}
