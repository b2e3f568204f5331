// RUN: cmask-opt %s --cmask-lower-to-intervals --convert-cmask-to-gpu="attention-head-dims=" --verify-diagnostics
// One argument group alone past the 4 KB of kernel parameters (50 offsets
// metadata: 100 buffers in the row group) has no plan: a located error.

// expected-error @+1 {{'cmask.spec' op the preprocess kernel's parameters of one argument group (4224 bytes: its metadata) pass CUDA's 4 KB; declare fewer metadata inputs}}
cmask.spec @many {
  cmask.metadata @m0 : offsets
  cmask.metadata @m1 : offsets
  cmask.metadata @m2 : offsets
  cmask.metadata @m3 : offsets
  cmask.metadata @m4 : offsets
  cmask.metadata @m5 : offsets
  cmask.metadata @m6 : offsets
  cmask.metadata @m7 : offsets
  cmask.metadata @m8 : offsets
  cmask.metadata @m9 : offsets
  cmask.metadata @m10 : offsets
  cmask.metadata @m11 : offsets
  cmask.metadata @m12 : offsets
  cmask.metadata @m13 : offsets
  cmask.metadata @m14 : offsets
  cmask.metadata @m15 : offsets
  cmask.metadata @m16 : offsets
  cmask.metadata @m17 : offsets
  cmask.metadata @m18 : offsets
  cmask.metadata @m19 : offsets
  cmask.metadata @m20 : offsets
  cmask.metadata @m21 : offsets
  cmask.metadata @m22 : offsets
  cmask.metadata @m23 : offsets
  cmask.metadata @m24 : offsets
  cmask.metadata @m25 : offsets
  cmask.metadata @m26 : offsets
  cmask.metadata @m27 : offsets
  cmask.metadata @m28 : offsets
  cmask.metadata @m29 : offsets
  cmask.metadata @m30 : offsets
  cmask.metadata @m31 : offsets
  cmask.metadata @m32 : offsets
  cmask.metadata @m33 : offsets
  cmask.metadata @m34 : offsets
  cmask.metadata @m35 : offsets
  cmask.metadata @m36 : offsets
  cmask.metadata @m37 : offsets
  cmask.metadata @m38 : offsets
  cmask.metadata @m39 : offsets
  cmask.metadata @m40 : offsets
  cmask.metadata @m41 : offsets
  cmask.metadata @m42 : offsets
  cmask.metadata @m43 : offsets
  cmask.metadata @m44 : offsets
  cmask.metadata @m45 : offsets
  cmask.metadata @m46 : offsets
  cmask.metadata @m47 : offsets
  cmask.metadata @m48 : offsets
  cmask.metadata @m49 : offsets
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
