//===- torch_binding.cpp - Eager attention as PyTorch C++ ops -------------===//
//
// The eager attention path of cmask.Mask.attention as a PyTorch operator
// with its autograd in C++: the forward and the backward call the runtime's
// C API (cmask_runtime.h) directly, so a backward runs no Python (measured:
// docs/performance.md). python/cmask/_binding.py builds this file against
// the PyTorch it runs with, on first use, loads it with
// torch.ops.load_library and points it at the runtime library
// (load_runtime); torch.compile keeps the Python custom ops
// (python/cmask/mask.py), which it traces.
//
//   torch.ops.cmask_native.load_runtime(handle)
//       looks the runtime's C API up in the library loaded at `handle`.
//   torch.ops.cmask_native.struct_layout()
//       the C structures' sizes and offsets as compiled here.
//   torch.classes.cmask_native.Artifact(handle)
//       owns a loaded artifact (cmask_artifact_load's handle): destroyed when
//       the Mask and every descriptor and autograd node using it are gone.
//   torch.classes.cmask_native.Descriptor(artifact, bounds, storage, batch,
//                                         cu_seqlens_q, cu_seqlens_k)
//       the runtime's descriptor over a Prepared's storage, holding its batch;
//       keeps the storage and cu_seqlens tensors alive. .id(): the int the
//       operator takes (valid while the Descriptor lives).
//   torch.ops.cmask_native.attention(q, k, v, descriptor_id, scale, tile_shape,
//                                    deterministic) -> (out, lse)
//       packed q [total_q, H, D], k, v [total_k, H_kv, D], or batched
//       [B, L, H, D]; out in q's shape, lse fp32 [H, total_q] or [B, H, L]
//       (not differentiable). scale < 0: 1/sqrt(D); tile_shape -1: the
//       runtime's choice. Differentiable in q, k and v.
//
//===----------------------------------------------------------------------===//

#include "cmask_runtime/cmask_runtime.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/record_function.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

using at::Tensor;

/// The runtime's C API, looked up in the library Python loaded
/// (load_runtime): this library does not link it, so that it shares no C++
/// symbol with it (a runtime built with a static libstdc++ made every
/// exception thrown here abort with "free(): invalid pointer").
struct RuntimeAPI {
#define CMASK_API_FUNCTIONS(X)                                                 \
  X(cmask_last_error)                                                          \
  X(cmask_artifact_destroy)                                                    \
  X(cmask_descriptor_create_at)                                                \
  X(cmask_descriptor_set_batch)                                                \
  X(cmask_descriptor_destroy)                                                  \
  X(cmask_attention_forward)                                                   \
  X(cmask_backward_scratch_bytes)                                              \
  X(cmask_attention_backward)
#define CMASK_API_POINTER(name) decltype(&::name) name = nullptr;
  CMASK_API_FUNCTIONS(CMASK_API_POINTER)
#undef CMASK_API_POINTER
};
RuntimeAPI rt;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Raises `message` (made as one string) as a RuntimeError.
[[noreturn]] void fail(const std::string &message) {
  TORCH_CHECK(false, message);
  std::abort(); // not reached
}

void check(cmask_status status) {
  if (status != CMASK_OK)
    fail(rt.cmask_last_error());
}

struct Artifact : torch::CustomClassHolder {
  explicit Artifact(int64_t handle)
      : handle(reinterpret_cast<cmask_artifact *>(handle)) {
    TORCH_CHECK(this->handle, "cmask: a null artifact handle");
  }
  ~Artifact() override { rt.cmask_artifact_destroy(handle); }
  cmask_artifact *handle;
};

