r"""The autoregressive variant: a small decoder transformer (``core.nn.decoder.DecoderLM``) over
quantised 2-D points, with SCALE, CCA and CFG on next-token logits.

A point :math:`x \in \mathbb R^L` becomes ``L`` tokens (each coordinate quantised to ``bins``
bins of ``[low, high]``); the sequence is ``[class token, x_1, ..., x_L]`` and the model predicts
each coordinate token from the class token and the earlier ones. Class token ``bins + C`` is the
null label.

* conditional: next-token NLL with label dropout; **CFG on logits** samples from
  :math:`\ell_\varnothing + w(\ell_c - \ell_\varnothing)` (two passes a token).
* **CCA** (Chen et al. 2024): with :math:`\Delta(x, c) = \log p_\theta(x \mid c) - \log
  p_{\rm ref}(x \mid c)` against the frozen conditional model, :math:`-\log\sigma(\beta\Delta(x,
  c)) - \lambda\log\sigma(-\beta\Delta(x, c^-))` with negatives :math:`c^-` from shuffled labels;
  samples from :math:`p_\theta` in one pass.
* **SCALE**: the likelihood model is the normalised geometric mixture :math:`p_{\rm lik} \propto
  p_\theta^{1/w}\,\mathrm{sg}[p_\psi]^{1 - 1/w}` (logits :math:`\tfrac1w\ell_\theta + (1 -
  \tfrac1w)\mathrm{sg}[\ell_\psi]`), fitted by NLL to real data; :math:`\psi` fits samples of
  :math:`p_{\rm lik}` by NLL. At the optimum :math:`p_\theta \propto p_{\rm data}^w /
  p_{\rm self}^{w-1}`: self-contrastive guidance on logits, sampled in one pass.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jaxtyping import Array, ArrayLike, Float, Int, PyTree

from jaxpapers.core.checks import (
    check_dtype,
    check_int,
    check_key,
    check_labels,
    check_ndim,
    check_positive,
    check_range,
    check_shape,
)
from jaxpapers.core.fit import FitResult
from jaxpapers.core.nn.decoder import DecoderLM, token_log_probs
from jaxpapers.scale._losses import drop_labels
from jaxpapers.scale._network import check_seeds, init_over_seeds
from jaxpapers.scale._train import DataSource, refreshing_fit

AR_KINDS = ("conditional", "cca", "scale")


class TokenModel(eqx.Module):
    """A class-conditional decoder over ``length`` tokens of ``bins`` values (graph static).

    Attributes:
      graphdef: nnx graph definition of the :class:`DecoderLM`.
      bins: values per token.
      num_classes: ``C``; class token ``bins + C`` is null.
      length: tokens per sample.
      low, high: the quantisation range.
    """

    graphdef: Any = eqx.field(static=True)
    bins: int = eqx.field(static=True)
    num_classes: int = eqx.field(static=True)
    length: int = eqx.field(static=True)
    low: float = eqx.field(static=True)
    high: float = eqx.field(static=True)

    @property
    def vocab(self) -> int:
        """Token ids: ``bins`` values, then ``C + 1`` class tokens."""
        return self.bins + self.num_classes + 1

    def logits(
        self, params: PyTree, tokens: Int[Array, "b l"], labels: Int[Array, " b"]
    ) -> Float[Array, "b l bins"]:
        """Teacher-forced logits of every coordinate token, restricted to the ``bins`` values
        (position ``i`` predicts token ``i`` from the class token and tokens ``< i``)."""
        seq = jnp.concatenate([(labels + self.bins)[:, None], tokens[:, :-1]], axis=1)
        return nnx.merge(self.graphdef, params)(seq)[..., : self.bins]

    def quantise(self, x: Float[Array, "b l"]) -> Int[Array, "b l"]:
        """Bin index of each coordinate (clipped to the range)."""
        u = (x - self.low) / (self.high - self.low)
        return jnp.clip(jnp.floor(u * self.bins), 0, self.bins - 1).astype(jnp.int32)

    def dequantise(self, tokens: Int[Array, "b l"], *, key: Array) -> Float[Array, "b l"]:
        """A uniform point inside each token's bin."""
        u = (tokens + jax.random.uniform(key, tokens.shape)) / self.bins
        return self.low + (self.high - self.low) * u


def token_model(
    num_classes: int,
    *,
    seeds: Int[Array, " s"],
    length: int = 2,
    bins: int = 32,
    low: float = -2.5,
    high: float = 2.5,
    d_model: int = 64,
    num_heads: int = 4,
    num_layers: int = 2,
) -> tuple[TokenModel, PyTree]:
    """A :class:`TokenModel` and its parameters, one set per seed (leading axis).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> tm, ps = token_model(3, seeds=jnp.arange(2), d_model=16, num_heads=2, num_layers=1)
        >>> tm.vocab, jax.tree.leaves(ps)[0].shape[0]
        (36, 2)
    """
    for name, value in (("num_classes", num_classes), ("length", length), ("bins", bins)):
        check_int(name, value, minimum=1)
    check_range("low", low)
    check_range("high", high, low, low_open=True)
    check_seeds(seeds)
    vocab = bins + num_classes + 1

    def make(seed):
        return DecoderLM(
            vocab,
            d_model=d_model,
            num_heads=num_heads,
            num_layers=num_layers,
            max_len=length + 1,
            rngs=nnx.Rngs(seed),
        )

    graphdef, params = init_over_seeds(make, jnp.asarray(seeds))
    return TokenModel(graphdef, bins, num_classes, length, low, high), params


