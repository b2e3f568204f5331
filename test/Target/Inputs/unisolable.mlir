cmask.spec @unisolable {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c2 = cmask.constant 2 : i64
    %h = cmask.floordiv %j, %c2
    %s = cmask.add %j, %h
    %v = cmask.cmp le, %s, %i
    cmask.yield %v : i1
  }
}
