/*===- cmask-capi-check.c - The runtime's C API, from C -------------------===*\
|*                                                                            *|
|*   cmask-capi-check ARTIFACT_DIR      (a causal artifact)                   *|
|*                                                                            *|
|* Loads the artifact through the C API, runs the preprocess for one causal  *|
|* sequence of 300 rows in checked mode, inside a CUDA graph (captured and    *|
|* replayed twice), and checks row 299's slot, the error flags and that the  *|
|* replay gives the same table as a direct launch. Prints "N passed, N       *|
|* failed".                                                                   *|
\*===----------------------------------------------------------------------===*/

#include "cmask_runtime/cmask_runtime.h"

#include <cuda.h>
#include <stdio.h>
#include <string.h>

static int passed, failed;
static void expect(int ok, const char *what) {
  printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
  if (ok)
    ++passed;
  else
    ++failed;
}

#define CU(x)                                                                  \
  do {                                                                         \
    if ((x) != CUDA_SUCCESS) {                                                 \
      printf("FAIL: %s\n", #x);                                                \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cmask-capi-check CAUSAL_ARTIFACT_DIR\n");
    return 2;
  }
  /* The application's context, as PyTorch would have made it current. */
  CUdevice dev;
  CUcontext ctx;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  cmask_artifact *a = NULL;
  if (cmask_artifact_load(argv[1], 0, &a) != CMASK_OK) {
    printf("FAIL: load: %s\n", cmask_last_error());
    return 1;
  }
  expect(cmask_artifact_num_slots(a, 0) == 1, "causal has K = 1");
  expect(strcmp(cmask_artifact_column_mode(a), "derived") == 0 &&
             cmask_artifact_num_slots(a, 1) == 1,
         "causal's column direction is derived, K = 1");
  expect(cmask_artifact_num_slots(a, 2) == -1, "no direction 2");
  expect(cmask_artifact_num_metadata(a) == 0, "causal has no metadata");
  cmask_artifact *bad = NULL;
  expect(cmask_artifact_load("/nonexistent", 0, &bad) == CMASK_ERROR &&
             strstr(cmask_last_error(), "manifest.json") != NULL,
         "a missing artifact is a clear error");

  const int32_t rows = 300;
  int32_t cu[2] = {0, rows};
  CUdeviceptr dcu;
  CU(cuMemAlloc(&dcu, sizeof cu));
  CU(cuMemcpyHtoD(dcu, cu, sizeof cu));
  cmask_descriptor *d = NULL;
  cmask_bounds bounds = {1, rows, rows, 1, rows, rows};
  if (cmask_descriptor_create(a, &bounds, &d) != CMASK_OK) {
    printf("FAIL: descriptor: %s\n", cmask_last_error());
    return 1;
  }
  expect(cmask_preprocess(a, d, 2, rows, rows, dcu, dcu, NULL, 0, NULL, 1) ==
             CMASK_ERROR,
         "a batch beyond the descriptor's bounds is refused");
  expect(cmask_preprocess(a, d, 1, rows, rows + 1, dcu, dcu, NULL, 0, NULL,
                          1) == CMASK_ERROR,
         "more keys than the column direction was sized for are refused");
  expect(cmask_preprocess(a, d, 1, rows, rows, dcu, dcu, NULL, 0, NULL, 1) ==
             CMASK_OK,
         "direct launch");
  int32_t flags = -1;
  expect(cmask_read_error_flags(a, d, NULL, &flags) == CMASK_OK && flags == 0,
         "valid metadata: error flags 0");
  static int32_t direct[300 * 2], replay[300 * 2];
  CU(cuMemcpyDtoH(direct, cmask_descriptor_intervals(d, 0), sizeof direct));
  expect(direct[2 * 299] == 0 && direct[2 * 299 + 1] == 300,
         "row 299 sees [0, 300)");
  static int32_t column[300 * 2];
  CU(cuMemcpyDtoH(column, cmask_descriptor_intervals(d, 1), sizeof column));
  expect(column[2 * 7] == 7 && column[2 * 7 + 1] == 300,
         "key 7 is seen by the rows [7, 300)");

  /* The preprocess inside a captured CUDA graph, replayed twice. */
  CU(cuMemsetD32(cmask_descriptor_intervals(d, 0), 0xdead, 2 * rows));
  CUstream stream;
  CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  cmask_status s =
      cmask_preprocess(a, d, 1, rows, rows, dcu, dcu, NULL, 0, stream, 0);
  CUgraph graph;
  CU(cuStreamEndCapture(stream, &graph));
  expect(s == CMASK_OK, "preprocess captured in a CUDA graph");
  CUgraphExec exec;
  CU(cuGraphInstantiate(&exec, graph, 0));
  CU(cuGraphLaunch(exec, stream));
  CU(cuGraphLaunch(exec, stream));
  CU(cuStreamSynchronize(stream));
  CU(cuMemcpyDtoH(replay, cmask_descriptor_intervals(d, 0), sizeof replay));
  expect(memcmp(direct, replay, sizeof direct) == 0,
         "graph replay builds the same interval table");

  /* Content the host cannot see without synchronizing is flagged by the
   * checked preprocess, and nothing is read or written out of bounds. */
  {
    cmask_descriptor *small = NULL;
    cmask_bounds narrow = {1, rows, 64, 1, rows, rows};
    expect(cmask_descriptor_create(a, &narrow, &small) == CMASK_OK,
           "a descriptor sized for 64 keys per sequence");
    flags = 0;
    expect(cmask_preprocess(a, small, 1, rows, rows, dcu, dcu, NULL, 0, NULL,
                            1) == CMASK_OK &&
               cmask_read_error_flags(a, small, NULL, &flags) == CMASK_OK &&
               (flags & 8) != 0,
           "a sequence longer than the descriptor was sized for: flag 8");
    int32_t past[2] = {0, rows + 50};
    CUdeviceptr dpast;
    CU(cuMemAlloc(&dpast, sizeof past));
    CU(cuMemcpyHtoD(dpast, past, sizeof past));
    flags = 0;
    expect(cmask_preprocess(a, d, 1, rows, rows, dpast, dcu, NULL, 0, NULL,
                            1) == CMASK_OK &&
               cmask_read_error_flags(a, d, NULL, &flags) == CMASK_OK &&
               (flags & 1) != 0,
           "cu_seqlens_q past the batch's rows: flag 1");
    flags = 0;
    expect(cmask_preprocess(a, d, 1, rows, rows, dcu, dpast, NULL, 0, NULL,
                            1) == CMASK_OK &&
               cmask_read_error_flags(a, d, NULL, &flags) == CMASK_OK &&
               (flags & 1) != 0,
           "cu_seqlens_k past the batch's keys: flag 1 (the column check)");
    cuMemFree(dpast);
    cmask_descriptor_destroy(small);
  }

  CUcontext current = NULL;
  CU(cuCtxGetCurrent(&current));
  expect(current == ctx, "the caller's current context is left as it was");
  /* Descriptors may outlive their artifact. */
  cmask_artifact_destroy(a);
  cmask_descriptor_destroy(d);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
