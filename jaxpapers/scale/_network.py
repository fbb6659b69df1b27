"""A split flax.nnx denoiser: static graph definition plus a parameter pytree passed explicitly.

Jitting a bound nnx module would bake its weights into the executable as constants; keeping the
graph definition static and the parameters as an argument lets one compiled function serve every
seed (``vmap`` over parameters) and every training step.

Why not the core's adapter (:class:`jaxpapers.core.diffusion.NNXEps`): that one is a sampler's
``eps_fn(x, t)`` on one unconditional sample with the parameters inside it. The losses here call
the network on batches with class labels and a scalar input (GFT's beta), and pass the parameters
per call (they are differentiated, ``vmap``-ped over seeds, stacked over methods, replaced by an
EMA teacher); :class:`Denoiser` is that call and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float, Int, PyTree

from jaxpapers.core.checks import check_dtype, check_int, check_ndim
from jaxpapers.core.diffusion import VPSchedule
from jaxpapers.core.nn.mlp import MLPDenoiser
from jaxpapers.core.nn.unet import UNet

#: The default variance-preserving schedule of every sampler and loop here.
DEFAULT_SCHEDULE = VPSchedule()

#: The network's scalar input for every model but GFT (whose scalar is its beta).
GUIDED = 1.0


class Denoiser(eqx.Module):
    """``eps = net(params, x [b, ...], t [b], labels [b] | None, scalar [b] | None)``.

    Attributes:
      graphdef: the nnx graph definition (static).
      num_classes: ``C``; label ``C`` is the null label.
      event_shape: shape of one sample (static).
    """

    graphdef: Any = eqx.field(static=True)
    num_classes: int = eqx.field(static=True)
    event_shape: tuple[int, ...] = eqx.field(static=True)

    def __call__(
        self,
        params: PyTree,
        x: Float[Array, "b ..."],
        t: Float[Array, " b"],
        labels: Int[Array, " b"] | None = None,
        scalar: Float[Array, " b"] | None = None,
    ) -> Float[Array, "b ..."]:
        return nnx.merge(self.graphdef, params)(x, t, labels, scalar)


def init_over_seeds(make: Callable[[Array], nnx.Module], seeds: Array) -> tuple[Any, PyTree]:
    """``(graphdef, params)`` of ``make(jax.random.key(seed))`` for every seed, the parameters
    stacked on a leading seed axis (one vmapped program; the graph from an abstract model)."""
    graphdef = nnx.split(nnx.eval_shape(lambda: make(jax.random.key(0))), nnx.Param)[0]

    def init(seed):
        return nnx.split(make(jax.random.key(seed)), nnx.Param)[1]

    return graphdef, jax.jit(jax.vmap(init))(seeds)


def check_seeds(seeds: Any) -> None:
    """``ValueError`` unless ``seeds`` is a non-empty ``[s]`` array of integer seeds."""
    check_ndim("seeds", seeds, 1)
    check_dtype("seeds", jnp.asarray(seeds), "integer")
    if len(seeds) == 0:
        raise ValueError("seeds is empty; expected at least one integer seed")


def mlp_denoiser(
    dim: int,
    num_classes: int,
    *,
    seeds: Int[Array, " s"],
    hidden: int = 128,
    depth: int = 3,
    emb: int = 32,
) -> tuple[Denoiser, PyTree]:
    """A class-conditional MLP denoiser with a scalar input, initialised once per seed.

    Args:
      dim: data dimension.
      num_classes: number of classes (the null label is ``num_classes``).
      seeds: ``[s]`` integer seeds; the parameters carry a leading seed axis.
      hidden, depth, emb: MLP width, hidden layers and embedding width.

    Returns:
      ``(denoiser, params)`` with ``params`` stacked over seeds.
    """
    for name, value in (("dim", dim), ("num_classes", num_classes), ("hidden", hidden)):
        check_int(name, value, minimum=1)
    check_int("depth", depth, minimum=1)
    check_int("emb", emb, minimum=1)
    check_seeds(seeds)

    def make(seed):
        return MLPDenoiser(
            dim,
            hidden=hidden,
            depth=depth,
            emb=emb,
            num_classes=num_classes,
            scalar_cond=True,
            rngs=nnx.Rngs(seed),
        )

    graphdef, params = init_over_seeds(make, jnp.asarray(seeds))
    return Denoiser(graphdef, num_classes, (dim,)), params


def unet_denoiser(
    size: int,
    num_classes: int,
    *,
    seeds: Int[Array, " s"],
    channels: tuple[int, ...] = (16, 32),
    emb: int = 32,
) -> tuple[Denoiser, PyTree]:
    """A class-conditional U-Net denoiser on ``[size, size, 1]`` images, one per seed."""
    check_int("size", size, minimum=1)
    check_int("num_classes", num_classes, minimum=1)
    check_int("emb", emb, minimum=1)
    check_seeds(seeds)

    def make(seed):
        return UNet(
            1, channels, emb, num_classes=num_classes, scalar_cond=True, rngs=nnx.Rngs(seed)
        )

    graphdef, params = init_over_seeds(make, jnp.asarray(seeds))
    return Denoiser(graphdef, num_classes, (size, size, 1)), params
