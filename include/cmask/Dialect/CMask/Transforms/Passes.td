//===- Passes.td - cmask transformation passes -------------*- tablegen -*-===//
//
// The passes that lower a MaskSpec's rules to interval slots. Each is a thin
// wrapper over the Analysis library (include/cmask/Analysis).
//
//===----------------------------------------------------------------------===//

#ifndef CMASK_DIALECT_CMASK_TRANSFORMS_PASSES_TD
#define CMASK_DIALECT_CMASK_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def RequireSpecPass : Pass<"cmask-require-spec", "::mlir::ModuleOp"> {
  let summary = "Fail when the input holds no cmask.spec";
  let description = [{
    The first stage of `cmask-lower-to-intervals`: an input without any
    `cmask.spec` (an empty file, or MLIR of another dialect) is a user error,
    reported at the module, rather than silently lowering nothing.

    ```mlir
    module {}   // error: no cmask.spec to lower in the input
    ```
  }];
}

def TransposeSpecPass : Pass<"cmask-transpose-spec", "::mlir::ModuleOp"> {
  let summary = "Add the column direction of every spec as a spec of its own";
  let description = [{
    For every `cmask.spec @s` (in rule form) adds `cmask.spec @s__columns`:
    the query rows that see each key column, written as a spec whose row is
    the key. Its one region applies everywhere; its rule is the disjunction
    over the regions of `@s` of (the region's guard, no earlier guard, the
    region's rule), with `i` and `j`, and `q_len` and `k_len`, exchanged.
    `cmask-lower-to-intervals` then lowers it like any spec; when its rule
    cannot be isolated (a grid position `i mod W`), the column direction
    falls back as docs/descriptor.md says.

    Input:
    ```mlir
    cmask.region @all guard { ... true ... } rule {
      %v = cmask.cmp le, %j, %i        // causal
      cmask.yield %v : i1
    }
    ```
    Output (added):
    ```mlir
    cmask.spec @causal__columns {
      cmask.region @columns guard { ... true ... } rule {
        %t = cmask.constant true
        %i = cmask.var j
        %j = cmask.var i
        %v = cmask.cmp le, %j, %i     // key column i sees rows j >= i
        %c = cmask.and %t, %v
        cmask.yield %c : i1
      }
    }
    ```
  }];
}

def NormalizeDNFPass : Pass<"cmask-normalize-dnf", "::mlir::cmask::SpecOp"> {
  let summary = "Rewrite every rule into disjunctive normal form with j isolated";
  let description = [{
    For every region: unrolls bounded unions, pushes negations down to the
    comparisons (NNF), rewrites every atom that mentions `j` exactly into
    bounds `j >= e` / `j < e` (constant coefficients, `floordiv` by a
    positive constant, `min`/`max` of `j`, segment comparisons), and
    distributes into a disjunction of conjunctions (DNF). Atoms that cannot
    be isolated are reported at their location. When the unions would unroll
    into more than `max-unrolled-atoms` atoms, or the DNF would exceed
    `max-conjuncts` conjuncts, the pass fails with an error instead of
    exploding.

    Input:
    ```mlir
    %v = cmask.cmp le, %d, %w     // with %d = i - j
    ```
    Output (the rule yields `or(and(j >= i - w, j < i + 1))`):
    ```mlir
    %lo = cmask.sub %i, %w
    %a0 = cmask.cmp ge, %j, %lo
    %hi = cmask.add %i, %c1
    %a1 = cmask.cmp lt, %j, %hi
    %c = cmask.and %a0, %a1
    %r = cmask.or %c
    cmask.yield %r : i1
    ```
  }];
  let options = [
    Option<"maxConjuncts", "max-conjuncts", "int64_t", /*default=*/"4096",
           "Fail when a rule's DNF would have more conjuncts than this">,
    Option<"maxUnrolledAtoms", "max-unrolled-atoms", "int64_t",
           /*default=*/"262144",
           "Fail when unrolling a rule's unions would give more atoms than this">,
  ];
}

def ExtractIntervalsPass : Pass<"cmask-extract-intervals", "::mlir::cmask::SpecOp"> {
  let summary = "Turn every DNF conjunct into an interval slot";
  let description = [{
    Each conjunct of a rule in the form produced by `cmask-normalize-dnf`
    becomes one `cmask.slot`: its `j`-free atoms form the row condition, the
    maximum of its lower bounds `lo(i)` (0 when none) and the minimum of its
    upper bounds `hi(i)` (`k_len` when none) form `[lo, hi)`. The rule then
    ends in `cmask.slots`.

    ```mlir
    %s0 = cmask.slot [%lo, %hi) if %cond
    cmask.slots %s0
    ```
  }];
}

def CanonicalizeSlotsPass : Pass<"cmask-canonicalize-slots", "::mlir::cmask::SpecOp"> {
  let summary = "Drop empty, duplicate and subsumed slots; merge adjacent ones";
  let description = [{
    Simplifies every region's slots using facts that hold for all of its
    rows (domain bounds, its guard, and the negation of every earlier guard
    whose negation is a conjunction of comparisons): drops slots that are
    provably empty, duplicated or contained in another slot, drops condition
    atoms the facts imply, and merges slots with the same row condition that
    are provably adjacent or overlapping for every row. Records the slot
    count as `num_slots` on each region and the maximum on the spec. The
    pairwise work grows with the cube of the slot count: past `max-proofs`
    prover calls the pass keeps the remaining slots (still exact) and warns
    that K may not be minimal.

    ```mlir
    // j < p or j <= i:  [0, p) and [0, i + 1) become [0, max(p, i + 1))
    cmask.region @all attributes {num_slots = 1 : i64} guard { ... } rule {
      ...
      %s = cmask.slot [%c0, %hi) if %true
      cmask.slots %s
    }
    ```
  }];
  let options = [
    Option<"maxProofs", "max-proofs", "size_t", /*default=*/"200000",
           "Prover calls per region before canonicalization stops">,
  ];
}

#endif // CMASK_DIALECT_CMASK_TRANSFORMS_PASSES_TD
