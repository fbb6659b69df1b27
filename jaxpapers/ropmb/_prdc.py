r"""PRDC (prototype relationship diagram construction), context-aware refinement, refined CAMs.

**Learned graph.** The ``M = (C + 1) K`` bank prototypes are the nodes; with
:math:`\hat p = p / |p|`, the edge weights are an attention over learned projections of the
normalised prototypes,

.. math::  E = \mathrm{softmax}_j\big( (\hat P W_q)(\hat P W_k)^\top / \sqrt{d_q} \big),

restricted to filled slots (unfilled ones send nothing).

**Message passing.** ``L`` residual layers :math:`H \leftarrow H + \mathrm{relu}(E H U_l) V_l`
from :math:`H_0 = \hat P`. Every operation acts row-wise or through :math:`E`, and
:math:`E(\Pi X) = \Pi E(X) \Pi^\top` for a permutation :math:`\Pi`, so the layer is
permutation-equivariant over prototypes: relabelling the bank relabels the output.

**Context-aware refinement.** For image ``b`` and class ``n`` with local (self-)prototype
:math:`l_{bn}` (masked average of the image's features under its seeds), attend over the class's
``K`` enriched global prototypes, :math:`a_k = \mathrm{softmax}_k(\cos(l_{bn}, g_{nk}) / \tau)`,
and mix: :math:`r_{bn} = \mathrm{normalise}\big((1 - \alpha)\hat l_{bn} + \alpha\,
\widehat{\textstyle\sum_k a_k g_{nk}}\big)`. A class with no seed pixel (``l = 0``) gets the
global part alone. The refined CAM is :math:`\cos(A_{ij}, r_{bn})`; background (``n = 0``)
is treated like any class, so the pseudo-mask is the arg-max over the background score and the
labelled classes.

**Objective.** :func:`prdc_loss` trains the graph on the image labels (label consistency of the
refined maps) and the image (colour-affinity consistency), never on the seed pixels as targets;
the derivation is in the package docstring.
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.core.checks import check_finite, check_int, check_positive, check_shape
from jaxpapers.ropmb._bank import BankState
from jaxpapers.ropmb._seeds import (
    RefineConfig,
    check_labels_multi_hot,
    class_activation_maps,
    masked_average_pool,
    normalise,
    seed_masks,
)

Method = Literal["cam", "sipe", "bank", "ropmb"]
METHODS: tuple[str, ...] = ("cam", "sipe", "bank", "ropmb")


class PRDC(eqx.Module):
    """Learned prototype graph and residual message passing over all bank prototypes.

    Attributes:
      w_q, w_k: ``[D, P]`` edge projections.
      u: ``[L, D, H]`` and ``v``: ``[L, H, D]`` message weights of the ``L`` layers.
    """

    w_q: Float[Array, "d p"]
    w_k: Float[Array, "d p"]
    u: Float[Array, "l d h"]
    v: Float[Array, "l h d"]

    def __init__(
        self,
        dim: int,
        *,
        key: jax.Array,
        proj: int = 16,
        hidden: int = 32,
        layers: int = 2,
        out_scale: float = 0.1,
    ):
        for name, val in (("dim", dim), ("proj", proj), ("hidden", hidden), ("layers", layers)):
            if not (isinstance(val, int) and val >= 1):
                raise ValueError(f"{name}={val!r}; expected a positive integer")
        kq, kk, ku, kv = jax.random.split(key, 4)
        self.w_q = jax.random.normal(kq, (dim, proj)) / jnp.sqrt(dim)
        self.w_k = jax.random.normal(kk, (dim, proj)) / jnp.sqrt(dim)
        self.u = jax.random.normal(ku, (layers, dim, hidden)) / jnp.sqrt(dim)
        self.v = out_scale * jax.random.normal(kv, (layers, hidden, dim)) / jnp.sqrt(hidden)

    def adjacency(
        self, nodes: Float[Array, "m d"], valid: Bool[Array, " m"]
    ) -> Float[Array, "m m"]:
        """Row-stochastic edge weights over the valid nodes (rows of invalid-only graphs: 0)."""
        x = normalise(nodes)
        logits = (x @ self.w_q) @ (x @ self.w_k).T / jnp.sqrt(self.w_q.shape[1])
        logits = jnp.where(valid[None, :], logits, -jnp.inf)
        e = jax.nn.softmax(logits, axis=-1)
        return jnp.where(jnp.any(valid), e, 0.0)

    def __call__(self, nodes: Float[Array, "m d"], valid: Bool[Array, " m"]) -> Float[Array, "m d"]:
        """Enriched node features ``[M, D]`` (``M`` prototypes of dimension ``D``)."""
        if nodes.ndim != 2 or nodes.shape[1] != self.w_q.shape[0]:
            raise ValueError(f"nodes has shape {nodes.shape}; expected [M, {self.w_q.shape[0]}]")
        e = self.adjacency(nodes, valid)
        h = normalise(nodes)
        for layer in range(self.u.shape[0]):
            h = h + jax.nn.relu(e @ h @ self.u[layer]) @ self.v[layer]
        return h

    def enrich(self, bank: BankState) -> BankState:
        """The bank with every prototype replaced by its enriched version."""
        n, k, d = bank.prototypes.shape
        out = self(bank.prototypes.reshape(n * k, d), bank.filled.reshape(n * k))
        return bank._replace(prototypes=out.reshape(n, k, d))


def refine_prototypes(
    local: Float[Array, "b n d"],
    mass: Float[Array, "b n"],
    bank: BankState,
    *,
    config: RefineConfig,
) -> Float[Array, "b n d"]:
    """Context-aware refinement: inject each class's attended global prototype into the image's
    local prototype (unit-norm output)."""
    g, filled = bank.prototypes, bank.filled
    check_shape("mass", mass, jnp.shape(local)[:2])
    check_finite("local", local)
    if local.shape[1:] != (g.shape[0], g.shape[2]):
        raise ValueError(
            f"local prototypes have shape {local.shape}; expected [B, {g.shape[0]}, {g.shape[2]}]"
        )
    lhat, ghat = normalise(local), normalise(g)
    sim = jnp.einsum("bnd,nkd->bnk", lhat, ghat) / config.temperature
    attn = jax.nn.softmax(jnp.where(filled[None], sim, -jnp.inf), axis=-1)
    attn = jnp.where(jnp.any(filled, axis=-1)[None, :, None], attn, 0.0)
    glob = normalise(jnp.einsum("bnk,nkd->bnd", attn, ghat))
    lhat = jnp.where((mass > 0)[..., None], lhat, 0.0)
    return normalise((1.0 - config.alpha) * lhat + config.alpha * glob)


def prototype_scores(
    features: Float[Array, "b h w d"], prototypes: Float[Array, "b n d"]
) -> Float[Array, "b h w n"]:
    """Cosine similarity of every pixel feature to every (image-specific) prototype."""
    if jnp.ndim(features) != 4:
        raise ValueError(f"features has shape {jnp.shape(features)}; expected [B, h, w, D]")
    b, d = jnp.shape(features)[0], jnp.shape(features)[-1]
    check_shape("prototypes", prototypes, (b, None, d))
    return jnp.einsum("bhwd,bnd->bhwn", normalise(features), normalise(prototypes))


def pseudo_masks(
    scores: Float[Array, "b h w n"], labels: Float[Array, "b c"], size: int
) -> Int[Array, "b s s"]:
    """Arg-max over the background score (index 0) and the labelled classes, after bilinear
    upsampling of the scores to ``size x size``; output ids: 0 background, ``c + 1`` class ``c``."""
    if jnp.ndim(scores) != 4:
        raise ValueError(f"scores has shape {jnp.shape(scores)}; expected [B, h, w, C + 1]")
    b, _, _, n = scores.shape
    check_labels_multi_hot(labels, b, n - 1)
    check_int("size", size, minimum=1)
    up = jax.image.resize(scores, (b, size, size, n), "linear")
    allowed = jnp.concatenate([jnp.ones((b, 1)), labels], axis=1) > 0
    return jnp.argmax(jnp.where(allowed[:, None, None, :], up, -jnp.inf), axis=-1)


def refined_scores(
    method: Method,
    features: Float[Array, "b h w d"],
    weights: Float[Array, "d c"],
    labels: Float[Array, "b c"],
    *,
    config: RefineConfig,
    bank: BankState | None = None,
    prdc: PRDC | None = None,
) -> Float[Array, "b h w n"]:
    """Per-pixel scores ``[B, h, w, C + 1]`` (background first) of one method.

    * ``"cam"``: the normalised CAMs with the constant background ``config.cam_background``;
    * ``"sipe"``: cosine to the image's own seed prototypes (no memory bank);
    * ``"bank"``: cosine to local prototypes refined with the raw memory bank (no GNN);
    * ``"ropmb"``: cosine to local prototypes refined with the PRDC-enriched bank.
    """
    if method not in METHODS:
        raise ValueError(f"method={method!r}; expected one of {METHODS}")
    cams = class_activation_maps(features, weights, labels)
    if method == "cam":
        bg = jnp.full((*cams.shape[:3], 1), config.cam_background, cams.dtype)
        return jnp.concatenate([bg, cams], axis=-1)
    local = masked_average_pool(features, seed_masks(cams, labels, config=config))
    if method == "sipe":
        return prototype_scores(features, local.prototypes)
    if bank is None or (method == "ropmb" and prdc is None):
        raise ValueError(f"method={method!r} needs a bank{' and a prdc' * (method == 'ropmb')}")
    if method == "ropmb":
        bank = prdc.enrich(bank)
    refined = refine_prototypes(local.prototypes, local.mass, bank, config=config)
    return prototype_scores(features, refined)


def colour_affinity(
    images: Float[Array, "b hh ww ch"], size: int, *, sigma: float = 0.1
) -> Float[Array, "b s s 2"]:
    r"""Colour affinity of every feature-grid pixel to its right and lower neighbour,
    :math:`w_{ij} = \exp(-|I_i - I_j|^2 / 2\sigma^2)`, on the image average-pooled to
    ``size x size`` (the feature resolution). The last column's right weight and the last row's
    lower weight are 0 (no neighbour). ``images`` side must be a multiple of ``size``."""
    if jnp.ndim(images) != 4 or images.shape[1] != images.shape[2]:
        raise ValueError(f"images has shape {jnp.shape(images)}; expected square [B, H, H, ch]")
    check_int("size", size, minimum=1)
    if images.shape[1] % size:
        raise ValueError(f"size={size}; expected a divisor of the image side {images.shape[1]}")
    check_positive("sigma", sigma)
    b, hh, _, ch = images.shape
    f = hh // size
    small = images.reshape(b, size, f, size, f, ch).mean(axis=(2, 4))
    right = jnp.sum((small[:, :, 1:] - small[:, :, :-1]) ** 2, -1)
    down = jnp.sum((small[:, 1:] - small[:, :-1]) ** 2, -1)
    right = jnp.pad(jnp.exp(-right / (2 * sigma**2)), ((0, 0), (0, 0), (0, 1)))
    down = jnp.pad(jnp.exp(-down / (2 * sigma**2)), ((0, 0), (0, 1), (0, 0)))
    return jnp.stack([right, down], axis=-1)


def label_evidence(probs: Float[Array, "b h w n"], top: int) -> Float[Array, "b n"]:
    """Image-level evidence of each class: the mean of its ``top`` largest pixel probabilities
    (a smooth max that a single stray pixel cannot satisfy)."""
    if jnp.ndim(probs) != 4:
        raise ValueError(f"probs has shape {jnp.shape(probs)}; expected [B, h, w, n]")
    b, h, w, n = probs.shape
    check_int("top", top, minimum=1)
    if top > h * w:
        raise ValueError(f"top={top}; expected at most h * w = {h * w} pixels")
    flat = jnp.moveaxis(probs.reshape(b, h * w, n), 1, -1)
    return jnp.mean(jax.lax.top_k(flat, top)[0], axis=-1)


def prdc_loss(
    prdc: PRDC,
    bank: BankState,
    features: Float[Array, "b h w d"],
    weights: Float[Array, "d c"],
    labels: Float[Array, "b c"],
    *,
    config: RefineConfig,
    affinity: Float[Array, "b h w 2"] | None = None,
    smooth_weight: float = 1.0,
    top_fraction: float = 1 / 32,
) -> Float[Array, ""]:
    r"""Training objective of the graph, tied to the image labels and the image, not to the seeds.

    The refined prototypes of all ``C + 1`` classes (absent classes: the global part alone) give
    pixel probabilities :math:`P_{ijn} = \mathrm{softmax}_n(\cos(A_{ij}, r_{bn}) / \tau)`.

    * **Label consistency** (the image labels are the supervision of WSSS): the evidence
      :math:`q_{bn}` of class ``n`` is the mean of its ``top_fraction`` largest pixel
      probabilities (:func:`label_evidence`); binary cross-entropy against the label, the
      background always present. An absent class whose enriched prototype claims pixels (e.g.
      a class prototype contaminated by background seeds) is penalised in every image without
      that class; a labelled class must claim some pixels.
    * **Affinity consistency** (PSA/IRN-style region smoothness, as a regularised loss):
      :math:`\sum w_{ij} |P_i - P_j|^2` over 4-neighbours with colour affinities ``affinity``
      (:func:`colour_affinity`), averaged over pixels and weighted by ``smooth_weight``: labels
      change where the colour changes. ``None`` leaves the term out.

    The seeds enter only through the local prototypes the refinement starts from (the same input
    as every method); no pixel is told which class it belongs to.
    """
    cams = class_activation_maps(features, weights, labels)
    seeds = seed_masks(cams, labels, config=config)
    local = masked_average_pool(features, seeds)
    refined = refine_prototypes(local.prototypes, local.mass, prdc.enrich(bank), config=config)
    probs = jax.nn.softmax(prototype_scores(features, refined) / config.temperature, axis=-1)
    b, h, w, _ = probs.shape
    top = max(1, round(h * w * top_fraction))
    q = jnp.clip(label_evidence(probs, top), 1e-6, 1.0 - 1e-6)
    target = jnp.concatenate([jnp.ones((b, 1), labels.dtype), labels], axis=1)
    loss = -jnp.mean(target * jnp.log(q) + (1.0 - target) * jnp.log1p(-q))
    if affinity is not None:
        check_shape("affinity", affinity, (b, h, w, 2))
        right = jnp.sum((probs[:, :, 1:] - probs[:, :, :-1]) ** 2, -1) * affinity[:, :, :-1, 0]
        down = jnp.sum((probs[:, 1:] - probs[:, :-1]) ** 2, -1) * affinity[:, :-1, :, 1]
        loss = loss + smooth_weight * (jnp.sum(right) + jnp.sum(down)) / (b * h * w)
    return loss


__all__ = [
    "METHODS",
    "PRDC",
    "Method",
    "colour_affinity",
    "label_evidence",
    "prdc_loss",
    "prototype_scores",
    "pseudo_masks",
    "refine_prototypes",
    "refined_scores",
]
