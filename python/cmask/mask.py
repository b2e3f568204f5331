"""A loaded artifact on a CUDA device: descriptors and attention over PyTorch tensors."""

from __future__ import annotations

import ctypes
import json
import weakref
from pathlib import Path

import torch

from . import _capi
from ._capi import check

_DTYPES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.F16}
_ROLE_NAMES = {_capi.ROLE_SCALAR: "scalar", _capi.ROLE_PER_SEQUENCE: "per_sequence",
               _capi.ROLE_OFFSETS: "offsets"}

# Masks by id, for the custom op (which takes plain ints); weak, so that a
# mask nobody holds is freed with its descriptor.
_REGISTRY: "weakref.WeakValueDictionary[int, Mask]" = weakref.WeakValueDictionary()


def _grow(x: int) -> int:
    """The next power of two at or above x (descriptor bounds grow by doubling)."""
    return 1 << max(0, int(x) - 1).bit_length()


class Prepared:
    """A descriptor built for one batch (Mask.prepare): attention on that batch
    without running the preprocess again."""

    def __init__(self, mask, descriptor, layout, keep):
        self.mask, self.descriptor, self.layout, self._keep = mask, descriptor, layout, keep
        # The runtime's tile choice for this batch, asked while the
        # descriptor holds it (the mask's descriptor serves later batches).
        self._tile = _capi.lib().cmask_attention_tile_shape(mask._handle, descriptor)

    @property
    def tile_shape(self):
        """The tile shape a call on this batch with no tile_shape= uses: the
        artifact's default, or (unless the artifact fixed it with
        --attention-tile) 128x128 on sequences of at most 65536 keys on
        average where the default is 128x64 (docs/attention.md); None where
        attention cannot run."""
        return self.mask.tile_shapes[self._tile] if self._tile >= 0 else None

    def tile_view(self, shape: int = -1) -> _capi.TileView:
        """Device pointers of the row descriptor's tile buffers (for tests);
        shape -1: the one a call with no tile_shape= uses."""
        view = _capi.TileView()
        s = (self._tile if self._tile >= 0 else self.mask.default_tile_index) \
            if shape < 0 else shape
        check(_capi.lib().cmask_descriptor_tiles(self.descriptor, 0, s, ctypes.byref(view)))
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
        handle = ctypes.c_void_p()
        check(L.cmask_artifact_load(str(self.path).encode(), self.device.index,
                                    ctypes.byref(handle)))
        self._handle = handle
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
        self._descriptor = None
        self._bounds = None
        self._cu_cache = {}
        self.id = id(self)
        _REGISTRY[self.id] = self

    def __del__(self):
        try:
            L = _capi.lib()
            if getattr(self, "_descriptor", None):
                L.cmask_descriptor_destroy(self._descriptor)
            if getattr(self, "_handle", None):
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
        if isinstance(x, torch.Tensor):
            if x.device != self.device:
                raise ValueError(f"cmask: {what} is on {x.device}, the mask on {self.device}")
            if x.dtype != torch.int32:
                raise TypeError(f"cmask: {what} must be int32, got {x.dtype}")
            return x.contiguous()
        return torch.tensor(list(x), dtype=torch.int32, device=self.device)

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

    def _metadata_args(self, metadata: dict, num_seqs: int):
        """The C metadata array for the manifest's order, and the tensors to keep alive."""
        self._validate_metadata(metadata, num_seqs)
        args = (_capi.MetadataArg * max(1, len(self.metadata)))()
        keep = []
        for i, (name, role) in enumerate(self.metadata):
            value = metadata[name]
            if role == "scalar":
                args[i].scalar = int(value)
            elif role == "per_sequence":
                t = self._int32(value, f"metadata {name}")
                keep.append(t)
                args[i].values, args[i].num_values = t.data_ptr(), t.numel()
            else:
                if isinstance(value, tuple) and len(value) == 2:
                    values = self._int32(value[0], f"metadata {name} values")
                    starts = self._int32(value[1], f"metadata {name} starts")
                else:  # one list of boundaries per sequence
                    lists = [list(map(int, v)) for v in value]
                    flat = [x for v in lists for x in v]
                    st = [0]
                    for v in lists:
                        st.append(st[-1] + len(v))
                    values = self._int32(flat or [0], f"metadata {name}")
                    starts = self._int32(st, f"metadata {name} starts")
                if starts.numel() != num_seqs + 1:
                    raise ValueError(f"cmask: metadata {name}: starts has {starts.numel()} "
                                     f"entries for {num_seqs} sequences (needs B + 1)")
                keep += [values, starts]
                args[i].values, args[i].num_values = values.data_ptr(), values.numel()
                args[i].starts = starts.data_ptr()
        return args, keep

    def _layout(self, q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
        """(num_seqs, total_q, total_k, max_q, max_k, cu_q, cu_k) of a batched or
        packed call."""
        if q.dim() == 4:
            if k.dim() != 4 or k.shape[0] != q.shape[0]:
                raise ValueError(f"cmask: batched q {tuple(q.shape)} needs k as [B, L, H, D] "
                                 f"with the same B, got {tuple(k.shape)}")
            if cu_seqlens_q is not None or cu_seqlens_k is not None:
                raise ValueError("cmask: cu_seqlens are for the packed layout [total, H, D]")
            B, Lq, Lk = q.shape[0], q.shape[1], k.shape[1]
            key = (B, Lq, Lk)
            if key not in self._cu_cache or torch.compiler.is_compiling():
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
            return (cu_q.numel() - 1, q.shape[0], k.shape[0], int(max_seqlen_q),
                    int(max_seqlen_k), cu_q, cu_k)
        raise ValueError(f"cmask: q must be [B, L, H, D] or [total, H, D], got {tuple(q.shape)}")

    def _descriptor_for(self, num_seqs, total_q, max_k, columns=False, total_k=0, max_q=0):
        """The mask's descriptor, recreated (grown by powers of two) when the batch
        exceeds it or needs the column direction it lacks."""
        need = (num_seqs, total_q, max_k, total_k, max_q)
        have = self._bounds or (0, 0, 0, 0, 0, False)
        if (self._bounds is None or any(n > b for n, b in zip(need, have[:5]))
                or (columns and not have[5])):
            grown = tuple(_grow(max(n, b)) for n, b in zip(need, have[:5]))
            grown = grown + (bool(columns or have[5]),)
            bounds = _capi.Bounds(grown[0], grown[1], grown[2], int(grown[5]), grown[3],
                                  grown[4])
            handle = ctypes.c_void_p()
            with torch.cuda.device(self.device):
                check(_capi.lib().cmask_descriptor_create(self._handle, ctypes.byref(bounds),
                                                          ctypes.byref(handle)))
            if self._descriptor:
                torch.cuda.current_stream(self.device).synchronize()  # old one may be in use
                _capi.lib().cmask_descriptor_destroy(self._descriptor)
            self._descriptor, self._bounds = handle, grown
        return self._descriptor

    # ------------------------------------------------------------------ API
    def prepare(self, *, cu_seqlens_q=None, cu_seqlens_k=None,
                max_seqlen_q=None, max_seqlen_k=None, q=None, k=None, checked=False,
                columns=False, **metadata) -> Prepared:
        """Runs the preprocess for a batch (layout from q and k, or cu_seqlens) on the
        current stream and returns the descriptor, for attention(..., prepared=...).
        columns=True also builds the column direction (for the backward) when the
        spec has one (column mode "rows": the backward reads the rows only)."""
        if q is None or k is None:
            raise ValueError("cmask: prepare needs q= and k= (their layout defines the batch)")
        num_seqs, total_q, total_k, max_q, max_k, cu_q, cu_k = self._layout(
            q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        args, keep = self._metadata_args(metadata, num_seqs)
        columns = columns and self.manifest["columns"]["mode"] != "rows"
        d = self._descriptor_for(num_seqs, total_q, max_k, columns, total_k, max_q)
        stream = torch.cuda.current_stream(self.device).cuda_stream
        check(_capi.lib().cmask_preprocess(self._handle, d, num_seqs, total_q, total_k,
                                           cu_q.data_ptr(), cu_k.data_ptr(), args,
                                           len(self.metadata), stream, int(checked)))
        if checked:
            flags = ctypes.c_int32()
            check(_capi.lib().cmask_read_error_flags(self._handle, d, stream, ctypes.byref(flags)))
            if flags.value:
                raise ValueError(f"cmask: invalid metadata (flags {flags.value}: 1 cu_seqlens, "
                                 "2 offsets starts, 4 offsets values, 8 a sequence longer "
                                 "than the descriptor's bounds)")
        return Prepared(self, d, (num_seqs, total_q, total_k, max_q, max_k), keep + [cu_q, cu_k])

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
                  deterministic=False, schedule=None, **metadata):
        """Masked attention forward on PyTorch's current stream.

        q: [B, Lq, H, D] (batched) or [total_q, H, D] (packed, with cu_seqlens_q/k
        and max_seqlen_q/k); k, v: the same layout with H_kv heads (H a multiple
        of H_kv: GQA/MQA). bf16 or fp16, D 64 or 128. Returns out (q's layout)
        and, with return_lse, the fp32 log-sum-exp ([B, H, Lq] or [H, total_q]).
        Metadata by name (docs/python.md). With prepared= the descriptor of
        Mask.prepare is used and no metadata is taken; out= and lse_out= (packed
        [total_q, H, D] and [H, total_q], contiguous) then receive the results.
        stats= (int32 [3]) adds the query tiles x heads processed per tile state.
        schedule= (with prepared=): "grid" (one CTA per query tile x head) or
        "persistent" (one CTA per SM; 128x128 kernels) instead of the
        runtime's choice (docs/attention.md).
        deterministic=True: the backward computes dq with a second pass over
        the row direction instead of fp32 atomics, bitwise the same run to
        run (dk and dv always are); it takes longer (docs/attention.md).
        """
        self._check_qkv(q, k, v)
        batched = q.dim() == 4
        if prepared is not None:
            if metadata:
                raise TypeError("cmask: metadata is given to prepare(), not with prepared=")
            if deterministic:
                raise TypeError("cmask: deterministic= is for the backward; a call with "
                                "prepared= has none")
            out, lse = _forward(self, q, k, v, prepared, scale, tile_shape, stats, out,
                                lse_out, schedule)
        else:
            if out is not None or lse_out is not None or stats is not None or \
                    schedule is not None:
                raise TypeError("cmask: out=, lse_out=, stats= and schedule= go with "
                                "prepared=")
            if deterministic and not self.deterministic_backward:
                raise ValueError(f"cmask: @{self.name}'s artifact has no deterministic dQ "
                                 "pass (it needs the row tile shape 128x64)")
            num_seqs, total_q, total_k, max_q, max_k, cu_q, cu_k = self._layout(
                q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
            tensors, ints = _encode_metadata(self, metadata, num_seqs)
            qp, kp, vp = _packed(q), _packed(k), _packed(v)
            out, lse = torch.ops.cmask.attention_forward(
                qp, kp, vp, cu_q, cu_k, tensors, ints, self.id, max_q, max_k,
                -1.0 if scale is None else float(scale), self._tile_index(tile_shape),
                bool(deterministic))
            if batched:
                out = out.view(q.shape)
        if batched:
            B, L, H = q.shape[0], q.shape[1], q.shape[2]
            lse = lse.view(H, B, L).transpose(0, 1)
        return (out, lse) if return_lse else out


def _packed(t: torch.Tensor) -> torch.Tensor:
    """[B, L, H, D] -> [B*L, H, D] (a view when the strides allow it)."""
    return t.reshape(t.shape[0] * t.shape[1], t.shape[2], t.shape[3]) if t.dim() == 4 else t


def _tensor(t: torch.Tensor) -> _capi.Tensor:
    return _capi.Tensor(t.data_ptr(), _DTYPES[t.dtype], t.shape[0], t.shape[1], t.shape[2],
                        t.stride(0), t.stride(1))


_SCHEDULES = {None: 0, "grid": 1, "persistent": 2}


def _forward(mask: Mask, q, k, v, prepared: Prepared, scale, tile_shape, stats, out=None,
             lse=None, schedule=None):
    """out, lse of the packed or batched q, k, v on a prepared descriptor."""
    if prepared.mask is not mask:
        raise ValueError("cmask: prepared= comes from another mask")
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
    _launch(mask, prepared.descriptor, qp, kp, vp, out, lse, scale, mask._tile_index(tile_shape),
            stats, _SCHEDULES[schedule])
    return out.view(q.shape), lse


def _launch(mask, descriptor, qp, kp, vp, out, lse, scale, tile, stats, schedule=0):
    for name, t in (("q", qp), ("k", kp), ("v", vp)):
        if t.stride(-1) != 1:
            raise ValueError(f"cmask: {name}'s head dimension must be contiguous")
    if stats is not None and (stats.dtype != torch.int32 or stats.numel() < 3 or
                              stats.device != mask.device):
        raise ValueError("cmask: stats must be an int32 tensor of 3 on the mask's device")
    args = _capi.AttentionArgs(
        _tensor(qp), _tensor(kp), _tensor(vp), _tensor(out), lse.data_ptr(),
        0.0 if scale is None or scale < 0 else float(scale), tile,
        0 if stats is None else stats.data_ptr(), schedule)
    stream = torch.cuda.current_stream(mask.device).cuda_stream
    check(_capi.lib().cmask_attention_forward(mask._handle, descriptor, ctypes.byref(args),
                                              stream))


def _encode_metadata(mask: Mask, metadata: dict, num_seqs: int):
    """Metadata as the custom op's (tensors, ints): scalars as ints, per-sequence
    values as one tensor, offsets as (values, starts)."""
    mask._validate_metadata(metadata, num_seqs)
    tensors, ints = [], []
    for name, role in mask.metadata:
        value = metadata[name]
        if role == "scalar":
            ints.append(int(value))
        elif role == "per_sequence":
            tensors.append(mask._int32(value, name))
        elif isinstance(value, tuple):
            tensors += [mask._int32(value[0], name), mask._int32(value[1], name)]
        else:
            lists = [list(map(int, x)) for x in value]
            starts = [0]
            for x in lists:
                starts.append(starts[-1] + len(x))
            tensors += [mask._int32([x for l in lists for x in l] or [0], name),
                        mask._int32(starts, name)]
    return tensors, ints


def _decode_metadata(mask: Mask, tensors, ints) -> dict:
    out, t, i = {}, 0, 0
    for name, role in mask.metadata:
        if role == "scalar":
            out[name], i = ints[i], i + 1
        elif role == "per_sequence":
            out[name], t = tensors[t], t + 1
        else:
            out[name], t = (tensors[t], tensors[t + 1]), t + 2
    return out


def _prepare_op(mask_id, q, k, cu_seqlens_q, cu_seqlens_k, metadata_tensors, metadata_ints,
                max_seqlen_q, max_seqlen_k, columns):
    """The registered mask and its descriptor built for the op's batch."""
    mask = _REGISTRY.get(mask_id)
    if mask is None:
        raise RuntimeError(f"cmask: mask {mask_id} is no longer loaded")
    meta = _decode_metadata(mask, metadata_tensors, metadata_ints)
    prepared = mask.prepare(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                            max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, q=q, k=k,
                            columns=columns, **meta)
    return mask, prepared


@torch.library.custom_op("cmask::attention_forward", mutates_args=())
def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                      metadata_tensors: list[torch.Tensor], metadata_ints: list[int],
                      mask_id: int, max_seqlen_q: int, max_seqlen_k: int, scale: float,
                      tile_shape: int, deterministic: bool
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Preprocess + forward on packed q, k, v ([total, H, D]): (out, lse [H, total_q])."""
    mask, prepared = _prepare_op(mask_id, q, k, cu_seqlens_q, cu_seqlens_k, metadata_tensors,
                                 metadata_ints, max_seqlen_q, max_seqlen_k, columns=False)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    _launch(mask, prepared.descriptor, q, k, v, out, lse, scale, tile_shape, None)
    return out, lse


@attention_forward.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, metadata_tensors, metadata_ints, mask_id,
      max_seqlen_q, max_seqlen_k, scale, tile_shape, deterministic):
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32))


# --------------------------------------------------------------------------
# Backward: the autograd formula of attention_forward.
# --------------------------------------------------------------------------

@torch.library.custom_op("cmask::attention_backward", mutates_args=())
def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                       lse: torch.Tensor, dout: torch.Tensor, cu_seqlens_q: torch.Tensor,
                       cu_seqlens_k: torch.Tensor, metadata_tensors: list[torch.Tensor],
                       metadata_ints: list[int], mask_id: int, max_seqlen_q: int,
                       max_seqlen_k: int, scale: float, deterministic: bool
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv of packed q, k, v ([total, H, D]) given the forward's out and lse."""
    mask, prepared = _prepare_op(mask_id, q, k, cu_seqlens_q, cu_seqlens_k, metadata_tensors,
                                 metadata_ints, max_seqlen_q, max_seqlen_k, columns=True)
    dout = dout.contiguous()
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    lib = _capi.lib()
    num_seqs = cu_seqlens_q.numel() - 1
    scratch = torch.empty(lib.cmask_backward_scratch_bytes(q.shape[0], num_seqs, q.shape[1],
                                                           q.shape[2]),
                          dtype=torch.uint8, device=q.device)
    args = _capi.BackwardArgs(_tensor(q), _tensor(k), _tensor(v), _tensor(out), _tensor(dout),
                              _tensor(dq), _tensor(dk), _tensor(dv), lse.data_ptr(),
                              scratch.data_ptr(), 0.0 if scale < 0 else float(scale),
                              int(deterministic), int(max_seqlen_q))
    stream = torch.cuda.current_stream(mask.device).cuda_stream
    check(lib.cmask_attention_backward(mask._handle, prepared.descriptor, ctypes.byref(args),
                                       stream))
    return dq, dk, dv


@attention_backward.register_fake
def _(q, k, v, out, lse, dout, cu_seqlens_q, cu_seqlens_k, metadata_tensors, metadata_ints,
      mask_id, max_seqlen_q, max_seqlen_k, scale, deterministic):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    (q, k, v, cu_q, cu_k, tensors, ints, mask_id, max_q, max_k, scale, tile,
     deterministic) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, *tensors)
    ctx.ints, ctx.mask_id, ctx.max_q, ctx.max_k, ctx.scale = ints, mask_id, max_q, max_k, scale
    ctx.deterministic = deterministic
    # The gradients mirror the inputs as torch.library flattens them: a list
    # of tensors (or an empty list) is a list, one of ints a single leaf.
    # (No argument has a default: the dispatcher drops trailing arguments
    # equal to their default from that structure, not from `inputs`.)
    ctx.no_grads = ([None] * len(tensors), None if ints else []) + (None,) * (len(inputs) - 7)


def _backward(ctx, dout, dlse):
    q, k, v, out, lse, cu_q, cu_k, *tensors = ctx.saved_tensors
    dq, dk, dv = torch.ops.cmask.attention_backward(
        q, k, v, out, lse, dout, cu_q, cu_k, tensors, ctx.ints, ctx.mask_id, ctx.max_q,
        ctx.max_k, ctx.scale, ctx.deterministic)
    return (dq, dk, dv, None, None) + ctx.no_grads


attention_forward.register_autograd(_backward, setup_context=_setup_context)
