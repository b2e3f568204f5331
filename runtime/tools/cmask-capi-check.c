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
    cmask_bounds narrow = {1, rows, 64, 0, 0, 0};
    expect(cmask_descriptor_create(a, &narrow, &small) == CMASK_OK,
           "a descriptor sized for 64 keys per sequence");
    /* Its key tiles hold 16 x the tile width (one state word): 4097 keys
     * pass that for any tile width up to 256. */
    const int32_t longKeys = 16 * 256 + 1;
    int32_t cuLong[2] = {0, longKeys};
    CUdeviceptr dlong;
    CU(cuMemAlloc(&dlong, sizeof cuLong));
    CU(cuMemcpyHtoD(dlong, cuLong, sizeof cuLong));
    flags = 0;
    expect(cmask_preprocess(a, small, 1, rows, longKeys, dcu, dlong, NULL, 0,
                            NULL, 1) == CMASK_OK &&
               cmask_read_error_flags(a, small, NULL, &flags) == CMASK_OK &&
               (flags & 8) != 0,
           "a sequence longer than the descriptor was sized for: flag 8");
    cuMemFree(dlong);
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

  /* A descriptor over storage the caller owns: the same table as the
   * runtime's own, nothing allocated, misaligned or short storage refused. */
  {
    uint64_t bytes = 0;
    expect(cmask_descriptor_bytes(a, &bounds, &bytes) == CMASK_OK &&
               bytes >= sizeof direct,
           "cmask_descriptor_bytes");
    CUdeviceptr storage;
    CU(cuMemAlloc(&storage, bytes + 256));
    cmask_descriptor *at = NULL, *again = NULL;
    expect(cmask_descriptor_create_at(a, &bounds, storage + 4, bytes, &at) ==
                   CMASK_ERROR &&
               strstr(cmask_last_error(), "aligned") != NULL,
           "misaligned storage is refused");
    expect(cmask_descriptor_create_at(a, &bounds, storage, bytes - 4, &at) ==
                   CMASK_ERROR &&
               strstr(cmask_last_error(), "bytes") != NULL,
           "storage shorter than the bounds need is refused");
    expect(cmask_descriptor_create_at(a, &bounds, storage, bytes, &at) ==
               CMASK_OK,
           "a descriptor over the caller's storage");
    uint64_t base = cmask_descriptor_error_flags(at);
    expect(base >= storage &&
               cmask_descriptor_intervals(at, 1) < storage + bytes,
           "its buffers lie in the storage");
    expect(cmask_preprocess(a, at, 1, rows, rows, dcu, dcu, NULL, 0, NULL, 0) ==
               CMASK_OK,
           "preprocess into the caller's storage");
    static int32_t at_rows[300 * 2];
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH(at_rows, cmask_descriptor_intervals(at, 0),
                    sizeof at_rows));
    expect(memcmp(direct, at_rows, sizeof direct) == 0,
           "the same interval table as the runtime's descriptor");
    expect(cmask_descriptor_create_at(a, &bounds, storage, bytes, &again) ==
                   CMASK_OK &&
               cmask_descriptor_intervals(again, 0) ==
                   cmask_descriptor_intervals(at, 0) &&
               cmask_descriptor_intervals(again, 1) ==
                   cmask_descriptor_intervals(at, 1),
           "two descriptors over the same storage and bounds are the same");
    expect(cmask_descriptor_set_batch(a, again, 2, rows, rows, dcu, dcu) ==
               CMASK_ERROR,
           "set_batch refuses a batch beyond the bounds");
    expect(cmask_descriptor_set_batch(a, again, 1, rows, rows, dcu, dcu) ==
               CMASK_OK,
           "set_batch on a second descriptor over the same storage");
    cmask_descriptor_destroy(again);
    cmask_descriptor_destroy(at);
    cuMemFree(storage);
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
