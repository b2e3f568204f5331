this is not mlir at all {{{
