// cmask-translate evaluators on small batches (docs/metadata-json.md).

// This file's spec: bottom-right causal cross attention `j <= i + k_len - q_len`.
// RUN: cmask-translate %s --cmask-to-intervals-json --metadata=%S/Inputs/causal.json | FileCheck %s --check-prefix=BR-IV
// RUN: cmask-translate %s --cmask-to-dense-json --metadata=%S/Inputs/causal.json | FileCheck %s --check-prefix=BR-DENSE
// RUN: cmask-translate %s --cmask-to-intervals-json --metadata=%S/Inputs/degenerate.json | FileCheck %s --check-prefix=DEGEN-IV
// RUN: cmask-translate %s --cmask-to-dense-json --metadata=%S/Inputs/degenerate.json | FileCheck %s --check-prefix=DEGEN-DENSE

// BR-IV: {"spec":"bottom_right","num_slots":1,"regions":["all"],"sequences":[
// BR-IV-SAME: {"q_len":3,"k_len":3,"rows":[{"region":0,"slots":{{\[\[}}0,1]]},{"region":0,"slots":{{\[\[}}0,2]]},{"region":0,"slots":{{\[\[}}0,3]]}]},
// BR-IV-SAME: {"q_len":2,"k_len":4,"rows":[{"region":0,"slots":{{\[\[}}0,3]]},{"region":0,"slots":{{\[\[}}0,4]]}]}]}
// BR-DENSE: {"spec":"bottom_right","regions":["all"],"sequences":[
// BR-DENSE-SAME: {"q_len":3,"k_len":3,"rows":["100","110","111"]},
// BR-DENSE-SAME: {"q_len":2,"k_len":4,"rows":["1110","1111"]}]}
// BR-DENSE-NOT: num_slots

// Empty sequences: no rows for q_len = 0; empty slots / strings for k_len = 0.
// DEGEN-IV: "sequences":[{"q_len":0,"k_len":3,"rows":[]},{"q_len":2,"k_len":0,"rows":[{"region":0,"slots":{{\[\[}}0,0]]},{"region":0,"slots":{{\[\[}}0,0]]}]}]}
// DEGEN-DENSE: "sequences":[{"q_len":0,"k_len":3,"rows":[]},{"q_len":2,"k_len":0,"rows":["",""]}]}

cmask.spec @bottom_right {
  cmask.region @all guard {
    %t = cmask.constant true
    cmask.yield %t : i1
  } rule {
    %i = cmask.var i
    %j = cmask.var j
    %ql = cmask.var q_len
    %kl = cmask.var k_len
    %d = cmask.sub %kl, %ql
    %e = cmask.add %i, %d
    %v = cmask.cmp le, %j, %e
    cmask.yield %v : i1
  }
}

// causal, one batch and an array of batches (the output is then an array).
// RUN: cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal.json | FileCheck %s --check-prefix=CAUSAL-IV
// RUN: cmask-translate %masks/causal.mlir --cmask-to-dense-json --metadata=%S/Inputs/causal.json | FileCheck %s --check-prefix=CAUSAL-DENSE
// RUN: cmask-translate %masks/causal.mlir --cmask-to-intervals-json --metadata=%S/Inputs/causal-batches.json | FileCheck %s --check-prefix=BATCHES

// CAUSAL-IV: {"spec":"causal","num_slots":1,"regions":["all"],"sequences":[
// CAUSAL-IV-SAME: {"q_len":3,"k_len":3,"rows":[{"region":0,"slots":{{\[\[}}0,1]]},{"region":0,"slots":{{\[\[}}0,2]]},{"region":0,"slots":{{\[\[}}0,3]]}]},
// CAUSAL-IV-SAME: {"q_len":2,"k_len":4,"rows":[{"region":0,"slots":{{\[\[}}0,1]]},{"region":0,"slots":{{\[\[}}0,2]]}]}]}
// CAUSAL-DENSE: {"spec":"causal","regions":["all"],"sequences":[
// CAUSAL-DENSE-SAME: {"q_len":3,"k_len":3,"rows":["100","110","111"]},
// CAUSAL-DENSE-SAME: {"q_len":2,"k_len":4,"rows":["1000","1100"]}]}
// BATCHES: [{"spec":"causal","num_slots":1,"regions":["all"],"sequences":[{"q_len":2,"k_len":2,"rows":[{"region":0,"slots":{{\[\[}}0,1]]},{"region":0,"slots":{{\[\[}}0,2]]}]}]},
// BATCHES-SAME: {"spec":"causal","num_slots":1,"regions":["all"],"sequences":[{"q_len":1,"k_len":3,"rows":[{"region":0,"slots":{{\[\[}}0,1]]}]}]}]

