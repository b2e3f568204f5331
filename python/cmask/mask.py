"""A loaded artifact on a CUDA device: descriptors and attention over PyTorch tensors."""

from __future__ import annotations

import collections
import ctypes
import hashlib
import json
import weakref
from pathlib import Path

import torch

from . import _binding, _capi
from ._capi import check

# The C API's codes of the element types and metadata roles. They come from
# the runtime library, loaded by the first Mask (so that importing this module,
# which registers the custom ops, needs PyTorch only).
_DTYPES: dict = {}
_ROLE_NAMES: dict = {}


def _read_abi_codes() -> None:
    if not _DTYPES:
        roles = {_capi.ROLE_SCALAR: "scalar", _capi.ROLE_PER_SEQUENCE: "per_sequence",
                 _capi.ROLE_OFFSETS: "offsets"}
        dtypes = {torch.bfloat16: _capi.BF16, torch.float16: _capi.F16}
        _ROLE_NAMES.update(roles)
        _DTYPES.update(dtypes)

# Masks by id, for the custom op (which takes plain ints); weak, so that a
# mask nobody holds is freed with its descriptor.
# The loaded masks by key (Mask.id): masks of the same artifact on the same
# device share a key (any of them serves the custom ops' calls).
_REGISTRY: "dict[int, weakref.WeakSet]" = {}
# The C++ binding's operator (torch.ops.cmask_native.attention), once loaded.
_ATTENTION_OP = None


