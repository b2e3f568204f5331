/*===- cmask-artifact-check.c - Does this runtime accept an artifact? -----===*\
|*                                                                            *|
|* cmask-artifact-check DIR...: reads each artifact's manifest.json and       *|
|* checks it as cmask_artifact_load does (format, structure, every kernel's   *|
|* arguments against this runtime's kernel ABI), without a GPU. Prints        *|
|* "DIR: ok" or the reason it would be refused; exits 1 if one is refused.    *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "cmask_runtime/cmask_runtime.h"

#include <stdio.h>

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: cmask-artifact-check DIR...\n");
    return 2;
  }
  int refused = 0;
  for (int k = 1; k < argc; ++k) {
    if (cmask_artifact_check(argv[k]) == CMASK_OK) {
      printf("%s: ok\n", argv[k]);
    } else {
      fprintf(stderr, "%s: refused: %s\n", argv[k], cmask_last_error());
      refused = 1;
    }
  }
  return refused;
}
