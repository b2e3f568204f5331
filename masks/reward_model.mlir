// reward_model: shared-prompt reward model. Each sequence is a prompt of
// prompt_len[b] tokens followed by several responses; @responses holds the
// response start boundaries inside the sequence. Prompt rows are causal; a
// response row sees the whole prompt and its own response causally:
// j < prompt_len[b] or (seg(j) == seg(i) and j <= i).
// Metadata: @prompt_len (per_sequence), @responses (offsets).
// Expected slots: region @prompt K = 1, [0, i + 1); region @response K = 2,
// [0, P) and [seg_start(seg(i)), min(seg_end(seg(i)), i + 1)). Spec K = 2.
cmask.spec @reward_model {
  cmask.metadata @prompt_len : per_sequence
  cmask.metadata @responses : offsets
  cmask.region @prompt guard {
    %i = cmask.var i
    %b = cmask.var b
    %p = cmask.lookup @prompt_len[%b]
    %g = cmask.cmp lt, %i, %p
    cmask.yield %g : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp le, %j, %i
    cmask.yield %v : i1
  }
  cmask.region @response guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %b = cmask.var b
    %p = cmask.lookup @prompt_len[%b]
    %in_prompt = cmask.cmp lt, %j, %p
    %si = cmask.seg @responses(%i)
    %sj = cmask.seg @responses(%j)
    %same = cmask.cmp eq, %sj, %si
    %causal = cmask.cmp le, %j, %i
    %own = cmask.and %same, %causal
    %v = cmask.or %in_prompt, %own
    cmask.yield %v : i1
  }
}