struct Descriptor : torch::CustomClassHolder {
  // bounds: cmask_bounds' fields in order; batch: (num_seqs, total_q, total_k,
  // max_seqlen_q, max_seqlen_k), the Prepared's layout.
  Descriptor(c10::intrusive_ptr<Artifact> artifact, std::vector<int64_t> bounds,
             Tensor storage, std::vector<int64_t> batch, Tensor cuSeqlensQ,
             Tensor cuSeqlensK)
      : artifact(std::move(artifact)), storage(std::move(storage)),
        cuSeqlensQ(std::move(cuSeqlensQ)), cuSeqlensK(std::move(cuSeqlensK)) {
    TORCH_CHECK(bounds.size() == 6 && batch.size() == 5,
                "cmask: a descriptor takes 6 bounds and a batch of 5");
    cmask_bounds b{static_cast<int32_t>(bounds[0]), bounds[1], bounds[2],
                   static_cast<int>(bounds[3]),     bounds[4], bounds[5]};
    auto address = [](const Tensor &t) {
      return reinterpret_cast<uint64_t>(t.data_ptr());
    };
    check(rt.cmask_descriptor_create_at(this->artifact->handle, &b,
                                        address(this->storage),
                                        this->storage.nbytes(), &handle));
    if (rt.cmask_descriptor_set_batch(this->artifact->handle, handle,
                                      static_cast<int32_t>(batch[0]), batch[1],
                                      batch[2], address(this->cuSeqlensQ),
                                      address(this->cuSeqlensK)) != CMASK_OK) {
      std::string why = rt.cmask_last_error();
      rt.cmask_descriptor_destroy(handle); // no destructor runs after a throw
      fail(why);
    }
    numSeqs = batch[0];
    maxSeqlenQ = batch[3];
  }
  ~Descriptor() override;
  /// Its id for the operator, registered on the first call.
  static int64_t getId(const c10::intrusive_ptr<Descriptor> &self);

  c10::intrusive_ptr<Artifact> artifact;
  Tensor storage, cuSeqlensQ, cuSeqlensK;
  cmask_descriptor *handle = nullptr;
  int64_t numSeqs = 0, maxSeqlenQ = 0, id = 0;
};

/// The live descriptors by id: the operator takes a plain int (a custom-class
/// argument costs about 10 us of host time per call to convert), resolved
/// here. A descriptor is listed from its first id() until its destructor,
/// and get() takes an owning reference only while another one exists (the
/// caller's Prepared holds one during the call): an id whose descriptor is
/// gone is an error, not a dangling pointer.
class Registry {
public:
  /// d's id, listing it on the first call.
  int64_t idOf(Descriptor *d) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!d->id) {
      d->id = ++last;
      live.emplace(d->id, d);
    }
    return d->id;
  }
  void remove(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    live.erase(id);
  }
  /// An owning reference to descriptor `id`. The use count is read under the
  /// lock the destructor takes, so a descriptor being destroyed is refused;
  /// a caller that holds no reference while another thread drops the last
  /// one races (mask.py's callers hold the Prepared).
  c10::intrusive_ptr<Descriptor> get(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(id);
    if (it == live.end() || c10::raw::intrusive_ptr::use_count(it->second) == 0)
      fail("cmask: descriptor " + std::to_string(id) + " is gone");
    return c10::intrusive_ptr<Descriptor>::unsafe_reclaim_from_nonowning(
        it->second);
  }

private:
  std::mutex mutex;
  std::unordered_map<int64_t, Descriptor *> live;
  int64_t last = 0;
};

/// Never destroyed: a descriptor freed during the process's exit still
/// finds it.
Registry &registry() {
  static Registry *r = new Registry;
  return *r;
}

Descriptor::~Descriptor() {
  if (id)
    registry().remove(id);
  rt.cmask_descriptor_destroy(handle);
}

int64_t Descriptor::getId(const c10::intrusive_ptr<Descriptor> &self) {
  return registry().idOf(self.get());
}

/// PyTorch's current stream on t's device, as the runtime takes it.
void *currentStream(const Tensor &t) {
  c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  return cuda.getStream(t.device()).native_handle();
}

/// Whether t is [tokens, heads, head_dim], or [B, L, heads, head_dim] whose
/// first two dimensions merge into tokens without a copy.
bool tokensView(const Tensor &t) {
  return t.dim() == 3 ||
         (t.dim() == 4 && (t.size(0) == 1 || t.size(1) == 1 ||
                           t.stride(0) == t.size(1) * t.stride(1)));
}

/// The stride between t's tokens (tokensView(t)): a batched tensor's L
/// stride, or its B stride where L is 1. A size-1 dimension's stride says
/// nothing (PyTorch's is_contiguous() ignores it: contiguous() returns such
/// a [B, 1, H, D] tensor as it is, whatever its L stride).
int64_t tokenStride(const Tensor &t) {
  return t.dim() == 4 && t.size(1) == 1 ? t.stride(0) : t.stride(-3);
}

/// t as the kernels take it: itself, or a contiguous copy (its shape kept)
/// where the batched dimensions do not merge.
Tensor asTokens(const Tensor &t) {
  TORCH_CHECK(t.dim() == 3 || t.dim() == 4,
              "cmask: q, k and v are [B, L, H, D] or [total, H, D]");
  return tokensView(t) ? t : t.contiguous();
}

