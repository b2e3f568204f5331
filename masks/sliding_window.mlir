// sliding_window: causal sliding window. Row i sees keys j with
// 0 <= i - j <= window, i.e. itself and the `window` keys before it.
// Metadata: @window (scalar).
// Expected slots: K = 1, [i - window, i + 1).
cmask.spec @sliding_window {
  cmask.metadata @window : scalar
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %w = cmask.meta @window
    %c0 = cmask.constant 0 : i64
    %dist = cmask.sub %i, %j
    %past = cmask.cmp le, %c0, %dist
    %near = cmask.cmp le, %dist, %w
    %v = cmask.and %past, %near
    cmask.yield %v : i1
  }
}
