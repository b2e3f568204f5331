// RUN: cmask-opt %s | cmask-opt | FileCheck %s
// RUN: cmask-opt %s --mlir-print-op-generic | cmask-opt | FileCheck %s
// RUN: cmask-opt %s --verify-roundtrip | FileCheck %s

// Round trip of every cmask op through the custom assembly format.

// CHECK-LABEL: cmask.spec @metadata_roles {
// CHECK-NEXT:    cmask.metadata @s : scalar
// CHECK-NEXT:    cmask.metadata @ps : per_sequence
// CHECK-NEXT:    cmask.metadata @off : offsets
// CHECK-NEXT:    cmask.region @r0 guard {
// CHECK-DAG:       [[I:%.+]] = cmask.var i
// CHECK-DAG:       [[B:%.+]] = cmask.var b
// CHECK-DAG:       cmask.var q_len
// CHECK-DAG:       cmask.var k_len
// CHECK-DAG:       [[S:%.+]] = cmask.meta @s
// CHECK:           [[P:%.+]] = cmask.lookup @ps{{\[}}[[B]]]
// CHECK:           [[SUM:%.+]] = cmask.add [[P]], [[S]]
// CHECK:           [[G:%.+]] = cmask.cmp lt, [[I]], [[SUM]]
// CHECK:           cmask.yield [[G]] : i1
// CHECK-NEXT:    } rule {
// CHECK:           [[SI:%.+]] = cmask.seg @off([[RI:%.+]])
// CHECK:           [[SJ:%.+]] = cmask.seg @off([[RJ:%.+]])
// CHECK:           cmask.seg_start @off([[SI]])
// CHECK:           cmask.seg_end @off([[SI]])
// CHECK:           [[V:%.+]] = cmask.cmp eq, [[SJ]], [[SI]]
// CHECK:           cmask.yield [[V]] : i1
cmask.spec @metadata_roles {
  cmask.metadata @s : scalar
  cmask.metadata @ps : per_sequence
  cmask.metadata @off : offsets
  cmask.region @r0 guard {
    %i = cmask.var i
    %b = cmask.var b
    %ql = cmask.var q_len
    %kl = cmask.var k_len
    %s = cmask.meta @s
    %p = cmask.lookup @ps[%b]
    %sum = cmask.add %p, %s
    %g = cmask.cmp lt, %i, %sum
    cmask.yield %g : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %si = cmask.seg @off(%i)
    %sj = cmask.seg @off(%j)
    %st = cmask.seg_start @off(%si)
    %en = cmask.seg_end @off(%si)
    %v = cmask.cmp eq, %sj, %si
    cmask.yield %v : i1
  }
}

// CHECK-LABEL: cmask.spec @arith {
// CHECK:         cmask.region @r guard {
// CHECK:         } rule {
// CHECK-DAG:       [[I:%.+]] = cmask.var i
// CHECK-DAG:       [[J:%.+]] = cmask.var j
// CHECK-DAG:       [[C4:%.+]] = cmask.constant 4 : i64
// CHECK-DAG:       [[CM2:%.+]] = cmask.constant -2 : i64
// CHECK-DAG:       [[F:%.+]] = cmask.constant false
// CHECK:           [[ADD:%.+]] = cmask.add [[I]], [[C4]]
// CHECK:           [[SUB:%.+]] = cmask.sub [[ADD]], [[CM2]]
// CHECK:           [[MUL:%.+]] = cmask.mul [[C4]], [[J]]
// CHECK:           [[FD:%.+]] = cmask.floordiv [[J]], [[C4]]
// CHECK:           [[MOD:%.+]] = cmask.mod [[I]], [[C4]]
// CHECK:           [[MIN:%.+]] = cmask.min [[I]], [[J]]
// CHECK:           [[MAX:%.+]] = cmask.max [[J]], [[SUB]]
// CHECK:           [[SQ:%.+]] = cmask.isqrt [[I]]
// CHECK:           [[NE:%.+]] = cmask.cmp ne, [[I]], [[C4]]
// CHECK:           [[SEL:%.+]] = cmask.select [[NE]], [[I]], [[SQ]]
// CHECK:           [[E1:%.+]] = cmask.cmp le, [[MUL]], [[SEL]]
// CHECK:           [[E2:%.+]] = cmask.cmp gt, [[FD]], [[MOD]]
// CHECK:           [[E3:%.+]] = cmask.cmp ge, [[MIN]], [[CM2]]
// CHECK:           [[E4:%.+]] = cmask.cmp lt, [[MAX]], [[I]]
// CHECK:           [[N:%.+]] = cmask.not [[E4]]
// CHECK:           [[A:%.+]] = cmask.and [[E1]], [[E2]]
// CHECK:           [[A1:%.+]] = cmask.and [[E3]]
// CHECK:           [[O:%.+]] = cmask.or [[A]], [[A1]], [[N]], [[F]]
// CHECK:           cmask.yield [[O]] : i1
cmask.spec @arith {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c4 = cmask.constant 4 : i64
    %cm2 = cmask.constant -2 : i64
    %f = cmask.constant false
    %add = cmask.add %i, %c4
    %sub = cmask.sub %add, %cm2
    %mul = cmask.mul %c4, %j
    %fd = cmask.floordiv %j, %c4
    %mod = cmask.mod %i, %c4
    %min = cmask.min %i, %j
    %max = cmask.max %j, %sub
    %sq = cmask.isqrt %i
    %ne = cmask.cmp ne, %i, %c4
    %sel = cmask.select %ne, %i, %sq
    %e1 = cmask.cmp le, %mul, %sel
    %e2 = cmask.cmp gt, %fd, %mod
    %e3 = cmask.cmp ge, %min, %cm2
    %e4 = cmask.cmp lt, %max, %i
    %n = cmask.not %e4
    %a = cmask.and %e1, %e2
    %a1 = cmask.and %e3
    %o = cmask.or %a, %a1, %n, %f
    cmask.yield %o : i1
  }
}