def _check_tokens(name: str, tokens, label_name: str, labels) -> None:
    """Static checks: integer ``tokens [b, l]`` and integer ``labels [b]``."""
    check_ndim(name, tokens, 2)
    check_dtype(name, tokens, "integer")
    check_shape(label_name, labels, (tokens.shape[0],))
    check_dtype(label_name, labels, "integer")


def sequence_log_prob(
    model: TokenModel, params: PyTree, tokens: Int[Array, "b l"], labels: Int[Array, " b"]
) -> Float[Array, " b"]:
    r""":math:`\log p(x \mid c) = \sum_i \log p(x_i \mid c, x_{<i})`."""
    _check_tokens("tokens", tokens, "labels", labels)
    return token_log_probs(model.logits(params, tokens, labels), tokens).sum(-1)


def ar_conditional_loss(model, params, tokens, labels, *, key, p_uncond=0.1):
    """Mean next-token NLL with label dropout."""
    check_key("key", key)
    lab = drop_labels(labels, p_uncond, model.num_classes, key=key)
    return -jnp.mean(sequence_log_prob(model, params, tokens, lab))


def cca_loss(model, params, ref_params, tokens, labels, *, key, beta=1.0, lam=1.0):
    r"""Condition Contrastive Alignment with negatives from shuffled labels."""
    check_key("key", key)
    neg = jax.random.permutation(key, labels)
    ref = jax.lax.stop_gradient
    d_pos = sequence_log_prob(model, params, tokens, labels) - ref(
        sequence_log_prob(model, ref_params, tokens, labels)
    )
    d_neg = sequence_log_prob(model, params, tokens, neg) - ref(
        sequence_log_prob(model, ref_params, tokens, neg)
    )
    return jnp.mean(-jax.nn.log_sigmoid(beta * d_pos) - lam * jax.nn.log_sigmoid(-beta * d_neg))


def ar_scale_loss(model, params, tokens, labels, self_tokens, self_labels, *, w, self_weight=1.0):
    r"""SCALE on logits: NLL of :math:`\tfrac1w\ell_\theta + (1-\tfrac1w)\mathrm{sg}[\ell_\psi]`
    on real tokens plus ``self_weight`` x NLL of :math:`\ell_\psi` on self-generated tokens."""
    check_positive("w", w)
    check_range("self_weight", self_weight, 0.0)
    _check_tokens("tokens", tokens, "labels", labels)
    _check_tokens("self_tokens", self_tokens, "self_labels", self_labels)
    theta, psi = params
    mixed = model.logits(theta, tokens, labels) / w + (1.0 - 1.0 / w) * jax.lax.stop_gradient(
        model.logits(psi, tokens, labels)
    )
    real = -jnp.mean(token_log_probs(mixed, tokens).sum(-1))
    self_nll = -jnp.mean(sequence_log_prob(model, psi, self_tokens, self_labels))
    return real + self_weight * self_nll


class TokenSample(NamedTuple):
    """Sampled ``tokens [b, length]`` and the exact number of network passes ``nfe``."""

    tokens: Int[Array, "b l"]
    nfe: Int[Array, ""]


@functools.partial(jax.jit, static_argnames=("model", "mode"))
def _ar_sample(model, params, labels, w, key, mode):
    b = labels.shape[0]
    null = jnp.full_like(labels, model.num_classes)

    def next_logits(tokens, i):
        if mode == "one_pass":
            return model.logits(params, tokens, labels)[:, i], 1
        if mode == "cfg":
            both = model.logits(
                params, jnp.concatenate([tokens, tokens]), jnp.concatenate([labels, null])
            )[:, i]
            return both[b:] + w * (both[:b] - both[b:]), 2
        theta, psi = params  # "likelihood": SCALE's training-time sampler
        lt, ls = model.logits(theta, tokens, labels)[:, i], model.logits(psi, tokens, labels)[:, i]
        return lt / w + (1.0 - 1.0 / w) * ls, 2

    def body(i, carry):
        tokens, nfe = carry
        logits, passes = next_logits(tokens, i)
        tok = jax.random.categorical(jax.random.fold_in(key, i), logits)
        return tokens.at[:, i].set(tok.astype(jnp.int32)), nfe + passes

    init = (jnp.zeros((b, model.length), jnp.int32), jnp.zeros((), jnp.int32))
    tokens, nfe = jax.lax.fori_loop(0, model.length, body, init)
    return TokenSample(tokens, nfe)