// hstu: c = 1; sequence 0 has q_len 6 and 2 targets (hist_end = 4), sequence 1
// has q_len 3 and no target. Every row has num_slots = 2 slots, padded with [0, 0].
// RUN: cmask-translate %masks/hstu.mlir --cmask-to-intervals-json --metadata=%S/Inputs/hstu.json | FileCheck %s --check-prefix=HSTU-IV
// RUN: cmask-translate %masks/hstu.mlir --cmask-to-dense-json --metadata=%S/Inputs/hstu.json | FileCheck %s --check-prefix=HSTU-DENSE

// HSTU-IV: {"spec":"hstu","num_slots":2,"regions":["contextual","history","target"],"sequences":[
// HSTU-IV-SAME: {"q_len":6,"k_len":6,"rows":[
// HSTU-IV-SAME: {"region":0,"slots":{{\[\[}}0,4],[0,0]]},
// HSTU-IV-SAME: {"region":1,"slots":{{\[\[}}0,2],[0,0]]},
// HSTU-IV-SAME: {"region":1,"slots":{{\[\[}}0,3],[0,0]]},
// HSTU-IV-SAME: {"region":1,"slots":{{\[\[}}0,4],[0,0]]},
// HSTU-IV-SAME: {"region":2,"slots":{{\[\[}}0,4],[4,5]]},
// HSTU-IV-SAME: {"region":2,"slots":{{\[\[}}0,4],[5,6]]}]},
// HSTU-IV-SAME: {"q_len":3,"k_len":3,"rows":[
// HSTU-IV-SAME: {"region":0,"slots":{{\[\[}}0,3],[0,0]]},
// HSTU-IV-SAME: {"region":1,"slots":{{\[\[}}0,2],[0,0]]},
// HSTU-IV-SAME: {"region":1,"slots":{{\[\[}}0,3],[0,0]]}]}]}
// HSTU-DENSE: {"spec":"hstu","regions":["contextual","history","target"],"sequences":[
// HSTU-DENSE-SAME: {"q_len":6,"k_len":6,"rows":["111100","110000","111000","111100","111110","111101"]},
// HSTU-DENSE-SAME: {"q_len":3,"k_len":3,"rows":["111","110","111"]}]}

// document over offsets [[4, 4, 9], []] (an empty document at 4; one
// segment for sequence 1).
// RUN: cmask-translate %masks/document.mlir --cmask-to-intervals-json --metadata=%S/Inputs/docs.json | FileCheck %s --check-prefix=DOCS-IV
// RUN: cmask-translate %masks/document.mlir --cmask-to-dense-json --metadata=%S/Inputs/docs.json | FileCheck %s --check-prefix=DOCS-DENSE
// DOCS-IV: {"q_len":12,"k_len":12,"rows":[{"region":0,"slots":{{\[\[}}0,4]]},{"region":0,"slots":{{\[\[}}0,4]]},{"region":0,"slots":{{\[\[}}0,4]]},{"region":0,"slots":{{\[\[}}0,4]]},
// DOCS-IV-SAME: {"region":0,"slots":{{\[\[}}4,9]]},{"region":0,"slots":{{\[\[}}4,9]]},{"region":0,"slots":{{\[\[}}4,9]]},{"region":0,"slots":{{\[\[}}4,9]]},{"region":0,"slots":{{\[\[}}4,9]]},
// DOCS-IV-SAME: {"region":0,"slots":{{\[\[}}9,12]]},{"region":0,"slots":{{\[\[}}9,12]]},{"region":0,"slots":{{\[\[}}9,12]]}]},
// DOCS-IV-SAME: {"q_len":5,"k_len":5,"rows":[{"region":0,"slots":{{\[\[}}0,5]]},{"region":0,"slots":{{\[\[}}0,5]]},{"region":0,"slots":{{\[\[}}0,5]]},{"region":0,"slots":{{\[\[}}0,5]]},{"region":0,"slots":{{\[\[}}0,5]]}]}]}
// DOCS-DENSE: "rows":["111100000000","111100000000","111100000000","111100000000","000011111000","000011111000","000011111000","000011111000","000011111000","000000000111","000000000111","000000000111"]},
// DOCS-DENSE-SAME: {"q_len":5,"k_len":5,"rows":["11111","11111","11111","11111","11111"]}]}