/// The runtime's view of t ([tokens, heads, head_dim], the batched
/// dimensions merged: tokensView(t)).
cmask_tensor view(const Tensor &t) {
  TORCH_CHECK(t.is_cuda() && t.stride(-1) == 1,
              "cmask: attention takes CUDA tensors with the head dimension "
              "contiguous");
  int dtype = t.scalar_type() == at::kBFloat16 ? CMASK_BF16
              : t.scalar_type() == at::kHalf   ? CMASK_F16
                                               : -1;
  if (dtype < 0)
    fail(std::string("cmask: ") + c10::toString(t.scalar_type()) +
         " is not supported (bfloat16, float16)");
  int64_t tokens = t.dim() == 4 ? t.size(0) * t.size(1) : t.size(0);
  return {reinterpret_cast<uint64_t>(t.data_ptr()),
          dtype,
          tokens,
          t.size(-2),
          t.size(-1),
          tokenStride(t),
          t.stride(-2)};
}

uint64_t address(const Tensor &t) {
  return reinterpret_cast<uint64_t>(t.data_ptr());
}

float scaleArg(double scale) {
  return scale < 0 ? 0.0f : static_cast<float>(scale);
}

/// out (the caller's q's shape, contiguous) and lse: fp32 [H, total_q], or
/// for batched q [B, H, L] over the same memory (strides L, B * L, 1).
/// q, k, v: asTokens of the caller's (the caller's shapes).
std::tuple<Tensor, Tensor> launchForward(const Tensor &callerQ, const Tensor &q,
                                         const Tensor &k, const Tensor &v,
                                         const Descriptor &d, double scale,
                                         int64_t tile) {
  const Tensor &c = callerQ;
  Tensor out = at::empty(c.sizes(), c.options());
  auto f32 = c.options().dtype(at::kFloat);
  Tensor lse =
      c.dim() == 4
          ? at::empty_strided({c.size(0), c.size(2), c.size(1)},
                              {c.size(1), c.size(0) * c.size(1), 1}, f32)
          : at::empty({c.size(1), c.size(0)}, f32);
  cmask_attention_args args{view(q),
                            view(k),
                            view(v),
                            view(out),
                            address(lse),
                            scaleArg(scale),
                            static_cast<int>(tile),
                            /*stats=*/0,
                            /*schedule=*/0,
                            /*gqa_packing=*/0,
                            /*section_heads=*/0};
  // Named in a torch.profiler trace (benchmarks/host_time.py --profile);
  // a flag's test when no profiler runs.
  RECORD_FUNCTION("cmask_runtime::attention_forward",
                  c10::ArrayRef<const c10::IValue>{});
  check(rt.cmask_attention_forward(d.artifact->handle, d.handle, &args,
                                   currentStream(q)));
  return {out, lse};
}

/// dq, dk, dv in q's, k's and v's shapes (asTokens of the caller's: the
/// caller's shapes).
variable_list launchBackward(const Tensor &q, const Tensor &k, const Tensor &v,
                             const Tensor &out, const Tensor &lse,
                             const Tensor &dout, const Descriptor &d,
                             double scale, bool deterministic) {
  Tensor dq = at::empty(q.sizes(), q.options());
  Tensor dk = at::empty(k.sizes(), k.options());
  Tensor dv = at::empty(v.sizes(), v.options());
  cmask_tensor qv = view(q);
  size_t scratchBytes = rt.cmask_backward_scratch_bytes(qv.tokens, d.numSeqs,
                                                        qv.heads, qv.head_dim);
  Tensor scratch = at::empty({static_cast<int64_t>(scratchBytes)},
                             q.options().dtype(at::kByte));
  cmask_backward_args args{
      qv,           view(k),          view(v),         view(out),
      view(dout),   view(dq),         view(dk),        view(dv),
      address(lse), address(scratch), scaleArg(scale), deterministic ? 1 : 0,
      d.maxSeqlenQ};
  RECORD_FUNCTION("cmask_runtime::attention_backward",
                  c10::ArrayRef<const c10::IValue>{});
  check(rt.cmask_attention_backward(d.artifact->handle, d.handle, &args,
                                    currentStream(q)));
  return {dq, dk, dv};
}

