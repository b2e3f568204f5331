cmask.spec @first {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}
cmask.spec @second {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}
