// RUN: cmask-opt %s -split-input-file -verify-diagnostics

// Verifier diagnostics of the cmask dialect: one case per distinct error.

//===----------------------------------------------------------------------===//
// j that cannot be isolated
//===----------------------------------------------------------------------===//

cmask.spec @j_in_guard {
  cmask.region @r guard {
    // expected-error @below {{'cmask.var' op `j` cannot appear in a row guard: a guard selects query rows and may use only i, b, q_len, k_len and metadata; move the condition on j into the rule}}
    %j = cmask.var j
    %c0 = cmask.constant 0 : i64
    %g = cmask.cmp ge, %j, %c0
    cmask.yield %g : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @j_times_j {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // expected-error @below {{'cmask.mul' op cannot isolate j: both factors depend on j; a product like `j * j` is not linear in j}}
    %jj = cmask.mul %j, %j
    %v = cmask.cmp le, %jj, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @j_times_metadata {
  cmask.metadata @w : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %w = cmask.meta @w
    // expected-error @below {{'cmask.mul' op cannot isolate j: j is multiplied by a factor that is not a constant (it depends on metadata or a variable); only constant multiples of j are allowed}}
    %jw = cmask.mul %j, %w
    %v = cmask.cmp le, %jw, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @j_times_i {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // A variable is no more a constant than metadata is.
    // expected-error @below {{'cmask.mul' op cannot isolate j: j is multiplied by a factor that is not a constant}}
    %ij = cmask.mul %i, %j
    %v = cmask.cmp le, %ij, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @j_mod_constant {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %c0 = cmask.constant 0 : i64
    %c3 = cmask.constant 3 : i64
    // expected-error @below {{'cmask.mod' op cannot isolate j: `mod` of a j-dependent value selects keys periodically, not a bounded number of intervals}}
    %m = cmask.mod %j, %c3
    %v = cmask.cmp eq, %m, %c0
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @j_mod_metadata {
  cmask.metadata @w : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %c0 = cmask.constant 0 : i64
    %w = cmask.meta @w
    // expected-error @below {{'cmask.mod' op cannot isolate j: `mod` of a j-dependent value selects keys periodically}}
    %m = cmask.mod %j, %w
    %v = cmask.cmp eq, %m, %c0
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @divisor_depends_on_j {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c1 = cmask.constant 1 : i64
    // expected-error @below {{'cmask.floordiv' op cannot isolate j: the divisor depends on j}}
    %q = cmask.floordiv %i, %j
    %v = cmask.cmp eq, %q, %c1
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @floordiv_j_by_metadata {
  cmask.metadata @w : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %w = cmask.meta @w
    // expected-error @below {{'cmask.floordiv' op cannot isolate j: a j-dependent dividend needs a positive constant divisor}}
    %q = cmask.floordiv %j, %w
    %v = cmask.cmp eq, %q, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @floordiv_j_by_negative {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %cm4 = cmask.constant -4 : i64
    // expected-error @below {{'cmask.floordiv' op cannot isolate j: a j-dependent dividend needs a positive constant divisor}}
    %q = cmask.floordiv %j, %cm4
    %v = cmask.cmp eq, %q, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @floordiv_by_zero {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c0 = cmask.constant 0 : i64
    // expected-error @below {{'cmask.floordiv' op divides by zero}}
    %q = cmask.floordiv %i, %c0
    %v = cmask.cmp le, %j, %q
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @mod_by_zero {
  cmask.region @r guard {
    %i = cmask.var i
    %c0 = cmask.constant 0 : i64
    // expected-error @below {{'cmask.mod' op divides by zero}}
    %m = cmask.mod %i, %c0
    %g = cmask.cmp eq, %m, %c0
    cmask.yield %g : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @lookup_by_j {
  cmask.metadata @vals : per_sequence
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // expected-error @below {{'cmask.lookup' op cannot isolate j: metadata array @vals is indexed by a j-dependent value}}
    %x = cmask.lookup @vals[%j]
    %v = cmask.cmp le, %x, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @isqrt_of_j {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // expected-error @below {{'cmask.isqrt' op cannot isolate j: the square root of a j-dependent value is not linear in j}}
    %s = cmask.isqrt %j
    %v = cmask.cmp le, %s, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @select_on_j {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c0 = cmask.constant 0 : i64
    %c = cmask.cmp lt, %j, %i
    // expected-error @below {{'cmask.select' op cannot isolate j: a select may not depend on j; write the two cases as `(c and x) or (not c and y)`}}
    %s = cmask.select %c, %i, %c0
    %v = cmask.cmp le, %s, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @select_value_on_j {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %t = cmask.constant true
    // expected-error @below {{'cmask.select' op cannot isolate j: a select may not depend on j}}
    %s = cmask.select %t, %j, %i
    %v = cmask.cmp le, %s, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @seg_of_shifted_j {
  cmask.metadata @docs : offsets
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %c1 = cmask.constant 1 : i64
    %j1 = cmask.add %j, %c1
    // expected-error @below {{'cmask.seg' op cannot isolate j: the segment of a j-dependent position other than j itself; compare seg(j) and shift the other side}}
    %sj = cmask.seg @docs(%j1)
    %si = cmask.seg @docs(%i)
    %v = cmask.cmp eq, %sj, %si
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @seg_start_of_seg_j {
  cmask.metadata @docs : offsets
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %sj = cmask.seg @docs(%j)
    // expected-error @below {{'cmask.seg_start' op cannot isolate j: the start of a j-dependent segment; compare seg(j) with a j-free segment index instead}}
    %st = cmask.seg_start @docs(%sj)
    %v = cmask.cmp le, %st, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @seg_end_of_seg_j {
  cmask.metadata @docs : offsets
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %sj = cmask.seg @docs(%j)
    // expected-error @below {{'cmask.seg_end' op cannot isolate j: the end of a j-dependent segment; compare seg(j) with a j-free segment index instead}}
    %en = cmask.seg_end @docs(%sj)
    %v = cmask.cmp le, %i, %en
    cmask.yield %v : i1
  }
}

//===----------------------------------------------------------------------===//
// Metadata declarations and uses
//===----------------------------------------------------------------------===//

// -----

cmask.spec @undeclared_metadata {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{'cmask.meta' op uses undeclared metadata @window; declare it in the spec with `cmask.metadata @window : scalar`}}
    %w = cmask.meta @window
    %v = cmask.cmp lt, %j, %w
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @undeclared_offsets {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // expected-error @below {{'cmask.seg' op uses undeclared metadata @docs; declare it in the spec with `cmask.metadata @docs : offsets`}}
    %sj = cmask.seg @docs(%j)
    %v = cmask.cmp lt, %sj, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @region_is_not_metadata {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // A symbol of the spec that is not a cmask.metadata is not metadata.
    // expected-error @below {{'cmask.meta' op uses undeclared metadata @r}}
    %w = cmask.meta @r
    %v = cmask.cmp lt, %j, %w
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @meta_of_per_sequence {
  cmask.metadata @p : per_sequence
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{'cmask.meta' op needs scalar metadata, but @p is declared as per_sequence}}
    %p = cmask.meta @p
    %v = cmask.cmp lt, %j, %p
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @lookup_of_scalar {
  cmask.metadata @c : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %b = cmask.var b
    // expected-error @below {{'cmask.lookup' op needs per_sequence metadata, but @c is declared as scalar}}
    %c = cmask.lookup @c[%b]
    %v = cmask.cmp lt, %j, %c
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @seg_of_per_sequence {
  cmask.metadata @p : per_sequence
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // expected-error @below {{'cmask.seg' op needs offsets metadata, but @p is declared as per_sequence}}
    %sj = cmask.seg @p(%j)
    %v = cmask.cmp lt, %sj, %i
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @seg_start_of_scalar {
  cmask.metadata @c : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // expected-error @below {{'cmask.seg_start' op needs offsets metadata, but @c is declared as scalar}}
    %st = cmask.seg_start @c(%i)
    %v = cmask.cmp ge, %j, %st
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @seg_end_of_scalar {
  cmask.metadata @c : scalar
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // expected-error @below {{'cmask.seg_end' op needs offsets metadata, but @c is declared as scalar}}
    %en = cmask.seg_end @c(%i)
    %v = cmask.cmp lt, %j, %en
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @duplicate_metadata {
  // expected-note @below {{see existing symbol definition here}}
  cmask.metadata @w : scalar
  // expected-error @below {{redefinition of symbol named 'w'}}
  cmask.metadata @w : per_sequence
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @duplicate_region {
  // expected-note @below {{see existing symbol definition here}}
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
  // expected-error @below {{redefinition of symbol named 'r'}}
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

// expected-error @below {{'cmask.metadata' op expects parent op 'cmask.spec'}}
cmask.metadata @orphan : scalar

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

// -----

// expected-error @below {{'cmask.spec' op has no region; add at least one cmask.region saying which keys its rows see}}
cmask.spec @no_region {
  cmask.metadata @w : scalar
}

// -----

// expected-error @below {{'cmask.spec' op has no region}}
cmask.spec @empty {
}

// -----

cmask.spec @op_in_spec {
  // expected-error @below {{'cmask.constant' op cannot appear directly in a cmask.spec; a spec holds only cmask.metadata and cmask.region ops}}
  %c = cmask.constant 1 : i64
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

// expected-error @below {{'cmask.var' op must be inside a cmask.region}}
%i = cmask.var i

// -----

cmask.spec @guard_ends_in_slots {
  cmask.region @r guard {
    %c0 = cmask.constant 0 : i64
    %i = cmask.var i
    %t = cmask.constant true
    %s = cmask.slot [%c0, %i) if %t
    // expected-error @below {{'cmask.slots' op cannot end a guard; a guard ends in `cmask.yield %v : i1`}}
    cmask.slots %s
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @slot_depends_on_j {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %c0 = cmask.constant 0 : i64
    %j = cmask.var j
    %t = cmask.constant true
    // expected-error @below {{'cmask.slot' op endpoints and condition of a slot must not depend on j}}
    %s = cmask.slot [%c0, %j) if %t
    cmask.slots %s
  }
}

// -----

cmask.spec @slots_in_union {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %u = cmask.any %d in [0, 1] {
      // expected-error @below {{'cmask.slots' op expects parent op 'cmask.region'}}
      cmask.slots
    }
    cmask.yield %u : i1
  }
}

// -----

cmask.spec @empty_and {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // expected-error @below {{'cmask.and' op needs at least one operand}}
    %a = cmask.and
    cmask.yield %a : i1
  }
}

// -----

cmask.spec @empty_or {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // expected-error @below {{'cmask.or' op needs at least one operand}}
    %o = cmask.or
    cmask.yield %o : i1
  }
}

//===----------------------------------------------------------------------===//
// Bounded unions
//===----------------------------------------------------------------------===//

// -----

cmask.spec @empty_union {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{'cmask.any' op is an empty union: its lower bound 3 is greater than its upper bound 2}}
    %u = cmask.any %d in [3, 2] {
      %v = cmask.cmp le, %j, %d
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

cmask.spec @negative_empty_union {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{'cmask.any' op is an empty union: its lower bound -1 is greater than its upper bound -2}}
    %u = cmask.any %d in [-1, -2] {
      %v = cmask.cmp le, %j, %d
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

cmask.spec @union_too_large {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{'cmask.any' op unions over more than 1024 values are not supported (bounds [0, 4096])}}
    %u = cmask.any %d in [0, 4096] {
      %v = cmask.cmp le, %j, %d
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

cmask.spec @union_too_large_full_range {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{'cmask.any' op bounds [-9223372036854775808, 9223372036854775807] are outside the 32-bit range}}
    %u = cmask.any %d in [-9223372036854775808, 9223372036854775807] {
      %v = cmask.cmp le, %j, %d
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

cmask.spec @union_body_arguments {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // expected-error @below {{'cmask.any' op body must take the union variable as one i64 argument}}
    %u = "cmask.any"() <{lower = 0 : i64, upper = 1 : i64}> ({
    ^bb0(%d: i64, %e: i64):
      %v = cmask.cmp le, %d, %e
      cmask.yield %v : i1
    }) : () -> i1
    cmask.yield %u : i1
  }
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// -----

cmask.spec @add_of_i1 {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %t = cmask.constant true
    // expected-error @below {{'cmask.add' op operand #1 must be 64-bit signless integer, but got 'i1'}}
    %a = "cmask.add"(%i, %t) : (i64, i1) -> i64
    %j = cmask.var j
    %v = cmask.cmp le, %j, %a
    cmask.yield %v : i1
  }
}

// -----

cmask.spec @cmp_yields_i64 {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    // expected-error @below {{'cmask.cmp' op result #0 must be 1-bit signless integer, but got 'i64'}}
    %v = "cmask.cmp"(%j, %i) <{predicate = 3 : i32}> : (i64, i64) -> i64
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @yield_of_i64 {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    // expected-error @below {{'cmask.yield' op operand #0 must be 1-bit signless integer, but got 'i64'}}
    "cmask.yield"(%i) : (i64) -> ()
  }
}

// -----

cmask.spec @constant_i32 {
  cmask.region @r guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    // expected-error @below {{'cmask.constant' op result #0 must be 1-bit signless integer or 64-bit signless integer, but got 'i32'}}
    %c = cmask.constant 3 : i32
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}

// -----

cmask.spec @literal_too_large {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    // expected-error @below {{'cmask.constant' op literal 9223372036854775807 is outside the 32-bit range [-2147483648, 2147483647]; rules compute in 64 bits on 32-bit metadata and literals, so that they cannot overflow}}
    %c = cmask.constant 9223372036854775807 : i64
    %x = cmask.add %j, %c
    %v = cmask.cmp le, %x, %j
    cmask.yield %v : i1
  }
}
