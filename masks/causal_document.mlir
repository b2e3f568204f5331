// causal_document: causal attention inside each document of a packed
// sequence: seg(j) == seg(i) and j <= i.
// Metadata: @docs (offsets): document boundaries inside each sequence.
// Expected slots: K = 1, [seg_start(seg(i)), min(seg_end(seg(i)), i + 1)).
cmask.spec @causal_document {
  cmask.metadata @docs : offsets
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %si = cmask.seg @docs(%i)
    %sj = cmask.seg @docs(%j)
    %same = cmask.cmp eq, %sj, %si
    %causal = cmask.cmp le, %j, %i
    %v = cmask.and %same, %causal
    cmask.yield %v : i1
  }
}
