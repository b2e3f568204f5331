"""Independent numpy reference predicates for the mask catalog (masks/*.mlir).

Written from the MaskSpec semantics in DESIGN.md ("MaskSpec semantics",
"Reference masks"), not from compiler output, so that a front-end bug cannot
fool both sides of the differential tests (test/differential/).

Every reference has the signature ``fn(q_len, k_len, b, metadata)`` where
``metadata`` is the batch-wide ``"metadata"`` object of a metadata JSON file
(docs/metadata-json.md): scalars are ints, per-sequence values are lists
indexed by ``b``, offsets are lists of per-sequence boundary lists. It returns
a bool array of shape ``[q_len, k_len]``: ``out[i, j]`` is True when query row
``i`` of sequence ``b`` sees key ``j``.

``random_metadata(name, rng)`` draws a random valid batch for a mask, with the
edge cases the compiler must get right (empty sequences, empty segments,
boundaries at 0 and at the end, zero targets, ...).
"""

from __future__ import annotations

import numpy as np

# Static maximum radius of the CLEAR spec (`cmask.any %d in [-16, 16]`).
CLEAR_MAX_RADIUS = 16


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _grid(q_len: int, k_len: int):
    """Row index i as a column [q_len, 1] and key index j as a row [1, k_len]."""
    i = np.arange(q_len, dtype=np.int64)[:, None]
    j = np.arange(k_len, dtype=np.int64)[None, :]
    return i, j


def segment_index(offsets, positions):
    """Segment index of each position: the number of boundaries <= position."""
    o = np.asarray(offsets, dtype=np.int64)
    return np.searchsorted(o, np.asarray(positions, dtype=np.int64), side="right")


def _full(q_len, k_len, value):
    return np.full((q_len, k_len), value, dtype=bool)


# --------------------------------------------------------------------------
# Reference predicates
# --------------------------------------------------------------------------


def causal(q_len, k_len, b, metadata):
    """j <= i (top-left causal, also for q_len != k_len)."""
    i, j = _grid(q_len, k_len)
    return np.broadcast_to(j <= i, (q_len, k_len)).copy()


def sliding_window(q_len, k_len, b, metadata):
    """0 <= i - j <= window."""
    w = int(metadata["window"])
    i, j = _grid(q_len, k_len)
    d = i - j
    return np.broadcast_to((d >= 0) & (d <= w), (q_len, k_len)).copy()


def document(q_len, k_len, b, metadata):
    """seg(j) == seg(i) over the sequence's document boundaries."""
    o = metadata["docs"][b]
    si = segment_index(o, np.arange(q_len))[:, None]
    sj = segment_index(o, np.arange(k_len))[None, :]
    return np.broadcast_to(si == sj, (q_len, k_len)).copy()


def causal_document(q_len, k_len, b, metadata):
    """seg(j) == seg(i) and j <= i."""
    i, j = _grid(q_len, k_len)
    return document(q_len, k_len, b, {"docs": metadata["docs"]}) & (j <= i)


def prefix_lm(q_len, k_len, b, metadata):
    """j < prefix_len[b] or j <= i."""
    p = int(metadata["prefix_len"][b])
    i, j = _grid(q_len, k_len)
    return np.broadcast_to((j < p) | (j <= i), (q_len, k_len)).copy()


def reward_model(q_len, k_len, b, metadata):
    """Shared-prompt reward model.

    Rows i < P (the prompt) are causal. Every other row sees the whole prompt
    (j < P) and, causally, the keys of its own response segment (the segments
    are delimited by the response start boundaries).
    """
    P = int(metadata["prompt_len"][b])
    o = metadata["responses"][b]
    i, j = _grid(q_len, k_len)
    si = segment_index(o, np.arange(q_len))[:, None]
    sj = segment_index(o, np.arange(k_len))[None, :]
    prompt_row = j <= i
    response_row = (j < P) | ((si == sj) & (j <= i))
    return np.broadcast_to(np.where(i < P, prompt_row, response_row), (q_len, k_len)).copy()


def hstu(q_len, k_len, b, metadata):
    """HSTU: context rows (i < c) see context + history (j < hist_end); history
    rows (i < hist_end) see the context and the history up to themselves
    (j < c or j <= i); target rows see context + history and themselves."""
    c = int(metadata["context"])
    hist_end = q_len - int(metadata["num_targets"][b])
    out = np.zeros((q_len, k_len), dtype=bool)
    j = np.arange(k_len)
    for i in range(q_len):
        if i < c:
            out[i] = j < hist_end
        elif i < hist_end:
            out[i] = (j < c) | (j <= i)
        else:
            out[i] = (j < hist_end) | (j == i)
    return out


