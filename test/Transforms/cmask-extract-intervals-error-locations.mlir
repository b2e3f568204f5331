// RUN: cmask-opt %s -split-input-file --cmask-extract-intervals -verify-diagnostics

// The "not in DNF" error of cmask-extract-intervals should point at the op
// that breaks the form: the `cmask.not` above an `or`, the `cmask.any` that
// was not unrolled (not at one of their operands).

cmask.spec @not_of_or {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %kl = cmask.var k_len
    %a = cmask.cmp lt, %j, %i
    %b = cmask.cmp ge, %j, %kl
    %o = cmask.or %a, %b
    // expected-error @below {{the rule is not in disjunctive normal form; run cmask-normalize-dnf first}}
    %v = cmask.not %o
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @union_not_unrolled {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{the rule is not in disjunctive normal form; run cmask-normalize-dnf first}}
    %u = cmask.any %d in [0, 1] {
      %e = cmask.cmp lt, %j, %d
      cmask.yield %e : i1
    }
    cmask.yield %u : i1
  }
}
