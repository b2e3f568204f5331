// document: bidirectional attention inside each document of a packed
// sequence. Row i sees every key j of its own document: seg(j) == seg(i).
// Metadata: @docs (offsets): document boundaries inside each sequence.
// Expected slots: K = 1, [seg_start(seg(i)), seg_end(seg(i))).
cmask.spec @document {
  cmask.metadata @docs : offsets
  cmask.region @all guard {
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
