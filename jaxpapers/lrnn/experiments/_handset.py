"""The hand-set BD-LRU (block 8) that tracks Z_5 and S_5 exactly: the sanity experiment.

Each token's transition is a block of permutation matrices: for a permutation ``sigma`` of five
items (a digit ``k`` of the mod-5 task is the cyclic shift ``i -> i + k``), ``M[sigma(i), i] = 1``
on the first five coordinates of every 8 x 8 block, zero elsewhere, and the input gate is zero.
Every row has L1 norm 1 or 0, so :func:`~jaxpapers.lrnn.l1_normalise` leaves it unchanged: the
construction lives inside the normalised parameterisation the trained models use. Block ``j``
(``j = 0..3``) starts at ``e_j`` and, after the prefix ``sigma_1 .. sigma_t``, holds
``e_{pi(j)}`` with ``pi = sigma_t o ... o sigma_1`` (apply the earlier first), the task's label.
Four images determine a permutation of five items; for Z_5 block 0 alone gives the running sum.
BOS and PAD tokens act as the identity. The states come from the library's own
:func:`~jaxpapers.lrnn.bdlru_recurrence` through the associative scan, so the experiment checks
that the parameterisation, the scan and the task labels agree on every length up to the test
length, with products of up to 256 transitions.
"""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np

from jaxpapers.lrnn import bdlru_recurrence, make_batch, task_spec

BLOCK, BLOCKS = 8, 4
_PERMS = np.array(list(itertools.permutations(range(5))), dtype=np.int64)
_INDEX = {tuple(p): i for i, p in enumerate(_PERMS)}


def token_permutations(task: str) -> np.ndarray:
    """``[vocab, 5]``: the permutation each token applies (BOS and PAD: the identity)."""
    spec = task_spec(task)
    ident = np.arange(5)
    if task == "mod5":
        perms = [(ident + k) % 5 for k in range(5)]
    elif task == "s5":
        perms = list(_PERMS)
    else:
        raise ValueError(f"task={task!r}; the hand-set construction covers 'mod5' and 's5'")
    return np.stack([*perms, ident, ident]).astype(np.int64)[: spec.vocab]


def handset_gates(task: str) -> np.ndarray:
    """``[vocab, BLOCKS, BLOCK, BLOCK + 1]`` raw gates of each token (input gate 0)."""
    perms = token_permutations(task)
    gates = np.zeros((len(perms), BLOCKS, BLOCK, BLOCK + 1), np.float32)
    for v, sigma in enumerate(perms):
        for i in range(5):
            gates[v, :, sigma[i], i] = 1.0
    return gates


def handset_accuracy(task: str, *, batch: int, length: int, split: int, seed: int) -> dict:
    """Accuracy of the hand-set BD-LRU on positions ``<= split`` and ``> split``."""
    b = make_batch(task, batch, length, seed=[seed, 7])
    gates = jnp.asarray(handset_gates(task))[jnp.asarray(b.tokens)]
    h0 = np.zeros((batch, BLOCKS, BLOCK), np.float32)
    h0[:, np.arange(BLOCKS), np.arange(BLOCKS)] = 1.0
    values = jnp.zeros((*b.tokens.shape, BLOCKS * BLOCK), jnp.float32)
    h = bdlru_recurrence(gates, values, jnp.asarray(h0.reshape(batch, -1)), mode="associative")
    state = np.asarray(h).reshape(*b.tokens.shape, BLOCKS, BLOCK)[..., :5]
    images = state.argmax(-1)  # [B, T, 4]: pi(0..3)
    if task == "mod5":
        pred = images[..., 0]
    else:
        last = 10 - images.sum(-1, keepdims=True)  # the fifth image: 0+1+2+3+4 = 10
        full = np.concatenate([images, last], -1)
        pred = np.array([_INDEX.get(tuple(p), -1) for p in full.reshape(-1, 5)]).reshape(
            images.shape[:-1]
        )
    hit = (pred == b.labels).astype(np.float64)
    pos = np.arange(b.tokens.shape[1])
    seen = b.mask * (pos <= split)
    unseen = b.mask * (pos > split)
    exact = float(np.abs(state.max(-1) - 1.0).max())
    return {
        "train_lengths": float((hit * seen).sum() / seen.sum()),
        "longer": float((hit * unseen).sum() / unseen.sum()),
        "max_deviation_from_one_hot": exact,
    }
