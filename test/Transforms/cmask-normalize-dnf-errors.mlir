// RUN: cmask-opt %s -split-input-file --cmask-normalize-dnf=max-conjuncts=4 -verify-diagnostics

// Analysis errors reported by cmask-normalize-dnf, at the atom they come from.

cmask.spec @two_j_terms {
  // expected-note @below {{while normalizing the rule of region @r}}
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c2 = cmask.constant 2 : i64
    %h = cmask.floordiv %j, %c2
    %s = cmask.add %j, %h
    // expected-error @below {{cannot isolate j in `j + (j floordiv 2) <= i`: j appears in two terms that cannot be combined, `j` and `j floordiv 2`}}
    %v = cmask.cmp le, %s, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @j_minus_min {
  // expected-note @below {{while normalizing the rule of region @r}}
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c2 = cmask.constant 2 : i64
    %m = cmask.min %j, %i
    %s = cmask.sub %j, %m
    // expected-error @below {{cannot isolate j in `j - min(i, j) <= 2`: j appears in two terms that cannot be combined, `j` and `min(i, j)`}}
    %v = cmask.cmp le, %s, %c2
    cmask.yield %v : i1
  }
}

// -----

// The error points at the atom even when it sits under `not` and `or`, and
// the other regions are left alone.
cmask.spec @nested_atom {
  cmask.region @fine guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
  // expected-note @below {{while normalizing the rule of region @bad}}
  cmask.region @bad guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c3 = cmask.constant 3 : i64
    %q = cmask.floordiv %j, %c3
    %s = cmask.sub %q, %j
    %a = cmask.cmp lt, %j, %i
    // (The message quotes the atom after `not` was pushed into it.)
    // expected-error @below {{cannot isolate j in `-j + (j floordiv 3) < 3`: j appears in two terms that cannot be combined, `j` and `j floordiv 3`}}
    %b = cmask.cmp ge, %s, %c3
    %o = cmask.or %a, %b
    %v = cmask.not %o
    cmask.yield %v : i1
  }
}

// -----

// (a0 or a1) and (b0 or b1) and (e0 or e1) has 8 conjuncts > max-conjuncts=4.
cmask.spec @dnf_too_large {
  // expected-error @below {{the rule's disjunctive normal form would have more than 4 conjuncts; simplify the rule or split it into several regions}}
  // expected-note @below {{while normalizing the rule of region @r}}
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c1 = cmask.constant 1 : i64
    %c2 = cmask.constant 2 : i64
    %c3 = cmask.constant 3 : i64
    %a0 = cmask.cmp lt, %j, %c1
    %a1 = cmask.cmp ge, %j, %i
    %b0 = cmask.cmp lt, %j, %c2
    %b1 = cmask.cmp ge, %i, %c1
    %e0 = cmask.cmp lt, %j, %c3
    %e1 = cmask.cmp ge, %i, %c2
    %o0 = cmask.or %a0, %a1
    %o1 = cmask.or %b0, %b1
    %o2 = cmask.or %e0, %e1
    %v = cmask.and %o0, %o1, %o2
    cmask.yield %v : i1
  }
}

// -----

// Two binary ors give 4 conjuncts: exactly at the limit, accepted.
cmask.spec @dnf_at_limit {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c1 = cmask.constant 1 : i64
    %c2 = cmask.constant 2 : i64
    %a0 = cmask.cmp lt, %j, %c1
    %a1 = cmask.cmp ge, %j, %i
    %b0 = cmask.cmp lt, %j, %c2
    %b1 = cmask.cmp ge, %i, %c1
    %o0 = cmask.or %a0, %a1
    %o1 = cmask.or %b0, %b1
    %v = cmask.and %o0, %o1
    cmask.yield %v : i1
  }
}

// -----

// Products of 32-bit literals can still leave 64 bits: the coefficient of j
// below is (2^31 - 1)^3. Rejected rather than silently wrapped, at the op
// whose folding overflows.
cmask.spec @coefficient_overflow {
  // expected-note @below {{while normalizing the rule of region @all}}
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c = cmask.constant 2147483647 : i64
    %c2 = cmask.mul %c, %c
    // expected-error @below {{constant arithmetic here overflows 64-bit integers (the compiler's exact rewrites would no longer match the 64-bit evaluation); use smaller constants}}
    %c3 = cmask.mul %c2, %c
    %x = cmask.mul %j, %c3
    %v = cmask.cmp le, %x, %i
    cmask.yield %v : i1
  }
}

// -----

// An overflow that only the rewrites produce (here the union's copies:
// d * 2^31-ish coefficients summed) is reported at the union.
cmask.spec @union_overflow {
  // expected-note @below {{while normalizing the rule of region @all}}
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c = cmask.constant 2147483647 : i64
    %c2 = cmask.mul %c, %c
    // expected-error @below {{constant arithmetic here overflows 64-bit integers}}
    %u = cmask.any %d in [0, 3] {
      %m = cmask.mul %c2, %d
      %s = cmask.add %i, %m
      %v = cmask.cmp le, %j, %s
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

// The guard's constant arithmetic is checked too (the slot prover and the
// preprocess use its simplified form).
cmask.spec @guard_overflow {
  // expected-note @below {{while normalizing the guard of region @all}}
  cmask.region @all guard {
    %i = cmask.var i
    %c = cmask.constant 2147483647 : i64
    %c2 = cmask.mul %c, %c
    // expected-error @below {{constant arithmetic here overflows 64-bit integers}}
    %c3 = cmask.mul %c2, %c
    %g = cmask.cmp lt, %i, %c3
    cmask.yield %g : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}
