cmask.spec @foreign {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %x = builtin.unrealized_conversion_cast %j : i64 to i64
    %i = cmask.var i
    %v = cmask.cmp le, %x, %i
    cmask.yield %v : i1
  }
}
