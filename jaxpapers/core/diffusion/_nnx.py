"""The one adapter where a diffrax term wraps an nnx network.

Networks are flax.nnx modules; diffrax terms and solvers are equinox modules. :class:`NNXEps` is
where the two meet: it holds a split flax.nnx epsilon network (its graph static, its parameters a
pytree leaf) and calls it as the ``eps_fn(x, t)`` of one sample that a
:class:`~jaxpapers.core.diffusion.DenoiserTerm` wraps. Use it (not another wrapper) to sample
with an nnx network through the diffusion core.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
from flax import nnx
from jaxtyping import Array, Float


class NNXEps(eqx.Module):
    """``eps_fn(x, t)`` on one sample from a split flax.nnx network called on batches.

    The parameters are a pytree leaf (so the network is an argument of jitted samplers, not a
    constant folded into them); the graph is static.

    Attributes:
      graphdef: ``nnx.split(model, nnx.Param)[0]``.
      params: the parameter state.
      kind: ``"unet"`` (called as ``model(x[None, ..., None], t[None])`` on one ``[H, W]``
        image, one channel) or ``"mlp"`` (called on the flattened sample ``[1, D]``).

    Examples:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> from jaxpapers.core.diffusion import NNXEps
      >>> from jaxpapers.core.nn.unet import UNet
      >>> g, p = nnx.split(UNet(1, (4, 8), emb=8, rngs=nnx.Rngs(0)), nnx.Param)
      >>> NNXEps(g, p, "unet")(jnp.zeros((8, 8)), jnp.asarray(0.5)).shape
      (8, 8)
    """

    graphdef: Any = eqx.field(static=True)
    params: Any
    kind: str = eqx.field(static=True, default="unet")

    def __check_init__(self) -> None:
        if self.kind not in ("unet", "mlp"):
            raise ValueError(f"kind={self.kind!r}; expected 'unet' or 'mlp'")

    def __call__(self, x: Float[Array, ...], t: Float[Array, ""]) -> Float[Array, ...]:
        model = nnx.merge(self.graphdef, self.params)
        if self.kind == "unet":
            return model(x[None, :, :, None], t[None])[0, :, :, 0]
        return model(x.reshape(1, -1), t[None]).reshape(x.shape)