// A bounded union with negative bounds: `d` is a constant in each copy, so
// `d * d` and `d * j` are allowed.
// CHECK-LABEL: cmask.spec @union {
// CHECK:         } rule {
// CHECK:           [[J:%.+]] = cmask.var j
// CHECK:           [[U:%.+]] = cmask.any [[D:%.+]] in [-16, 16] {
// CHECK-NEXT:        [[DD:%.+]] = cmask.mul [[D]], [[D]]
// CHECK-NEXT:        [[JD:%.+]] = cmask.mul [[D]], [[J]]
// CHECK-NEXT:        [[X:%.+]] = cmask.cmp le, [[JD]], [[DD]]
// CHECK-NEXT:        cmask.yield [[X]] : i1
// CHECK-NEXT:      }
// CHECK:           [[U2:%.+]] = cmask.any [[E:%.+]] in [3, 3] attributes {note = "one copy"} {
// CHECK-NEXT:        [[Y:%.+]] = cmask.cmp ge, [[J]], [[E]]
// CHECK-NEXT:        cmask.yield [[Y]] : i1
// CHECK-NEXT:      }
// CHECK:           cmask.or [[U]], [[U2]]
cmask.spec @union {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %u = cmask.any %d in [-16, 16] {
      %dd = cmask.mul %d, %d
      %jd = cmask.mul %d, %j
      %x = cmask.cmp le, %jd, %dd
      cmask.yield %x : i1
    }
    %u2 = cmask.any %e in [3, 3] attributes {note = "one copy"} {
      %y = cmask.cmp ge, %j, %e
      cmask.yield %y : i1
    }
    %v = cmask.or %u, %u2
    cmask.yield %v : i1
  }
}

// Interval form, with the num_slots attributes of canonicalized specs.
// CHECK-LABEL: cmask.spec @slots attributes {num_slots = 2 : i64} {
// CHECK:         cmask.region @two attributes {num_slots = 2 : i64} guard {
// CHECK:         } rule {
// CHECK-DAG:       [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:       [[I:%.+]] = cmask.var i
// CHECK-DAG:       [[KL:%.+]] = cmask.var k_len
// CHECK-DAG:       [[T:%.+]] = cmask.constant true
// CHECK:           [[S0:%.+]] = cmask.slot [[[C0]], [[I]]) if [[T]]
// CHECK:           [[S1:%.+]] = cmask.slot [[[I]], [[KL]]) if [[T]]
// CHECK:           cmask.slots [[S0]], [[S1]]
// CHECK:         cmask.region @none attributes {num_slots = 0 : i64} guard {
// CHECK:         } rule {
// CHECK-NEXT:      cmask.slots{{$}}
// CHECK-NEXT:    }
cmask.spec @slots attributes {num_slots = 2 : i64} {
  cmask.region @two attributes {num_slots = 2 : i64} guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %c0 = cmask.constant 0 : i64
    %i = cmask.var i
    %kl = cmask.var k_len
    %t = cmask.constant true
    %s0 = cmask.slot [%c0, %i) if %t
    %s1 = cmask.slot [%i, %kl) if %t
    cmask.slots %s0, %s1
  }
  cmask.region @none attributes {num_slots = 0 : i64} guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    cmask.slots
  }
}
