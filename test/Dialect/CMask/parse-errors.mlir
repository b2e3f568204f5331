// RUN: cmask-opt %s -split-input-file -verify-diagnostics

// Parser-level errors of the cmask custom assembly formats.

cmask.spec @union_without_bounds {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{custom op 'cmask.any' a bounded union needs static inclusive bounds: write `cmask.any %d in [lo, hi] { ... }`}}
    %u = cmask.any %d {
      %v = cmask.cmp le, %j, %d
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

cmask.spec @union_bounds_without_comma {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{expected ','}}
    %u = cmask.any %d in [0 1] {
      %v = cmask.cmp le, %j, %d
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

cmask.spec @union_bound_not_integer {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %c = cmask.constant 4 : i64
    // Bounds are static: an SSA value is not accepted.
    // expected-error @below {{custom op 'cmask.any' expected integer value}}
    %u = cmask.any %d in [0, %c] {
      %v = cmask.cmp le, %j, %d
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

cmask.spec @union_bound_too_large {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{custom op 'cmask.any' integer value too large}}
    %u = cmask.any %d in [0, 99999999999999999999] {
      %v = cmask.cmp le, %j, %d
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

cmask.spec @unknown_builtin {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // expected-error @below {{custom op 'cmask.var' expected string or keyword containing one of the following enum values for attribute 'kind' [i, j, b, q_len, k_len]}}
    %x = cmask.var x
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @unknown_role {
  // expected-error @below {{custom op 'cmask.metadata' expected string or keyword containing one of the following enum values for attribute 'role' [scalar, per_sequence, offsets]}}
  cmask.metadata @m : vector
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @unknown_predicate {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    // expected-error @below {{custom op 'cmask.cmp' expected string or keyword containing one of the following enum values for attribute 'predicate' [eq, ne, lt, le, gt, ge]}}
    %v = cmask.cmp foo, %i, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @closed_slot {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %t = cmask.constant true
    // A slot is half-open: `[lo, hi)`.
    // expected-error @below {{expected ')'}}
    %s = cmask.slot [%i, %i] if %t
    cmask.slots %s
  }
}

// -----

cmask.spec @slot_without_condition {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %c0 = cmask.constant 0 : i64
    // The error is reported at the next token.
    %s = cmask.slot [%c0, %i)
    // expected-error @below {{custom op 'cmask.slot' expected 'if'}}
    cmask.slots %s
  }
}

// -----

cmask.spec @slot_of_booleans {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // expected-note @below {{prior use here}}
    %t = cmask.constant true
    // expected-error @below {{use of value '%t' expects different type than prior uses: 'i64' vs 'i1'}}
    %s = cmask.slot [%t, %t) if %t
    cmask.slots %s
  }
}

// -----

cmask.spec @region_without_guard {
  // expected-error @below {{custom op 'cmask.region' expected 'guard'}}
  cmask.region @r rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

// expected-error @below {{custom op 'cmask.spec' expected valid '@'-identifier for symbol name}}
cmask.spec {
}

// -----

cmask.spec @yield_without_type {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    // expected-error @below {{expected ':'}}
    cmask.yield %t
  }
}

// -----

cmask.spec @meta_without_name {
  cmask.metadata @m : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // expected-error @below {{expected attribute value}}
    %m = cmask.meta
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @lookup_without_index {
  cmask.metadata @p : per_sequence
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // expected-error @below {{expected '['}}
    %p = cmask.lookup @p
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @undefined_value {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    // expected-error @below {{use of undeclared SSA value name}}
    %v = cmask.cmp le, %i, %undefined
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @unknown_type {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // expected-error @below {{unknown  type `nope` in dialect `cmask`}}
    %x = "cmask.var"() <{kind = 0 : i32}> : () -> !cmask.nope
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @union_without_brackets {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{custom op 'cmask.any' a bounded union needs static inclusive bounds: write `cmask.any %d in [lo, hi] { ... }`}}
    %u = cmask.any %d in 0, 4 {
      %v = cmask.cmp le, %j, %d
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

// Each region of a cmask.region is its own name scope: a rule cannot use a
// value of another region.
cmask.spec @value_of_another_region {
  cmask.metadata @num_targets : per_sequence
  cmask.region @context guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{use of undeclared SSA value name}}
    %v = cmask.cmp lt, %j, %ht
    cmask.yield %v : i1
  }
  cmask.region @history guard {
    %i = cmask.var i
    %ht = cmask.var q_len
    %g = cmask.cmp lt, %i, %ht
    cmask.yield %g : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @name_among_attributes {
  // expected-error @below {{custom op 'cmask.region' takes its name before the attributes, not among them}}
  cmask.region @r attributes {sym_name = "r"} guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

// expected-error @below {{custom op 'cmask.spec' attribute 'num_slots' failed to satisfy constraint: 64-bit signless integer attribute}}
cmask.spec @bad_attribute attributes {num_slots = "two"} {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}
