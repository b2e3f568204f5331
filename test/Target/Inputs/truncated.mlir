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
