// causal: top-left causal attention. Row i sees every key j <= i.
// Metadata: none.
// Expected slots: K = 1, [0, i + 1).
cmask.spec @causal {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp le, %j, %i
    cmask.yield %v : i1
  }
}
