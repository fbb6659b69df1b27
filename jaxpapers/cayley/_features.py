"""Per-layer sentence representations of a frozen BERT-style encoder, mean-pooled over tokens."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_shape
from jaxpapers.core.nn.bert import Bert, mean_pool


@partial(jax.jit, static_argnames=("graphdef",))
def _encode_batch(graphdef, state, ids, mask):
    model = nnx.merge(graphdef, state)
    states = model(ids, mask, all_layers=True)
    return jax.vmap(mean_pool, in_axes=(0, None), out_axes=1)(states, mask)


def encode_layers(
    model: Bert,
    ids: Int[Array, "texts tokens"],
    mask: Int[Array, "texts tokens"],
    *,
    batch_size: int = 256,
) -> Float[Array, "texts layers hidden"]:
    """Mean-pooled hidden states of the embeddings and of every layer: ``[N, L + 1, D]``.

    One jitted program runs the frozen encoder on ``batch_size`` texts at a time (the last batch is
    padded), with the weights passed as an argument rather than baked in.

    Args:
      model: a :class:`~jaxpapers.core.nn.bert.Bert` (e.g. ``load_minilm()``).
      ids, mask: ``[N, T]`` from :func:`jaxpapers.core.nn.bert.tokenize`.
      batch_size: texts per forward pass.
    """
    check_shape("ids", ids, (None, None))
    check_shape("mask", mask, ids.shape)
    if not (isinstance(batch_size, int) and batch_size >= 1):
        raise ValueError(f"batch_size={batch_size!r}; expected an int >= 1")
    graphdef, state = nnx.split(model)
    n = ids.shape[0]
    pad = (-n) % batch_size
    ids = np.pad(np.asarray(ids), ((0, pad), (0, 0)))
    mask = np.pad(np.asarray(mask), ((0, pad), (0, 0)))
    out = [
        _encode_batch(
            graphdef,
            state,
            jnp.asarray(ids[i : i + batch_size]),
            jnp.asarray(mask[i : i + batch_size]),
        )
        for i in range(0, n + pad, batch_size)
    ]
    return jnp.concatenate(out, axis=0)[:n]
