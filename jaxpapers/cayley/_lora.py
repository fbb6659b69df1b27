r"""Low-rank adapters (LoRA, Hu et al. 2021) for ``nnx.Linear`` layers of a frozen model.

A frozen projection ``y = x W + b`` gets a trainable low-rank update,

.. math:: y = x W + b + \tfrac{\alpha}{r}\, (x A) B, \qquad A \in \mathbb{R}^{d_{in} \times r},
    \; B \in \mathbb{R}^{r \times d_{out}},

with ``B = 0`` at the start (so the adapted model starts equal to the frozen one) and ``A`` drawn
with scale ``1 / sqrt(d_in)``. Only ``A`` and ``B`` are :class:`flax.nnx.LoRAParam` variables, so
``nnx.split(model, nnx.LoRAParam, ...)`` separates what is trained from the frozen rest
(``LoRAParam`` is a subclass of ``nnx.Param``: filter it first). :func:`merge_lora` folds the
update into the kernel, ``W' = W + (alpha / r) A B``, for inference at the frozen model's cost.

The LoRA baseline of P03's ``vs_lora`` (:mod:`jaxpapers.cayley.experiments`) adapts MiniLM with
these; they are not part of the Cayley-Encoder's API.

Examples:
    >>> import jax, jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxpapers.cayley._lora import add_lora, lora_param_count
    >>> class Block(nnx.Module):
    ...     def __init__(self):
    ...         self.query = nnx.Linear(8, 8, rngs=nnx.Rngs(0))
    >>> block = Block()
    >>> x = jnp.ones((2, 8))
    >>> before = block.query(x)
    >>> add_lora([block], ("query",), rank=2, key=jax.random.key(1))
    1
    >>> bool(jnp.array_equal(block.query(x), before)), lora_param_count(block)
    (True, 32)
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

from jaxpapers.core.checks import check_int, check_key


class LoRALinear(nnx.Module):
    """A frozen ``nnx.Linear`` plus a rank-``r`` adapter: ``base(x) + (alpha / r) (x A) B``.

    Args:
      base: the frozen layer (kept as is; its kernel and bias stay ``nnx.Param``).
      rank: ``r`` >= 1.
      key: PRNG key for ``A``.
      alpha: scale numerator (default ``2 r``, i.e. a scale of 2).
    """

    def __init__(self, base: nnx.Linear, rank: int, *, key: jax.Array, alpha: float | None = None):
        if not isinstance(base, nnx.Linear):
            raise ValueError(f"base is a {type(base).__name__}; expected an nnx.Linear")
        if not (isinstance(rank, int) and rank >= 1):
            raise ValueError(f"rank={rank!r}; expected an int >= 1")
        d_in, d_out = base.in_features, base.out_features
        self.base = base
        self.rank = rank
        self.scale = float(2 * rank if alpha is None else alpha) / rank
        dtype = base.kernel[...].dtype
        self.lora_a = nnx.LoRAParam(jax.random.normal(key, (d_in, rank), dtype) / d_in**0.5)
        self.lora_b = nnx.LoRAParam(jnp.zeros((rank, d_out), dtype))

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.base(x) + self.scale * ((x @ self.lora_a[...]) @ self.lora_b[...])

    def merged(self) -> nnx.Linear:
        """An ``nnx.Linear`` with kernel ``W + (alpha / r) A B`` and the same bias."""
        kernel = self.base.kernel[...] + self.scale * (self.lora_a[...] @ self.lora_b[...])
        out = nnx.eval_shape(
            lambda: nnx.Linear(
                self.base.in_features,
                self.base.out_features,
                use_bias=self.base.bias is not None,
                rngs=nnx.Rngs(0),
            )
        )
        out.kernel.set_value(kernel)
        if self.base.bias is not None:
            out.bias.set_value(self.base.bias[...])
        return out


def add_lora(
    modules: Sequence[nnx.Module],
    names: Sequence[str],
    *,
    rank: int,
    key: jax.Array,
    alpha: float | None = None,
) -> int:
    """Replace the ``nnx.Linear`` attribute ``name`` of each module by a :class:`LoRALinear`.

    In place; returns the number of layers adapted. E.g. ``add_lora(bert.layers, ("query",
    "value"), rank=8, key=k)`` adapts every attention query and value projection of a
    :class:`~jaxpapers.core.nn.bert.Bert`; pass ``bert.layers[4:]`` for the top layers only.

    Raises:
      ValueError: if a module lacks ``name`` or it is not an ``nnx.Linear`` (already adapted
        layers included), or nothing is given.
    """
    check_key("key", key)
    check_int("rank", rank, minimum=1)
    if len(modules) == 0 or len(names) == 0:
        raise ValueError(
            f"got {len(modules)} modules and names={tuple(names)}; expected at least one of each"
        )
    keys = jax.random.split(key, len(modules) * len(names))
    count = 0
    for i, module in enumerate(modules):
        for j, name in enumerate(names):
            layer = getattr(module, name, None)
            if not isinstance(layer, nnx.Linear):
                raise ValueError(
                    f"module {i} ({type(module).__name__}) attribute {name!r} is a "
                    f"{type(layer).__name__}; expected an nnx.Linear"
                )
            setattr(
                module, name, LoRALinear(layer, rank, key=keys[i * len(names) + j], alpha=alpha)
            )
            count += 1
    return count


def merge_lora(model: nnx.Module) -> nnx.Module:
    """A copy of ``model`` whose every :class:`LoRALinear` is folded into a plain ``nnx.Linear``."""
    model = nnx.clone(model)
    for _, module in list(nnx.iter_graph(model)):
        if not isinstance(module, nnx.Module):
            continue
        for name, child in list(vars(module).items()):
            if isinstance(child, LoRALinear):
                setattr(module, name, child.merged())
    return model


def lora_param_count(model: nnx.Module) -> int:
    """Number of adapter scalars (``nnx.LoRAParam``) in ``model``."""
    return int(sum(jnp.size(v) for v in jax.tree.leaves(nnx.state(model, nnx.LoRAParam))))


__all__ = ["LoRALinear", "add_lora", "lora_param_count", "merge_lora"]