def _artifact_key(path: Path, device_index: int) -> int:
    """A key of the artifact's content (every file of its directory) and the
    device: the custom ops' `mask_id`, so that torch.compile sees the same
    constant for two masks of one spec and does not recompile."""
    h = hashlib.sha256(str(device_index).encode())
    for f in sorted(p for p in path.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return int.from_bytes(h.digest()[:7], "little")


class Prepared:
    """A descriptor built for one batch (Mask.prepare): attention on that batch,
    forward and backward, without running the preprocess again.

    Its buffers are one uint8 tensor (`storage`, from PyTorch's caching
    allocator), laid out by the artifact and `bounds`; `layout` is (num_seqs,
    total_q, total_k, max_seqlen_q, max_seqlen_k). Build one per batch and
    pass it to the attention of every layer (as a BlockMask is): each
    Prepared is independent of the mask's later batches."""

    def __init__(self, mask, storage, bounds, layout, cu_q, cu_k, keep):
        self.mask, self.storage, self.bounds, self.layout = mask, storage, bounds, layout
        self.cu_seqlens_q, self.cu_seqlens_k, self._keep = cu_q, cu_k, keep
        self._native = None  # the C++ binding's descriptor, made on first use
        self._columns = self.columns

    def _native_id(self) -> int:
        """The id of the C++ binding's descriptor over `storage`, made on
        first use: it holds the storage, the cu_seqlens and the artifact while
        this Prepared or an autograd graph needs them."""
        if self._native is None:
            native = torch.classes.cmask_native.Descriptor(
                self.mask._native, list(self.bounds), self.storage, list(self.layout),
                self.cu_seqlens_q, self.cu_seqlens_k)
            # The id first: another thread that sees _native set reads it.
            self._id, self._native = native.id(), native
        return self._id

    @property
    def columns(self) -> bool:
        """Whether it holds the column direction the backward reads (a spec
        whose column mode is "rows" needs none)."""
        return bool(self.bounds[3]) or self.mask.manifest["columns"]["mode"] == "rows"

    @property
    def descriptor(self):
        """The runtime's handle over `storage` (valid until the next call on
        the mask: take it anew for each use)."""
        return self.mask._view(self.storage, self.bounds, self.layout, self.cu_seqlens_q,
                               self.cu_seqlens_k)

    @property
    def tile_shape(self):
        """The tile shape a call on this batch with no tile_shape= uses: the
        artifact's default, or (unless the artifact fixed it with
        --attention-tile) 128x128 on sequences of at most 65536 keys on
        average where the default is 128x64 (docs/attention.md); None where
        attention cannot run."""
        tile = _capi.lib().cmask_attention_tile_shape(self.mask._handle, self.descriptor)
        return self.mask.tile_shapes[tile] if tile >= 0 else None

    def tile_view(self, shape: int = -1) -> _capi.TileView:
        """Device pointers of the row descriptor's tile buffers (for tests);
        shape -1: the one a call with no tile_shape= uses."""
        view = _capi.TileView()
        d = self.descriptor
        tile = _capi.lib().cmask_attention_tile_shape(self.mask._handle, d)
        s = (tile if tile >= 0 else self.mask.default_tile_index) if shape < 0 else shape
        check(_capi.lib().cmask_descriptor_tiles(d, 0, s, ctypes.byref(view)))
        return view


class Mask:
    """An artifact loaded on a CUDA device (cmask.load / cmask.compile)."""

    def __init__(self, artifact_dir, device=None):
        self.path = Path(artifact_dir)
        manifest = self.path / "manifest.json"
        if not manifest.is_file():
            raise FileNotFoundError(f"cmask: {manifest} not found (build the artifact with "
                                    "cmask-translate SPEC --cmask-to-artifact -o DIR)")
        self.manifest = json.loads(manifest.read_text())
        if not torch.cuda.is_available():
            raise RuntimeError("cmask: no CUDA device (the runtime needs one)")
        self.device = torch.device("cuda", torch.cuda.current_device() if device is None
                                   else torch.device(device).index or 0)
        torch.cuda.init()  # the primary context PyTorch uses, made before the runtime's
        L = _capi.lib()
        _read_abi_codes()
        handle = ctypes.c_void_p()
        check(L.cmask_artifact_load(str(self.path).encode(), self.device.index,
                                    ctypes.byref(handle)))
        self._handle = handle
        # With the C++ binding, it owns the artifact (freed when the last
        # descriptor and autograd node using it are).
        self._native = (torch.classes.cmask_native.Artifact(handle.value)
                        if _binding.load() else None)
        # Eager calls through the binding (False: the autograd.Function
        # below; the tests and benchmarks compare the two).
        self._eager_binding = self._native is not None
        if self._eager_binding:
            global _ATTENTION_OP
            _ATTENTION_OP = torch.ops.cmask_native.attention.default
        self.name = self.manifest["spec"]
        n = L.cmask_artifact_num_metadata(handle)
        self.metadata = [(L.cmask_artifact_metadata_name(handle, i).decode(),
                          _ROLE_NAMES[L.cmask_artifact_metadata_role(handle, i)])
                         for i in range(n)]
        self.tile_shapes = []
        for i in range(L.cmask_artifact_num_tile_shapes(handle, 0)):
            q, k = ctypes.c_int64(), ctypes.c_int64()
            check(L.cmask_artifact_tile_shape(handle, 0, i, ctypes.byref(q), ctypes.byref(k)))
            self.tile_shapes.append(f"{q.value}x{k.value}")
        self.default_tile_index = L.cmask_artifact_default_attention_shape(handle)
        # Whether the backward kernels include the row pass of deterministic=True.
        kernels = (self.manifest.get("attention") or {}).get("kernels", [])
        self.deterministic_backward = any(k.get("pass") == "backward" and
                                          "dq_rows_tile_shape" in k for k in kernels)
        # Runtime handles over descriptor storage, by (storage address,
        # bounds): a handle is a function of the two (host memory only).
        self._views: "collections.OrderedDict[tuple, ctypes.c_void_p]" = \
            collections.OrderedDict()
        self._storage_bytes_cache = {}
        self._view_batch = {}  # handle key -> the batch set_batch last told it
        self._scratch_bytes = {}  # cmask_backward_scratch_bytes by its arguments
        self._cu_cache = {}
        self.id = _artifact_key(self.path, self.device.index)
        _REGISTRY.setdefault(self.id, weakref.WeakSet()).add(self)

    def __del__(self):
        try:
            L = _capi.lib()
            for handle in getattr(self, "_views", {}).values():
                L.cmask_descriptor_destroy(handle)
            if getattr(self, "_handle", None) and getattr(self, "_native", None) is None:
                L.cmask_artifact_destroy(self._handle)
        except Exception:
            pass

    def __repr__(self):
        meta = ", ".join(f"{n}: {r}" for n, r in self.metadata)
        return f"cmask.Mask(@{self.name}, metadata=[{meta}], tiles={self.tile_shapes})"

    # ------------------------------------------------------------------ helpers
    @property
    def has_attention(self) -> bool:
        return bool(_capi.lib().cmask_artifact_has_attention(self._handle))

    def _tile_index(self, tile_shape) -> int:
        if tile_shape is None:
            return -1
        if tile_shape not in self.tile_shapes:
            raise ValueError(f"cmask: tile shape {tile_shape!r} is not in the artifact "
                             f"({', '.join(self.tile_shapes)})")
        return self.tile_shapes.index(tile_shape)

    def _int32(self, x, what: str) -> torch.Tensor:
        """x (a list, or an int32 tensor on the CPU or the mask's device) on
        the device, without waiting for the GPU."""
        if isinstance(x, torch.Tensor):
            if x.dtype != torch.int32:
                raise TypeError(f"cmask: {what} must be int32, got {x.dtype}")
            if x.device == self.device:
                return x.contiguous()
            if x.device.type != "cpu":
                raise ValueError(f"cmask: {what} is on {x.device}, the mask on {self.device}")
            host = x.contiguous()
        else:
            host = torch.tensor(list(x), dtype=torch.int32)
        # From pinned memory without blocking: a pageable copy would wait for
        # the work queued on the stream before it (the host would stall).
        if not torch.compiler.is_compiling():
            host = host.pin_memory()
        return host.to(self.device, non_blocking=True)

    def _validate_metadata(self, metadata: dict, num_seqs: int) -> None:
        """Names, roles and sizes (plain Python: torch.compile traces it)."""
        names = [n for n, _ in self.metadata]
        missing = [n for n in names if n not in metadata]
        extra = [n for n in metadata if n not in names]
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(missing))
            if extra:
                parts.append("unknown " + ", ".join(extra))
            raise TypeError(f"cmask: @{self.name} metadata: {'; '.join(parts)} (it takes: "
                            + ", ".join(f"{n} ({r})" for n, r in self.metadata) + ")")
        for name, role in self.metadata:
            value = metadata[name]
            if role == "scalar":
                if isinstance(value, torch.Tensor):
                    raise TypeError(f"cmask: metadata {name} is a scalar: pass a Python int "
                                    "(a tensor would need a host synchronization)")
            elif role == "per_sequence":
                n = value.numel() if isinstance(value, torch.Tensor) else len(value)
                if n != num_seqs:
                    raise ValueError(f"cmask: metadata {name} has {n} values for "
                                     f"{num_seqs} sequences")
            elif isinstance(value, tuple):
                if len(value) != 2:
                    raise TypeError(f"cmask: offsets metadata {name}: (values, starts) or a "
                                    "list of boundary lists")
                n = value[1].numel() if isinstance(value[1], torch.Tensor) else len(value[1])
                if n != num_seqs + 1:
                    raise ValueError(f"cmask: metadata {name}: starts has {n} entries for "
                                     f"{num_seqs} sequences (needs B + 1)")
            elif len(value) != num_seqs:
                raise ValueError(f"cmask: metadata {name} has {len(value)} boundary lists "
                                 f"for {num_seqs} sequences")

    def _layout(self, q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
        """(num_seqs, total_q, total_k, max_q, max_k, cu_q, cu_k) of a batched or
        packed call; q and k are tensors or their shapes."""
        q, k = (torch.empty(x, device="meta") if isinstance(x, (tuple, list, torch.Size))
                else x for x in (q, k))
        if q.dim() == 4:
            if k.dim() != 4 or k.shape[0] != q.shape[0]:
                raise ValueError(f"cmask: batched q {tuple(q.shape)} needs k as [B, L, H, D] "
                                 f"with the same B, got {tuple(k.shape)}")
            if cu_seqlens_q is not None or cu_seqlens_k is not None:
                raise ValueError("cmask: cu_seqlens are for the packed layout [total, H, D]")
            B, Lq, Lk = q.shape[0], q.shape[1], k.shape[1]
            key = (B, Lq, Lk)
            if torch.compiler.is_compiling() or key not in self._cu_cache:
                cu = (
                    torch.arange(0, (B + 1) * Lq, Lq, dtype=torch.int32, device=self.device)[:B + 1],
                    torch.arange(0, (B + 1) * Lk, Lk, dtype=torch.int32, device=self.device)[:B + 1])
                if torch.compiler.is_compiling():  # no graph tensors in the cache
                    return B, B * Lq, B * Lk, Lq, Lk, cu[0], cu[1]
                self._cu_cache[key] = cu
            cu_q, cu_k = self._cu_cache[key]
            return B, B * Lq, B * Lk, Lq, Lk, cu_q, cu_k
        if q.dim() == 3:
            if k.dim() != 3:
                raise ValueError(f"cmask: packed q [total, H, D] needs packed k, got {tuple(k.shape)}")
            if cu_seqlens_q is None or cu_seqlens_k is None:
                raise ValueError("cmask: the packed layout [total, H, D] needs cu_seqlens_q and "
                                 "cu_seqlens_k (int32 [B + 1] on the device)")
            if max_seqlen_q is None or max_seqlen_k is None:
                raise ValueError("cmask: the packed layout needs max_seqlen_q and max_seqlen_k "
                                 "(ints: reading them from the device would synchronize)")
            cu_q = self._int32(cu_seqlens_q, "cu_seqlens_q")
            cu_k = self._int32(cu_seqlens_k, "cu_seqlens_k")
            if cu_q.numel() != cu_k.numel() or cu_q.numel() < 1:
                raise ValueError("cmask: cu_seqlens_q and cu_seqlens_k must both be [B + 1]")
            return (cu_q.numel() - 1, q.shape[0], k.shape[0], _as_int(max_seqlen_q),
                    _as_int(max_seqlen_k), cu_q, cu_k)
        raise ValueError(f"cmask: q must be [B, L, H, D] or [total, H, D], got {tuple(q.shape)}")

    def _storage_bytes(self, bounds: tuple) -> int:
        n = self._storage_bytes_cache.get(bounds)
        if n is None:
            size = ctypes.c_uint64()
            check(_capi.lib().cmask_descriptor_bytes(self._handle,
                                                     ctypes.byref(_capi.Bounds(*bounds)),
                                                     ctypes.byref(size)))
            if len(self._storage_bytes_cache) > 4096:  # lengths that never repeat
                self._storage_bytes_cache.clear()
            n = self._storage_bytes_cache[bounds] = size.value
        return n

    def _view(self, storage, bounds, layout, cu_q, cu_k):
        """The runtime's descriptor handle over `storage` for `bounds`, holding
        the batch `layout` (num_seqs, total_q, total_k, ...)."""
        L = _capi.lib()
        key = (storage.data_ptr(), bounds)
        handle = self._views.get(key)
        if handle is None:
            handle = ctypes.c_void_p()
            check(L.cmask_descriptor_create_at(self._handle, ctypes.byref(_capi.Bounds(*bounds)),
                                               storage.data_ptr(), storage.numel(),
                                               ctypes.byref(handle)))
            self._views[key] = handle
            if len(self._views) > 64:
                old, old_handle = self._views.popitem(last=False)
                self._view_batch.pop(old, None)
                L.cmask_descriptor_destroy(old_handle)
        else:
            self._views.move_to_end(key)
        # set_batch only when the handle was told another batch last.
        batch = (tuple(layout[:3]), cu_q.data_ptr(), cu_k.data_ptr())
        if self._view_batch.get(key) != batch:
            check(L.cmask_descriptor_set_batch(self._handle, handle, layout[0], layout[1],
                                               layout[2], batch[1], batch[2]))
            self._view_batch[key] = batch
        return handle

    # ------------------------------------------------------------------ API
    def prepare(self, *, cu_seqlens_q=None, cu_seqlens_k=None,
                max_seqlen_q=None, max_seqlen_k=None, q=None, k=None, checked=False,
                columns=True, window_q=None, window_k=None, **metadata) -> Prepared:
        """Runs the preprocess for a batch on the current stream and returns its
        descriptor, for attention(..., prepared=...) in every layer, forward
        and backward. The layout as attention takes it: q= and k= (tensors, or
        just their shapes, e.g. (total, H, D) with cu_seqlens), cu_seqlens and
        max_seqlen; the metadata by name. columns=False
        leaves out the column direction the backward reads (a forward-only
        descriptor, built faster). checked=True also checks the metadata
        (it waits for the GPU: not for the training loop).

        window_q= / window_k= (int32 [B, 2], or a list of pairs): the batch is
        a window of longer sequences (docs/descriptor.md, Windows): sequence
        b's present query rows (keys), as the layout counts them, begin at
        row window[b][0] of a whole sequence of window[b][1] rows (keys), and
        the mask and the metadata are the whole sequence's."""
        if q is None or k is None:
            raise ValueError("cmask: prepare needs q= and k= (their layout defines the batch)")
        layout = self._layout(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        num_seqs, total_q, total_k, max_q, max_k, cu_q, cu_k = layout
        # A window follows its cu_seqlens in one buffer (docs/descriptor.md).
        windows = (window_q is not None, window_k is not None)
        if windows[0]:
            cu_q = torch.cat([cu_q, self._window(window_q, num_seqs, "window_q")])
        if windows[1]:
            cu_k = torch.cat([cu_k, self._window(window_k, num_seqs, "window_k")])
        tensors, ints = _encode_metadata(self, metadata, num_seqs)
        columns = bool(columns) and self.manifest["columns"]["mode"] != "rows"
        bounds = (num_seqs, total_q, max_k, int(columns), total_k, max_q)
        batch = (num_seqs, total_q, total_k, max_q, max_k)
        if torch.compiler.is_compiling():
            storage = torch.ops.cmask.preprocess(cu_q, cu_k, tensors, ints, self.id,
                                                 list(bounds), list(batch), bool(checked),
                                                 *windows)
        else:
            storage = _preprocess(self, cu_q, cu_k, tensors, ints, bounds, batch, bool(checked),
                                  *windows)
        return Prepared(self, storage, bounds, batch, cu_q, cu_k, tensors)

    def _window(self, window, num_seqs: int, name: str) -> torch.Tensor:
        """A window_q= / window_k= argument as int32 [2 * num_seqs] on the device."""
        if isinstance(window, torch.Tensor):
            n = window.numel()
        else:
            window = [int(x) for pair in window for x in pair]
            n = len(window)
        if n != 2 * num_seqs:
            raise ValueError(f"cmask: {name} needs a (first row, whole length) pair per "
                             f"sequence ({num_seqs}), got {n} values")
        return self._int32(window.reshape(-1) if isinstance(window, torch.Tensor) else window,
                           name)

    def _check_qkv(self, q, k, v):
        for name, t in (("q", q), ("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"cmask: {name} must be a torch.Tensor")
            if t.device != self.device:
                raise ValueError(f"cmask: {name} is on {t.device}; the mask is loaded on "
                                 f"{self.device}")
            if t.dtype not in _DTYPES:
                raise TypeError(f"cmask: {name} is {t.dtype}; supported: torch.bfloat16, "
                                "torch.float16")
        if not (q.dtype == k.dtype == v.dtype):
            raise TypeError(f"cmask: q, k, v must share a dtype ({q.dtype}, {k.dtype}, {v.dtype})")
        if k.shape != v.shape:
            raise ValueError(f"cmask: k {tuple(k.shape)} and v {tuple(v.shape)} differ")
        if q.shape[-1] != k.shape[-1]:
            raise ValueError(f"cmask: head dims differ (q {q.shape[-1]}, k {k.shape[-1]})")
        if q.shape[-2] % k.shape[-2]:
            raise ValueError(f"cmask: {q.shape[-2]} query heads are not a multiple of "
                             f"{k.shape[-2]} key/value heads")

    def attention(self, q, k, v, scale=None, return_lse=False, *, cu_seqlens_q=None,
                  cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, tile_shape=None,
                  prepared: Prepared | None = None, stats=None, out=None, lse_out=None,
                  deterministic=False, schedule=None, gqa_packing=None, section_heads=None,
                  **metadata):
        """Masked attention on PyTorch's current stream, with its backward.

        q: [B, Lq, H, D] (batched) or [total_q, H, D] (packed, with cu_seqlens_q/k
        and max_seqlen_q/k); k, v: the same layout with H_kv heads (H a multiple
        of H_kv: GQA/MQA). bf16 or fp16, D 64 or 128. Returns out (q's layout)
        and, with return_lse, the fp32 log-sum-exp ([B, H, Lq] or [H, total_q]).
        Metadata by name (docs/python.md), or prepared= (Mask.prepare: the
        batch's descriptor, built once and passed to every layer; the layout
        and metadata are then the prepare call's).
        deterministic=True: the backward computes dq with a second pass over
        the row direction instead of fp32 atomics, bitwise the same run to
        run (dk and dv always are); it takes longer (docs/attention.md).
        Forward only, with prepared=: out= and lse_out= (packed [total_q, H, D]
        and [H, total_q], contiguous) receive the results, stats= (int32 [3])
        adds the work items (query tiles x heads) processed per tile state, schedule=
        "grid" (one CTA per query tile x head) or "persistent" (one CTA per
        SM; 128x128 kernels) replaces the runtime's choice, gqa_packing=
        True or False packs the query heads of a KV head into a tile's rows
        or not (None: packed where H / H_kv is a power of two up to 64;
        docs/attention.md), section_heads= (at least 1) replaces the runtime's
        section of the persistent kernel (its items come in sections of that
        many query heads; the grid kernel ignores it; docs/attention.md, The
        persistent schedule).
        """
        if (prepared is not None and self._eager_binding and not metadata and out is None
                and lse_out is None and stats is None and schedule is None
                and gqa_packing is None and section_heads is None
                and not torch.compiler.is_compiling()):
            out, lse = self._attention_binding(q, k, v, prepared, scale, tile_shape,
                                               deterministic)
            return (out, lse) if return_lse else out
        self._check_qkv(q, k, v)
        self._check_options(None, deterministic, q, k, v)
        grad = _requires_grad(q, k, v)
        forward_only = out is not None or lse_out is not None or stats is not None or \
            schedule is not None or gqa_packing is not None or section_heads is not None
        if prepared is None:
            if forward_only:
                raise TypeError("cmask: out=, lse_out=, stats=, schedule=, gqa_packing= and "
                                "section_heads= go with prepared=")
            prepared = self.prepare(q=q, k=k, cu_seqlens_q=cu_seqlens_q,
                                    cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                                    max_seqlen_k=max_seqlen_k, columns=grad, **metadata)
        else:
            if metadata:
                raise TypeError("cmask: metadata is given to prepare(), not with prepared=")
            self._check_options(prepared, False, q, k, v)
        batched = q.dim() == 4
        if forward_only:
            if grad:
                raise TypeError("cmask: out=, lse_out=, stats=, schedule=, gqa_packing= and "
                                "section_heads= are forward only (the inputs require grad)")
            out, lse = _forward(self, q, k, v, prepared, scale, tile_shape, stats, out,
                                lse_out, schedule, gqa_packing, section_heads)
        else:
            qp, kp, vp = _packed(q), _packed(k), _packed(v)
            scale = -1.0 if scale is None else float(scale)
            tile = self._tile_index(tile_shape)
            if torch.compiler.is_compiling():
                out, lse = torch.ops.cmask.attention_forward(
                    qp, kp, vp, prepared.storage, prepared.cu_seqlens_q,
                    prepared.cu_seqlens_k, self.id, list(prepared.bounds),
                    list(prepared.layout), scale, tile, bool(deterministic))
            elif self._eager_binding:  # the C++ binding, with or without grad
                out, lse = self._attention_binding(qp, kp, vp, prepared, scale, tile_shape,
                                                   deterministic)
            elif grad:
                out, lse = _Attention.apply(qp, kp, vp, self, prepared, scale, tile,
                                            bool(deterministic))
            else:
                out, lse = _attention(self, qp, kp, vp, prepared.storage, prepared.cu_seqlens_q,
                                      prepared.cu_seqlens_k, prepared.bounds, prepared.layout,
                                      scale, tile)
            if batched:
                out = out.view(q.shape)
        if batched:
            B, L, H = q.shape[0], q.shape[1], q.shape[2]
            lse = lse.view(H, B, L).transpose(0, 1)
        return (out, lse) if return_lse else out

    def _check_options(self, prepared, deterministic, q, k, v) -> None:
        """deterministic= against the artifact, and prepared= (if given)
        against this mask and, where the inputs require grad, its column
        direction: the checks of every path."""
        if deterministic and not self.deterministic_backward:
            raise ValueError(f"cmask: @{self.name}'s artifact has no deterministic dQ "
                             "pass (it needs the row tile shape 128x64)")
        if prepared is None:
            return
        if prepared.mask.id != self.id:  # another Mask of the same artifact serves
            raise ValueError("cmask: prepared= comes from another mask")
        if not prepared._columns and _requires_grad(q, k, v):
            raise ValueError("cmask: the inputs require grad but prepared= has no column "
                             "direction for the backward (prepare it with columns=True)")

    def _attention_binding(self, q, k, v, prepared, scale, tile_shape, deterministic):
        """out, lse in q's layout through the C++ binding (eager, with or
        without grad): the checks of the Python path run where the call
        fails, so that its errors read the same."""
        self._check_options(prepared, deterministic, q, k, v)
        try:
            return _ATTENTION_OP(q, k, v, prepared._native_id(),
                                 -1.0 if scale is None else float(scale),
                                 -1 if tile_shape is None else self._tile_index(tile_shape),
                                 bool(deterministic))
        except (RuntimeError, TypeError) as e:
            # The Python path's checks, for their messages, where one fails.
            self._check_qkv(q, k, v)
            for name, t in (("q", q), ("k", k), ("v", v)):
                if t.stride(-1) != 1:
                    raise ValueError(f"cmask: {name}'s head dimension must be "
                                     "contiguous") from None
            if type(e) is RuntimeError:  # the runtime's or the binding's (c10::Error)
                raise _capi.RuntimeError_(str(e)) from None
            raise  # PyTorch's own subclasses (out of memory, ...) and TypeErrors


def _requires_grad(q, k, v) -> bool:
    """Whether autograd records the call (q, k, v may be anything: the
    checks that name a wrong one come later)."""
    return torch.is_grad_enabled() and any(getattr(t, "requires_grad", False)
                                           for t in (q, k, v))


def _as_int(x):
    """x as an int, a SymInt kept symbolic (under torch.compile, int() would
    specialize the graph on its value)."""
    return x if isinstance(x, torch.SymInt) else int(x)


def _packed(t: torch.Tensor) -> torch.Tensor:
    """[B, L, H, D] -> [B*L, H, D] (a view when the strides allow it)."""
    return t.reshape(t.shape[0] * t.shape[1], t.shape[2], t.shape[3]) if t.dim() == 4 else t


def _tensor(t: torch.Tensor) -> _capi.Tensor:
    return _capi.Tensor(t.data_ptr(), _DTYPES[t.dtype], t.shape[0], t.shape[1], t.shape[2],
                        t.stride(0), t.stride(1))


_SCHEDULES = {None: 0, "grid": 1, "persistent": 2}
_GQA_PACKING = {None: 0, False: 1, True: 2}


def _forward(mask: Mask, q, k, v, prepared: Prepared, scale, tile_shape, stats, out=None,
             lse=None, schedule=None, gqa_packing=None, section_heads=None):
    """out, lse of the packed or batched q, k, v on a prepared descriptor
    (forward only: out=, lse_out=, stats=, schedule=, gqa_packing=,
    section_heads=)."""
    qp, kp, vp = _packed(q), _packed(k), _packed(v)
    if out is None:
        out = torch.empty(qp.shape, dtype=q.dtype, device=q.device)
    elif out.shape != qp.shape or out.dtype != q.dtype or not out.is_contiguous():
        raise ValueError(f"cmask: out= must be a contiguous {q.dtype} tensor of shape "
                         f"{tuple(qp.shape)}")
    if lse is None:
        lse = torch.empty((qp.shape[1], qp.shape[0]), dtype=torch.float32, device=q.device)
    elif lse.shape != (qp.shape[1], qp.shape[0]) or lse.dtype != torch.float32 or \
            not lse.is_contiguous():
        raise ValueError(f"cmask: lse_out= must be a contiguous float32 tensor of shape "
                         f"{(qp.shape[1], qp.shape[0])}")
    if schedule not in _SCHEDULES:
        raise ValueError(f"cmask: schedule {schedule!r} (None, 'grid' or 'persistent')")
    if gqa_packing is not None and not isinstance(gqa_packing, bool):
        raise ValueError(f"cmask: gqa_packing {gqa_packing!r} (None, False or True)")
    if section_heads is not None and (isinstance(section_heads, bool) or
                                      not isinstance(section_heads, int) or
                                      not 1 <= section_heads < 2**31):
        raise ValueError(f"cmask: section_heads {section_heads!r} (None or an int from 1 "
                         "to 2**31 - 1)")
    _launch(mask, prepared.descriptor, qp, kp, vp, out, lse, scale, mask._tile_index(tile_shape),
            stats, _SCHEDULES[schedule], _GQA_PACKING[gqa_packing], section_heads or 0)
    return out.view(q.shape), lse


def _launch(mask, descriptor, qp, kp, vp, out, lse, scale, tile, stats, schedule=0,
            gqa_packing=0, section_heads=0):
    for name, t in (("q", qp), ("k", kp), ("v", vp)):
        if t.stride(-1) != 1:
            raise ValueError(f"cmask: {name}'s head dimension must be contiguous")
    if stats is not None and (stats.dtype != torch.int32 or stats.numel() < 3 or
                              stats.device != mask.device):
        raise ValueError("cmask: stats must be an int32 tensor of 3 on the mask's device")
    args = _capi.AttentionArgs(
        _tensor(qp), _tensor(kp), _tensor(vp), _tensor(out), lse.data_ptr(),
        0.0 if scale is None or scale < 0 else float(scale), tile,
        0 if stats is None else stats.data_ptr(), schedule, gqa_packing, section_heads)
    check(_capi.lib().cmask_attention_forward(mask._handle, descriptor, ctypes.byref(args),
                                              _stream(mask)))


def _encode_metadata(mask: Mask, metadata: dict, num_seqs: int):
    """Metadata as the custom ops take them (tensors, ints): scalars as ints,
    per-sequence values as one tensor, offsets as (values, starts); checked
    against the spec's names, roles and the batch's sequences."""
    mask._validate_metadata(metadata, num_seqs)
    tensors, ints = [], []
    for name, role in mask.metadata:
        value = metadata[name]
        if role == "scalar":
            ints.append(_as_int(value))
        elif role == "per_sequence":
            tensors.append(mask._int32(value, f"metadata {name}"))
        elif isinstance(value, tuple):
            tensors += [mask._int32(value[0], f"metadata {name} values"),
                        mask._int32(value[1], f"metadata {name} starts")]
        else:  # one list of boundaries per sequence
            lists = [list(map(int, x)) for x in value]
            starts = [0]
            for x in lists:
                starts.append(starts[-1] + len(x))
            tensors += [mask._int32([x for l in lists for x in l] or [0], f"metadata {name}"),
                        mask._int32(starts, f"metadata {name} starts")]
    return tensors, ints


def _metadata_struct(mask: Mask, tensors, ints):
    """The C metadata array (the manifest's order) of _encode_metadata's output."""
    args = (_capi.MetadataArg * max(1, len(mask.metadata)))()
    t = i = 0
    for k, (_, role) in enumerate(mask.metadata):
        if role == "scalar":
            args[k].scalar, i = ints[i], i + 1
        else:
            args[k].values, args[k].num_values = tensors[t].data_ptr(), tensors[t].numel()
            if role == "offsets":
                args[k].starts = tensors[t + 1].data_ptr()
            t += 1 if role == "per_sequence" else 2
    return args


def _mask(mask_id: int) -> Mask:
    for mask in _REGISTRY.get(mask_id, ()):
        return mask
    raise RuntimeError(f"cmask: mask {mask_id} is no longer loaded")


# --------------------------------------------------------------------------
# The preprocess, the forward and the backward on a descriptor's storage.
# Eager calls run the C++ binding's operator (csrc/torch_binding.cpp,
# docs/python.md), or, where it is not loaded, these functions through a
# torch.autograd.Function; under torch.compile the same functions run as
# custom ops (torch.library), so that the graph sees plain tensors and ints.
# --------------------------------------------------------------------------

def _stream(mask: Mask) -> int:
    return torch._C._cuda_getCurrentRawStream(mask.device.index)


def _preprocess(mask: Mask, cu_q, cu_k, tensors, ints, bounds: tuple, batch, checked: bool,
                window_q=False, window_k=False):
    """The descriptor's storage for `bounds` (num_seqs, total_q, max_seqlen_k,
    columns, total_k, max_seqlen_q), built for `batch` (num_seqs, total_q,
    total_k, max_seqlen_q, max_seqlen_k); of a window of longer sequences
    when window_q / window_k: cu_q / cu_k are then followed by the window
    (int32 [2B])."""
    storage = torch.empty(mask._storage_bytes(bounds), dtype=torch.uint8, device=cu_q.device)
    d = mask._view(storage, bounds, batch, cu_q, cu_k)
    stream = _stream(mask)
    L = _capi.lib()
    check(L.cmask_preprocess_window(
        mask._handle, d, batch[0], batch[1], batch[2], cu_q.data_ptr(), cu_k.data_ptr(),
        _metadata_struct(mask, tensors, ints), len(mask.metadata), stream, int(checked),
        int(window_q), int(window_k)))
    if checked:
        flags = ctypes.c_int32()
        check(L.cmask_read_error_flags(mask._handle, d, stream, ctypes.byref(flags)))
        if flags.value:
            raise ValueError(f"cmask: invalid metadata (flags {flags.value}: 1 cu_seqlens, "
                             "2 offsets starts, 4 offsets values, 8 a sequence longer "
                             "than the descriptor's bounds, 16 a window outside its "
                             "sequence)")
    return storage


def _attention(mask: Mask, q, k, v, storage, cu_q, cu_k, bounds: tuple, batch, scale: float,
               tile: int):
    """out, lse [H, total_q] of packed q, k, v over the descriptor in `storage`."""
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    _launch(mask, mask._view(storage, bounds, batch, cu_q, cu_k), q, k, v, out, lse, scale,
            tile, None)
    return out, lse


def _attention_backward(mask: Mask, q, k, v, out, lse, dout, storage, cu_q, cu_k,
                        bounds: tuple, batch, scale: float, deterministic: bool):
    """dq, dk, dv of packed q, k, v given the forward's out and lse, over the
    same descriptor (with its column direction)."""
    dout = dout.contiguous()
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    _launch_backward(mask, mask._view(storage, bounds, batch, cu_q, cu_k), q, k, v, out, lse,
                     dout, dq, dk, dv, batch, scale, deterministic)
    return dq, dk, dv


def _launch_backward(mask: Mask, d, q, k, v, out, lse, dout, dq, dk, dv, batch, scale: float,
                     deterministic: bool):
    """cmask_attention_backward into dq, dk, dv over the descriptor view d."""
    L = _capi.lib()
    shape = (q.shape[0], batch[0], q.shape[1], q.shape[2])
    size = mask._scratch_bytes.get(shape)
    if size is None:
        if len(mask._scratch_bytes) > 4096:  # lengths that never repeat
            mask._scratch_bytes.clear()
        size = mask._scratch_bytes[shape] = L.cmask_backward_scratch_bytes(*shape)
    scratch = torch.empty(size, dtype=torch.uint8, device=q.device)
    args = _capi.BackwardArgs(_tensor(q), _tensor(k), _tensor(v), _tensor(out), _tensor(dout),
                              _tensor(dq), _tensor(dk), _tensor(dv), lse.data_ptr(),
                              scratch.data_ptr(), 0.0 if scale < 0 else float(scale),
                              int(deterministic), int(batch[3]))
    check(L.cmask_attention_backward(mask._handle, d, ctypes.byref(args), _stream(mask)))


def _no_lse_gradient(ctx, lse):
    """lse carries no gradient (the backward computes none through it): marked
    so, a loss that reaches it fails in autograd instead of a silent zero,
    and no zero gradient is made for it (that fill cost about 200 us of host
    time per call on the H200's host)."""
    ctx.mark_non_differentiable(lse)
    ctx.set_materialize_grads(False)


class _Attention(torch.autograd.Function):
    """Eager attention with its backward, on a Prepared descriptor."""

    @staticmethod
    def forward(ctx, q, k, v, mask, prepared, scale, tile, deterministic):
        p = prepared
        out, lse = _attention(mask, q, k, v, p.storage, p.cu_seqlens_q, p.cu_seqlens_k,
                              p.bounds, p.layout, scale, tile)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.mask, ctx.prepared, ctx.scale, ctx.deterministic = mask, p, scale, deterministic
        _no_lse_gradient(ctx, lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        if dout is None:  # out did not reach the loss
            return (None,) * 8
        q, k, v, out, lse = ctx.saved_tensors
        p = ctx.prepared
        dq, dk, dv = _attention_backward(ctx.mask, q, k, v, out, lse, dout, p.storage,
                                         p.cu_seqlens_q, p.cu_seqlens_k, p.bounds, p.layout,
                                         ctx.scale, ctx.deterministic)
        return dq, dk, dv, None, None, None, None, None


@torch.library.custom_op("cmask::preprocess", mutates_args=())
def preprocess(cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
               metadata_tensors: list[torch.Tensor], metadata_ints: list[int], mask_id: int,
               bounds: list[int], batch: list[int], checked: bool,
               window_q: bool = False, window_k: bool = False) -> torch.Tensor:
    """_preprocess as a custom op."""
    return _preprocess(_mask(mask_id), cu_seqlens_q, cu_seqlens_k, metadata_tensors,
                       metadata_ints, tuple(bounds), batch, checked, window_q, window_k)


@preprocess.register_fake
def _(cu_seqlens_q, cu_seqlens_k, metadata_tensors, metadata_ints, mask_id, bounds, batch,
      checked, window_q=False, window_k=False):
    # The size is the runtime's function of the bounds, which may be symbolic
    # here (lengths that change between calls): a size of its own.
    return cu_seqlens_q.new_empty((torch.library.get_ctx().new_dynamic_size(),),
                                  dtype=torch.uint8)


@torch.library.custom_op("cmask::attention_forward", mutates_args=())
def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      storage: torch.Tensor, cu_seqlens_q: torch.Tensor,
                      cu_seqlens_k: torch.Tensor, mask_id: int, bounds: list[int],
                      batch: list[int], scale: float, tile_shape: int, deterministic: bool
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """_attention as a custom op: (out, lse [H, total_q])."""
    return _attention(_mask(mask_id), q, k, v, storage, cu_seqlens_q, cu_seqlens_k,
                      tuple(bounds), batch, scale, tile_shape)


@attention_forward.register_fake
def _(q, k, v, storage, cu_seqlens_q, cu_seqlens_k, mask_id, bounds, batch, scale,
      tile_shape, deterministic):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32))


@torch.library.custom_op("cmask::attention_backward", mutates_args=())
def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                       lse: torch.Tensor, dout: torch.Tensor, storage: torch.Tensor,
                       cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor, mask_id: int,
                       bounds: list[int], batch: list[int], scale: float, deterministic: bool
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """_attention_backward as a custom op: dq, dk, dv."""
    return _attention_backward(_mask(mask_id), q, k, v, out, lse, dout, storage, cu_seqlens_q,
                               cu_seqlens_k, tuple(bounds), batch, scale, deterministic)


@attention_backward.register_fake
def _(q, k, v, out, lse, dout, storage, cu_seqlens_q, cu_seqlens_k, mask_id, bounds, batch,
      scale, deterministic):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    (q, k, v, storage, cu_q, cu_k, mask_id, bounds, batch, scale, tile,
     deterministic) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, storage, cu_q, cu_k)
    ctx.mask_id, ctx.bounds, ctx.batch, ctx.scale = mask_id, bounds, batch, scale
    ctx.deterministic = deterministic
    _no_lse_gradient(ctx, lse)


def _backward(ctx, dout, dlse):
    if dout is None:  # out did not reach the loss
        return (None,) * 12
    q, k, v, out, lse, storage, cu_q, cu_k = ctx.saved_tensors
    dq, dk, dv = torch.ops.cmask.attention_backward(
        q, k, v, out, lse, dout, storage, cu_q, cu_k, ctx.mask_id, ctx.bounds, ctx.batch,
        ctx.scale, ctx.deterministic)
    return (dq, dk, dv) + (None,) * 9


attention_forward.register_autograd(_backward, setup_context=_setup_context)
