"""The abstract's analysis as code: [CLS]-to-patch attention mass and the read-out gradient.

In the last block the [CLS] output is ``cls' = cls + W_o sum_h sum_j a_hj v_hj + MLP(...)`` with
``v_hj = W_v,h^T LN_1(x_j)`` and ``a_hj`` the [CLS]-to-patch attention of head ``h``. Holding the
attention probabilities fixed (the read-out path), the gradient of an image-level loss ``L(cls')``
w.r.t. patch token ``x_j`` is

.. math::  \\frac{\\partial L}{\\partial x_j}
           = J_{LN_1}(x_j)^\\top \\sum_h a_{hj}\\, W_{v,h}\\, u_h,
           \\qquad u = W_o^\\top \\frac{\\partial L}{\\partial \\mathrm{cls}_{mid}},

i.e. it is weighted by the attention mass ``a_hj`` (exactly proportional to it with one head, up
to the LayerNorm Jacobian): patches the [CLS] token ignores receive almost no image-level signal.
:func:`readout_gradients` returns both the autodiff gradient and this closed form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_ndim
from jaxpapers.core.nn.vit import ViT


def cls_attention_mass(attention: Float[Array, "b h t t"]) -> Float[Array, "b n"]:
    """Mean over heads of the [CLS] query's attention to each patch (``attention[:, :, 0, 1:]``)."""
    if attention.ndim != 4 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention has shape {attention.shape}; expected [B, heads, T, T]")
    return jnp.mean(attention[:, :, 0, 1:], axis=1)


class ReadoutGradients(NamedTuple):
    """``mass [B, N]`` (head-mean attention), ``autodiff``/``predicted [B, N, dim]`` gradients."""

    mass: Float[Array, "b n"]
    autodiff: Float[Array, "b n d"]
    predicted: Float[Array, "b n d"]


def readout_gradients(
    vit: ViT,
    images: Float[Array, "b h w c"],
    loss: Callable[[jax.Array], jax.Array],
) -> ReadoutGradients:
    """Gradient of ``sum_b loss(cls_b)`` w.r.t. the patch tokens entering the last block, along
    the [CLS] read-out (attention held fixed), by autodiff and by the closed form above.

    Args:
      vit: the backbone.
      images: ``[B, H, W, C]``.
      loss: maps final [CLS] features ``[B, dim]`` (after the final LayerNorm) to ``[B]``.
    """
    check_ndim("images", images, 4)
    h = vit.embed_tokens(images)
    for block in vit.blocks[:-1]:
        h = block(h)
    last = vit.blocks[-1]
    attn = jax.lax.stop_gradient(last.attend(h)[1])
    cls_in, patches = h[:, :1], h[:, 1:]

    def image_loss(p: jax.Array) -> jax.Array:
        out, _ = last.attend(jnp.concatenate([cls_in, p], axis=1), attn)
        return jnp.sum(loss(vit.ln(out[:, 0])))

    autodiff = jax.grad(image_loss)(patches)

    # Closed form: dL/d(cls_mid) by autodiff of the block's tail, then the value path by hand.
    b, t, d = h.shape
    heads = last.heads
    dh = d // heads
    mixed = jnp.einsum(
        "bhk,bkhd->bhd", attn[:, :, 0], _values(last, h).reshape(b, t, heads, dh)
    ).reshape(b, d)
    cls_res = cls_in[:, 0]

    def tail(o: jax.Array) -> jax.Array:
        mid = cls_res + last.proj(o)
        out = mid + last.fc2(jax.nn.gelu(last.fc1(last.ln2(mid))))
        return jnp.sum(loss(vit.ln(out)))

    g_o = jax.grad(tail)(mixed).reshape(b, heads, dh)  # dL/d(concat of head outputs)
    w_v = last.qkv.kernel[...][:, 2 * d :].reshape(d, heads, dh)
    # dL/dLN1(x_j) = sum_h a_hj W_v,h g_o,h
    g_ln = jnp.einsum("bhj,dhe,bhe->bjd", attn[:, :, 0, 1:], w_v, g_o)
    _, ln_vjp = jax.vjp(last.ln1, patches)
    (predicted,) = ln_vjp(g_ln)
    return ReadoutGradients(cls_attention_mass(attn), autodiff, predicted)


def _values(block, h: jax.Array) -> jax.Array:
    d = h.shape[-1]
    return block.qkv(block.ln1(h))[..., 2 * d :]


def binned_error(
    mass: Float[Array, " m"], error: Float[Array, " m"], bins: int = 4
) -> Float[Array, " bins"]:
    """Mean ``error`` in each of ``bins`` equal-count bins of ``mass`` (lowest mass first)."""
    if mass.shape != error.shape or mass.ndim != 1:
        raise ValueError(f"mass {mass.shape} and error {error.shape} must be equal 1-D shapes")
    if not (isinstance(bins, int) and 1 <= bins <= mass.shape[0]):
        raise ValueError(f"bins={bins!r}; expected an integer in [1, {mass.shape[0]}]")
    order = jnp.argsort(mass)
    which = (jnp.arange(mass.shape[0]) * bins) // mass.shape[0]
    sums = jnp.zeros(bins).at[which].add(error[order])
    counts = jnp.zeros(bins).at[which].add(1.0)
    return sums / counts


__all__ = ["ReadoutGradients", "binned_error", "cls_attention_mass", "readout_gradients"]
