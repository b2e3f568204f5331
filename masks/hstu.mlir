// hstu: HSTU generative recommender. A sequence is c contextual tokens, then
// the user history, then num_targets[b] target items at its end;
// hist_end = q_len - num_targets[b]. Context rows see context + history;
// history rows see the context and the history up to themselves; each
// target sees context + history and itself only.
// Metadata: @context (scalar c), @num_targets (per_sequence).
// Expected slots: @contextual K = 1, [0, hist_end); @history K = 1 after merging
// [0, c) with [c, i + 1) into [0, max(c, i + 1)), which is [0, i + 1) since
// i >= c on these rows; @target K = 2, [0, hist_end) and [i, i + 1).
// Spec K = 2.
cmask.spec @hstu {
  cmask.metadata @context : scalar
  cmask.metadata @num_targets : per_sequence
  cmask.region @contextual guard {
    %i = cmask.var i
    %c = cmask.meta @context
    %g = cmask.cmp lt, %i, %c
    cmask.yield %g : i1
  } rule {
    %j = cmask.var j
    %b = cmask.var b
    %ql = cmask.var q_len
    %nt = cmask.lookup @num_targets[%b]
    %hist_end = cmask.sub %ql, %nt
    %v = cmask.cmp lt, %j, %hist_end
    cmask.yield %v : i1
  }
  cmask.region @history guard {
    %i = cmask.var i
    %b = cmask.var b
    %ql = cmask.var q_len
    %nt = cmask.lookup @num_targets[%b]
    %hist_end = cmask.sub %ql, %nt
    %g = cmask.cmp lt, %i, %hist_end
    cmask.yield %g : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c = cmask.meta @context
    %in_ctx = cmask.cmp lt, %j, %c
    %after_ctx = cmask.cmp ge, %j, %c
    %causal = cmask.cmp le, %j, %i
    %hist = cmask.and %after_ctx, %causal
    %v = cmask.or %in_ctx, %hist
    cmask.yield %v : i1
  }
  cmask.region @target guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %b = cmask.var b
    %ql = cmask.var q_len
    %nt = cmask.lookup @num_targets[%b]
    %hist_end = cmask.sub %ql, %nt
    %in_hist = cmask.cmp lt, %j, %hist_end
    %self = cmask.cmp eq, %j, %i
    %v = cmask.or %in_hist, %self
    cmask.yield %v : i1
  }
}
