// RUN: cmask-opt %s -split-input-file --cmask-normalize-dnf | FileCheck %s
// RUN: cmask-opt %s -split-input-file --cmask-normalize-dnf | cmask-opt -split-input-file --cmask-normalize-dnf | FileCheck %s

// cmask-normalize-dnf: unions unrolled, negations pushed into comparisons,
// every j atom isolated into `j >= e` / `j < e`, the rule distributed into an
// `or` of `and`s. (The second RUN line checks that the DNF is a fixpoint.)

// Sliding window `0 <= i - j <= w`: one conjunct j >= i - w, j < i + 1.
// CHECK-LABEL: cmask.spec @sliding_window
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[W:%.+]] = cmask.meta @window
// CHECK-DAG:     [[C1:%.+]] = cmask.constant 1 : i64
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], [[C1]]
// CHECK-DAG:     [[HI:%.+]] = cmask.cmp lt, [[J]], [[IP1]]
// CHECK-DAG:     [[IMW:%.+]] = cmask.sub [[I]], [[W]]
// CHECK-DAG:     [[LO:%.+]] = cmask.cmp ge, [[J]], [[IMW]]
// CHECK:         [[AND:%.+]] = cmask.and [[HI]], [[LO]]
// CHECK-NEXT:    [[OR:%.+]] = cmask.or [[AND]]{{$}}
// CHECK-NEXT:    cmask.yield [[OR]] : i1
// CHECK-NOT:     cmask.not
cmask.spec @sliding_window {
  cmask.metadata @window : scalar
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %w = cmask.meta @window
    %c0 = cmask.constant 0 : i64
    %dist = cmask.sub %i, %j
    %past = cmask.cmp le, %c0, %dist
    %near = cmask.cmp le, %dist, %w
    %v = cmask.and %past, %near
    cmask.yield %v : i1
  }
}

// -----

// (j < p or j <= i) and i >= p  ->  (j < p and i >= p) or (i >= p and j < i + 1)
// CHECK-LABEL: cmask.spec @or_distribution
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[P:%.+]] = cmask.meta @p
// CHECK-DAG:     [[JLTP:%.+]] = cmask.cmp lt, [[J]], [[P]]
// CHECK-DAG:     [[IGEP:%.+]] = cmask.cmp ge, [[I]], [[P]]
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], [[C1:%.+]]
// CHECK-DAG:     [[JLEI:%.+]] = cmask.cmp lt, [[J]], [[IP1]]
// CHECK-DAG:     [[A0:%.+]] = cmask.and [[JLTP]], [[IGEP]]
// CHECK-DAG:     [[A1:%.+]] = cmask.and [[IGEP]], [[JLEI]]
// CHECK:         [[OR:%.+]] = cmask.or [[A0]], [[A1]]{{$}}
// CHECK-NEXT:    cmask.yield [[OR]] : i1
cmask.spec @or_distribution {
  cmask.metadata @p : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %p = cmask.meta @p
    %a = cmask.cmp lt, %j, %p
    %b = cmask.cmp le, %j, %i
    %c = cmask.cmp ge, %i, %p
    %or = cmask.or %a, %b
    %v = cmask.and %or, %c
    cmask.yield %v : i1
  }
}

// -----

// not (j > i or j < p)  ->  j >= p and j < i + 1: no `not` is left.
// CHECK-LABEL: cmask.spec @not_pushed
// CHECK:       } rule {
// CHECK-NOT:     cmask.not
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[P:%.+]] = cmask.meta @p
// CHECK-DAG:     [[LO:%.+]] = cmask.cmp ge, [[J]], [[P]]
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[HI:%.+]] = cmask.cmp lt, [[J]], [[IP1]]
// CHECK:         [[AND:%.+]] = cmask.and [[LO]], [[HI]]
// CHECK-NEXT:    [[OR:%.+]] = cmask.or [[AND]]{{$}}
// CHECK-NEXT:    cmask.yield [[OR]] : i1
cmask.spec @not_pushed {
  cmask.metadata @p : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %p = cmask.meta @p
    %a = cmask.cmp gt, %j, %i
    %b = cmask.cmp lt, %j, %p
    %o = cmask.or %a, %b
    %v = cmask.not %o
    cmask.yield %v : i1
  }
}

