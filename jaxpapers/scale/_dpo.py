r"""Diffusion-DPO on top of a trained (SCALE) denoiser (Wallace et al. 2023).

For a preferred sample :math:`x^w` and a rejected one :math:`x^l` of the same label, noised with
the same :math:`t` and :math:`\epsilon`, let :math:`\Delta(x) = \|\epsilon - \epsilon_\theta(x_t,
c)\|^2 - \|\epsilon - \epsilon_{\rm ref}(x_t, c)\|^2` (how much better than the reference the model
denoises). The loss is

.. math:: -\log\sigma\big(-\beta\,(\Delta(x^w) - \Delta(x^l))\big),

the DPO objective with the diffusion ELBO standing in for the log-likelihood. When the pair is
tied (:math:`x^w = x^l`) the loss is :math:`\log 2` and its gradient vanishes. Pairs are ranked by
a reward that the experiment defines (the true class log-likelihood on a mixture, a held-out
classifier's log-probability of the intended class on digits).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, Int, PyTree

from jaxpapers.core.checks import check_key, check_ndim, check_positive, check_shape
from jaxpapers.core.diffusion import VPSchedule
from jaxpapers.core.fit import FitResult, fit
from jaxpapers.scale._losses import noise_batch
from jaxpapers.scale._network import DEFAULT_SCHEDULE, GUIDED, Denoiser


class PreferencePairs(NamedTuple):
    """``win`` and ``lose`` samples ``[n, ...]`` for ``labels [n]``."""

    win: Array
    lose: Array
    labels: Int[Array, " n"]


def rank_pairs(
    x_a: Float[Array, "n ..."],
    x_b: Float[Array, "n ..."],
    labels: Int[Array, " n"],
    reward_a: Float[Array, " n"],
    reward_b: Float[Array, " n"],
) -> PreferencePairs:
    """Order each pair by reward (ties go to ``x_a``)."""
    check_ndim("x_a", x_a, range(1, 8))
    check_shape("x_b", x_b, x_a.shape)
    n = x_a.shape[0]
    for name, arr in (("labels", labels), ("reward_a", reward_a), ("reward_b", reward_b)):
        check_shape(name, arr, (n,))
    a_wins = (reward_a >= reward_b).reshape((-1,) + (1,) * (x_a.ndim - 1))
    return PreferencePairs(jnp.where(a_wins, x_a, x_b), jnp.where(a_wins, x_b, x_a), labels)


def dpo_loss(
    net: Denoiser,
    params: PyTree,
    ref_params: PyTree,
    pairs: PreferencePairs,
    *,
    key: Array,
    schedule: VPSchedule,
    beta: float,
) -> Float[Array, ""]:
    r"""Diffusion-DPO loss of a batch of pairs (mean); ``ref_params`` are held fixed."""
    check_key("key", key)
    check_positive("beta", beta)
    both = jnp.concatenate([pairs.win, pairs.lose])
    n = noise_batch(both, key=key, schedule=schedule)
    b = pairs.labels.shape[0]
    # The same time and noise for both members of a pair.
    t = jnp.concatenate([n.t[:b], n.t[:b]])
    eps = jnp.concatenate([n.eps[:b], n.eps[:b]])
    bshape = (-1,) + (1,) * (both.ndim - 1)
    x_t = schedule.alpha(t).reshape(bshape) * both + schedule.sigma(t).reshape(bshape) * eps
    labels = jnp.concatenate([pairs.labels, pairs.labels])
    one = jnp.full(t.shape, GUIDED, both.dtype)

    def err(p):
        return jnp.sum((net(p, x_t, t, labels, one) - eps).reshape(2 * b, -1) ** 2, -1)

    delta = err(params) - jax.lax.stop_gradient(err(ref_params))
    margin = delta[:b] - delta[b:]
    return jnp.mean(-jax.nn.log_sigmoid(-beta * margin))


@functools.partial(jax.jit, static_argnames=("net", "steps", "batch", "schedule"))
def _dpo_fit(net, params, pairs, key, lr, beta, steps, batch, schedule):
    ref = params

    def loss(p, _batch, k):
        ki, kl = jax.random.split(k)
        idx = jax.random.randint(ki, (batch,), 0, pairs.labels.shape[0])
        sub = jax.tree.map(lambda a: a[idx], pairs)
        return dpo_loss(net, p, ref, sub, key=kl, schedule=schedule, beta=beta)

    return fit(loss, params, optax.adam(lr), steps=steps, key=key)


def dpo_fit(
    net: Denoiser,
    params: PyTree,
    pairs: PreferencePairs,
    *,
    key: Array,
    steps: int,
    batch: int,
    beta: float = 1.0,
    lr: float = 2e-4,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
) -> FitResult:
    """Fine-tune ``params`` with Diffusion-DPO on ``pairs`` (reference: the initial ``params``).

    Adam steps on ``batch`` pairs drawn with replacement, in :func:`jaxpapers.core.fit.fit` (a
    non-finite loss, gradient or update freezes the run and clears ``finite``).

    Returns:
      :class:`jaxpapers.core.fit.FitResult` (``params``, ``opt_state``, ``losses [steps]``,
      ``finite``).
    """
    check_key("key", key)
    if not isinstance(steps, int) or steps < 1 or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"steps={steps!r}, batch={batch!r}; expected integers >= 1")
    check_positive("beta", beta)
    check_positive("lr", lr)
    return _dpo_fit(net, params, pairs, key, lr, beta, steps, batch, schedule)
