cmask.spec @invalid {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %jj = cmask.mul %j, %j
    %v = cmask.cmp le, %jj, %i
    cmask.yield %v : i1
  }
}
