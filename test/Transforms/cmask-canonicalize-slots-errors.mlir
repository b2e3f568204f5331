// RUN: cmask-opt %s -split-input-file --cmask-canonicalize-slots -verify-diagnostics

// cmask-canonicalize-slots needs every rule in slot form.

cmask.spec @causal {
  // expected-error @below {{'cmask.region' op has no slots yet; run cmask-extract-intervals before cmask-canonicalize-slots}}
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %v = cmask.cmp le, %j, %i
    cmask.yield %v : i1
  }
}

// -----

// One region in slot form does not make the others so.
cmask.spec @mixed {
  cmask.region @lowered guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    cmask.slots
  }
  // expected-error @below {{'cmask.region' op has no slots yet; run cmask-extract-intervals before cmask-canonicalize-slots}}
  cmask.region @pending guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %t = cmask.constant true
    cmask.yield %t : i1
  }
}