// -----

// not (j-free guard-like atom) in a rule: not (i < p) -> i >= p.
// CHECK-LABEL: cmask.spec @not_of_row_atom
// CHECK:       } rule {
// CHECK-NOT:     cmask.not
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[P:%.+]] = cmask.meta @p
// CHECK-DAG:     [[GE:%.+]] = cmask.cmp ge, [[I]], [[P]]
// CHECK:         [[AND:%.+]] = cmask.and [[GE]]{{$}}
// CHECK-NEXT:    [[OR:%.+]] = cmask.or [[AND]]{{$}}
// CHECK-NEXT:    cmask.yield [[OR]] : i1
cmask.spec @not_of_row_atom {
  cmask.metadata @p : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %p = cmask.meta @p
    %a = cmask.cmp lt, %i, %p
    %v = cmask.not %a
    cmask.yield %v : i1
  }
}

// -----

// any d in [0, 2]: j == 10 * d  ->  three conjuncts [0, 1), [10, 11), [20, 21).
// CHECK-LABEL: cmask.spec @union_unrolled
// CHECK:       } rule {
// CHECK-NOT:     cmask.any
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[C0:%.+]] = cmask.constant 0 : i64
// CHECK-DAG:     [[C1:%.+]] = cmask.constant 1 : i64
// CHECK-DAG:     [[C10:%.+]] = cmask.constant 10 : i64
// CHECK-DAG:     [[C11:%.+]] = cmask.constant 11 : i64
// CHECK-DAG:     [[C20:%.+]] = cmask.constant 20 : i64
// CHECK-DAG:     [[C21:%.+]] = cmask.constant 21 : i64
// CHECK-DAG:     [[H0:%.+]] = cmask.cmp lt, [[J]], [[C1]]
// CHECK-DAG:     [[L0:%.+]] = cmask.cmp ge, [[J]], [[C0]]
// CHECK-DAG:     [[H1:%.+]] = cmask.cmp lt, [[J]], [[C11]]
// CHECK-DAG:     [[L1:%.+]] = cmask.cmp ge, [[J]], [[C10]]
// CHECK-DAG:     [[H2:%.+]] = cmask.cmp lt, [[J]], [[C21]]
// CHECK-DAG:     [[L2:%.+]] = cmask.cmp ge, [[J]], [[C20]]
// CHECK-DAG:     [[A0:%.+]] = cmask.and [[H0]], [[L0]]
// CHECK-DAG:     [[A1:%.+]] = cmask.and [[H1]], [[L1]]
// CHECK-DAG:     [[A2:%.+]] = cmask.and [[H2]], [[L2]]
// CHECK:         [[OR:%.+]] = cmask.or [[A0]], [[A1]], [[A2]]{{$}}
// CHECK-NEXT:    cmask.yield [[OR]] : i1
cmask.spec @union_unrolled {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %u = cmask.any %d in [0, 2] {
      %c10 = cmask.constant 10 : i64
      %y = cmask.mul %d, %c10
      %e = cmask.cmp eq, %j, %y
      cmask.yield %e : i1
    }
    cmask.yield %u : i1
  }
}

// -----

