"""Coalition games ``v(S)`` behind each attribution method; the natural total effect.

A game maps a coalition mask ``(n,)`` to a number. Four games over one SCM, one model ``f`` and
one explained unit ``x``, with ``u`` the unit's abduced noise and ``u'`` an independent
reference world (``X' = X(u')``):

* counterfactual (the natural total effect of ``X_S``):
  ``v(S) = f(x) - E_{u | x} E_{u'} f(X^{do(X_S = X'_S)}(u))``;
* causal (interventional expectations, Heskes et al. 2020):
  ``v(S) = E_{u'} f(X^{do(X_S = x_S)}(u'))``;
* interventional SHAP (marginal expectations, Janzing et al. 2020):
  ``v(S) = E_{X'} f(x_S, X'_{-S})``;
* observational SHAP (conditional expectations, Lundberg and Lee 2017):
  ``v(S) = E[f(X) | X_S = x_S]`` (discrete SCMs, exact enumeration).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from jaxpapers.cfshap._scm import DiscreteSCM, LinearGaussianSCM, Worlds
from jaxpapers.core.checks import check_finite, check_int, check_shape

SCM = DiscreteSCM | LinearGaussianSCM


class TableModel(eqx.Module):
    """A model of discrete variables stored as a table over all joint values (row-major)."""

    table: Float[Array, " K"]
    strides: tuple[int, ...] = eqx.field(static=True)

    def __call__(self, x: Array) -> Array:
        return self.table[jnp.sum(jnp.asarray(x) * jnp.asarray(self.strides, jnp.int32))]


def tabulate(scm: DiscreteSCM, model: Callable[[Array], Array]) -> TableModel:
    """Evaluate ``model`` once on every joint value of a discrete SCM."""
    if isinstance(model, TableModel):
        return model
    table = jax.vmap(model)(scm.value_configs()).astype(float)
    strides = tuple(int(s) for s in np.cumprod((1, *scm.cards[::-1]))[::-1][1:])
    return TableModel(table, strides)


def _check_unit(scm: SCM, x: Array) -> Array:
    x = jnp.asarray(x)
    if x.shape != (scm.num_features,):
        raise ValueError(f"x has shape {x.shape}; expected ({scm.num_features},)")
    check_finite("x", x)
    if isinstance(scm, DiscreteSCM):
        xs = np.asarray(x)
        if np.any(xs < 0) or np.any(xs >= np.asarray(scm.cards)):
            raise ValueError(f"x={xs.tolist()} lies outside the cardinalities {scm.cards}")
        return x.astype(jnp.int32)
    return x


def _worlds(scm: SCM, x: Array, background) -> tuple[Worlds, Worlds]:
    if isinstance(scm, DiscreteSCM):
        factual = scm.abduct(x)
        if not float(factual.weight.sum()) > 0:
            raise ValueError(f"x={np.asarray(x).tolist()} has probability zero under the SCM")
        return factual, scm.reference_worlds()
    if background is None:
        raise ValueError("a LinearGaussianSCM needs background draws of X, shape (m, n)")
    background = jnp.asarray(background)
    if background.ndim != 2 or background.shape[1] != scm.num_features:
        raise ValueError(
            f"background has shape {background.shape}; expected (m, {scm.num_features})"
        )
    return scm.abduct(x), scm.reference_worlds(background)


class CounterfactualGame(eqx.Module):
    """``v(S)``: the natural total effect of ``X_S`` on ``f`` for the explained unit.

    ``v(S) = f(x) - sum_a sum_b w_a w'_b f(solve(u_a, X'_b, S))`` over abduced worlds ``a`` and
    reference worlds ``b``. ``v(empty) = 0`` and ``v(all) = f(x) - E f(X)``.
    """

    scm: SCM
    model: Callable
    x: Array
    factual: Worlds
    reference: Worlds

    @property
    def num_features(self) -> int:
        return self.scm.num_features

    def __call__(self, mask: Bool[Array, " n"]) -> Float[Array, ""]:
        def one(u, xr):
            return self.model(self.scm.solve(u, xr, mask))

        inner = jax.vmap(lambda u: jax.vmap(lambda xr: one(u, xr))(self.reference.values))
        vals = inner(self.factual.noise)
        return self.model(self.x) - self.factual.weight @ vals @ self.reference.weight


class CausalGame(eqx.Module):
    """``v(S) = E_{u'} f(X^{do(X_S = x_S)}(u'))`` (causal Shapley values' game)."""

    scm: SCM
    model: Callable
    x: Array
    reference: Worlds

    @property
    def num_features(self) -> int:
        return self.scm.num_features

    def __call__(self, mask: Bool[Array, " n"]) -> Float[Array, ""]:
        vals = jax.vmap(lambda u: self.model(self.scm.solve(u, self.x, mask)))(self.reference.noise)
        return vals @ self.reference.weight


class InterventionalGame(eqx.Module):
    """``v(S) = E_{X'} f(x_S, X'_{-S})`` (interventional / marginal SHAP)."""

    model: Callable
    x: Array
    reference: Worlds

    @property
    def num_features(self) -> int:
        return int(self.x.shape[0])

    def __call__(self, mask: Bool[Array, " n"]) -> Float[Array, ""]:
        vals = jax.vmap(lambda xr: self.model(jnp.where(mask, self.x, xr)))(self.reference.values)
        return vals @ self.reference.weight


class ObservationalGame(eqx.Module):
    """``v(S) = E[f(X) | X_S = x_S]`` (observational / conditional SHAP), exact enumeration."""

    model: Callable
    x: Array
    reference: Worlds

    @property
    def num_features(self) -> int:
        return int(self.x.shape[0])

    def __call__(self, mask: Bool[Array, " n"]) -> Float[Array, ""]:
        vals = jax.vmap(self.model)(self.reference.values)
        agree = jnp.all((self.reference.values == self.x[None]) | ~mask[None], axis=-1)
        w = jnp.where(agree, self.reference.weight, 0.0)
        return vals @ w / w.sum()


def _prepare(scm: SCM, model, x):
    x = _check_unit(scm, x)
    if isinstance(scm, DiscreteSCM):
        model = tabulate(scm, model)
    return model, x


def counterfactual_game(scm: SCM, model: Callable, x: Array, *, background=None):
    """The natural-total-effect game of unit ``x`` (``background``: ``(m, n)`` draws of ``X``,
    needed for a linear-Gaussian SCM; a discrete SCM enumerates its worlds exactly)."""
    model, x = _prepare(scm, model, x)
    factual, reference = _worlds(scm, x, background)
    return CounterfactualGame(scm, model, x, factual, reference)


def causal_game(scm: SCM, model: Callable, x: Array, *, background=None) -> CausalGame:
    """The interventional-expectation game of causal Shapley values."""
    model, x = _prepare(scm, model, x)
    return CausalGame(scm, model, x, _worlds(scm, x, background)[1])


def interventional_game(scm: SCM, model: Callable, x: Array, *, background=None):
    """The marginal-expectation game of interventional SHAP."""
    model, x = _prepare(scm, model, x)
    return InterventionalGame(model, x, _worlds(scm, x, background)[1])


def observational_game(scm: DiscreteSCM, model: Callable, x: Array) -> ObservationalGame:
    """The conditional-expectation game of observational SHAP (discrete SCMs only)."""
    if not isinstance(scm, DiscreteSCM):
        raise ValueError("observational_game enumerates values exactly: it needs a DiscreteSCM")
    model, x = _prepare(scm, model, x)
    return ObservationalGame(model, x, _worlds(scm, x, None)[1])


def natural_total_effect(
    scm: SCM, model: Callable, x: Array, subset: Bool[Array, " n"], *, background=None
) -> Float[Array, ""]:
    """Natural total effect of ``X_S`` on the prediction for unit ``x``.

    ``NTE_S(x) = f(x) - E[f(X^{do(X_S = X'_S)}(u)) | X = x]``: the unit keeps its own noise
    ``u`` (abduction), ``X_S`` is reset to values ``X'_S`` of an independent natural world (the
    "natural" part), and every descendant responds (the "total" part).

    Examples:
      >>> import jax.numpy as jnp
      >>> scm = LinearGaussianSCM(jnp.array([[0.0, 0.0], [2.0, 0.0]]))
      >>> f = lambda x: 3.0 * x[1]
      >>> float(natural_total_effect(scm, f, jnp.array([1.0, 2.5]), jnp.array([True, False]),
      ...                            background=jnp.zeros((1, 2))))
      6.0
    """
    check_shape("subset", subset, (scm.num_features,))
    game = counterfactual_game(scm, model, x, background=background)
    return game(jnp.asarray(subset, bool))


def mediation_effects(
    scm: SCM, treatment: int, mediator: int, outcome: int, t0, t1, *, background=None
) -> dict[str, Array]:
    """Total, natural direct and natural indirect effects of ``treatment`` on ``outcome``.

    ``TE = E[Y_{t1} - Y_{t0}]``, ``NDE = E[Y_{t1, M_{t0}} - Y_{t0}]``,
    ``NIE = E[Y_{t0, M_{t1}} - Y_{t0}]`` (Pearl 2001), expectations over the noise law (a
    discrete SCM) or the background worlds (a linear-Gaussian SCM). In a linear SCM
    ``TE = NDE + NIE``.
    """
    n = scm.num_features
    for name, node in (("treatment", treatment), ("mediator", mediator), ("outcome", outcome)):
        if check_int(name, node, minimum=0) >= n:
            raise ValueError(f"{name}={node}; expected a node in 0..{n - 1}")
    if len({treatment, mediator, outcome}) != 3:
        raise ValueError(
            f"treatment={treatment}, mediator={mediator}, outcome={outcome}; expected three "
            "different nodes"
        )
    check_finite("t0", t0)
    check_finite("t1", t1)
    if background is not None:
        check_shape("background", background, (None, n))
        check_finite("background", background)
    if isinstance(scm, DiscreteSCM):
        worlds = scm.reference_worlds()
    else:
        if background is None:
            background = scm.expected_values()[None]
        worlds = scm.reference_worlds(jnp.asarray(background))
    t_mask = jnp.zeros(n, bool).at[treatment].set(True)
    tm_mask = t_mask.at[mediator].set(True)

    def outcomes(u):
        def do_t(t):
            return scm.solve(u, jnp.zeros(n, worlds.values.dtype).at[treatment].set(t), t_mask)

        y_t0, y_t1 = do_t(t0)[outcome], do_t(t1)[outcome]

        def nested(t, t_med):
            m = do_t(t_med)[mediator]
            vals = jnp.zeros(n, worlds.values.dtype).at[treatment].set(t).at[mediator].set(m)
            return scm.solve(u, vals, tm_mask)[outcome]

        return jnp.stack([y_t1 - y_t0, nested(t1, t0) - y_t0, nested(t0, t1) - y_t0])

    eff = worlds.weight @ jax.vmap(outcomes)(worlds.noise).astype(float)
    return {"total": eff[0], "natural_direct": eff[1], "natural_indirect": eff[2]}