def clear(q_len, k_len, b, metadata):
    """CLEAR: text rows see everything; the image row at grid (y, x) sees all
    text and each image key (y2, x2) with (y2-y)^2 + (x2-x)^2 <= r^2 and
    |y2 - y| <= R (the static maximum radius); a row past the grid sees the
    text only."""
    T = int(metadata["text_len"])
    H = int(metadata["height"])
    W = int(metadata["width"])
    r = int(metadata["radius"])
    out = np.zeros((q_len, k_len), dtype=bool)
    for i in range(q_len):
        if i < T:
            out[i, :] = True
            continue
        y, x = divmod(i - T, W)
        if y >= H:  # a row past the grid sees the text only
            out[i, :min(T, k_len)] = True
            continue
        for j in range(k_len):
            if j < T:
                out[i, j] = True
                continue
            y2, x2 = divmod(j - T, W)
            if y2 >= H:  # past the grid (never when k_len == T + H * W)
                continue
            dy, dx = y2 - y, x2 - x
            out[i, j] = abs(dy) <= CLEAR_MAX_RADIUS and dy * dy + dx * dx <= r * r
    return out


REFERENCES = {
    "causal": causal,
    "sliding_window": sliding_window,
    "document": document,
    "causal_document": causal_document,
    "prefix_lm": prefix_lm,
    "reward_model": reward_model,
    "hstu": hstu,
    "clear": clear,
}

# How the compiler derives each catalog spec's column direction (the query
# rows that see each key, for the backward pass) and its K there.
EXPECTED_COLUMNS = {
    "causal": ("derived", 1),
    "sliding_window": ("derived", 1),
    "document": ("derived", 1),
    "causal_document": ("derived", 1),
    "prefix_lm": ("derived", 2),
    "reward_model": ("derived", 3),
    "hstu": ("derived", 5),
    "clear": ("symmetric", 2 * CLEAR_MAX_RADIUS + 2),
}

# The K (num_slots) the compiler must derive for each catalog spec.
EXPECTED_K = {
    "causal": 1,
    "sliding_window": 1,
    "document": 1,
    "causal_document": 1,
    "prefix_lm": 1,
    "reward_model": 2,
    "hstu": 2,
    "clear": 2 * CLEAR_MAX_RADIUS + 2,
}


# --------------------------------------------------------------------------
# Random metadata
# --------------------------------------------------------------------------


def _length(rng: np.random.Generator, max_len: int = 48) -> int:
    """A sequence length in 0..max_len, often 0 or 1."""
    u = rng.random()
    if u < 0.08:
        return 0
    if u < 0.16:
        return 1
    if u < 0.30:
        return int(rng.integers(2, 6))
    return int(rng.integers(2, max_len + 1))


def _random_offsets(rng: np.random.Generator, L: int, lo: int = 0) -> list[int]:
    """Non-decreasing boundaries in [lo, L] (lo <= L), with empty segments
    (repeated boundaries, boundaries at 0 / lo and at L) often enough."""
    mode = rng.random()
    if mode < 0.12:
        return []
    n = int(rng.integers(1, 7))
    vals = [int(v) for v in rng.integers(lo, L + 1, size=n)]
    if mode < 0.35:  # repeated boundaries -> empty segments in the middle
        k = int(rng.integers(0, n))
        vals += [vals[k]] * int(rng.integers(1, 3))
    if rng.random() < 0.25:
        vals.append(lo)
    if rng.random() < 0.25:
        vals.append(L)
    if rng.random() < 0.08:
        vals += [0, 0]
    if rng.random() < 0.08:
        vals += [L, L]
    return sorted(v for v in vals if lo <= v <= L)


def _sequences(rng, n, same_len: bool, max_len: int = 48):
    seqs = []
    for _ in range(n):
        q = _length(rng, max_len)
        if same_len:
            k = q
        else:
            u = rng.random()
            k = q if u < 0.3 else _length(rng, max_len)
        seqs.append({"q_len": q, "k_len": k})
    return seqs


