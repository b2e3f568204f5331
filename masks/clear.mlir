// clear: CLEAR multimodal mask. A sequence is T text tokens followed by an
// H x W image grid in row-major order (q_len = k_len = T + H * W). Text rows
// see everything. The image row at grid position (y, x) = ((i - T) floordiv W,
// (i - T) mod W) sees all text and the image keys inside the circle of radius
// r around it: for a grid-row offset d with d*d <= r*r (|d| <= R = 16, the
// static maximum radius) the keys of grid row y + d with
// |x' - x| <= s = isqrt(r*r - d*d), clipped to the grid.
// A row past the grid (y >= H, only when q_len > T + H * W) sees the text
// only; so the mask is symmetric for any lengths (`symmetric`: the column
// direction of the backward pass is the row direction, checked by the
// compiler).
// Metadata: @text_len (T), @height (H), @width (W), @radius (r): scalars.
// Expected slots: @text K = 1, [0, k_len); @image K = 1 + (2R + 1) = 34:
// [0, T) and, for every d in [-16, 16], if d*d <= r*r and 0 <= y + d < H,
// [T + (y+d)*W + max(x - s, 0), T + (y+d)*W + min(x + s, W - 1) + 1).
cmask.spec @clear attributes {symmetric} {
  cmask.metadata @text_len : scalar
  cmask.metadata @height : scalar
  cmask.metadata @width : scalar
  cmask.metadata @radius : scalar
  cmask.region @text guard {
    %i = cmask.var i
    %T = cmask.meta @text_len
    %g = cmask.cmp lt, %i, %T
    cmask.yield %g : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
  cmask.region @image guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %T = cmask.meta @text_len
    %H = cmask.meta @height
    %W = cmask.meta @width
    %r = cmask.meta @radius
    %c0 = cmask.constant 0 : i64
    %c1 = cmask.constant 1 : i64
    %pos = cmask.sub %i, %T
    %y = cmask.floordiv %pos, %W
    %x = cmask.mod %pos, %W
    %rr = cmask.mul %r, %r
    %wmax = cmask.sub %W, %c1
    %text = cmask.cmp lt, %j, %T
    %in_grid = cmask.cmp lt, %y, %H
    %img = cmask.any %d in [-16, 16] {
      %dd = cmask.mul %d, %d
      %in_radius = cmask.cmp le, %dd, %rr
      %yd = cmask.add %y, %d
      %row_ge0 = cmask.cmp ge, %yd, %c0
      %row_ltH = cmask.cmp lt, %yd, %H
      %rem = cmask.sub %rr, %dd
      %s = cmask.isqrt %rem
      %row_off = cmask.mul %yd, %W
      %base = cmask.add %T, %row_off
      %xl = cmask.sub %x, %s
      %xlc = cmask.max %xl, %c0
      %xh = cmask.add %x, %s
      %xhc = cmask.min %xh, %wmax
      %lo = cmask.add %base, %xlc
      %hi = cmask.add %base, %xhc
      %j_ge = cmask.cmp ge, %j, %lo
      %j_le = cmask.cmp le, %j, %hi
      %ok = cmask.and %in_grid, %in_radius, %row_ge0, %row_ltH, %j_ge, %j_le
      cmask.yield %ok : i1
    }
    %v = cmask.or %text, %img
    cmask.yield %v : i1
  }
}
