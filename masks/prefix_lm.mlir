// prefix_lm: prefix language model. Every row sees the whole prefix of
// prefix_len[b] keys bidirectionally, and the rest causally:
// j < prefix_len[b] or j <= i.
// Metadata: @prefix_len (per_sequence).
// Expected slots: K = 1; [0, p) and [0, i + 1) merge to [0, max(p, i + 1)).
cmask.spec @prefix_lm {
  cmask.metadata @prefix_len : per_sequence
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %b = cmask.var b
    %p = cmask.lookup @prefix_len[%b]
    %in_prefix = cmask.cmp lt, %j, %p
    %causal = cmask.cmp le, %j, %i
    %v = cmask.or %in_prefix, %causal
    cmask.yield %v : i1
  }
}