def random_metadata(name: str, rng: np.random.Generator, max_len: int = 48) -> dict:
    """A random valid batch ``{"sequences": [...], "metadata": {...}}`` for the
    catalog mask ``name``, sequences of at most ``max_len`` rows (CLEAR:
    grids of up to 5 x 6, or 12 x 20 when max_len is larger)."""
    nseq = int(rng.integers(1, 5))
    if name == "clear":
        big = max_len > 48
        T = int(rng.integers(0, 40 if big else 7))
        H = int(rng.integers(1, 13 if big else 6))
        W = int(rng.integers(1, 21 if big else 7))
        u = rng.random()
        if u < 0.1:
            r = 0
        elif u < 0.25:
            r = int(rng.integers(17, 19))  # beyond the static maximum 16
        else:
            r = int(rng.integers(0, 19))
        n = T + H * W
        nseq = 1 if rng.random() < 0.5 else int(rng.integers(2, 4))
        return {
            "sequences": [{"q_len": n, "k_len": n} for _ in range(nseq)],
            "metadata": {"text_len": T, "height": H, "width": W, "radius": r},
        }

    cross = name in ("causal", "sliding_window", "prefix_lm", "document",
                     "causal_document")
    seqs = _sequences(rng, nseq, same_len=not cross, max_len=max_len)
    md: dict = {}
    if name == "causal":
        pass
    elif name == "sliding_window":
        u = rng.random()
        if u < 0.1:
            md["window"] = 0
        elif u < 0.15:
            md["window"] = int(rng.integers(-3, 0))  # negative: sees nothing
        elif u < 0.25:
            md["window"] = int(rng.integers(48, 100))  # wider than any sequence
        else:
            md["window"] = int(rng.integers(1, 20))
    elif name in ("document", "causal_document"):
        md["docs"] = [
            _random_offsets(rng, max(s["q_len"], s["k_len"])) for s in seqs
        ]
    elif name == "prefix_lm":
        p = []
        for s in seqs:
            u = rng.random()
            k = s["k_len"]
            if u < 0.15:
                p.append(0)
            elif u < 0.25:
                p.append(k)
            elif u < 0.35:
                p.append(k + int(rng.integers(1, 10)))
            else:
                p.append(int(rng.integers(0, k + 1)))
        md["prefix_len"] = p
    elif name == "reward_model":
        P, offs = [], []
        for s in seqs:
            L = s["q_len"]
            u = rng.random()
            if u < 0.15:
                p = 0
            elif u < 0.25:
                p = L  # the whole sequence is prompt
            else:
                p = int(rng.integers(0, L + 1))
            P.append(p)
            if rng.random() < 0.8:
                # responses start after the prompt; the first boundary is
                # usually the prompt end
                o = _random_offsets(rng, L, lo=p)
                if rng.random() < 0.6 and (not o or o[0] != p):
                    o = [p] + o
            else:
                o = _random_offsets(rng, L)  # boundaries anywhere
            offs.append(sorted(o))
        md["prompt_len"] = P
        md["responses"] = offs
    elif name == "hstu":
        u = rng.random()
        maxlen = max(s["q_len"] for s in seqs)
        if u < 0.2:
            c = 0
        elif u < 0.3:
            c = maxlen + int(rng.integers(0, 5))  # context longer than sequences
        else:
            c = int(rng.integers(0, 9))
        md["context"] = c
        nt = []
        for s in seqs:
            L = s["q_len"]
            v = rng.random()
            if v < 0.2:
                nt.append(0)
            elif v < 0.28:
                nt.append(L)
            else:
                nt.append(int(rng.integers(0, L + 1)))
        md["num_targets"] = nt
    else:
        raise KeyError(f"unknown catalog mask {name!r}")
    return {"sequences": seqs, "metadata": md}


def reference_batch(name: str, batch: dict) -> list[np.ndarray]:
    """The reference mask of every sequence of a batch."""
    fn = REFERENCES[name]
    return [
        fn(s["q_len"], s["k_len"], b, batch["metadata"])
        for b, s in enumerate(batch["sequences"])
    ]


if __name__ == "__main__":  # pragma: no cover - quick visual check
    rng = np.random.default_rng(0)
    for name in REFERENCES:
        batch = random_metadata(name, rng)
        print(name, batch)
        for m in reference_batch(name, batch):
            for row in m.astype(int):
                print("".join(map(str, row)))
            print()