def ar_sample(
    model: TokenModel,
    params: PyTree,
    labels: Int[Array, " b"],
    *,
    key: Array,
    mode: str = "one_pass",
    w: ArrayLike = 1.0,
) -> TokenSample:
    """Ancestral sampling of ``length`` tokens per label.

    Args:
      model, params: the token model (for ``mode="likelihood"``: SCALE's pair ``(theta, psi)``).
      labels: ``[b]`` labels in ``[0, C]``.
      key: PRNG key.
      mode: ``"one_pass"`` (conditional, CCA, SCALE: one pass a token), ``"cfg"`` (CFG on
        logits, two passes a token) or ``"likelihood"`` (SCALE's mixture, two passes).
      w: guidance scale (``>= 0``; ``> 0`` for ``"likelihood"``).

    Returns:
      :class:`TokenSample` with ``nfe = length x passes``.
    """
    check_key("key", key)
    labels = jnp.asarray(labels)
    check_labels("labels", labels, model.num_classes + 1)
    if mode not in ("one_pass", "cfg", "likelihood"):
        raise ValueError(f"mode={mode!r}; expected 'one_pass', 'cfg' or 'likelihood'")
    check_positive("w", w, allow_zero=mode == "cfg")
    return _ar_sample(model, params, labels, jnp.asarray(w, jnp.float32), key, mode)


class ARMethod(eqx.Module):
    """AR training method: ``kind`` in ``("conditional", "cca", "scale")`` and its knobs
    (``w``, ``p_uncond``, CCA's ``beta`` and ``lam``, SCALE's ``refresh``/``self_batch``/
    ``self_weight``)."""

    kind: str = eqx.field(static=True)
    w: float = eqx.field(static=True, default=1.0)
    p_uncond: float = eqx.field(static=True, default=0.1)
    beta: float = eqx.field(static=True, default=1.0)
    lam: float = eqx.field(static=True, default=1.0)
    refresh: int = eqx.field(static=True, default=10)
    self_batch: int = eqx.field(static=True, default=256)
    self_weight: float = eqx.field(static=True, default=1.0)

    def __check_init__(self) -> None:
        if self.kind not in AR_KINDS:
            raise ValueError(f"kind={self.kind!r}; expected one of {AR_KINDS}")
        if self.w < 1.0:
            raise ValueError(f"w={self.w}; expected >= 1")


@functools.partial(jax.jit, static_argnames=("model", "method", "steps", "batch"))
def _ar_fit(model, method, params, ref_params, data, key, lr, steps, batch):
    make_buffer = None
    if method.kind == "scale":
        params = (params, params)

        def make_buffer(p, k, first):
            kl, ks = jax.random.split(k)
            labels = data.draw(method.self_batch, key=kl)[1]
            p = jax.lax.stop_gradient(p)
            return _ar_sample(model, p, labels, jnp.float32(method.w), ks, "likelihood")[0], labels

    def loss_fn(p, _ema, buf, k, step):
        kd, kl = jax.random.split(k)
        x, labels = data.draw(batch, key=kd)
        tokens = model.quantise(x)
        if method.kind == "conditional":
            return ar_conditional_loss(model, p, tokens, labels, key=kl, p_uncond=method.p_uncond)
        if method.kind == "cca":
            return cca_loss(
                model, p, ref_params, tokens, labels, key=kl, beta=method.beta, lam=method.lam
            )
        return ar_scale_loss(
            model, p, tokens, labels, buf[0], buf[1], w=method.w, self_weight=method.self_weight
        )

    res = refreshing_fit(
        loss_fn,
        params,
        optax.adam(lr),
        key=key,
        steps=steps,
        block=method.refresh if method.kind == "scale" else 1,
        make_buffer=make_buffer,
    )
    return res._replace(state=None)


def ar_fit(
    model: TokenModel,
    method: ARMethod,
    params: PyTree,
    data: DataSource,
    *,
    key: Array,
    steps: int,
    batch: int,
    lr: float = 1e-3,
    ref_params: PyTree | None = None,
) -> FitResult:
    """Train the token model with ``method`` (CCA fine-tunes ``params`` against ``ref_params``,
    default: ``params`` themselves). For SCALE the result's ``params`` are ``(theta, psi)``; its
    self-generated tokens are ``self_batch`` ancestral samples of the likelihood model, drawn from
    the stop-gradient parameters every ``refresh`` steps. Jitted inside; the loop is
    :func:`jaxpapers.core.fit.fit` (Adam; a non-finite step freezes the run).

    Returns:
      :class:`jaxpapers.core.fit.FitResult` (``params``, ``opt_state``, ``losses [steps]``,
      ``finite``).
    """
    check_key("key", key)
    if not isinstance(steps, int) or steps < 1 or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"steps={steps!r}, batch={batch!r}; expected integers >= 1")
    if method.kind == "scale" and steps % method.refresh:
        raise ValueError(f"steps={steps} must be a multiple of refresh={method.refresh}")
    ref = params if ref_params is None else ref_params
    return _ar_fit(model, method, params, ref, data, key, lr, steps, batch)
