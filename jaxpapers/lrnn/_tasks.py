"""State-tracking tasks (Grazzi et al., 2024; Deletang et al., 2023; Merrill et al., 2024).

Every sequence starts with a ``BOS`` token so that a normalised recurrence (whose state only moves
inside the convex hull of its inputs) has a first input to start from; every model sees the same
tokens.

* ``parity``: bits; the label at each position is the XOR of the bits so far (the group Z_2).
* ``mod5``: digits 0..4; the label is the running sum mod 5 (the cyclic group Z_5).
* ``s5``: the 120 permutations of 5 items; the label is the composition of the prefix (S_5,
  non-abelian: needs dense state mixing, Merrill et al. 2024).
* ``mod5_brackets``: expressions over digits 0..4 with ``+``, ``-`` and brackets, left-padded; one
  label per sequence, the value mod 5 at the last token (context-free, Deletang et al. 2023).

Per-position tasks train on length-``L`` sequences (labels at every prefix length ``1..L``) and are
tested on positions ``L+1..T_test`` of longer sequences (length generalisation).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

TASKS: tuple[str, ...] = ("parity", "mod5", "mod5_brackets", "s5")

_PERMS = np.array(list(itertools.permutations(range(5))), dtype=np.int64)
_PERM_INDEX = {tuple(p): i for i, p in enumerate(_PERMS)}
# _COMPOSE[g, s] = index of the permutation g o s (apply s, then g).
_COMPOSE = np.array(
    [[_PERM_INDEX[tuple(_PERMS[g][_PERMS[s]])] for s in range(120)] for g in range(120)],
    dtype=np.int64,
)

# Tokens of the bracket task.
_PLUS, _MINUS, _OPEN, _CLOSE = 5, 6, 7, 8


class TaskSpec(NamedTuple):
    """Token and class counts of a task (``BOS = vocab - 2``, ``PAD = vocab - 1``)."""

    vocab: int
    n_classes: int
    per_position: bool


class TaskBatch(NamedTuple):
    """One batch: ``tokens [B, T]`` int32, ``labels [B, T]`` int32, ``mask [B, T]`` float32."""

    tokens: np.ndarray
    labels: np.ndarray
    mask: np.ndarray


def task_spec(task: str) -> TaskSpec:
    """Vocabulary (including BOS and PAD) and classes of ``task``."""
    symbols, classes = {
        "parity": (2, 2),
        "mod5": (5, 5),
        "s5": (120, 120),
        "mod5_brackets": (9, 5),
    }.get(task, (0, 0))
    if not symbols:
        raise ValueError(f"task={task!r}; expected one of {TASKS}")
    return TaskSpec(symbols + 2, classes, task != "mod5_brackets")


def _prefix_labels(task: str, symbols: np.ndarray) -> np.ndarray:
    if task == "parity":
        return np.cumsum(symbols, axis=1) % 2
    if task == "mod5":
        return np.cumsum(symbols, axis=1) % 5
    state = np.full(symbols.shape[0], _PERM_INDEX[tuple(range(5))], dtype=np.int64)
    out = np.empty_like(symbols)
    for t in range(symbols.shape[1]):
        state = _COMPOSE[symbols[:, t], state]
        out[:, t] = state
    return out


def _expression(rng: np.random.Generator, n: int) -> list[int]:
    """The tokens of a random expression of exactly ``n`` tokens (``n`` odd)."""
    if n == 1:
        return [int(rng.integers(5))]
    if n >= 3 and rng.random() < 0.25:
        return [_OPEN, *_expression(rng, n - 2), _CLOSE]
    left_len = 2 * int(rng.integers((n - 1) // 2)) + 1
    op = _PLUS if rng.random() < 0.5 else _MINUS
    return [*_expression(rng, left_len), op, *_expression(rng, n - 1 - left_len)]


def evaluate_expression(tokens: list[int]) -> int:
    """Value mod 5 of a token expression, read left to right with brackets (``2-1+3`` is 4)."""
    stack: list[tuple[int, int]] = []
    acc, sign = 0, 1
    for tok in tokens:
        if tok < 5:
            acc += sign * tok
        elif tok in (_PLUS, _MINUS):
            sign = 1 if tok == _PLUS else -1
        elif tok == _OPEN:
            stack.append((acc, sign))
            acc, sign = 0, 1
        else:
            outer, outer_sign = stack.pop()
            acc, sign = outer + outer_sign * acc, 1
    return acc % 5


def make_batch(
    task: str, batch: int, length: int, *, seed: int | Sequence[int], min_length: int = 1
) -> TaskBatch:
    """A batch of ``task`` with sequences of ``length`` symbols after BOS (``T = length + 1``).

    Host-side NumPy data: all randomness comes from ``np.random.default_rng(seed)``.

    Args:
      task: one of :data:`TASKS`.
      batch: number of sequences.
      length: symbols per sequence; for ``mod5_brackets`` the padded length, each expression
        having an odd length drawn from ``[min_length, length]``.
      seed: a non-negative integer, or a sequence of them (NumPy ``SeedSequence`` entropy,
        e.g. ``[seed, replica, step]`` for one stream per replica and step).
      min_length: shortest expression (bracket task) or first labelled position (other tasks:
        positions before ``min_length`` are masked out, for length-generalisation tests).

    Returns:
      A :class:`TaskBatch` with ``T = length + 1``.
    """
    spec = task_spec(task)
    if batch < 1 or length < 1 or not 1 <= min_length <= length:
        raise ValueError(
            f"batch={batch}, length={length}, min_length={min_length}; expected positive sizes "
            "with 1 <= min_length <= length"
        )
    entropy = np.asarray(seed)
    if entropy.ndim > 1 or not np.issubdtype(entropy.dtype, np.integer) or np.any(entropy < 0):
        raise ValueError(f"seed={seed!r}; expected a non-negative integer or a sequence of them")
    rng = np.random.default_rng(seed)
    bos, pad = spec.vocab - 2, spec.vocab - 1
    tokens = np.full((batch, length + 1), pad, dtype=np.int32)
    labels = np.zeros((batch, length + 1), dtype=np.int32)
    mask = np.zeros((batch, length + 1), dtype=np.float32)
    if spec.per_position:
        symbols = rng.integers(spec.vocab - 2, size=(batch, length))
        tokens[:, 0] = bos
        tokens[:, 1:] = symbols
        labels[:, 1:] = _prefix_labels(task, symbols)
        mask[:, min_length:] = 1.0
        return TaskBatch(tokens, labels, mask)
    lo = min_length + (1 - min_length % 2)
    hi = length if length % 2 else length - 1
    if lo > hi:
        raise ValueError(f"no odd expression length in [{min_length}, {length}]")
    for i in range(batch):
        n = lo + 2 * int(rng.integers((hi - lo) // 2 + 1))
        expr = _expression(rng, n)
        tokens[i, length - n] = bos
        tokens[i, length + 1 - n :] = expr
        labels[i, -1] = evaluate_expression(expr)
    mask[:, -1] = 1.0
    return TaskBatch(tokens, labels, mask)
