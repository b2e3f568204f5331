// RUN: cmask-opt %s -split-input-file --cmask-extract-intervals -verify-diagnostics

// cmask-extract-intervals needs the form cmask-normalize-dnf produces.

cmask.spec @and_of_or {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %ql = cmask.var q_len
    %a = cmask.cmp lt, %j, %i
    %b = cmask.cmp ge, %j, %ql
    %c = cmask.cmp ge, %i, %ql
    %o = cmask.or %a, %b
    // expected-error @below {{the rule is not in disjunctive normal form; run cmask-normalize-dnf first}}
    %v = cmask.and %o, %c
    cmask.yield %v : i1
  }
}

// -----

// A comparison that mentions j but is not a bound `j >= e` / `j < e`.
cmask.spec @causal_not_normalized {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // expected-error @below {{atom `j <= i` mentions j but is not a bound `j >= e` or `j < e`; run cmask-normalize-dnf first}}
    %v = cmask.cmp le, %j, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @sliding_window_not_normalized {
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
    // expected-error @below {{atom `0 <= i - j` mentions j but is not a bound `j >= e` or `j < e`; run cmask-normalize-dnf first}}
    %past = cmask.cmp le, %c0, %dist
    %near = cmask.cmp le, %dist, %w
    %v = cmask.and %past, %near
    cmask.yield %v : i1
  }
}

// -----

// `not` of a bound is folded into the opposite bound (not j < i is j >= i),
// but `not` of a j atom that is not a bound is still not in the right form.
cmask.spec @not_of_atom {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %a = cmask.cmp le, %j, %i
    // expected-error @below {{atom `j > i` mentions j but is not a bound `j >= e` or `j < e`; run cmask-normalize-dnf first}}
    %n = cmask.not %a
    cmask.yield %n : i1
  }
}