/// Takes q, k, v as the caller has them (packed or batched); the kernels'
/// packed views are made here, not as autograd view nodes.
struct Attention : torch::autograd::Function<Attention> {
  static variable_list forward(AutogradContext *ctx, const Tensor &q,
                               const Tensor &k, const Tensor &v,
                               const c10::intrusive_ptr<Descriptor> &d,
                               double scale, int64_t tile, bool deterministic) {
    Tensor qt = asTokens(q), kt = asTokens(k), vt = asTokens(v);
    auto [out, lse] = launchForward(q, qt, kt, vt, *d, scale, tile);
    ctx->save_for_backward({qt, kt, vt, out, lse});
    ctx->saved_data["descriptor"] = d;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["deterministic"] = deterministic;
    // lse carries no gradient, and none is made for it (mask.py's
    // _no_lse_gradient says why).
    ctx->mark_non_differentiable({lse});
    ctx->set_materialize_grads(false);
    return {out, lse};
  }

  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    variable_list result(7);
    if (!grads[0].defined()) // out did not reach the loss
      return result;
    variable_list saved = ctx->get_saved_variables();
    auto d = ctx->saved_data["descriptor"].toCustomClass<Descriptor>();
    Tensor dout = grads[0].contiguous();
    variable_list g =
        launchBackward(saved[0], saved[1], saved[2], saved[3], saved[4], dout,
                       *d, ctx->saved_data["scale"].toDouble(),
                       ctx->saved_data["deterministic"].toBool());
    for (int i = 0; i < 3; ++i)
      result[i] = std::move(g[i]);
    return result;
  }
};

std::tuple<Tensor, Tensor> attention(const Tensor &q, const Tensor &k,
                                     const Tensor &v, int64_t descriptor,
                                     double scale, int64_t tile,
                                     bool deterministic) {
  c10::intrusive_ptr<Descriptor> d = registry().get(descriptor);
  // Nothing for autograd to record (grad mode off, or no input requires
  // grad): the launch alone, without the autograd node's bookkeeping.
  if (!at::GradMode::is_enabled() ||
      !(q.requires_grad() || k.requires_grad() || v.requires_grad()))
    return launchForward(q, asTokens(q), asTokens(k), asTokens(v), *d, scale,
                         tile);
  variable_list r = Attention::apply(q, k, v, d, scale, tile, deterministic);
  return {r[0], r[1]};
}

/// Looks the C API up in the runtime library that python/cmask/_capi.py
/// loaded, by its dlopen handle (ctypes' CDLL._handle): the same copy, never
/// a second one.
void loadRuntime(int64_t handle) {
  void *library = reinterpret_cast<void *>(handle);
  if (!library)
    fail("cmask: load_runtime takes the runtime library's dlopen handle");
  RuntimeAPI api;
#define CMASK_API_LOOKUP(name)                                                 \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(library, #name));      \
  if (!api.name)                                                               \
    fail("cmask: the runtime library lacks " #name);
  CMASK_API_FUNCTIONS(CMASK_API_LOOKUP)
#undef CMASK_API_LOOKUP
  rt = api;
}

/// The C structures as this library was compiled (cmask_runtime_structs.def):
/// per structure its size, then each field's offset, in the .def's order.
/// _binding.py compares them with the loaded library's cmask_abi() before
/// any call, as _capi.py does for its ctypes structures.
std::vector<int64_t> structLayout() {
  std::vector<int64_t> out;
#define CMASK_STRUCT_BEGIN(name)                                               \
  {                                                                            \
    using S = name;                                                            \
    out.push_back(sizeof(S));
#define CMASK_FIELD(type, field) out.push_back(offsetof(S, field));
#define CMASK_STRUCT_END(name) }
#include "cmask_runtime/cmask_runtime_structs.def"
#undef CMASK_STRUCT_BEGIN
#undef CMASK_FIELD
#undef CMASK_STRUCT_END
  return out;
}

} // namespace

TORCH_LIBRARY(cmask_native, m) {
  m.def("load_runtime(int handle) -> ()", &loadRuntime);
  m.def("struct_layout() -> int[]", &structLayout);
  m.class_<Artifact>("Artifact").def(torch::init<int64_t>());
  m.class_<Descriptor>("Descriptor")
      .def(torch::init<c10::intrusive_ptr<Artifact>, std::vector<int64_t>,
                       Tensor, std::vector<int64_t>, Tensor, Tensor>())
      .def("id", [](const c10::intrusive_ptr<Descriptor> &self) {
        return Descriptor::getId(self);
      });
  m.def("attention(Tensor q, Tensor k, Tensor v, "
        "int descriptor, "
        "float scale, int tile_shape, bool deterministic) -> (Tensor, Tensor)",
        &attention);
}