// Negative union bounds and `d * j` (a constant multiple of j in each copy):
// d = -1: -j <= i -> j >= -i;  d = 0: 0 <= i;  d = 1: j <= i -> j < i + 1.
// CHECK-LABEL: cmask.spec @union_scaled_j
// CHECK:       } rule {
// CHECK-NOT:     cmask.any
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[ROW:%.+]] = cmask.cmp le, {{%.+}}, [[I]]
// CHECK-DAG:     [[NEGI:%.+]] = cmask.mul {{%.+}}, [[I]]
// CHECK-DAG:     [[LO:%.+]] = cmask.cmp ge, [[J]], [[NEGI]]
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[HI:%.+]] = cmask.cmp lt, [[J]], [[IP1]]
// CHECK-DAG:     [[A0:%.+]] = cmask.and [[ROW]]{{$}}
// CHECK-DAG:     [[A1:%.+]] = cmask.and [[LO]]{{$}}
// CHECK-DAG:     [[A2:%.+]] = cmask.and [[HI]]{{$}}
// CHECK:         [[OR:%.+]] = cmask.or [[A0]], [[A1]], [[A2]]{{$}}
// CHECK-NEXT:    cmask.yield [[OR]] : i1
cmask.spec @union_scaled_j {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %u = cmask.any %d in [-1, 1] {
      %jd = cmask.mul %d, %j
      %e = cmask.cmp le, %jd, %i
      cmask.yield %e : i1
    }
    cmask.yield %u : i1
  }
}

// -----

// j floordiv 4 == i floordiv 4  ->  4 * (i floordiv 4) <= j < 4 * (i floordiv 4) + 4.
// CHECK-LABEL: cmask.spec @block_diagonal
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[BI:%.+]] = cmask.floordiv [[I]], [[C4:%.+]]
// CHECK-DAG:     [[LO:%.+]] = cmask.cmp ge, [[J]], [[LOV:%.+]]
// CHECK-DAG:     [[LOV]] = cmask.mul {{%.+}}, [[BI]]
// CHECK-DAG:     [[HI:%.+]] = cmask.cmp lt, [[J]], [[HIV:%.+]]
// CHECK-DAG:     [[HIV]] = cmask.add [[M:%.+]], {{%.+}}
// CHECK-DAG:     [[M]] = cmask.mul {{%.+}}, [[BI]]
// CHECK:         [[AND:%.+]] = cmask.and [[HI]], [[LO]]
// CHECK-NEXT:    [[OR:%.+]] = cmask.or [[AND]]{{$}}
// CHECK-NEXT:    cmask.yield [[OR]] : i1
// CHECK-NOT:     cmask.floordiv [[J]]
cmask.spec @block_diagonal {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c4 = cmask.constant 4 : i64
    %bj = cmask.floordiv %j, %c4
    %bi = cmask.floordiv %i, %c4
    %v = cmask.cmp eq, %bj, %bi
    cmask.yield %v : i1
  }
}

// -----

// Nested floordiv of j: ((j floordiv 2) + 3) floordiv 3 <= i  <=>  j < 6 * i.
// CHECK-LABEL: cmask.spec @nested_floordiv
// CHECK:       } rule {
// CHECK-NOT:     cmask.floordiv
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[C6:%.+]] = cmask.constant 6 : i64
// CHECK-DAG:     [[SIXI:%.+]] = cmask.mul [[C6]], [[I]]
// CHECK-DAG:     [[HI:%.+]] = cmask.cmp lt, [[J]], [[SIXI]]
// CHECK:         [[AND:%.+]] = cmask.and [[HI]]{{$}}
// CHECK-NEXT:    [[OR:%.+]] = cmask.or [[AND]]{{$}}
cmask.spec @nested_floordiv {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c2 = cmask.constant 2 : i64
    %c3 = cmask.constant 3 : i64
    %h = cmask.floordiv %j, %c2
    %s = cmask.add %h, %c3
    %q = cmask.floordiv %s, %c3
    %v = cmask.cmp le, %q, %i
    cmask.yield %v : i1
  }
}

// -----

