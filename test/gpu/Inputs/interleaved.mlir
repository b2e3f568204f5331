// interleaved: even rows are causal; odd rows see a sink of 16 keys and a
// causal window of 96 keys before them. `i mod 2` in the guard defeats the
// column derivation (column mode "rows"): the backward masks with the row
// intervals (test_backward.py::test_row_intervals).
cmask.spec @interleaved {
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
  cmask.region @odd guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c16 = cmask.constant 16 : i64
    %c96 = cmask.constant 96 : i64
    %sink = cmask.cmp lt, %j, %c16
    %d = cmask.sub %i, %j
    %c0 = cmask.constant 0 : i64
    %past = cmask.cmp le, %c0, %d
    %near = cmask.cmp le, %d, %c96
    %win = cmask.and %past, %near
    %v = cmask.or %sink, %win
    cmask.yield %v : i1
  }
}
