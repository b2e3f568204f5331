/* A stand-in libcuda.so.1 for timing the cmask runtime's own host path on a
 * machine without a GPU (runtime_host_cost.sh): every driver call the
 * runtime makes returns at once and succeeds. Allocations are addresses
 * from a counter (never dereferenced), pointers are device memory of
 * device 0, the device is an sm_90 of 132 SMs, copies to the host write
 * zeros. Nothing is launched: what a program times with it is the
 * runtime's C++ alone, without the driver's cost (a launch 3.3-4.3 us on an
 * H100's host, docs/performance.md, thirty-third session). A driver call
 * the runtime comes to make that is missing here fails the program's start
 * (an undefined symbol; test/python/test_runtime_host_cost.py): add it. */
#include <cuda.h>
#include <string.h>

static CUdeviceptr next_address = 0x700000000000ull;
static int module_token, function_token, context_token;
static unsigned long launches;

/* Kernel launches so far (not a driver call: runtime_host_cost checks with
 * it that each timed call reached its launches). */
unsigned long cuda_stub_launches(void) { return launches; }

CUresult cuInit(unsigned int flags) {
  (void)flags;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                              CUdevice device) {
  (void)device;
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = 9;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = 0;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 132;
    break;
  default:
    *value = 0;
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  (void)device;
  *context = (CUcontext)&context_token;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  (void)device;
  return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent(CUcontext context) {
  (void)context;
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent(CUcontext *context) {
  if (context)
    *context = (CUcontext)&context_token;
  return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice *device) {
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  (void)image;
  *module = (CUmodule)&module_token;
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule module) {
  (void)module;
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                             const char *name) {
  (void)module, (void)name;
  *function = (CUfunction)&function_token;
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute,
                            int value) {
  (void)function, (void)attribute, (void)value;
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr *ptr, size_t bytes) {
  *ptr = next_address;
  next_address += (bytes + 0xffff) & ~(size_t)0xffff;
  return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr ptr) {
  (void)ptr;
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes) {
  (void)src;
  memset(dst, 0, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                           CUstream stream) {
  (void)dst, (void)src, (void)bytes, (void)stream;
  return CUDA_SUCCESS;
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n,
                          CUstream stream) {
  (void)dst, (void)value, (void)n, (void)stream;
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream stream) {
  (void)stream;
  return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status) {
  (void)stream;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult cuPointerGetAttributes(unsigned int count,
                                CUpointer_attribute *attributes, void **data,
                                CUdeviceptr ptr) {
  (void)ptr;
  for (unsigned int i = 0; i < count; ++i) {
    if (attributes[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
      *(unsigned int *)data[i] = CU_MEMORYTYPE_DEVICE;
    else if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
      *(int *)data[i] = 0;
    else
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}
CUresult cuTensorMapEncodeTiled(
    CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *address,
    const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
    const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion promotion,
    CUtensorMapFloatOOBfill fill) {
  (void)type, (void)rank, (void)address, (void)dims, (void)strides, (void)box;
  (void)elementStrides, (void)interleave, (void)swizzle, (void)promotion,
      (void)fill;
  memset(map, 0, sizeof *map);
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                        unsigned int gz, unsigned int bx, unsigned int by,
                        unsigned int bz, unsigned int shared, CUstream stream,
                        void **params, void **extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz;
  (void)shared, (void)stream, (void)params, (void)extra;
  ++launches;
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                          void **params, void **extra) {
  (void)config, (void)f, (void)params, (void)extra;
  ++launches;
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult error, const char **name) {
  (void)error;
  *name = "CUDA_STUB";
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult error, const char **text) {
  (void)error;
  *text = "the stand-in libcuda (benchmarks/micro/host_cost/cuda_stub.c)";
  return CUDA_SUCCESS;
}