// seg(j) == seg(i)  ->  seg_start(seg(i)) <= j < seg_end(seg(i)).
// CHECK-LABEL: cmask.spec @document
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[SI:%.+]] = cmask.seg @docs([[I]])
// CHECK-DAG:     [[START:%.+]] = cmask.seg_start @docs([[SI]])
// CHECK-DAG:     [[END:%.+]] = cmask.seg_end @docs([[SI]])
// CHECK-DAG:     [[LO:%.+]] = cmask.cmp ge, [[J]], [[START]]
// CHECK-DAG:     [[HI:%.+]] = cmask.cmp lt, [[J]], [[END]]
// CHECK:         [[AND:%.+]] = cmask.and [[HI]], [[LO]]
// CHECK-NEXT:    [[OR:%.+]] = cmask.or [[AND]]{{$}}
// CHECK-NEXT:    cmask.yield [[OR]] : i1
// CHECK-NOT:     cmask.seg @docs([[J]])
cmask.spec @document {
  cmask.metadata @docs : offsets
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %si = cmask.seg @docs(%i)
    %sj = cmask.seg @docs(%j)
    %v = cmask.cmp eq, %sj, %si
    cmask.yield %v : i1
  }
}

// -----

// j != i  ->  (j < i) or (j >= i + 1): two conjuncts.
// CHECK-LABEL: cmask.spec @not_self
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[BELOW:%.+]] = cmask.cmp lt, [[J]], [[I]]
// CHECK-DAG:     [[IP1:%.+]] = cmask.add [[I]], {{%.+}}
// CHECK-DAG:     [[ABOVE:%.+]] = cmask.cmp ge, [[J]], [[IP1]]
// CHECK-DAG:     [[A0:%.+]] = cmask.and [[BELOW]]{{$}}
// CHECK-DAG:     [[A1:%.+]] = cmask.and [[ABOVE]]{{$}}
// CHECK:         [[OR:%.+]] = cmask.or [[A0]], [[A1]]{{$}}
// CHECK-NEXT:    cmask.yield [[OR]] : i1
// CHECK-NOT:     cmask.cmp ne
cmask.spec @not_self {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp ne, %j, %i
    cmask.yield %v : i1
  }
}

// -----

// max(2 * j, 3) <= i  ->  i >= 3 (written -i + 2 < 0) and j < i floordiv 2 + 1.
// CHECK-LABEL: cmask.spec @max_of_j
// CHECK:       } rule {
// CHECK-DAG:     [[I:%.+]] = cmask.var i
// CHECK-DAG:     [[J:%.+]] = cmask.var j
// CHECK-DAG:     [[HALF:%.+]] = cmask.floordiv [[I]], {{%.+}}
// CHECK-DAG:     [[HIV:%.+]] = cmask.add [[HALF]], {{%.+}}
// CHECK-DAG:     [[HI:%.+]] = cmask.cmp lt, [[J]], [[HIV]]
// CHECK:         [[AND:%.+]] = cmask.and [[ROW:%.+]], [[HI]]
// CHECK-NEXT:    [[OR:%.+]] = cmask.or [[AND]]{{$}}
// CHECK-NOT:     cmask.max
cmask.spec @max_of_j {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c3 = cmask.constant 3 : i64
    %c2 = cmask.constant 2 : i64
    %m = cmask.mul %c2, %j
    %x = cmask.max %m, %c3
    %v = cmask.cmp le, %x, %i
    cmask.yield %v : i1
  }
}

// -----

// Constant rules: `true` is one empty conjunct, `false` no conjunct.
// CHECK-LABEL: cmask.spec @constants
// CHECK:         cmask.region @all guard {
// CHECK:         } rule {
// CHECK-NEXT:      [[T:%.+]] = cmask.constant true
// CHECK-NEXT:      [[OR:%.+]] = cmask.or [[T]]{{$}}
// CHECK-NEXT:      cmask.yield [[OR]] : i1
// CHECK:         cmask.region @none guard {
// CHECK:         } rule {
// CHECK-NEXT:      [[F:%.+]] = cmask.constant false
// CHECK-NEXT:      cmask.yield [[F]] : i1
cmask.spec @constants {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
  cmask.region @none guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %a = cmask.cmp lt, %j, %i
    %b = cmask.cmp ge, %j, %i
    %v = cmask.and %a, %b
    cmask.yield %v : i1
  }
}
