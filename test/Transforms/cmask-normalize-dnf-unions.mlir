// RUN: cmask-opt %s -split-input-file -verify-diagnostics --cmask-normalize-dnf
// RUN: not cmask-opt %s -split-input-file --cmask-lower-to-intervals 2>&1 | FileCheck %s
// RUN: not cmask-opt %s -split-input-file --cmask-normalize-dnf=max-unrolled-atoms=4096 2>&1 | FileCheck %s --check-prefix=LOWER

// The work a rule's unions may take is bounded: the size of the unrolled
// rule is computed before anything is built, and the union that passes the
// bound is reported.

// Two nested unions of 1024 values: 1,048,576 atoms.
cmask.spec @nested_unions {
  // expected-note @below {{while normalizing the rule of region @all}}
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %k = cmask.constant 1000 : i64
    // expected-error @below {{unrolling the bounded unions gives 1048576 atoms; a rule may unroll to at most 262144 in all (narrow the unions' bounds)}}
    %u = cmask.any %a in [0, 1023] {
      %v = cmask.any %b in [0, 1023] {
        %m = cmask.mul %a, %k
        %s = cmask.add %m, %b
        %c = cmask.cmp eq, %j, %s
        cmask.yield %c : i1
      }
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}

// -----

// 262,144 atoms, of which 1,279 are distinct: within the bound, and quick
// (duplicates are dropped in n log n).
// CHECK-LABEL: cmask.spec @many_equal_atoms
// With a lower bound (the fuzzer's), the same rule is refused:
// LOWER: error: unrolling the bounded unions gives 262144 atoms; a rule may unroll to at most 4096 in all
// CHECK: %[[HI:.+]] = cmask.constant 1279 : i64
// CHECK: cmask.slot [%{{.+}}, %[[HI]]) if %{{.+}}
cmask.spec @many_equal_atoms {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %j = cmask.var j
    %u = cmask.any %a in [0, 1023] {
      %v = cmask.any %b in [0, 255] {
        %s = cmask.add %a, %b
        %c = cmask.cmp le, %j, %s
        cmask.yield %c : i1
      }
      cmask.yield %v : i1
    }
    cmask.yield %u : i1
  }
}
