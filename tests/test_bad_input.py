"""Bad input is a ``ValueError`` that names the argument, never a silent answer (issue 37).

One table over the public functions of every paper (each package's ``__all__``), of ``core`` and
of ``jaxpapers_kernels``: each row calls one function eagerly on tiny inputs with one bad argument
(wrong shape, wrong dtype, NaN/inf where values must be finite, an out-of-range scalar, a wrong key
type) and asserts a ``ValueError`` whose message names that argument. The rule for where values
are checked is in ``jaxpapers.core.checks`` (and docs/getting-started.md): at the boundary of a
public call, on concrete values only.

``test_every_export_is_classified`` keeps the table honest: every exported function is either in
the table, or in ``LEFT_OUT`` with the reason it has no bad-input row (a class, a constant, a
function of a config or a string only), or in ``NOT_YET_COVERED`` (a function that takes arrays,
ranged scalars or a key but has no row yet; the list may only shrink).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

NAN = float("nan")
INF = float("inf")


@dataclass(frozen=True)
class Case:
    """One bad call: ``fn`` (``package.name``), the argument it names, the kind of fault."""

    fn: str
    arg: str
    kind: str  # shape | dtype | finite | range | key | type
    call: Callable[[], Any]

    @property
    def id(self) -> str:
        return f"{self.fn}:{self.arg}:{self.kind}"


def _fit_loss(p, batch, key):
    return jnp.sum((p - batch) ** 2)


def _fit(**kwargs):
    """``core.fit.fit`` on a two-parameter least squares, ``kwargs`` overriding the defaults."""
    import optax

    from jaxpapers.core.fit import fit

    args = {"steps": 4, "key": _k(), "batches": jnp.zeros((4, 2))}
    args.update(kwargs)
    return fit(_fit_loss, jnp.zeros(2), optax.sgd(0.1), **args)


def _k(seed: int = 0) -> jax.Array:
    return jax.random.key(seed)


# ----------------------------------------------------------------------------------------------
# Small shared inputs (built on first use; every one is tiny).


@functools.cache
def _mdp():
    from jaxpapers import ievi

    return ievi.gridworld(2, 0.9)


def _bad_gamma_mdp(gamma: float):
    import equinox as eqx  # tree_at skips TabularMDP's own checks: the function must check

    return eqx.tree_at(lambda m: m.gamma, _mdp(), jnp.asarray(gamma, _mdp().P.dtype))


@functools.cache
def _quant():
    from jaxpapers_kernels import quantize

    w = jnp.linspace(-1.0, 1.0, 64 * 8).reshape(64, 8)
    return quantize(w, bits=4, group_size=16)


@functools.cache
def _scm():
    from jaxpapers import cfshap

    return cfshap.LinearGaussianSCM(jnp.array([[0.0, 0.0], [2.0, 0.0]]))


class _Additive:
    num_features = 3

    def __call__(self, m):
        return m.astype(float) @ jnp.arange(3.0)


def _ievi_cases() -> list[Case]:
    from jaxpapers import ievi
    from jaxpapers.core.mdp import TabularMDP, check_mdp, check_transitions

    P = lambda: _mdp().P
    R = lambda: _mdp().R
    V = lambda: jnp.zeros(4)
    return [
        # issue 37: gamma=1.5 and gamma=nan were accepted; 2.5 gave a bare TypeError
        Case("ievi.gridworld", "gamma", "range", lambda: ievi.gridworld(4, gamma=1.5)),
        Case("ievi.gridworld", "gamma", "finite", lambda: ievi.gridworld(4, gamma=NAN)),
        Case("ievi.gridworld", "size", "type", lambda: ievi.gridworld(2.5, 0.9)),
        Case("ievi.gridworld", "slip", "range", lambda: ievi.gridworld(3, 0.9, slip=1.5)),
        Case("ievi.forest_management", "gamma", "range", lambda: ievi.forest_management(3, 1.0)),
        Case(
            "ievi.forest_management", "num_states", "type", lambda: ievi.forest_management(2.5, 0.9)
        ),
        Case(
            "ievi.forest_management",
            "fire",
            "finite",
            lambda: ievi.forest_management(3, 0.9, fire=NAN),
        ),
        Case("ievi.random_mdp", "key", "key", lambda: ievi.random_mdp(3, 2, 0.9, key=0)),
        Case("ievi.random_mdp", "gamma", "range", lambda: ievi.random_mdp(3, 2, -0.5, key=_k())),
        Case(
            "ievi.random_mdp", "num_states", "range", lambda: ievi.random_mdp(0, 2, 0.9, key=_k())
        ),
        Case(
            "ievi.random_mdp",
            "concentration",
            "range",
            lambda: ievi.random_mdp(3, 2, 0.9, key=_k(), concentration=0.0),
        ),
        Case("core.mdp.TabularMDP", "gamma", "range", lambda: TabularMDP(P(), R(), gamma=1.5)),
        Case(
            "core.mdp.TabularMDP",
            "R",
            "finite",
            lambda: TabularMDP(P(), R().at[0, 0].set(NAN), gamma=0.9),
        ),
        Case("core.mdp.TabularMDP", "P", "shape", lambda: TabularMDP(P()[0], R(), gamma=0.9)),
        Case("core.mdp.TabularMDP", "horizon", "range", lambda: TabularMDP(P(), R(), horizon=0)),
        Case(
            "core.mdp.TabularMDP",
            "initial",
            "range",
            lambda: TabularMDP(P(), R(), gamma=0.9, initial=jnp.ones(4)),
        ),
        Case("core.mdp.check_mdp", "mdp.gamma", "range", lambda: check_mdp(_bad_gamma_mdp(1.5))),
        Case("core.mdp.check_mdp", "mdp", "type", lambda: check_mdp((P(), R(), 0.9))),
        Case(
            "core.mdp.check_transitions",
            "P",
            "range",
            lambda: check_transitions(P().at[0, 0, 0].set(-1.0)),
        ),
        Case("core.mdp.check_transitions", "P", "shape", lambda: check_transitions(P()[0])),
        # issue 37: an int key gave JAX's PRNG TypeError
        Case("ievi.perturbed_model", "key", "key", lambda: ievi.perturbed_model(P(), 0.1, key=0)),
        Case(
            "ievi.perturbed_model",
            "l1_error",
            "range",
            lambda: ievi.perturbed_model(P(), 3.0, key=_k()),
        ),
        Case(
            "ievi.perturbed_model",
            "P",
            "shape",
            lambda: ievi.perturbed_model(P()[0], 0.1, key=_k()),
        ),
        Case(
            "ievi.sample_counts", "key", "key", lambda: ievi.sample_counts(P(), 2, key=np.uint32(3))
        ),
        Case("ievi.sample_counts", "n", "range", lambda: ievi.sample_counts(P(), 0, key=_k())),
        Case(
            "ievi.sample_counts",
            "P",
            "finite",
            lambda: ievi.sample_counts(P().at[0, 0, 0].set(NAN), 2, key=_k()),
        ),
        Case("ievi.estimated_model", "key", "key", lambda: ievi.estimated_model(P(), 2, key=1)),
        Case("ievi.estimated_model", "n", "type", lambda: ievi.estimated_model(P(), 2.5, key=_k())),
        Case("ievi.row_l1_error", "P_hat", "shape", lambda: ievi.row_l1_error(P(), P()[:1])),
        Case(
            "ievi.row_l1_error",
            "P_hat",
            "finite",
            lambda: ievi.row_l1_error(P(), P().at[0, 0, 0].set(NAN)),
        ),
        # issue 37: a_ie_vi on a gamma=1.5 MDP returned V = [nan ...] and converged False
        Case("ievi.a_ie_vi", "mdp.gamma", "range", lambda: ievi.a_ie_vi(_bad_gamma_mdp(1.5), P())),
        Case("ievi.a_ie_vi", "mdp.gamma", "finite", lambda: ievi.a_ie_vi(_bad_gamma_mdp(NAN), P())),
        Case("ievi.a_ie_vi", "model_P", "shape", lambda: ievi.a_ie_vi(_mdp(), P()[:1])),
        Case("ievi.a_ie_vi", "shrink", "range", lambda: ievi.a_ie_vi(_mdp(), P(), shrink=1.0)),
        Case(
            "ievi.a_ie_vi",
            "max_queries",
            "type",
            lambda: ievi.a_ie_vi(_mdp(), P(), max_queries=2.5),
        ),
        Case("ievi.ie_vi", "h", "range", lambda: ievi.ie_vi(_mdp(), P(), h=0.0)),
        Case("ievi.ie_vi", "h", "finite", lambda: ievi.ie_vi(_mdp(), P(), h=NAN)),
        Case(
            "ievi.ie_vi",
            "V0",
            "finite",
            lambda: ievi.ie_vi(_mdp(), P(), h=1.0, V0=V().at[0].set(INF)),
        ),
        Case("ievi.ie_vi", "rounds", "range", lambda: ievi.ie_vi(_mdp(), P(), h=1.0, rounds=0)),
        Case("ievi.value_iteration", "tol", "range", lambda: ievi.value_iteration(_mdp(), tol=0.0)),
        Case(
            "ievi.value_iteration",
            "V0",
            "shape",
            lambda: ievi.value_iteration(_mdp(), V0=jnp.zeros(3)),
        ),
        Case(
            "ievi.value_iteration",
            "mdp.gamma",
            "range",
            lambda: ievi.value_iteration(_bad_gamma_mdp(1.0)),
        ),
        Case(
            "ievi.value_iteration",
            "policy",
            "shape",
            lambda: ievi.value_iteration(_mdp(), policy=jnp.ones((4, 3)) / 3),
        ),
        Case(
            "ievi.implicit_step",
            "anchor",
            "finite",
            lambda: ievi.implicit_step(_mdp(), P(), V().at[1].set(NAN), V(), V(), 1.0),
        ),
        Case(
            "ievi.implicit_step",
            "TV",
            "shape",
            lambda: ievi.implicit_step(_mdp(), P(), V(), V(), jnp.zeros(3), 1.0),
        ),
        Case(
            "ievi.implicit_step",
            "h",
            "range",
            lambda: ievi.implicit_step(_mdp(), P(), V(), V(), V(), -1.0),
        ),
        Case("ievi.plan_in_model", "model_P", "shape", lambda: ievi.plan_in_model(_mdp(), P()[:1])),
        Case(
            "ievi.plan_in_model",
            "mdp.gamma",
            "range",
            lambda: ievi.plan_in_model(_bad_gamma_mdp(2.0), P()),
        ),
        Case("ievi.bellman", "V", "shape", lambda: ievi.bellman(_mdp(), jnp.zeros(3))),
        Case(
            "ievi.bellman", "policy", "shape", lambda: ievi.bellman(_mdp(), V(), jnp.ones((3, 4)))
        ),
        Case("ievi.q_values", "V", "shape", lambda: ievi.q_values(_mdp(), jnp.zeros((4, 1)))),
        Case(
            "ievi.evaluate_policy",
            "policy",
            "shape",
            lambda: ievi.evaluate_policy(_mdp(), jnp.ones((4, 3))),
        ),
        Case(
            "ievi.evaluate_policy",
            "mdp.gamma",
            "range",
            lambda: ievi.evaluate_policy(_bad_gamma_mdp(1.5), jnp.ones((4, 4)) / 4),
        ),
        Case(
            "ievi.policy_iteration",
            "max_iterations",
            "range",
            lambda: ievi.policy_iteration(_mdp(), max_iterations=0),
        ),
        Case(
            "ievi.policy_iteration",
            "mdp.gamma",
            "finite",
            lambda: ievi.policy_iteration(_bad_gamma_mdp(NAN)),
        ),
        Case(
            "ievi.optimal_values",
            "mdp.gamma",
            "range",
            lambda: ievi.optimal_values(_bad_gamma_mdp(1.5)),
        ),
        Case(
            "ievi.optimal_values", "mdp", "type", lambda: ievi.optimal_values((P(), _mdp().R, 0.9))
        ),
        Case("ievi.greedy_policy", "q", "shape", lambda: ievi.greedy_policy(jnp.zeros(4))),
        Case("ievi.dyna_q", "key", "key", lambda: ievi.dyna_q(_mdp(), V(), key=0, rounds=2)),
        Case(
            "ievi.dyna_q", "rounds", "range", lambda: ievi.dyna_q(_mdp(), V(), key=_k(), rounds=0)
        ),
        Case(
            "ievi.dyna_q",
            "v_star",
            "finite",
            lambda: ievi.dyna_q(_mdp(), V().at[0].set(NAN), key=_k(), rounds=2),
        ),
        Case(
            "ievi.ie_dyna",
            "key",
            "key",
            lambda: ievi.ie_dyna(_mdp(), P(), V(), key=7, rounds=2, h=1.0),
        ),
        Case(
            "ievi.ie_dyna",
            "h",
            "range",
            lambda: ievi.ie_dyna(_mdp(), P(), V(), key=_k(), rounds=2, h=0.0),
        ),
        Case(
            "ievi.ie_dyna",
            "samples_per_pair",
            "type",
            lambda: ievi.ie_dyna(_mdp(), P(), V(), key=_k(), rounds=2, h=1.0, samples_per_pair=1.5),
        ),
        Case(
            "ievi.samples_to_error",
            "target",
            "finite",
            lambda: ievi.samples_to_error(ievi.DynaResult(V(), jnp.ones(2), jnp.arange(2)), NAN),
        ),
        Case(
            "ievi.samples_to_error",
            "result",
            "type",
            lambda: ievi.samples_to_error((V(), jnp.ones(2), jnp.arange(2)), 0.1),
        ),
    ]


def _lrnn_cases() -> list[Case]:
    from jaxpapers import lrnn

    z = jnp.zeros
    c64 = lambda *s: jnp.ones(s, jnp.complex64)
    return [
        # issue 37: NaN passed straight through hlru_recurrence
        Case(
            "lrnn.hlru_recurrence",
            "values",
            "finite",
            lambda: lrnn.hlru_recurrence(z((4, 2, 3)), z((4, 2)).at[1, 1].set(NAN)),
        ),
        Case(
            "lrnn.hlru_recurrence",
            "gates",
            "finite",
            lambda: lrnn.hlru_recurrence(z((4, 2, 3)).at[0, 0, 0].set(INF), z((4, 2))),
        ),
        Case(
            "lrnn.hlru_recurrence",
            "values",
            "shape",
            lambda: lrnn.hlru_recurrence(z((4, 2, 3)), z((4, 3))),
        ),
        Case(
            "lrnn.hlru_recurrence",
            "h0",
            "finite",
            lambda: lrnn.hlru_recurrence(z((4, 2, 3)), z((4, 2)), z((2, 2)).at[0, 0].set(NAN)),
        ),
        Case(
            "lrnn.hlru_recurrence",
            "values",
            "dtype",
            lambda: lrnn.hlru_recurrence(z((4, 2, 3)), z((4, 2), jnp.int32)),
        ),
        Case(
            "lrnn.bdlru_recurrence",
            "gates",
            "shape",
            lambda: lrnn.bdlru_recurrence(z((4, 2, 2, 2)), z((4, 4))),
        ),
        Case(
            "lrnn.bdlru_recurrence",
            "values",
            "finite",
            lambda: lrnn.bdlru_recurrence(z((4, 2, 2, 3)), z((4, 4)).at[0, 0].set(NAN)),
        ),
        # issue 37: mismatched lru_recurrence inputs gave a broadcasting error (or, for real
        # inputs, silently dropped the rotation)
        Case(
            "lrnn.lru_recurrence",
            "inputs",
            "shape",
            lambda: lrnn.lru_recurrence(z(3), z(3), c64(5, 4)),
        ),
        Case(
            "lrnn.lru_recurrence",
            "theta_log",
            "shape",
            lambda: lrnn.lru_recurrence(z(4), z(3), c64(5, 4)),
        ),
        Case(
            "lrnn.lru_recurrence",
            "inputs",
            "dtype",
            lambda: lrnn.lru_recurrence(z(4), z(4), jnp.ones((5, 4))),
        ),
        Case(
            "lrnn.lru_recurrence",
            "nu_log",
            "dtype",
            lambda: lrnn.lru_recurrence(z(4, jnp.int32), z(4), c64(5, 4)),
        ),
        Case(
            "lrnn.lru_recurrence",
            "inputs",
            "finite",
            lambda: lrnn.lru_recurrence(z(4), z(4), c64(5, 4).at[0, 0].set(NAN)),
        ),
        Case(
            "lrnn.lru_lambda",
            "nu_log",
            "finite",
            lambda: lrnn.lru_lambda(z(4).at[0].set(NAN), z(4)),
        ),
        Case("lrnn.lru_lambda", "theta_log", "shape", lambda: lrnn.lru_lambda(z(4), z(2))),
        Case(
            "lrnn.l1_normalise",
            "gates",
            "finite",
            lambda: lrnn.l1_normalise(z((2, 3)).at[0, 0].set(NAN)),
        ),
        Case(
            "lrnn.l1_normalise", "gates", "dtype", lambda: lrnn.l1_normalise(z((2, 3), jnp.int32))
        ),
        Case("lrnn.diagonal_scan", "a", "shape", lambda: lrnn.diagonal_scan(z((4, 2)), z((4, 3)))),
        Case(
            "lrnn.diagonal_scan",
            "b",
            "finite",
            lambda: lrnn.diagonal_scan(z((4, 2)), z((4, 2)).at[0, 0].set(NAN)),
        ),
        Case(
            "lrnn.diagonal_scan",
            "h0",
            "shape",
            lambda: lrnn.diagonal_scan(z((4, 2)), z((4, 2)), z(3)),
        ),
        Case(
            "lrnn.diagonal_scan",
            "chunk",
            "range",
            lambda: lrnn.diagonal_scan(z((4, 2)), z((4, 2)), chunk=0),
        ),
        Case(
            "lrnn.diagonal_scan",
            "a",
            "dtype",
            lambda: lrnn.diagonal_scan(z((4, 2), jnp.int32), z((4, 2))),
        ),
        Case(
            "lrnn.block_scan", "a", "shape", lambda: lrnn.block_scan(z((4, 1, 2, 3)), z((4, 1, 2)))
        ),
        Case(
            "lrnn.block_scan",
            "a",
            "finite",
            lambda: lrnn.block_scan(z((4, 1, 2, 2)).at[0, 0, 0, 0].set(INF), z((4, 1, 2))),
        ),
        Case(
            "lrnn.companion_scan",
            "b",
            "shape",
            lambda: lrnn.companion_scan(z((4, 2, 2)), z((4, 3))),
        ),
        Case(
            "lrnn.companion_scan",
            "a",
            "finite",
            lambda: lrnn.companion_scan(z((4, 2, 2)).at[0, 0, 0].set(NAN), z((4, 2))),
        ),
        Case(
            "lrnn.companion_scan",
            "mode",
            "range",
            lambda: lrnn.companion_scan(z((4, 2, 2)), z((4, 2)), mode="fast"),
        ),
        Case("lrnn.companion_matrices", "a", "shape", lambda: lrnn.companion_matrices(z(()))),
        Case(
            "lrnn.companion_matrices",
            "a",
            "dtype",
            lambda: lrnn.companion_matrices(z(3, jnp.int32)),
        ),
        Case(
            "lrnn.masked_xent",
            "labels",
            "shape",
            lambda: lrnn.masked_xent(z((2, 3, 4)), z((2, 2), jnp.int32), jnp.ones((2, 3))),
        ),
        Case(
            "lrnn.masked_accuracy",
            "labels",
            "dtype",
            lambda: lrnn.masked_accuracy(z((2, 3, 4)), z((2, 3)), jnp.ones((2, 3))),
        ),
        Case(
            "lrnn.load_corpus",
            "valid_fraction",
            "range",
            lambda: lrnn.load_corpus(valid_fraction=1.5),
        ),
        Case(
            "lrnn.make_batch",
            "batch",
            "range",
            lambda: lrnn.make_batch("parity", 0, 8, seed=0),
        ),
        Case("lrnn.make_batch", "seed", "range", lambda: lrnn.make_batch("parity", 2, 8, seed=-1)),
    ]


def _core_cases() -> list[Case]:
    from jaxpapers.core import metrics

    x, y = jnp.ones((3, 2)), jnp.zeros((3, 2))
    return [
        # issue 37: NaN went through mmd_rbf and a zero bandwidth returned nan
        Case(
            "core.metrics.mmd_rbf", "x", "finite", lambda: metrics.mmd_rbf(x.at[0, 0].set(NAN), y)
        ),
        Case(
            "core.metrics.mmd_rbf", "y", "finite", lambda: metrics.mmd_rbf(x, y.at[0, 0].set(INF))
        ),
        Case(
            "core.metrics.mmd_rbf",
            "bandwidths",
            "range",
            lambda: metrics.mmd_rbf(x, y, bandwidths=(0.0,)),
        ),
        Case(
            "core.metrics.mmd_rbf",
            "bandwidths",
            "finite",
            lambda: metrics.mmd_rbf(x, y, bandwidths=(NAN,)),
        ),
        Case("core.metrics.mmd_rbf", "y", "shape", lambda: metrics.mmd_rbf(x, jnp.zeros((3, 4)))),
        Case(
            "core.metrics.sliced_wasserstein",
            "key",
            "key",
            lambda: metrics.sliced_wasserstein(x, y, key=0),
        ),
        Case(
            "core.metrics.sliced_wasserstein",
            "y",
            "shape",
            lambda: metrics.sliced_wasserstein(x, jnp.zeros((4, 2)), key=_k()),
        ),
        Case(
            "core.metrics.sliced_wasserstein",
            "x",
            "finite",
            lambda: metrics.sliced_wasserstein(x.at[0, 0].set(NAN), y, key=_k()),
        ),
        Case(
            "core.metrics.sliced_wasserstein",
            "n_projections",
            "range",
            lambda: metrics.sliced_wasserstein(x, y, key=_k(), n_projections=0),
        ),
        Case(
            "core.metrics.accuracy",
            "labels",
            "shape",
            lambda: metrics.accuracy(x, jnp.zeros(2, jnp.int32)),
        ),
        Case("core.metrics.psnr", "ref", "shape", lambda: metrics.psnr(x, jnp.zeros((3, 3)))),
        Case(
            "core.metrics.psnr", "data_range", "range", lambda: metrics.psnr(x, y, data_range=0.0)
        ),
    ]


def _kernel_cases() -> list[Case]:
    import jaxpapers_kernels as jk

    q = _quant
    w = jnp.linspace(-1.0, 1.0, 64 * 8).reshape(64, 8)
    return [
        # issue 37: NaN went into quantize's scales; width 60 against K = 64 blamed group_size
        Case(
            "kernels.quantize",
            "w",
            "finite",
            lambda: jk.quantize(w.at[3, 1].set(NAN), bits=4, group_size=16),
        ),
        Case("kernels.quantize", "w", "shape", lambda: jk.quantize(w[0], bits=4, group_size=16)),
        Case(
            "kernels.quantize",
            "w",
            "dtype",
            lambda: jk.quantize(w.astype(jnp.int32), bits=4, group_size=16),
        ),
        Case("kernels.quantize", "bits", "range", lambda: jk.quantize(w, bits=3, group_size=16)),
        Case(
            "kernels.quantize", "group_size", "range", lambda: jk.quantize(w, bits=4, group_size=24)
        ),
        Case(
            "kernels.perturbed_quant_matmul",
            "x",
            "shape",
            lambda: jk.perturbed_quant_matmul(jnp.ones((3, 60)), *q(), bits=4, group_size=16),
        ),
        Case(
            "kernels.perturbed_quant_matmul",
            "x",
            "dtype",
            lambda: jk.perturbed_quant_matmul(
                jnp.ones((3, 64), jnp.int32), *q(), bits=4, group_size=16
            ),
        ),
        Case(
            "kernels.perturbed_quant_matmul",
            "scales",
            "shape",
            lambda: jk.perturbed_quant_matmul(
                jnp.ones((3, 64)), q().codes, q().scales[:-1], q().zeros, bits=4, group_size=16
            ),
        ),
        Case(
            "kernels.perturbed_quant_matmul",
            "seeds",
            "shape",
            lambda: jk.perturbed_quant_matmul(
                jnp.ones((3, 64)), *q(), jnp.zeros(3, jnp.uint32), bits=4, group_size=16
            ),
        ),
        Case(
            "kernels.perturbed_quant_matmul",
            "eps",
            "shape",
            lambda: jk.perturbed_quant_matmul(
                jnp.ones((3, 64)), *q(), None, jnp.zeros(2), bits=4, group_size=16
            ),
        ),
        Case(
            "kernels.perturbed_quant_matmul_reference",
            "x",
            "shape",
            lambda: jk.perturbed_quant_matmul_reference(
                jnp.ones((3, 60)),
                *q(),
                jnp.zeros(2, jnp.uint32),
                0.0,
                bits=4,
                group_size=16,
                spec=jk.NO_PERTURBATION,
            ),
        ),
        Case(
            "kernels.counter_noise_reference",
            "seed",
            "dtype",
            lambda: jk.counter_noise_reference(jnp.float32(1.5), (4, 6)),
        ),
        Case(
            "kernels.counter_noise",
            "seed",
            "shape",
            lambda: jk.counter_noise(jnp.zeros(2, jnp.uint32), (4, 6)),
        ),
        Case(
            "kernels.counter_hash",
            "seed",
            "dtype",
            lambda: jk.counter_hash(jnp.float32(1.5), jnp.arange(3, dtype=jnp.uint32)),
        ),
        Case(
            "kernels.bag_from_bits",
            "k",
            "range",
            lambda: jk.bag_from_bits(jnp.zeros(3, jnp.uint32), 33),
        ),
        Case("kernels.bag_from_bits", "bits", "dtype", lambda: jk.bag_from_bits(jnp.zeros(3), 4)),
        Case(
            "kernels.gaussian_from_bits",
            "bits",
            "dtype",
            lambda: jk.gaussian_from_bits(jnp.zeros(3)),
        ),
        Case(
            "kernels.pack_codes",
            "codes",
            "range",
            lambda: jk.pack_codes(jnp.full((8, 2), 16, jnp.int32), 4),
        ),
        Case(
            "kernels.pack_codes",
            "bits",
            "range",
            lambda: jk.pack_codes(jnp.zeros((8, 2), jnp.int32), 3),
        ),
        Case(
            "kernels.pack_codes",
            "codes",
            "shape",
            lambda: jk.pack_codes(jnp.zeros((3, 2), jnp.int32), 4),
        ),
        Case(
            "kernels.unpack_codes",
            "bits",
            "range",
            lambda: jk.unpack_codes(jnp.zeros((4, 2), jnp.int8), 5),
        ),
        Case(
            "kernels.counter_noise",
            "k",
            "range",
            lambda: jk.counter_noise(jnp.uint32(1), (4, 6), k=0),
        ),
        Case(
            "kernels.counter_noise",
            "shape",
            "shape",
            lambda: jk.counter_noise(jnp.uint32(1), (4,), k=4),
        ),
    ]


def _crce_cases() -> list[Case]:
    from jaxpapers import crce

    w = jnp.arange(6.0).reshape(3, 2) / 6
    head = lambda a: jnp.mean(a, axis=(1, 2)) @ w
    a = jnp.ones((2, 2, 2, 3))
    tgt = jnp.array([0, 1])
    sal, ctx = jnp.ones((2, 2, 2)), jnp.zeros((2, 2, 2))
    mask = jnp.ones((2, 4, 4), bool)
    model = lambda x: jnp.mean(x, axis=(1, 2)) @ jnp.ones((3, 2))
    return [
        Case("crce.grad_cam", "target", "range", lambda: crce.grad_cam(head, a, jnp.array([0, 2]))),
        Case(
            "crce.grad_cam",
            "features",
            "finite",
            lambda: crce.grad_cam(head, a.at[0, 0, 0, 0].set(NAN), tgt),
        ),
        Case(
            "crce.contrastive_cam",
            "target",
            "shape",
            lambda: crce.contrastive_cam(head, a, jnp.array([0])),
        ),
        Case(
            "crce.contrastive_cam",
            "features",
            "shape",
            lambda: crce.contrastive_cam(head, a[0], tgt),
        ),
        Case(
            "crce.class_activation_map",
            "weights",
            "shape",
            lambda: crce.class_activation_map(a, jnp.ones((2, 2)), tgt),
        ),
        Case(
            "crce.class_activation_map",
            "target",
            "dtype",
            lambda: crce.class_activation_map(a, w, jnp.array([0.0, 1.0])),
        ),
        Case(
            "crce.contrastive_score",
            "target",
            "range",
            lambda: crce.contrastive_score(jnp.ones((2, 2)), jnp.array([0, 5])),
        ),
        Case(
            "crce.contrastive_score",
            "logits",
            "finite",
            lambda: crce.contrastive_score(jnp.ones((2, 2)).at[0, 0].set(NAN), tgt),
        ),
        Case(
            "crce.cr_ce_loss",
            "labels",
            "range",
            lambda: crce.cr_ce_loss(head, a, jnp.array([0, 3]), ctx, config=crce.CRCE()),
        ),
        Case(
            "crce.cr_ce_loss",
            "context",
            "shape",
            lambda: crce.cr_ce_loss(head, a, tgt, ctx[0], config=crce.CRCE()),
        ),
        Case(
            "crce.cr_ce_loss",
            "features",
            "finite",
            lambda: crce.cr_ce_loss(head, a.at[0, 0, 0, 0].set(INF), tgt, ctx, config=crce.CRCE()),
        ),
        Case(
            "crce.cr_ce_loss",
            "config",
            "type",
            lambda: crce.cr_ce_loss(head, a, tgt, ctx, config={"beta": 1.0}),
        ),
        Case("crce.context_share", "context", "shape", lambda: crce.context_share(sal, ctx[:1])),
        Case("crce.context_share", "context", "range", lambda: crce.context_share(sal, ctx + 2.0)),
        Case(
            "crce.context_evidence",
            "saliency",
            "finite",
            lambda: crce.context_evidence(sal.at[0, 0, 0].set(NAN), ctx),
        ),
        Case("crce.estimated_context", "saliency", "shape", lambda: crce.estimated_context(sal[0])),
        Case("crce.cell_fractions", "grid", "range", lambda: crce.cell_fractions(mask, (0, 2))),
        Case("crce.cell_fractions", "mask", "shape", lambda: crce.cell_fractions(mask[0], (2, 2))),
        Case(
            "crce.pointing_game", "object_mask", "shape", lambda: crce.pointing_game(sal, mask[:1])
        ),
        Case(
            "crce.pointing_game",
            "saliency",
            "finite",
            lambda: crce.pointing_game(sal.at[0, 0, 0].set(NAN), mask),
        ),
        Case(
            "crce.mask_agreement", "object_mask", "shape", lambda: crce.mask_agreement(sal, mask[0])
        ),
        Case(
            "crce.deletion_insertion",
            "steps",
            "range",
            lambda: crce.deletion_insertion(model, jnp.ones((2, 4, 4, 3)), sal, tgt, steps=0),
        ),
        Case(
            "crce.deletion_insertion",
            "images",
            "finite",
            lambda: crce.deletion_insertion(
                model, jnp.ones((2, 4, 4, 3)).at[0, 0, 0, 0].set(NAN), sal, tgt
            ),
        ),
        Case(
            "crce.deletion_insertion",
            "target",
            "shape",
            lambda: crce.deletion_insertion(model, jnp.ones((2, 4, 4, 3)), sal, tgt[:1]),
        ),
    ]


def _kffm_cases() -> list[Case]:
    from jaxpapers import kffm

    x, y = jnp.ones((3, 5)), jnp.zeros((3, 5))
    kern = kffm.RBFKernel(bandwidth=1.0)
    vf = lambda t, z: -z
    apply = lambda p, z, t: z * p
    return [
        Case(
            "kffm.hilbert_geometry",
            "y",
            "shape",
            lambda: kffm.hilbert_geometry(x, jnp.zeros((3, 4)), kern),
        ),
        Case(
            "kffm.hilbert_geometry",
            "x",
            "finite",
            lambda: kffm.hilbert_geometry(x.at[0, 0].set(NAN), y, kern),
        ),
        Case(
            "kffm.hilbert_geometry",
            "epsilon",
            "range",
            lambda: kffm.hilbert_geometry(x, y, kern, epsilon=0.0),
        ),
        Case(
            "kffm.hilbert_sinkhorn_divergence",
            "y",
            "finite",
            lambda: kffm.hilbert_sinkhorn_divergence(x, y.at[0, 0].set(INF), kern),
        ),
        Case(
            "kffm.hilbert_sinkhorn_divergence",
            "epsilon",
            "finite",
            lambda: kffm.hilbert_sinkhorn_divergence(x, y, kern, epsilon=NAN),
        ),
        Case("kffm.density_mse", "bins", "range", lambda: kffm.density_mse(x, y, bins=1)),
        Case(
            "kffm.density_mse", "reference", "shape", lambda: kffm.density_mse(x, jnp.zeros((3, 4)))
        ),
        Case(
            "kffm.spectrum_mse",
            "samples",
            "finite",
            lambda: kffm.spectrum_mse(x.at[0, 0].set(NAN), y),
        ),
        Case(
            "kffm.mean_power_spectrum",
            "samples",
            "shape",
            lambda: kffm.mean_power_spectrum(jnp.ones(5)),
        ),
        Case(
            "kffm.mean_power_spectrum",
            "samples",
            "finite",
            lambda: kffm.mean_power_spectrum(x.at[0, 0].set(NAN)),
        ),
        Case(
            "kffm.path_signature",
            "depth",
            "range",
            lambda: kffm.path_signature(jnp.ones((4, 2)), 0),
        ),
        Case("kffm.path_signature", "path", "shape", lambda: kffm.path_signature(jnp.ones(4), 2)),
        Case("kffm.draw_indices", "key", "key", lambda: kffm.draw_indices(jnp.ones((3, 3)), key=0)),
        Case(
            "kffm.draw_indices",
            "coupling",
            "shape",
            lambda: kffm.draw_indices(jnp.ones(3), key=_k()),
        ),
        Case(
            "kffm.draw_indices",
            "coupling",
            "range",
            lambda: kffm.draw_indices(-jnp.ones((3, 3)), key=_k()),
        ),
        Case("kffm.ffm_interpolant", "t", "shape", lambda: kffm.ffm_interpolant(x, y, jnp.ones(2))),
        Case(
            "kffm.ffm_interpolant",
            "x0",
            "finite",
            lambda: kffm.ffm_interpolant(x.at[0, 0].set(NAN), y, jnp.ones(3)),
        ),
        Case(
            "kffm.ffm_interpolant",
            "sigma_min",
            "range",
            lambda: kffm.ffm_interpolant(x, y, jnp.ones(3), -0.1),
        ),
        Case("kffm.ffm_target", "x1", "shape", lambda: kffm.ffm_target(x, jnp.zeros((2, 5)))),
        Case(
            "kffm.regression_loss",
            "t",
            "shape",
            lambda: kffm.regression_loss(apply, 1.0, x, y, jnp.ones(2)),
        ),
        Case(
            "kffm.flow_matching_loss",
            "key",
            "key",
            lambda: kffm.flow_matching_loss(apply, 1.0, x, key=0, prior=None, pairing=None),
        ),
        Case(
            "kffm.generate",
            "x0",
            "finite",
            lambda: kffm.generate(vf, x.at[0, 0].set(NAN), solver="euler", steps=2),
        ),
        Case(
            "kffm.generate", "steps", "range", lambda: kffm.generate(vf, x, solver="euler", steps=0)
        ),
        Case("kffm.generate", "rtol", "range", lambda: kffm.generate(vf, x, rtol=0.0)),
        Case(
            "kffm.make_pairing_fn",
            "scope",
            "range",
            lambda: kffm.make_pairing_fn(kffm.IndependentPairing(), scope="world"),
        ),
    ]


def _lamp_cases() -> list[Case]:
    from jaxpapers import lamp
    from jaxpapers.core.diffusion import VPSchedule

    op = lamp.MatrixOperator(jnp.eye(2, 3))
    mean, mat, y = jnp.zeros(3), jnp.eye(2, 3), jnp.ones(2)
    sch = VPSchedule()
    risk = lambda **kw: lamp.one_step_risk(
        **{
            "mean": mean,
            "var": 1.0,
            "matrix": mat,
            "y": y,
            "sigma_y": 0.1,
            "schedule": sch,
            "t_prev": 0.6,
            "t": 0.5,
            "t_next": 0.4,
            **kw,
        }
    )
    return [
        Case("lamp.measure", "key", "key", lambda: lamp.measure(op, jnp.ones(3), 0.1, key=0)),
        Case("lamp.measure", "x", "shape", lambda: lamp.measure(op, jnp.ones(2), 0.1, key=_k())),
        Case(
            "lamp.measure",
            "x",
            "finite",
            lambda: lamp.measure(op, jnp.ones(3).at[0].set(NAN), 0.1, key=_k()),
        ),
        Case(
            "lamp.measure",
            "sigma_y",
            "range",
            lambda: lamp.measure(op, jnp.ones(3), -0.1, key=_k()),
        ),
        Case("lamp.one_step_risk", "y", "shape", lambda: risk(y=jnp.ones(3))),
        Case("lamp.one_step_risk", "var", "range", lambda: risk(var=0.0)),
        Case("lamp.one_step_risk", "t", "range", lambda: risk(t=0.3)),
        Case("lamp.one_step_risk", "mean", "finite", lambda: risk(mean=mean.at[0].set(NAN))),
        Case(
            "lamp.monte_carlo_one_step_risk",
            "key",
            "key",
            lambda: lamp.monte_carlo_one_step_risk(
                mean, 1.0, mat, y, 0.1, sch, 0.6, 0.5, 0.4, 1.0, key=0
            ),
        ),
        Case(
            "lamp.monte_carlo_one_step_risk",
            "n",
            "range",
            lambda: lamp.monte_carlo_one_step_risk(
                mean, 1.0, mat, y, 0.1, sch, 0.6, 0.5, 0.4, 1.0, key=_k(), n=0
            ),
        ),
        Case(
            "lamp.monte_carlo_one_step_risk",
            "sigma_y",
            "range",
            lambda: lamp.monte_carlo_one_step_risk(
                mean, 1.0, mat, y, 0.0, sch, 0.6, 0.5, 0.4, 1.0, key=_k()
            ),
        ),
        Case("lamp.lamp", "strength", "finite", lambda: lamp.lamp(lamp.DDRM(op, 0.1), NAN)),
        Case(
            "lamp.sample_posterior",
            "key",
            "key",
            lambda: lamp.sample_posterior(
                _lamp_term(), lamp.lamp(lamp.DDRM(op, 0.1)), jnp.ones(2), key=0, num_steps=2
            ),
        ),
        Case(
            "lamp.sample_posterior",
            "num_steps",
            "range",
            lambda: lamp.sample_posterior(
                _lamp_term(), lamp.lamp(lamp.DDRM(op, 0.1)), jnp.ones(2), key=_k(), num_steps=0
            ),
        ),
        Case(
            "lamp.sample_posterior",
            "y",
            "finite",
            lambda: lamp.sample_posterior(
                _lamp_term(),
                lamp.lamp(lamp.DDRM(op, 0.1)),
                jnp.ones(2).at[0].set(NAN),
                key=_k(),
                num_steps=2,
            ),
        ),
    ]


def _tiny_linear():
    from flax import nnx

    return nnx.Linear(16, 2, rngs=nnx.Rngs(0))


def _lamp_term():
    from jaxpapers.core.diffusion import DenoiserTerm, VPSchedule, grid_mixture

    sch = VPSchedule()
    prior = grid_mixture(3)
    return DenoiserTerm(lambda x, t: prior.eps(x, t, sch), sch)


def _lqzo_cases() -> list[Case]:
    from jaxpapers import lqzo

    cfg = lqzo.make_config(rank=1)
    params = {"w": jnp.ones((4, 4))}
    seeds = jnp.array([1, 2], jnp.uint32)
    w = jnp.linspace(-1.0, 1.0, 32).reshape(16, 2)
    return [
        Case(
            "lqzo.quantize",
            "w",
            "finite",
            lambda: lqzo.quantize(w.at[0, 0].set(NAN), bits=4, group_size=8),
        ),
        Case(
            "lqzo.quantize", "group_size", "range", lambda: lqzo.quantize(w, bits=4, group_size=5)
        ),
        Case("lqzo.quantize", "bits", "range", lambda: lqzo.quantize(w, bits=5, group_size=8)),
        Case(
            "lqzo.dequantize",
            "scales",
            "shape",
            lambda: lqzo.dequantize(lqzo.quantize(w, bits=4, group_size=8), jnp.ones((3, 2))),
        ),
        Case("lqzo.make_config", "eps", "range", lambda: lqzo.make_config(eps=0.0)),
        Case("lqzo.make_config", "rank", "range", lambda: lqzo.make_config(rank=-1)),
        Case("lqzo.make_config", "nu", "range", lambda: lqzo.make_config(nu=0)),
        Case("lqzo.zo_gradient", "key", "key", lambda: lqzo.zo_gradient(config=cfg, key=0)),
        Case("lqzo.mezo", "key", "key", lambda: lqzo.mezo(1e-3, key=1)),
        Case("lqzo.qzo", "key", "key", lambda: lqzo.qzo(1e-3, key=1)),
        Case("lqzo.lqzo", "key", "key", lambda: lqzo.lqzo(1e-3, key=1)),
        Case("lqzo.lqzo", "eps", "range", lambda: lqzo.lqzo(1e-3, key=_k(), eps=-1.0)),
        Case(
            "lqzo.zo_estimate",
            "seeds",
            "shape",
            lambda: lqzo.zo_estimate(
                lambda p: jnp.sum(p["w"]), params, jnp.ones(3, jnp.uint32), config=cfg
            ),
        ),
        Case(
            "lqzo.perturbation_tree",
            "seeds",
            "dtype",
            lambda: lqzo.perturbation_tree(params, jnp.ones(2), config=cfg),
        ),
        Case(
            "lqzo.shared_directions",
            "seeds",
            "shape",
            lambda: lqzo.shared_directions(params, seeds[:1], config=cfg),
        ),
        Case(
            "lqzo.direction_tree",
            "seeds",
            "shape",
            lambda: lqzo.direction_tree(params, seeds[:1], config=cfg),
        ),
        Case(
            "lqzo.low_rank_direction",
            "seeds",
            "dtype",
            lambda: lqzo.low_rank_direction(jnp.ones(2), (4, 4), config=cfg),
        ),
        Case("lqzo.near_square_shape", "size", "range", lambda: lqzo.near_square_shape(0)),
        Case(
            "lqzo.matrix_view_shape",
            "shape",
            "range",
            lambda: lqzo.matrix_view_shape((4, 0), False),
        ),
        Case(
            "lqzo.estimate_to_gradient",
            "seeds",
            "shape",
            lambda: lqzo.estimate_to_gradient(
                lqzo.ZOEstimate(
                    jnp.float32(1.0), jnp.float32(1.0), jnp.float32(0.0), seeds[:1], None
                ),
                params,
                config=cfg,
            ),
        ),
        Case(
            "lqzo.quantize_linears",
            "group_size",
            "range",
            lambda: lqzo.quantize_linears(_tiny_linear(), bits=4, group_size=3),
        ),
        Case(
            "lqzo.zo_finetune",
            "steps",
            "range",
            lambda: lqzo.zo_finetune(
                lambda p, a, b: 0.0,
                params,
                None,
                lambda k: None,
                {"x": jnp.ones((4, 2))},
                steps=0,
                batch_size=1,
                seeds=[0],
            ),
        ),
    ]


def _steam_cases() -> list[Case]:
    from jaxpapers import steam
    from jaxpapers.core.data import scenes as scenes_module

    cfg = steam.VISConfig()
    ss = steam.identity_scale_shift(4)
    ex = steam.Experts(jnp.zeros((2, 4, 1)), jnp.zeros((2, 1, 4)))
    keys = jnp.eye(2, 4)
    feats = jnp.zeros((2, cfg.grid, cfg.grid, cfg.dim))
    act = jnp.ones(cfg.experts)
    ad = lambda: steam.init_adapters(config=cfg, key=_k())
    pr = lambda: steam.identity_projectors(config=cfg)
    scenes = scenes_module.SceneConfig(size=8, num_objects=1, min_radius=1.0, max_radius=2.0)
    inst = jnp.zeros((4, 4), jnp.int32)
    assign = jnp.asarray(steam.assignments(2, 1))
    out = steam.VISOutput(
        jnp.zeros((2, 2, cfg.classes + 1)),
        jnp.zeros((2, 2, 4, 4)),
        jnp.ones((2, 2, 3)),
        jnp.ones(2),
        jnp.ones((2, 2)),
    )
    return [
        Case("steam.identity_scale_shift", "dim", "range", lambda: steam.identity_scale_shift(0)),
        Case(
            "steam.feature_moments",
            "x",
            "finite",
            lambda: steam.feature_moments(jnp.ones((3, 4)).at[0, 0].set(NAN)),
        ),
        Case("steam.feature_moments", "x", "shape", lambda: steam.feature_moments(jnp.ones(4))),
        Case(
            "steam.dash_init",
            "reference_std",
            "shape",
            lambda: steam.dash_init(jnp.ones((3, 4)), jnp.zeros(4), jnp.ones(3)),
        ),
        Case(
            "steam.dash_init",
            "eps",
            "range",
            lambda: steam.dash_init(jnp.ones((3, 4)), jnp.zeros(4), jnp.ones(4), eps=0.0),
        ),
        Case(
            "steam.dash_init",
            "reference_mean",
            "finite",
            lambda: steam.dash_init(jnp.ones((3, 4)), jnp.zeros(4).at[0].set(NAN), jnp.ones(4)),
        ),
        Case("steam.scale_shift", "x", "shape", lambda: steam.scale_shift(jnp.ones((2, 3)), ss)),
        Case(
            "steam.fold_scale_shift",
            "kernel",
            "shape",
            lambda: steam.fold_scale_shift(jnp.ones((2, 3)), jnp.ones(4), ss),
        ),
        Case(
            "steam.input_subspace",
            "energy",
            "range",
            lambda: steam.input_subspace(jnp.ones((3, 4)), energy=1.5),
        ),
        Case(
            "steam.input_subspace",
            "inputs",
            "finite",
            lambda: steam.input_subspace(jnp.ones((3, 4)).at[0, 0].set(NAN)),
        ),
        Case(
            "steam.input_subspace",
            "max_rank",
            "range",
            lambda: steam.input_subspace(jnp.ones((3, 4)), max_rank=-1),
        ),
        Case(
            "steam.orthogonal_projector",
            "basis",
            "shape",
            lambda: steam.orthogonal_projector(jnp.ones(4)),
        ),
        Case(
            "steam.orthogonal_projector",
            "basis",
            "finite",
            lambda: steam.orthogonal_projector(jnp.ones((4, 2)).at[0, 0].set(NAN)),
        ),
        Case(
            "steam.project_out",
            "x",
            "shape",
            lambda: steam.project_out(jnp.ones((2, 3)), jnp.ones((4, 2))),
        ),
        Case("steam.init_experts", "key", "key", lambda: steam.init_experts(2, 4, 1, key=0)),
        Case("steam.init_experts", "rank", "range", lambda: steam.init_experts(2, 4, 0, key=_k())),
        Case(
            "steam.route",
            "temperature",
            "range",
            lambda: steam.route(jnp.ones(4), keys, temperature=0.0),
        ),
        Case(
            "steam.route",
            "summary",
            "shape",
            lambda: steam.route(jnp.ones(3), keys, temperature=0.1),
        ),
        Case(
            "steam.route",
            "active",
            "shape",
            lambda: steam.route(jnp.ones(4), keys, temperature=0.1, active=jnp.ones(3)),
        ),
        Case(
            "steam.route",
            "summary",
            "finite",
            lambda: steam.route(jnp.ones(4).at[0].set(NAN), keys, temperature=0.1),
        ),
        Case(
            "steam.mixture_adapter",
            "weights",
            "shape",
            lambda: steam.mixture_adapter(jnp.ones((3, 4)), jnp.ones(3), ex),
        ),
        Case(
            "steam.mixture_adapter",
            "x",
            "shape",
            lambda: steam.mixture_adapter(jnp.ones((3, 5)), jnp.ones(2), ex),
        ),
        Case(
            "steam.identity_switches",
            "tracks",
            "shape",
            lambda: steam.identity_switches(
                jnp.zeros((2, 4, 4), jnp.int32), jnp.zeros((2, 4, 3), jnp.int32), 1, 2
            ),
        ),
        Case(
            "steam.identity_switches",
            "slots",
            "range",
            lambda: steam.identity_switches(
                jnp.zeros((2, 4, 4), jnp.int32), jnp.zeros((2, 4, 4), jnp.int32), 0, 2
            ),
        ),
        Case("steam.forgetting", "acc", "shape", lambda: steam.forgetting(np.ones((2, 3)))),
        Case(
            "steam.forgetting",
            "acc",
            "finite",
            lambda: steam.forgetting(np.array([[1.0, NAN], [NAN, 1.0]])),
        ),
        Case(
            "steam.check_video",
            "video",
            "shape",
            lambda: steam.check_video("video", jnp.zeros((2, 3, 3, 3)), config=cfg),
        ),
        Case(
            "steam.make_videos",
            "key",
            "key",
            lambda: steam.make_videos(1, 2, config=scenes, key=0, pool=jnp.array([0])),
        ),
        Case(
            "steam.make_videos",
            "pool",
            "range",
            lambda: steam.make_videos(1, 2, config=scenes, key=_k(), pool=jnp.array([99])),
        ),
        Case("steam.init_vis", "key", "key", lambda: steam.init_vis(config=cfg, key=0)),
        Case("steam.init_adapters", "key", "key", lambda: steam.init_adapters(config=cfg, key=1)),
        Case(
            "steam.init_adapters",
            "config",
            "type",
            lambda: steam.init_adapters(config={"dim": 4}, key=_k()),
        ),
        Case(
            "steam.identity_projectors",
            "config",
            "type",
            lambda: steam.identity_projectors(config=None),
        ),
        Case(
            "steam.encode",
            "frames",
            "shape",
            lambda: steam.encode(None, {}, jnp.zeros((cfg.size, cfg.size, 3))),
        ),
        Case(
            "steam.encode",
            "frames",
            "finite",
            lambda: steam.encode(
                None, {}, jnp.zeros((1, cfg.size, cfg.size, 3)).at[0, 0, 0, 0].set(NAN)
            ),
        ),
        Case(
            "steam.routing_weights",
            "feats",
            "shape",
            lambda: steam.routing_weights(ad(), feats[..., :1], config=cfg, active=act),
        ),
        Case(
            "steam.routing_weights",
            "active",
            "shape",
            lambda: steam.routing_weights(ad(), feats, config=cfg, active=act[:1]),
        ),
        Case(
            "steam.routing_weights",
            "hard",
            "range",
            lambda: steam.routing_weights(ad(), feats, config=cfg, active=act, hard=2.0),
        ),
        Case(
            "steam.routing_weights",
            "task_id",
            "range",
            lambda: steam.routing_weights(ad(), feats, config=cfg, active=act, task_id=cfg.experts),
        ),
        Case(
            "steam.routing_weights",
            "task_id",
            "type",
            lambda: steam.routing_weights(ad(), feats, config=cfg, active=act, task_id=0.5),
        ),
        Case(
            "steam.decode",
            "feats",
            "finite",
            lambda: steam.decode(
                {}, ad(), pr(), feats.at[0, 0, 0, 0].set(NAN), config=cfg, active=act
            ),
        ),
        Case(
            "steam.adapter_inputs",
            "feats",
            "shape",
            lambda: steam.adapter_inputs({}, ad(), pr(), feats[0], config=cfg, active=act),
        ),
        Case(
            "steam.masked_logits",
            "allowed",
            "shape",
            lambda: steam.masked_logits(jnp.zeros((2, 5)), jnp.ones(2)),
        ),
        Case("steam.assignments", "slots", "range", lambda: steam.assignments(2, 3)),
        Case("steam.assignments", "queries", "type", lambda: steam.assignments(2.5, 1)),
        Case(
            "steam.frame_targets",
            "classes",
            "shape",
            lambda: steam.frame_targets(inst, inst[:2], 2),
        ),
        Case("steam.frame_targets", "slots", "range", lambda: steam.frame_targets(inst, inst, 0)),
        Case(
            "steam.matching_loss",
            "mask_logits",
            "shape",
            lambda: steam.matching_loss(
                jnp.zeros((2, 3)), jnp.zeros((3, 4, 4)), inst, inst, jnp.ones(2), assign
            ),
        ),
        Case(
            "steam.matching_loss",
            "instances",
            "shape",
            lambda: steam.matching_loss(
                jnp.zeros((2, 3)), jnp.zeros((2, 4, 4)), inst[:2], inst[:2], jnp.ones(2), assign
            ),
        ),
        Case(
            "steam.matching_loss",
            "no_object_weight",
            "range",
            lambda: steam.matching_loss(
                jnp.zeros((2, 3)),
                jnp.zeros((2, 4, 4)),
                inst,
                inst,
                jnp.ones(2),
                assign,
                no_object_weight=-1.0,
            ),
        ),
        Case("steam.associate", "queries", "shape", lambda: steam.associate(jnp.ones((2, 3)))),
        Case(
            "steam.associate",
            "queries",
            "finite",
            lambda: steam.associate(jnp.ones((2, 2, 3)).at[0, 0, 0].set(NAN)),
        ),
        Case(
            "steam.segment",
            "threshold",
            "range",
            lambda: steam.segment(out, jnp.ones(cfg.classes), threshold=1.5),
        ),
        Case(
            "steam.segment",
            "allowed",
            "shape",
            lambda: steam.segment(out, jnp.ones(cfg.classes + 1)),
        ),
        Case(
            "steam.dynamic_scale_shift",
            "summary",
            "shape",
            lambda: steam.dynamic_scale_shift(
                jnp.ones((2, 3, 4)),
                jnp.ones((3, 4)),
                jnp.zeros(4),
                ss,
                steam.DashSlope(jnp.zeros((4, 4)), jnp.zeros((4, 4))),
            ),
        ),
        Case(
            "steam.match",
            "mask_logits",
            "shape",
            lambda: steam.match(
                jnp.zeros((2, 3)), jnp.zeros((3, 4, 4)), inst, inst, jnp.ones(2), assign
            ),
        ),
        Case(
            "steam.temporal_loss",
            "matched",
            "shape",
            lambda: steam.temporal_loss(
                jnp.ones((3, 2, 4)), jnp.zeros((2, 1), jnp.int32), jnp.ones((2, 1))
            ),
        ),
        Case(
            "steam.temporal_loss",
            "temperature",
            "range",
            lambda: steam.temporal_loss(
                jnp.ones((3, 2, 4)),
                jnp.zeros((3, 1), jnp.int32),
                jnp.ones((3, 1)),
                temperature=0.0,
            ),
        ),
    ]


def _ropmb_cases() -> list[Case]:
    from jaxpapers import ropmb
    from jaxpapers.ropmb import _bank, _seeds

    feats = jnp.ones((2, 2, 2, 3))
    w = jnp.ones((3, 2))
    lab = jnp.array([[1.0, 0.0], [0.0, 1.0]])
    cfg = ropmb.RefineConfig()
    bank = ropmb.BankState(jnp.ones((3, 2, 3)), jnp.ones((3, 2), bool), jnp.int32(0))
    return [
        Case(
            "ropmb.class_activation_maps",
            "weights",
            "shape",
            lambda: ropmb.class_activation_maps(feats, jnp.ones((2, 2)), lab),
        ),
        Case(
            "ropmb.colour_affinity",
            "images",
            "shape",
            lambda: ropmb.colour_affinity(jnp.ones((2, 4, 6, 3)), 2),
        ),
        Case(
            "ropmb.colour_affinity",
            "size",
            "range",
            lambda: ropmb.colour_affinity(jnp.ones((2, 4, 4, 3)), 3),
        ),
        Case(
            "ropmb.label_evidence",
            "probs",
            "shape",
            lambda: ropmb.label_evidence(jnp.ones((2, 4, 4)), 2),
        ),
        Case(
            "ropmb.label_evidence",
            "top",
            "range",
            lambda: ropmb.label_evidence(jnp.ones((2, 2, 2, 3)), 5),
        ),
        Case(
            "ropmb.class_activation_maps",
            "labels",
            "range",
            lambda: ropmb.class_activation_maps(feats, w, lab * 2),
        ),
        Case(
            "ropmb.class_activation_maps",
            "features",
            "finite",
            lambda: ropmb.class_activation_maps(feats.at[0, 0, 0, 0].set(NAN), w, lab),
        ),
        Case(
            "ropmb.seed_masks",
            "cams",
            "shape",
            lambda: ropmb.seed_masks(jnp.ones((2, 2, 2)), lab, config=cfg),
        ),
        Case(
            "ropmb.seed_masks",
            "cams",
            "finite",
            lambda: ropmb.seed_masks(
                jnp.ones((2, 2, 2, 2)).at[0, 0, 0, 0].set(NAN), lab, config=cfg
            ),
        ),
        Case(
            "ropmb.masked_average_pool",
            "weights",
            "shape",
            lambda: ropmb.masked_average_pool(feats, jnp.ones((2, 2, 3, 3))),
        ),
        Case(
            "ropmb._seeds.normalise",
            "axis",
            "range",
            lambda: _seeds.normalise(jnp.ones((2, 3)), axis=2),
        ),
        Case(
            "ropmb.labels_from_sets",
            "num_classes",
            "range",
            lambda: ropmb.labels_from_sets([[0]], 0),
        ),
        Case(
            "ropmb._bank.cluster_means",
            "seeds",
            "shape",
            lambda: _bank.cluster_means(
                bank.prototypes, bank.filled, jnp.ones((4, 3)), jnp.ones((4, 2))
            ),
        ),
        Case(
            "ropmb.refine_prototypes",
            "local",
            "shape",
            lambda: ropmb.refine_prototypes(
                jnp.ones((2, 2, 3)), jnp.ones((2, 2)), bank, config=cfg
            ),
        ),
        Case(
            "ropmb.refine_prototypes",
            "local",
            "finite",
            lambda: ropmb.refine_prototypes(
                jnp.ones((2, 3, 3)).at[0, 0, 0].set(NAN), jnp.ones((2, 3)), bank, config=cfg
            ),
        ),
        Case(
            "ropmb.prototype_scores",
            "prototypes",
            "shape",
            lambda: ropmb.prototype_scores(feats, jnp.ones((2, 3, 4))),
        ),
        Case(
            "ropmb.pseudo_masks",
            "size",
            "range",
            lambda: ropmb.pseudo_masks(jnp.ones((2, 2, 2, 3)), lab, 0),
        ),
        Case(
            "ropmb.pseudo_masks",
            "labels",
            "shape",
            lambda: ropmb.pseudo_masks(jnp.ones((2, 2, 2, 3)), lab[:1], 4),
        ),
        Case(
            "ropmb.refined_scores",
            "method",
            "range",
            lambda: ropmb.refined_scores("best", feats, w, lab, config=cfg),
        ),
        Case(
            "ropmb.refined_scores",
            "labels",
            "shape",
            lambda: ropmb.refined_scores("cam", feats, w, lab[:, :1], config=cfg),
        ),
        Case(
            "ropmb.prdc_loss",
            "weights",
            "shape",
            lambda: ropmb.prdc_loss(None, bank, feats, jnp.ones((4, 2)), lab, config=cfg),
        ),
    ]


def _verdicts():
    from jaxpapers.core import verdicts

    return verdicts


@functools.cache
def _layout(cfg):
    from jaxpapers.core.data import scenes

    return scenes.sample_layout(config=cfg, key=_k())


def _core_more_cases() -> list[Case]:
    from jaxpapers.core import segmentation_metrics, stats
    from jaxpapers.core.chat import chat_examples, check_sampling, key_to_seed, message, seed_to_key
    from jaxpapers.core.data import digits, scenes
    from jaxpapers.core.diffusion import (
        VPSchedule,
        check_time_grid,
        clip_x0,
        grid_mixture,
        probability_flow_ode,
        sample_ddim,
        time_grid,
    )
    from jaxpapers.core.nn import decoder, vit
    from jaxpapers.core.nn.bert import mean_pool
    from jaxpapers.kffm import _functional_data as F
    from jaxpapers.lamp import _image_metrics as image_metrics
    from jaxpapers.ropmb import _multilabel as multilabel

    grid = jnp.linspace(0.0, 1.0, 8)
    u0 = jnp.ones((2, 8))
    cfg = scenes.SceneConfig(size=16, num_objects=2)
    pair = [([message("user", "hi")], "hello")]
    return [
        Case("kffm.gp_sample", "key", "key", lambda: F.gp_sample(2, grid, key=0)),
        Case("kffm.gp_sample", "n", "range", lambda: F.gp_sample(0, grid, key=_k())),
        Case(
            "kffm.gp_sample",
            "lengthscale",
            "range",
            lambda: F.gp_sample(2, grid, key=_k(), lengthscale=0.0),
        ),
        Case(
            "kffm.gaussian_process_prior",
            "grid",
            "shape",
            lambda: F.gaussian_process_prior(jnp.ones((2, 2, 2))),
        ),
        Case(
            "kffm.gaussian_process_prior",
            "variance",
            "range",
            lambda: F.gaussian_process_prior(grid, variance=-1.0),
        ),
        Case(
            "kffm._functional_data.covariance",
            "kernel",
            "range",
            lambda: F.covariance(grid, grid, kernel="cubic"),
        ),
        Case(
            "kffm._functional_data.covariance",
            "lengthscale",
            "range",
            lambda: F.covariance(grid, grid, lengthscale=0.0),
        ),
        Case(
            "kffm.gp_mixture_paths",
            "key",
            "key",
            lambda: F.gp_mixture_paths(2, grid, key=3),
        ),
        Case(
            "kffm.ou_paths",
            "theta",
            "range",
            lambda: F.ou_paths(2, grid, key=_k(), theta=-1.0),
        ),
        Case("kffm.ou_paths", "key", "key", lambda: F.ou_paths(2, grid, key=1)),
        Case(
            "kffm.oscillator_paths",
            "n",
            "type",
            lambda: F.oscillator_paths(2.5, grid, key=_k()),
        ),
        Case("kffm.periodic_grid", "n", "range", lambda: F.periodic_grid(0)),
        Case(
            "kffm._functional_data.random_fourier_series",
            "modes",
            "range",
            lambda: F.random_fourier_series(2, 8, key=_k(), modes=0),
        ),
        Case(
            "kffm._functional_data.random_fourier_series",
            "key",
            "key",
            lambda: F.random_fourier_series(2, 8, key=5),
        ),
        Case(
            "kffm.burgers_solve",
            "u0",
            "shape",
            lambda: F.burgers_solve(jnp.ones(8)),
        ),
        Case(
            "kffm.burgers_solve",
            "u0",
            "finite",
            lambda: F.burgers_solve(u0.at[0, 0].set(NAN)),
        ),
        Case("kffm.burgers_solve", "nu", "range", lambda: F.burgers_solve(u0, nu=0.0)),
        Case(
            "kffm.reaction_diffusion_solve",
            "u0",
            "finite",
            lambda: F.reaction_diffusion_solve(u0.at[0, 0].set(INF)),
        ),
        Case(
            "kffm.reaction_diffusion_solve",
            "rate",
            "range",
            lambda: F.reaction_diffusion_solve(u0, rate=-1.0),
        ),
        Case(
            "kffm.burgers_solutions",
            "key",
            "key",
            lambda: F.burgers_solutions(2, 8, key=0),
        ),
        Case(
            "kffm.reaction_diffusion_solutions",
            "n",
            "range",
            lambda: F.reaction_diffusion_solutions(0, 8, key=_k()),
        ),
        Case("kffm.heat2d_solve", "u0", "shape", lambda: F.heat2d_solve(u0)),
        Case(
            "kffm.heat2d_solve",
            "u0",
            "finite",
            lambda: F.heat2d_solve(jnp.ones((1, 8, 8)).at[0, 0, 0].set(NAN)),
        ),
        Case(
            "kffm.heat2d_solutions",
            "key",
            "key",
            lambda: F.heat2d_solutions(2, 8, key=0),
        ),
        Case(
            "kffm._functional_data.kolmogorov_forcing",
            "n_grid",
            "range",
            lambda: F.kolmogorov_forcing(1),
        ),
        Case(
            "kffm.navier_stokes2d_solve",
            "w0",
            "shape",
            lambda: F.navier_stokes2d_solve(jnp.ones((8, 6))),
        ),
        Case(
            "kffm.navier_stokes2d_solve",
            "w0",
            "finite",
            lambda: F.navier_stokes2d_solve(jnp.ones((8, 8)).at[0, 0].set(NAN)),
        ),
        Case(
            "kffm.navier_stokes2d_solve",
            "viscosity",
            "range",
            lambda: F.navier_stokes2d_solve(jnp.ones((8, 8)), viscosity=-1.0),
        ),
        Case(
            "kffm.navier_stokes2d_solutions",
            "key",
            "key",
            lambda: F.navier_stokes2d_solutions(2, 8, key=0),
        ),
        Case(
            "kffm.navier_stokes2d_solutions",
            "n_grid",
            "range",
            lambda: F.navier_stokes2d_solutions(2, 7, key=_k()),
        ),
        Case(
            "kffm._functional_data.random_vorticity",
            "key",
            "key",
            lambda: F.random_vorticity(2, 8, key=0),
        ),
        Case(
            "kffm._functional_data.random_vorticity",
            "rms",
            "range",
            lambda: F.random_vorticity(2, 8, key=_k(), rms=0.0),
        ),
        Case(
            "core.data.scenes.make_scenes",
            "key",
            "key",
            lambda: scenes.make_scenes(2, config=cfg, key=0),
        ),
        Case(
            "core.data.scenes.make_scenes",
            "n",
            "range",
            lambda: scenes.make_scenes(0, config=cfg, key=_k()),
        ),
        Case(
            "core.data.scenes.make_scenes",
            "classes",
            "shape",
            lambda: scenes.make_scenes(
                2, config=cfg, key=_k(), classes=jnp.zeros((2, 5), jnp.int32)
            ),
        ),
        Case(
            "core.data.scenes.make_sequence",
            "frames",
            "range",
            lambda: scenes.make_sequence(0, config=cfg, key=_k()),
        ),
        Case(
            "core.data.scenes.make_sequence",
            "key",
            "key",
            lambda: scenes.make_sequence(2, config=cfg, key=1),
        ),
        Case(
            "core.data.scenes.sample_layout",
            "key",
            "key",
            lambda: scenes.sample_layout(config=cfg, key=2),
        ),
        Case(
            "core.data.scenes.render_background",
            "key",
            "key",
            lambda: scenes.render_background(0, config=cfg, key=2),
        ),
        Case(
            "core.data.scenes.render",
            "key",
            "key",
            lambda: scenes.render(None, config=cfg, background=0, key=2),
        ),
        Case(
            "core.data.scenes.move_layout",
            "velocity",
            "shape",
            lambda: scenes.move_layout(_layout(cfg), jnp.ones((3, 2)), 1.0, config=cfg),
        ),
        Case(
            "core.data.scenes.patch_fractions",
            "patch",
            "range",
            lambda: scenes.patch_fractions(jnp.zeros((8, 8), jnp.int32), 3, 2),
        ),
        Case(
            "core.data.scenes.patch_labels",
            "min_cover",
            "range",
            lambda: scenes.patch_labels(jnp.zeros((8, 8), jnp.int32), 4, 2, min_cover=1.5),
        ),
        Case(
            "ropmb._multilabel.check_groups",
            "groups",
            "range",
            lambda: multilabel.check_groups([[0, 9]], 3, 2),
        ),
        Case(
            "ropmb._multilabel.cooccurring_classes",
            "key",
            "key",
            lambda: multilabel.cooccurring_classes([[0, 1]], 2, 2, key=0),
        ),
        Case(
            "ropmb._multilabel.cooccurring_classes",
            "n",
            "range",
            lambda: multilabel.cooccurring_classes([[0, 1]], 0, 2, key=_k()),
        ),
        Case(
            "ropmb._multilabel.make_cooccurring_scenes",
            "key",
            "key",
            lambda: multilabel.make_cooccurring_scenes([[0, 1]], 2, config=cfg, key=0),
        ),
        Case("core.data.digits.load_digits", "size", "range", lambda: digits.load_digits(size=0)),
        Case(
            "core.data.digits.split",
            "test_fraction",
            "range",
            lambda: digits.split(digits.load_digits(), test_fraction=1.5),
        ),
        Case("core.diffusion.time_grid", "num_steps", "range", lambda: time_grid(0)),
        Case("core.diffusion.time_grid", "t_max", "range", lambda: time_grid(4, t_max=1.5)),
        Case(
            "core.diffusion.check_time_grid",
            "ts",
            "shape",
            lambda: check_time_grid(jnp.ones((2, 2))),
        ),
        Case(
            "core.diffusion.check_time_grid",
            "ts",
            "range",
            lambda: check_time_grid(jnp.array([0.2, 0.5])),
        ),
        Case(
            "core.diffusion.clip_x0",
            "bound",
            "range",
            lambda: clip_x0(lambda x, t: x, VPSchedule(), 0.0),
        ),
        Case("core.diffusion.grid_mixture", "dim", "range", lambda: grid_mixture(0)),
        Case("core.diffusion.grid_mixture", "std", "range", lambda: grid_mixture(2, std=-1.0)),
        Case(
            "core.diffusion.sample_ddim",
            "num_steps",
            "range",
            lambda: sample_ddim(None, VPSchedule(), (2,), key=_k(), num_steps=0),
        ),
        Case(
            "core.diffusion.sample_ddim",
            "key",
            "key",
            lambda: sample_ddim(None, VPSchedule(), (2,), key=0, num_steps=2),
        ),
        Case(
            "core.diffusion.probability_flow_ode",
            "num_steps",
            "range",
            lambda: probability_flow_ode(None, VPSchedule(), jnp.ones(2), num_steps=0),
        ),
        Case(
            "core.diffusion.probability_flow_ode",
            "x_init",
            "finite",
            lambda: probability_flow_ode(
                None, VPSchedule(), jnp.ones(2).at[0].set(NAN), num_steps=2
            ),
        ),
        Case(
            "lamp._image_metrics.ssim",
            "ref",
            "shape",
            lambda: image_metrics.ssim(jnp.ones((1, 8, 8)), jnp.ones((1, 8, 7))),
        ),
        Case(
            "lamp._image_metrics.ssim",
            "data_range",
            "range",
            lambda: image_metrics.ssim(jnp.ones((1, 8, 8)), jnp.ones((1, 8, 8)), data_range=0.0),
        ),
        Case(
            "lamp._image_metrics.ssim",
            "x",
            "finite",
            lambda: image_metrics.ssim(
                jnp.ones((1, 8, 8)).at[0, 0, 0].set(NAN), jnp.ones((1, 8, 8))
            ),
        ),
        Case(
            "lamp._image_metrics.gaussian_window",
            "sigma",
            "range",
            lambda: image_metrics.gaussian_window(7, 0.0),
        ),
        Case(
            "lamp._image_metrics.gaussian_window",
            "size",
            "range",
            lambda: image_metrics.gaussian_window(0, 1.0),
        ),
        Case(
            "core.segmentation_metrics.confusion_matrix",
            "pred",
            "range",
            lambda: segmentation_metrics.confusion_matrix(
                jnp.array([[0, 5]]), jnp.array([[0, 1]]), 2
            ),
        ),
        Case(
            "core.segmentation_metrics.confusion_matrix",
            "target",
            "shape",
            lambda: segmentation_metrics.confusion_matrix(jnp.array([[0, 1]]), jnp.array([[0]]), 2),
        ),
        Case(
            "core.segmentation_metrics.mean_iou",
            "pred",
            "dtype",
            lambda: segmentation_metrics.mean_iou(
                jnp.zeros((2, 2)), jnp.zeros((2, 2), jnp.int32), 2
            ),
        ),
        Case(
            "core.segmentation_metrics.iou_from_confusion",
            "confusion",
            "shape",
            lambda: segmentation_metrics.iou_from_confusion(jnp.ones((2, 3))),
        ),
        Case(
            "core.segmentation_metrics.boundary_f1",
            "tolerance",
            "range",
            lambda: segmentation_metrics.boundary_f1(
                jnp.zeros((4, 4), jnp.int32), jnp.zeros((4, 4), jnp.int32), tolerance=-1
            ),
        ),
        Case(
            "core.segmentation_metrics.label_boundary",
            "labels",
            "shape",
            lambda: segmentation_metrics.label_boundary(jnp.zeros(4, jnp.int32)),
        ),
        Case(
            "core.stats.fit_loglog_slope",
            "x",
            "range",
            lambda: stats.fit_loglog_slope(np.array([1.0, -2.0, 3.0]), np.array([1.0, 2.0, 3.0])),
        ),
        Case(
            "core.stats.fit_loglog_slope",
            "y",
            "shape",
            lambda: stats.fit_loglog_slope(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0])),
        ),
        Case(
            "core.stats.fit_loglog_slope",
            "confidence",
            "range",
            lambda: stats.fit_loglog_slope(
                np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]), confidence=1.5
            ),
        ),
        Case(
            "core.nn.decoder.filter_top_p",
            "top_p",
            "range",
            lambda: decoder.filter_top_p(jnp.zeros((2, 4)), 1.5),
        ),
        Case(
            "core.nn.decoder.filter_top_p",
            "logits",
            "shape",
            lambda: decoder.filter_top_p(jnp.zeros(()), 0.5),
        ),
        Case(
            "core.nn.decoder.token_log_probs",
            "targets",
            "shape",
            lambda: decoder.token_log_probs(jnp.zeros((2, 3, 4)), jnp.zeros((2, 2), jnp.int32)),
        ),
        Case(
            "core.nn.decoder.token_log_probs",
            "targets",
            "range",
            lambda: decoder.token_log_probs(jnp.zeros((2, 3, 4)), jnp.full((2, 3), 4, jnp.int32)),
        ),
        Case(
            "core.nn.decoder.sample",
            "key",
            "key",
            lambda: decoder.sample(
                None, None, jnp.zeros((1, 2), jnp.int32), key=0, max_new_tokens=2
            ),
        ),
        Case(
            "core.nn.decoder.sample",
            "max_new_tokens",
            "range",
            lambda: decoder.sample(
                None, None, jnp.zeros((1, 2), jnp.int32), key=_k(), max_new_tokens=0
            ),
        ),
        Case(
            "core.nn.vit.patchify",
            "patch",
            "range",
            lambda: vit.patchify(jnp.ones((1, 8, 8, 3)), 3),
        ),
        Case("core.nn.vit.patchify", "x", "shape", lambda: vit.patchify(jnp.ones((8, 8, 3)), 4)),
        Case(
            "core.nn.bert.mean_pool",
            "mask",
            "shape",
            lambda: mean_pool(jnp.ones((2, 3, 4)), jnp.ones((2, 2))),
        ),
        Case("core.chat.check_sampling", "temperature", "range", lambda: check_sampling(-1.0, 10)),
        Case("core.chat.check_sampling", "max_tokens", "range", lambda: check_sampling(1.0, 0)),
        Case("core.chat.key_to_seed", "key", "key", lambda: key_to_seed(3)),
        Case("core.chat.seed_to_key", "seed", "type", lambda: seed_to_key(2.5)),
        Case(
            "core.chat.chat_examples",
            "context",
            "range",
            lambda: chat_examples(pair, context=0, max_len=8),
        ),
        Case("core.chat.message", "role", "range", lambda: message("robot", "hi")),
        Case(
            "core.chat.validate_messages",
            "messages",
            "range",
            lambda: __import__("jaxpapers.core.chat", fromlist=["x"]).validate_messages([]),
        ),
        Case(
            "core.chat.fit_local_chat",
            "key",
            "key",
            lambda: __import__("jaxpapers.core.chat", fromlist=["x"]).fit_local_chat(
                pair, key=0, context=8, max_len=16, steps=1
            ),
        ),
        Case(
            "core.train.train",
            "key",
            "key",
            lambda: __import__("jaxpapers.core.train", fromlist=["x"]).train(
                lambda p, b, k: 0.0, {}, None, lambda i: {}, steps=1, key=0
            ),
        ),
        Case(
            "core.train.train",
            "steps",
            "range",
            lambda: __import__("jaxpapers.core.train", fromlist=["x"]).train(
                lambda p, b, k: 0.0, {}, None, lambda i: {}, steps=0, key=_k()
            ),
        ),
        Case("core.diffusion.solve_diffusion", "ts", "shape", lambda: _solve_diffusion_bad_ts()),
        Case("core.fit.fit", "steps", "range", lambda: _fit(steps=0)),
        Case("core.fit.fit", "key", "key", lambda: _fit(key=0)),
        Case("core.fit.fit", "key", "shape", lambda: _fit(key=jax.random.split(_k(), 3))),
        Case("core.fit.fit", "batches", "shape", lambda: _fit(batches=jnp.zeros((5, 2)))),
        Case(
            "core.compilation.use_compile_policy",
            "size",
            "range",
            lambda: __import__("jaxpapers.core.compilation", fromlist=["x"]).use_compile_policy(
                "huge"
            ),
        ),
        Case("core.verdicts.t_quantile", "df", "range", lambda: _verdicts().t_quantile(0.0)),
        Case("core.verdicts.t_quantile", "df", "finite", lambda: _verdicts().t_quantile(NAN)),
        Case(
            "core.verdicts.one_sample",
            "values",
            "shape",
            lambda: _verdicts().one_sample([], 0.0, ">", rule="r", quantity="q", test="t"),
        ),
        Case(
            "core.verdicts.one_sample",
            "claim",
            "range",
            lambda: _verdicts().one_sample([1.0, 2.0], 0.0, ">=", rule="r", quantity="q", test="t"),
        ),
        Case(
            "core.verdicts.welch",
            "b",
            "shape",
            lambda: _verdicts().welch([1.0, 2.0], [], 0.0, ">", rule="r", quantity="q"),
        ),
        Case(
            "core.verdicts.welch",
            "claim",
            "range",
            lambda: _verdicts().welch([1.0], [2.0], 0.0, "!", rule="r", quantity="q"),
        ),
        Case(
            "core.data.scenes.object_mask",
            "index",
            "range",
            lambda: scenes.object_mask(_layout(cfg), 5, config=cfg),
        ),
    ]


def _solve_diffusion_bad_ts():
    from jaxpapers.core.diffusion import (
        DDIM,
        DenoiserTerm,
        VPSchedule,
        grid_mixture,
        solve_diffusion,
    )

    sch = VPSchedule()
    prior = grid_mixture(2)
    term = DenoiserTerm(lambda x, t: prior.eps(x, t, sch), sch)
    return solve_diffusion(term, DDIM(), jnp.ones(2), jnp.ones((2, 2)))


#: Functions whose first check is the key's type: each row calls it with an int seed as ``key``
#: and ``None`` for every other required argument (the key is checked before anything is read).
KEY_FIRST: tuple[str, ...] = (
    "audit.fit_awareness_lm", "audit.realism_win_rate", "audit.refine_action", "audit.run_audit",
    "audit.run_deployment",
    "cfshap.attributions", "cfshap.desiderata_table", "cfshap.equivalent_pair",
    "cfshap.lime_values", "cfshap.pair_desiderata", "cfshap.witnesses",
    "codi.augment", "codi.init_state", "codi.pretrain", "codi.random_masks", "codi.train_step",
    "codi.texture_scenes",
    "graphons.optimise_graphon", "graphons.plain_mc_density", "graphons.symmetric_mc_density",
    "ivp.distill_prober", "ivp.make_question_bank", "ivp.probe", "ivp.profile_library",
    "ivp.sample_personas",
    "ldp_rl.exp3_ldp", "ldp_rl.random_contextual_bandit", "ldp_rl.random_episodic_mdp",
    "ldp_rl.ucbvi_ldp", "ldp_rl.unary_encode",
    "markov_games.online_cce", "markov_games.random_game", "markov_games.run_bandit",
    "markov_games.simulator_cce",
    "multiclass.digits_stream", "multiclass.linear_stream", "multiclass.run_online",
    "rapo.draw_batch", "rapo.rl_loss", "rapo.rl_step", "rapo.rollout", "rapo.sft_loss",
    "rapo.warmup_replies",
    "scale.ar_conditional_loss", "scale.ar_fit", "scale.ar_sample", "scale.cca_loss",
    "scale.conditional_loss", "scale.dpo_fit", "scale.dpo_loss", "scale.drop_labels", "scale.fit",
    "scale.fit_many", "scale.gft_loss", "scale.mg_loss", "scale.noise_batch", "scale.sample_cfg",
    "scale.sample_one_pass", "scale.scale_loss", "scale.self_samples", "scale.fit_scg",
    "scale.fit_self_score", "scale.sample_scg", "scale.scg_loss", "scale.self_score_error",
)  # fmt: skip


def _int_key_call(qualname: str) -> Callable[[], Any]:
    """``fn(None, ..., key=0)``: every required argument ``None``, the key a Python int."""
    package, name = qualname.split(".")
    fn = getattr(importlib.import_module(f"jaxpapers.{package}"), name)
    args, kwargs = [], {}
    for p in inspect.signature(fn).parameters.values():
        value = 0 if p.name == "key" else None
        if p.name != "key" and p.default is not inspect.Parameter.empty:
            continue
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[p.name] = value
        elif p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            args.append(value)
    return lambda: fn(*args, **kwargs)


def _key_first_cases() -> list[Case]:
    return [Case(q, "key", "key", _int_key_call(q)) for q in KEY_FIRST]


def _owned_cases() -> list[Case]:
    """Rows of the packages whose checks were already in place (their owners keep them)."""
    from jaxpapers import (
        audit,
        cayley,
        cfshap,
        codi,
        graphons,
        ivp,
        ldp_rl,
        markov_games,
        multiclass,
        rapo,
        scale,
    )

    tri = lambda: graphons.triangle()
    R2 = jnp.zeros((2, 2))
    pol = lambda: jnp.full((1, 1, 4), 0.25)
    mg = lambda: markov_games.chicken()
    return [
        Case("audit.wilson_interval", "n", "range", lambda: audit.wilson_interval(3, 0)),
        Case("audit.wilson_interval", "wins", "range", lambda: audit.wilson_interval(5, 3)),
        Case("cayley.layer_graph", "num_layers", "range", lambda: cayley.layer_graph(0)),
        Case(
            "cayley.ridge_probe",
            "x",
            "shape",
            lambda: cayley.ridge_probe(
                np.ones(4), np.zeros(4, int), np.ones(4), alphas=[1.0], num_classes=2
            ),
        ),
        Case(
            "cayley.ridge_probe",
            "y",
            "range",
            lambda: cayley.ridge_probe(
                np.ones((4, 3)), np.full(4, 2), np.ones(4), alphas=[1.0], num_classes=2
            ),
        ),
        Case(
            "cayley.ridge_probe",
            "alphas",
            "range",
            lambda: cayley.ridge_probe(
                np.ones((4, 3)), np.zeros(4, int), np.ones(4), alphas=[0.0], num_classes=2
            ),
        ),
        Case(
            "cayley.ridge_probe",
            "x",
            "finite",
            lambda: cayley.ridge_probe(
                np.full((4, 3), np.nan), np.zeros(4, int), np.ones(4), alphas=[1.0], num_classes=2
            ),
        ),
        Case(
            "cayley.layer_graph",
            "topology",
            "range",
            lambda: cayley.layer_graph(4, topology="ring"),
        ),
        Case("cayley.sl2_order", "n", "range", lambda: cayley.sl2_order(1)),
        Case("cayley.sl2_cayley_graph", "n", "range", lambda: cayley.sl2_cayley_graph(1)),
        Case("cayley.cayley_modulus", "num_layers", "range", lambda: cayley.cayley_modulus(0)),
        Case(
            "cayley.fit_head",
            "y",
            "shape",
            lambda: cayley.fit_head(None, jnp.ones((2, 3, 4)), jnp.zeros(3, jnp.int32), steps=1),
        ),
        Case(
            "cfshap.balke_pearl_bounds",
            "p_xy_given_z",
            "shape",
            lambda: cfshap.balke_pearl_bounds(jnp.ones((2, 2))),
        ),
        Case(
            "cfshap.balke_pearl_bounds",
            "p_xy_given_z",
            "finite",
            lambda: cfshap.balke_pearl_bounds(jnp.full((2, 2, 2), NAN)),
        ),
        Case(
            "cfshap.asymmetric_shapley_values",
            "parents",
            "shape",
            lambda: cfshap.asymmetric_shapley_values(_Additive(), ((), ())),
        ),
        Case(
            "cfshap.interventional_game",
            "x",
            "shape",
            lambda: cfshap.interventional_game(_scm(), lambda x: x[..., 0], jnp.zeros(3)),
        ),
        Case(
            "cfshap.causal_game",
            "x",
            "shape",
            lambda: cfshap.causal_game(_scm(), lambda x: x[..., 0], jnp.zeros(3)),
        ),
        Case(
            "cfshap.counterfactual_game",
            "x",
            "finite",
            lambda: cfshap.counterfactual_game(_scm(), lambda x: x[..., 0], jnp.array([NAN, 0.0])),
        ),
        Case(
            "codi.binned_error",
            "error",
            "shape",
            lambda: codi.binned_error(jnp.ones(4), jnp.ones(3)),
        ),
        Case(
            "codi.binned_error",
            "bins",
            "range",
            lambda: codi.binned_error(jnp.ones(4), jnp.ones(4), bins=0),
        ),
        Case(
            "codi.cls_attention_mass",
            "attention",
            "shape",
            lambda: codi.cls_attention_mass(jnp.ones((2, 3, 4))),
        ),
        Case(
            "codi.codi_targets",
            "cls_targets",
            "shape",
            lambda: codi.codi_targets(jnp.ones((2, 3, 4)), jnp.ones((2, 5)), 0.5),
        ),
        Case(
            "codi.codi_targets",
            "lam",
            "range",
            lambda: codi.codi_targets(jnp.ones((2, 3, 4)), jnp.ones((2, 4)), 1.5),
        ),
        Case(
            "codi.distillation_loss",
            "targets",
            "shape",
            lambda: codi.distillation_loss(jnp.ones((2, 4)), jnp.ones((2, 3)), 0.1),
        ),
        Case(
            "codi.teacher_targets",
            "center",
            "shape",
            lambda: codi.teacher_targets(jnp.ones((2, 4)), jnp.ones(3), 0.1),
        ),
        Case(
            "codi.knn_classify",
            "train_labels",
            "range",
            lambda: codi.knn_classify(
                jnp.ones((3, 2)), jnp.array([0, 1, 5]), jnp.ones((2, 2)), 2, k=1
            ),
        ),
        Case(
            "codi.knn_classify",
            "k",
            "range",
            lambda: codi.knn_classify(
                jnp.ones((3, 2)), jnp.array([0, 1, 1]), jnp.ones((2, 2)), 2, k=0
            ),
        ),
        Case(
            "codi.linear_probe",
            "test_features",
            "shape",
            lambda: codi.linear_probe(
                jnp.ones((3, 2)), jnp.array([0, 1, 1]), jnp.ones((2, 3)), 2, steps=1
            ),
        ),
        Case("graphons.best_reference", "p", "range", lambda: graphons.best_reference(1.5, 0.1)),
        Case(
            "graphons.hub_construction", "p", "range", lambda: graphons.hub_construction(0.0, 0.1)
        ),
        Case(
            "graphons.constant_construction",
            "p",
            "range",
            lambda: graphons.constant_construction(2.0, 0.1),
        ),
        Case(
            "graphons.matrix_density",
            "A",
            "shape",
            lambda: graphons.matrix_density(tri(), jnp.ones((2, 3))),
        ),
        Case(
            "graphons.step_density",
            "values",
            "shape",
            lambda: graphons.step_density(tri(), jnp.array([0.5, 0.5]), jnp.ones((3, 3))),
        ),
        Case(
            "graphons.step_density",
            "sizes",
            "range",
            lambda: graphons.step_density(tri(), jnp.array([0.5, 0.6]), jnp.ones((2, 2))),
        ),
        Case(
            "graphons.solve_shift",
            "logits",
            "shape",
            lambda: graphons.solve_shift(tri(), jnp.ones(3), 0.1),
        ),
        Case(
            "graphons.solve_shift",
            "target",
            "range",
            lambda: graphons.solve_shift(tri(), jnp.zeros((3, 3)), 1.5),
        ),
        Case(
            "ivp.spearman",
            "truth",
            "shape",
            lambda: ivp.spearman(jnp.ones((2, 3)), jnp.ones((2, 4))),
        ),
        Case(
            "ivp.top_k_accuracy",
            "k",
            "range",
            lambda: ivp.top_k_accuracy(jnp.ones(4), jnp.ones(4), k=0),
        ),
        Case("ivp.value_index", "names", "range", lambda: ivp.value_index("not-a-value")),
        Case(
            "ldp_rl.randomized_response_output_probabilities",
            "epsilon",
            "range",
            lambda: ldp_rl.randomized_response_output_probabilities(-1.0),
        ),
        Case(
            "ldp_rl.unary_output_probabilities",
            "num_categories",
            "range",
            lambda: ldp_rl.unary_output_probabilities(13, 1.0),
        ),
        Case(
            "ldp_rl.unary_keep_probability",
            "epsilon",
            "range",
            lambda: ldp_rl.unary_keep_probability(-1.0),
        ),
        Case(
            "ldp_rl.unary_noise_variance",
            "epsilon",
            "range",
            lambda: ldp_rl.unary_noise_variance(0.0),
        ),
        Case(
            "ldp_rl.unary_debias",
            "epsilon",
            "range",
            lambda: ldp_rl.unary_debias(jnp.ones((2, 3)), -1.0),
        ),
        Case(
            "ldp_rl.max_privacy_loss",
            "probabilities",
            "shape",
            lambda: ldp_rl.max_privacy_loss(np.ones(3)),
        ),
        Case("ldp_rl.exp3_params", "num_rounds", "range", lambda: ldp_rl.exp3_params(2, 3, 0, 1.0)),
        Case(
            "markov_games.matrix_game",
            "payoffs",
            "shape",
            lambda: markov_games.matrix_game(np.ones(3)),
        ),
        Case("markov_games.lp_cce", "payoffs", "shape", lambda: markov_games.lp_cce(np.ones(3))),
        Case(
            "markov_games.congestion_game",
            "num_players",
            "range",
            lambda: markov_games.congestion_game(0),
        ),
        Case(
            "markov_games._game.pad_horizon",  # internal (not exported), still checked
            "horizon",
            "range",
            lambda: importlib.import_module("jaxpapers.markov_games._game").pad_horizon(mg(), 0),
        ),
        Case(
            "markov_games.cce_gap",
            "policy",
            "shape",
            lambda: markov_games.cce_gap(mg(), jnp.ones((1, 2, 4))),
        ),
        Case(
            "markov_games.cce_gap", "policy", "range", lambda: markov_games.cce_gap(mg(), pol() * 2)
        ),
        Case(
            "markov_games.mixture_cce_gap",
            "weights",
            "shape",
            lambda: markov_games.mixture_cce_gap(mg(), [pol()], jnp.ones(2)),
        ),
        Case(
            "multiclass.gaptron",
            "exploration",
            "range",
            lambda: multiclass.gaptron(exploration=1.5),
        ),
        Case("multiclass.gaptron", "eta", "range", lambda: multiclass.gaptron(eta=0.0)),
        Case(
            "multiclass.margin",
            "label",
            "range",
            lambda: multiclass.margin(jnp.ones(3), jnp.int32(5)),
        ),
        Case(
            "multiclass.margin",
            "label",
            "shape",
            lambda: multiclass.margin(jnp.ones((2, 3)), jnp.zeros(3, jnp.int32)),
        ),
        Case(
            "multiclass.surrogate_loss",
            "label",
            "range",
            lambda: multiclass.surrogate_loss(jnp.ones(3), jnp.int32(3)),
        ),
        Case(
            "multiclass.score_gradient",
            "scores",
            "shape",
            lambda: multiclass.score_gradient(jnp.ones((2, 3)), jnp.int32(0)),
        ),
        Case(
            "multiclass.classification_error",
            "weights",
            "shape",
            lambda: multiclass.classification_error(
                jnp.ones((3, 4)), multiclass.Stream(jnp.ones((2, 5)), jnp.zeros(2, jnp.int32))
            ),
        ),
        Case(
            "multiclass.stream_margin",
            "U",
            "shape",
            lambda: multiclass.stream_margin(
                multiclass.Stream(jnp.ones((2, 5)), jnp.zeros(2, jnp.int32)), jnp.ones((3, 4))
            ),
        ),
        Case(
            "multiclass.best_linear_predictor",
            "num_classes",
            "range",
            lambda: multiclass.best_linear_predictor(
                multiclass.Stream(jnp.ones((2, 5)), jnp.zeros(2, jnp.int32)), 0
            ),
        ),
        Case(
            "multiclass.surrogate_regret",
            "comparator_loss",
            "shape",
            lambda: multiclass.surrogate_regret(jnp.ones((2, 5)), jnp.ones(3)),
        ),
        Case(
            "rapo.extract_reply",
            "completion",
            "shape",
            lambda: rapo.extract_reply(jnp.zeros(3, jnp.int32)),
        ),
        Case(
            "rapo.completion_mask",
            "completion",
            "shape",
            lambda: rapo.completion_mask(jnp.zeros(3, jnp.int32)),
        ),
        Case(
            "markov_games.joint_actions",
            "num_actions",
            "range",
            lambda: markov_games.joint_actions((2, 0)),
        ),
        Case(
            "markov_games.congestion_payoffs",
            "num_roads",
            "range",
            lambda: markov_games.congestion_payoffs(2, 0),
        ),
        Case(
            "ldp_rl.randomized_response_debias",
            "epsilon",
            "range",
            lambda: ldp_rl.randomized_response_debias(jnp.ones(2), 0.0),
        ),
        Case(
            "ldp_rl.exp3_regret_bound",
            "num_arms",
            "range",
            lambda: ldp_rl.exp3_regret_bound(2, 0, 10, 1.0),
        ),
        Case(
            "ldp_rl.backward_induction",
            "R",
            "shape",
            lambda: ldp_rl.backward_induction(jnp.full((2, 2, 2), 0.5), jnp.zeros(2), 2),
        ),
        Case(
            "ldp_rl.backward_induction",
            "horizon",
            "range",
            lambda: ldp_rl.backward_induction(jnp.full((2, 2, 2), 0.5), R2, 0),
        ),
        Case(
            "codi.teacher_temperature",
            "start",
            "range",
            lambda: codi.teacher_temperature(jnp.int32(0), 10, start=0.0),
        ),
        Case(
            "codi.teacher_momentum",
            "base",
            "range",
            lambda: codi.teacher_momentum(jnp.int32(0), 10, base=1.5),
        ),
        Case("graphons.clique", "r", "range", lambda: graphons.clique(0)),
        Case("graphons.cycle", "k", "range", lambda: graphons.cycle(2)),
        Case("graphons.path", "k", "type", lambda: graphons.path(2.5)),
        Case(
            "cfshap.response_functions", "card", "range", lambda: cfshap.response_functions(0, (2,))
        ),
        Case("cfshap.coalition_masks", "n", "range", lambda: cfshap.coalition_masks(0)),
        Case(
            "ivp.repeated_mask",
            "questions",
            "shape",
            lambda: ivp.repeated_mask(jnp.zeros((), jnp.int32)),
        ),
        Case(
            "ivp.social_acceptability",
            "repeated",
            "shape",
            lambda: ivp.social_acceptability(jnp.ones(4), jnp.ones(3)),
        ),
        Case(
            "ivp.social_acceptability",
            "repeat_penalty",
            "range",
            lambda: ivp.social_acceptability(jnp.ones(4), jnp.ones(4), -1.0),
        ),
        Case(
            "multiclass.stable_gaptron",
            "exploration",
            "range",
            lambda: multiclass.stable_gaptron(exploration=-0.1),
        ),
        Case(
            "multiclass.stable_perceptron",
            "eta",
            "range",
            lambda: multiclass.stable_perceptron(eta=-1.0),
        ),
        Case(
            "multiclass.surrogate_loss",
            "loss",
            "range",
            lambda: multiclass.surrogate_loss(jnp.ones(3), jnp.int32(0), loss="l1"),
        ),
        Case(
            "rapo.group_advantages", "rewards", "shape", lambda: rapo.group_advantages(jnp.ones(4))
        ),
        Case(
            "rapo.grpo_loss",
            "mask",
            "shape",
            lambda: rapo.grpo_loss(R2, R2, jnp.ones(2), jnp.ones((2, 3))),
        ),
        Case(
            "rapo.rapo_loss",
            "advantages",
            "shape",
            lambda: rapo.rapo_loss(R2, R2, jnp.ones(3), jnp.ones((2, 2)), R2),
        ),
        Case(
            "rapo.rapo_weights", "advantages", "shape", lambda: rapo.rapo_weights(R2, jnp.ones(3))
        ),
        Case(
            "rapo.profile_token_pmi",
            "log_probs_without_profile",
            "shape",
            lambda: rapo.profile_token_pmi(R2, jnp.zeros((2, 3))),
        ),
        Case(
            "rapo.split_profiles",
            "unseen",
            "range",
            lambda: rapo.split_profiles(rapo.World(), unseen=1.5),
        ),
        Case("rapo.parse_psycot", "text", "range", lambda: rapo.parse_psycot("no sections here")),
        Case("rapo.mask_role", "tokens", "shape", lambda: rapo.mask_role(jnp.zeros(3, jnp.int32))),
        Case(
            "rapo.role_pmi",
            "tokens",
            "shape",
            lambda: rapo.role_pmi(lambda c, t: c, jnp.zeros(3, jnp.int32)),
        ),
        Case(
            "rapo.stereotyped_split",
            "unseen",
            "range",
            lambda: rapo.stereotyped_split(rapo.World(), unseen=1.5),
        ),
        Case(
            "rapo.rl_optimizer",
            "learning_rate",
            "range",
            lambda: rapo.rl_optimizer(config=rapo.RLConfig(), learning_rate=-1.0),
        ),
        Case(
            "scale.frechet_distance",
            "f2",
            "shape",
            lambda: scale.frechet_distance(jnp.ones((4, 2)), jnp.ones((4, 3))),
        ),
        Case("scale.checkerboard_mixture", "dim", "range", lambda: scale.checkerboard_mixture(0)),
        Case(
            "scale.scg_target",
            "eps_self",
            "shape",
            lambda: scale.scg_target(jnp.ones((4, 2)), jnp.ones((4, 3)), 2.0),
        ),
        Case(
            "scale.mixture_metrics",
            "labels",
            "shape",
            lambda: scale.mixture_metrics(
                scale.checkerboard_mixture(2),
                jnp.ones((4, 2)),
                jnp.zeros(3, jnp.int32),
                jnp.ones((4, 2)),
            ),
        ),
    ]


def _named_in_issue_cases() -> list[Case]:
    """The other packages' rows named in issue 37 (their owners keep the rest of the package)."""
    from jaxpapers import cfshap, ldp_rl

    return [
        # issue 37: out-of-range bits came back as [1 -4 1 7]
        Case(
            "ldp_rl.randomized_response",
            "bit",
            "range",
            lambda: ldp_rl.randomized_response(jnp.array([0, 5, 1, 7]), 1.0, key=_k()),
        ),
        Case(
            "ldp_rl.randomized_response",
            "key",
            "key",
            lambda: ldp_rl.randomized_response(jnp.array([0, 1]), 1.0, key=3),
        ),
        Case(
            "ldp_rl.randomized_response",
            "epsilon",
            "range",
            lambda: ldp_rl.randomized_response(jnp.array([0, 1]), -1.0, key=_k()),
        ),
        # issue 37: a negative sample count raised an MLIR error
        Case(
            "cfshap.LinearGaussianSCM.sample", "num", "range", lambda: _scm().sample(-3, key=_k())
        ),
        Case("cfshap.LinearGaussianSCM.sample", "key", "key", lambda: _scm().sample(3, key=5)),
        # issue 37: an int key gave JAX's PRNG TypeError
        Case(
            "cfshap.shapley_sampling",
            "key",
            "key",
            lambda: cfshap.shapley_sampling(_Additive(), key=0, num_permutations=4),
        ),
        Case(
            "cfshap.shapley_sampling",
            "num_permutations",
            "range",
            lambda: cfshap.shapley_sampling(_Additive(), key=_k(), num_permutations=1),
        ),
    ]


@functools.cache
def _dscm():
    from jaxpapers import cfshap

    return cfshap.DiscreteSCM.canonical((2, 2), ((), (0,)))


def _lin3():
    from jaxpapers import cfshap

    return cfshap.LinearGaussianSCM(jnp.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]))


def _f1(x):
    return x[1].astype(float)


class _Empty:
    num_features = 0

    def __call__(self, m):
        return jnp.zeros(())


def _bank(features: bool = False):
    from jaxpapers import ivp

    valid = jnp.ones((1, 2, 3), bool)
    if not features:
        return ivp.QuestionBank(None, None, valid, None, None)
    return ivp.QuestionBank(jnp.zeros((1, 2, 3, 10)), jnp.zeros((1, 2, 3)), valid, None, None)


def _emdp():
    from jaxpapers import ldp_rl

    return ldp_rl.TabularMDP(jnp.ones((2, 2, 2)) / 2, jnp.zeros((2, 2)), horizon=2)


def _rbatch(profile: int = 0, question: int = 0):
    from jaxpapers import rapo

    return rapo.Batch(jnp.full((2, 4), profile, jnp.int32), jnp.full(2, question, jnp.int32))


def _toks():
    return jnp.zeros((2, 2), jnp.int32)


def _labs(n: int = 2):
    return jnp.zeros(n, jnp.int32)


def _boundary_cases() -> list[Case]:
    """Rows of the functions moved out of ``NOT_YET_COVERED`` (checks added at their boundary)."""
    from jaxpapers import (
        cayley,
        cfshap,
        codi,
        graphons,
        ivp,
        ldp_rl,
        markov_games,
        rapo,
        scale,
    )

    head = lambda x: jnp.zeros(2)
    x3 = lambda: jnp.ones((2, 3, 4))
    e = lambda: jnp.array([0, 1])
    return [
        Case("cayley.apply_head", "x", "shape", lambda: cayley.apply_head(head, jnp.ones((2, 3)))),
        Case(
            "cayley.shapley_values", "values", "shape", lambda: cayley.shapley_values(jnp.ones(3))
        ),
        Case(
            "cayley.coalition_accuracy",
            "x",
            "range",
            lambda: cayley.coalition_accuracy(head, jnp.ones((2, 13, 4)), e()),
        ),
        Case(
            "cayley.layer_shapley",
            "x",
            "shape",
            lambda: cayley.layer_shapley(head, jnp.ones((2, 3)), e()),
        ),
        Case("cayley.apply_head", "x", "dtype", lambda: cayley.apply_head(head, x3() > 0)),
        Case(
            "cayley.encode_layers",
            "ids",
            "shape",
            lambda: cayley.encode_layers(None, jnp.zeros(3, jnp.int32), jnp.ones(3, jnp.int32)),
        ),
        Case(
            "cayley.encode_layers",
            "batch_size",
            "range",
            lambda: cayley.encode_layers(
                None, jnp.zeros((2, 3), jnp.int32), jnp.ones((2, 3), jnp.int32), batch_size=0
            ),
        ),
        Case(
            "cayley.layer_attribution",
            "y",
            "shape",
            lambda: cayley.layer_attribution(head, x3(), jnp.zeros(3, jnp.int32)),
        ),
        Case(
            "cayley.message_passing",
            "h",
            "shape",
            lambda: cayley.message_passing(jnp.ones(3), e(), e()),
        ),
        Case(
            "cayley.message_passing",
            "senders",
            "dtype",
            lambda: cayley.message_passing(jnp.ones((3, 1)), jnp.array([0.0, 1.0]), e()),
        ),
        Case(
            "cayley.message_passing",
            "edge_mask",
            "shape",
            lambda: cayley.message_passing(jnp.ones((3, 1)), e(), e(), edge_mask=jnp.ones(3, bool)),
        ),
        Case("cfshap.causal_orders", "parents", "range", lambda: cfshap.causal_orders(((5,), ()))),
        Case(
            "cfshap.cf_shapley_bounds",
            "observational",
            "shape",
            lambda: cfshap.cf_shapley_bounds(_dscm(), _f1, jnp.array([1, 1]), jnp.ones(3) / 3),
        ),
        Case(
            "cfshap.cf_shapley_bounds",
            "x",
            "shape",
            lambda: cfshap.cf_shapley_bounds(_dscm(), _f1, jnp.array([1]), jnp.ones(4) / 4),
        ),
        Case(
            "cfshap.check_desiderata",
            "phi",
            "shape",
            lambda: cfshap.check_desiderata(jnp.zeros(3), _dscm(), _f1, jnp.array([1, 1])),
        ),
        Case(
            "cfshap.check_desiderata",
            "tol",
            "range",
            lambda: cfshap.check_desiderata(
                jnp.zeros(2), _dscm(), _f1, jnp.array([1, 1]), tol=-1.0
            ),
        ),
        Case("cfshap.game_values", "game", "range", lambda: cfshap.game_values(_Empty())),
        Case(
            "cfshap.game_values",
            "batch_size",
            "range",
            lambda: cfshap.game_values(_Additive(), batch_size=0),
        ),
        Case(
            "cfshap.mediation_effects",
            "outcome",
            "range",
            lambda: cfshap.mediation_effects(_scm(), 0, 1, 2, 0.0, 1.0),
        ),
        Case(
            "cfshap.mediation_effects",
            "treatment",
            "type",
            lambda: cfshap.mediation_effects(_scm(), 0.5, 1, 1, 0.0, 1.0),
        ),
        Case(
            "cfshap.mediation_effects",
            "t1",
            "finite",
            lambda: cfshap.mediation_effects(_lin3(), 0, 1, 2, 0.0, NAN),
        ),
        Case(
            "cfshap.monotone_mask",
            "table",
            "shape",
            lambda: cfshap.monotone_mask(np.zeros((4, 3), np.int32), (2,)),
        ),
        Case(
            "cfshap.monotone_mask",
            "parent_cards",
            "range",
            lambda: cfshap.monotone_mask(np.zeros((4, 2), np.int32), (0,)),
        ),
        Case(
            "cfshap.natural_total_effect",
            "subset",
            "shape",
            lambda: cfshap.natural_total_effect(
                _scm(), _f1, jnp.ones(2), jnp.ones(3, bool), background=jnp.zeros((1, 2))
            ),
        ),
        Case(
            "cfshap.natural_total_effect",
            "x",
            "finite",
            lambda: cfshap.natural_total_effect(
                _scm(), _f1, jnp.array([1.0, NAN]), jnp.ones(2, bool), background=jnp.zeros((1, 2))
            ),
        ),
        Case(
            "cfshap.observational_game",
            "x",
            "shape",
            lambda: cfshap.observational_game(_dscm(), _f1, jnp.array([1, 1, 0])),
        ),
        Case(
            "cfshap.observational_game",
            "x",
            "range",
            lambda: cfshap.observational_game(_dscm(), _f1, jnp.array([1, 2])),
        ),
        Case("cfshap.shapley_values", "game", "range", lambda: cfshap.shapley_values(_Empty())),
        Case(
            "cfshap.shapley_values",
            "batch_size",
            "type",
            lambda: cfshap.shapley_values(_Additive(), batch_size=2.5),
        ),
        Case(
            "cfshap.topological_order",
            "parents",
            "range",
            lambda: cfshap.topological_order(((0,), ())),
        ),
        Case(
            "codi.readout_gradients",
            "images",
            "shape",
            lambda: codi.readout_gradients(None, jnp.ones((4, 4, 3)), jnp.sum),
        ),
        Case(
            "codi.ssl_loss",
            "views",
            "shape",
            lambda: codi.ssl_loss(
                None,
                None,
                jnp.ones((2, 4, 4, 3)),
                jnp.ones((2, 4), bool),
                config=None,
                lam=None,
            ),
        ),
        Case(
            "codi.ssl_loss",
            "masks",
            "shape",
            lambda: codi.ssl_loss(
                None,
                None,
                jnp.ones((2, 1, 4, 4, 3)),
                jnp.ones((2, 3, 4), bool),
                config=None,
                lam=None,
            ),
        ),
        Case(
            "codi.ssl_loss",
            "lam",
            "range",
            lambda: codi.ssl_loss(
                None,
                None,
                jnp.ones((2, 1, 4, 4, 3)),
                jnp.ones((2, 1, 4), bool),
                config=None,
                lam=1.5,
            ),
        ),
        Case(
            "codi.teacher_tokens",
            "images",
            "shape",
            lambda: codi.teacher_tokens(None, jnp.ones((4, 4, 3))),
        ),
        Case(
            "codi.update_center",
            "teacher_logits",
            "shape",
            lambda: codi.update_center(jnp.zeros(3), jnp.ones((2, 4))),
        ),
        Case(
            "codi.update_center",
            "momentum",
            "range",
            lambda: codi.update_center(jnp.zeros(3), jnp.ones((2, 3)), momentum=1.5),
        ),
        Case(
            "codi.update_center",
            "center",
            "shape",
            lambda: codi.update_center(jnp.zeros((3, 1)), jnp.ones(3)),
        ),
        Case(
            "graphons.all_tuples_density",
            "A",
            "shape",
            lambda: graphons.all_tuples_density(graphons.triangle(), jnp.ones((3, 2))),
        ),
        Case(
            "graphons.bernoulli_entropy",
            "p",
            "range",
            lambda: graphons.bernoulli_entropy(jnp.ones(2) / 2, 1.5),
        ),
        Case(
            "graphons.bernoulli_entropy",
            "q",
            "finite",
            lambda: graphons.bernoulli_entropy(jnp.array([NAN]), 0.5),
        ),
        Case(
            "graphons.clique_construction",
            "p",
            "range",
            lambda: graphons.clique_construction(1.5, 0.1),
        ),
        Case(
            "graphons.clique_construction",
            "delta",
            "range",
            lambda: graphons.clique_construction(0.5, -0.5),
        ),
        Case(
            "graphons.evaluate_tail",
            "num_points",
            "range",
            lambda: graphons.evaluate_tail(None, None, 0),
        ),
        Case(
            "graphons.evaluate_turan",
            "num_points",
            "type",
            lambda: graphons.evaluate_turan(None, None, 2.5),
        ),
        Case(
            "graphons.grid_density",
            "num_points",
            "range",
            lambda: graphons.grid_density(graphons.triangle(), lambda x, y: x * y, 0),
        ),
        Case(
            "graphons.shifted_matrix",
            "num_points",
            "range",
            lambda: graphons.shifted_matrix(None, 0.0, 0),
        ),
        Case(
            "graphons.shifted_matrix",
            "shift",
            "finite",
            lambda: graphons.shifted_matrix(None, NAN, 4),
        ),
        Case(
            "ivp.answer_likelihood",
            "desirable",
            "shape",
            lambda: ivp.answer_likelihood(
                jnp.ones((2, 4, 3)) / 3,
                jnp.ones((2, 2)) / 2,
                jnp.ones(2) / 2,
                jnp.ones(3) / 2,
                0.1,
                0.5,
            ),
        ),
        Case(
            "ivp.answer_likelihood",
            "grid",
            "range",
            lambda: ivp.answer_likelihood(
                jnp.ones((2, 4, 3)) / 3,
                jnp.ones((2, 3)) / 3,
                jnp.ones(2) / 2,
                jnp.full(3, 1.5),
                0.1,
                0.5,
            ),
        ),
        Case(
            "ivp.answer_probs",
            "profile",
            "shape",
            lambda: ivp.answer_probs(
                jnp.ones((2, 3, 4)), jnp.zeros((2, 3)), jnp.ones((2, 3), bool), jnp.ones(5), 1.0
            ),
        ),
        Case(
            "ivp.answer_probs",
            "bias",
            "shape",
            lambda: ivp.answer_probs(
                jnp.ones((2, 3, 4)), jnp.zeros(3), jnp.ones((2, 3), bool), jnp.ones(4), 1.0
            ),
        ),
        Case(
            "ivp.answer_probs",
            "beta",
            "finite",
            lambda: ivp.answer_probs(
                jnp.ones((2, 3, 4)), jnp.zeros((2, 3)), jnp.ones((2, 3), bool), jnp.ones(4), NAN
            ),
        ),
        Case("ivp.answer_text", "answer", "range", lambda: ivp.answer_text(_bank(), 0, 1, 3)),
        Case("ivp.answer_text", "question", "range", lambda: ivp.answer_text(_bank(), 0, 2, 0)),
        Case(
            "ivp.conceal_prob",
            "gamma",
            "range",
            lambda: ivp.conceal_prob(jnp.ones(2) / 2, jnp.ones(3) / 2, 0.1, -1.0),
        ),
        Case(
            "ivp.conceal_prob",
            "grid",
            "shape",
            lambda: ivp.conceal_prob(jnp.ones(2) / 2, jnp.ones((3, 1)) / 2, 0.1, 0.5),
        ),
        Case("ivp.context_index", "context", "range", lambda: ivp.context_index("home")),
        Case(
            "ivp.information_gain",
            "likelihood",
            "shape",
            lambda: ivp.information_gain(jnp.zeros((4, 3)), jnp.ones((2, 4, 2, 3)) / 3),
        ),
        Case("ivp.parse_answer", "context", "range", lambda: ivp.parse_answer(_bank(), 1, 0, "2")),
        Case(
            "ivp.parse_answer", "question", "type", lambda: ivp.parse_answer(_bank(), 0, 0.5, "2")
        ),
        Case(
            "ivp.profile_from_dict",
            "weights",
            "range",
            lambda: ivp.profile_from_dict({"power": 1.0}),
        ),
        Case(
            "ivp.profile_posterior_mean",
            "library",
            "shape",
            lambda: ivp.profile_posterior_mean(jnp.zeros((4, 3)), jnp.ones((3, 10))),
        ),
        Case("ivp.question_text", "context", "range", lambda: ivp.question_text(_bank(), -1, 0)),
        Case(
            "ivp.update_posterior",
            "likelihood",
            "shape",
            lambda: ivp.update_posterior(jnp.zeros((4, 3)), jnp.ones((4, 2, 5)) / 5, 0),
        ),
        Case(
            "ivp.update_posterior",
            "answer",
            "range",
            lambda: ivp.update_posterior(jnp.zeros((4, 3)), jnp.ones((4, 3, 5)) / 5, 5),
        ),
        Case(
            "ivp.update_posterior",
            "answer",
            "type",
            lambda: ivp.update_posterior(jnp.zeros((4, 3)), jnp.ones((4, 3, 5)) / 5, 1.0),
        ),
        Case(
            "ivp.answer_tables",
            "library",
            "shape",
            lambda: ivp.answer_tables(_bank(features=True), jnp.ones((2, 4)), 1.0),
        ),
        Case(
            "ivp.answer_tables",
            "beta",
            "finite",
            lambda: ivp.answer_tables(_bank(features=True), jnp.ones((2, 10)), INF),
        ),
        Case(
            "ivp.persona_chat_model",
            "index",
            "range",
            lambda: ivp.persona_chat_model(
                ivp.Personas(jnp.ones((2, 1, 10)), jnp.ones(2)), 2, _bank(), persona_config=None
            ),
        ),
        Case(
            "ivp.pooled_profile",
            "library",
            "shape",
            lambda: ivp.pooled_profile(jnp.zeros((1, 4, 3)), jnp.ones((3, 10))),
        ),
        Case(
            "ivp.pooled_profile",
            "log_post",
            "shape",
            lambda: ivp.pooled_profile(jnp.zeros((4, 3)), jnp.ones((4, 10))),
        ),
        Case(
            "ivp.transcript_tokens",
            "answers",
            "shape",
            lambda: ivp.transcript_tokens(
                jnp.zeros((2, 3), jnp.int32),
                jnp.zeros((2, 2), jnp.int32),
                jnp.zeros(2, jnp.int32),
                4,
                3,
            ),
        ),
        Case(
            "ivp.transcript_tokens",
            "questions",
            "dtype",
            lambda: ivp.transcript_tokens(
                jnp.zeros((2, 3)), jnp.zeros((2, 3), jnp.int32), jnp.zeros(2, jnp.int32), 4, 3
            ),
        ),
        Case(
            "ivp.transcript_tokens",
            "num_answers",
            "range",
            lambda: ivp.transcript_tokens(
                jnp.zeros((2, 3), jnp.int32),
                jnp.zeros((2, 3), jnp.int32),
                jnp.zeros(2, jnp.int32),
                4,
                0,
            ),
        ),
        Case(
            "ldp_rl.estimated_model",
            "counts",
            "shape",
            lambda: ldp_rl.estimated_model(jnp.ones((2, 2, 3, 2))),
        ),
        Case(
            "ldp_rl.estimated_model",
            "counts",
            "finite",
            lambda: ldp_rl.estimated_model(jnp.full((2, 2, 2, 2), NAN)),
        ),
        Case(
            "ldp_rl.exp3_policy",
            "loss_estimates",
            "shape",
            lambda: ldp_rl.exp3_policy(
                jnp.zeros(3), ldp_rl.Exp3Params(jnp.asarray(0.1), jnp.asarray(0.1))
            ),
        ),
        Case(
            "ldp_rl.exp3_policy",
            "gamma",
            "range",
            lambda: ldp_rl.exp3_policy(
                jnp.zeros((2, 3)), ldp_rl.Exp3Params(jnp.asarray(0.1), jnp.asarray(1.5))
            ),
        ),
        Case(
            "ldp_rl.importance_weighted_losses",
            "message",
            "shape",
            lambda: ldp_rl.importance_weighted_losses(
                jnp.zeros(2), jnp.ones((2, 3)) / 3, jnp.zeros(2, jnp.int32)
            ),
        ),
        Case(
            "ldp_rl.importance_weighted_losses",
            "arms",
            "range",
            lambda: ldp_rl.importance_weighted_losses(
                jnp.zeros(3), jnp.ones((2, 3)) / 3, jnp.array([0, 3])
            ),
        ),
        Case(
            "ldp_rl.policy_value",
            "policy",
            "shape",
            lambda: ldp_rl.policy_value(_emdp(), jnp.zeros((2, 3), jnp.int32)),
        ),
        Case(
            "ldp_rl.policy_value",
            "policy",
            "dtype",
            lambda: ldp_rl.policy_value(_emdp(), jnp.zeros((2, 2))),
        ),
        Case(
            "ldp_rl.policy_value",
            "policy",
            "range",
            lambda: ldp_rl.policy_value(_emdp(), jnp.full((2, 2), 2, jnp.int32)),
        ),
        Case(
            "markov_games.bernstein_regret_bound",
            "num_arms",
            "range",
            lambda: markov_games.bernstein_regret_bound(None, 0),
        ),
        Case(
            "markov_games.bernstein_regret_bound",
            "delta",
            "range",
            lambda: markov_games.bernstein_regret_bound(None, 2, delta=1.5),
        ),
        Case(
            "markov_games.best_response_values",
            "policy",
            "shape",
            lambda: markov_games.best_response_values(
                markov_games.chicken(), jnp.full((1, 1, 3), 1 / 3)
            ),
        ),
        Case(
            "markov_games.markov_lp_cce",
            "game",
            "type",
            lambda: markov_games.markov_lp_cce(None),
        ),
        Case(
            "markov_games.policy_values",
            "policy",
            "shape",
            lambda: markov_games.policy_values(markov_games.chicken(), jnp.full((2, 1, 4), 0.25)),
        ),
        Case(
            "markov_games.product_policy",
            "marginals",
            "shape",
            lambda: markov_games.product_policy(
                markov_games.chicken(), [jnp.full((1, 1, 2), 0.5), jnp.ones((1, 1, 3)) / 3]
            ),
        ),
        Case(
            "markov_games.product_policy",
            "marginals",
            "range",
            lambda: markov_games.product_policy(markov_games.chicken(), [jnp.full((1, 1, 2), 0.5)]),
        ),
        Case(
            "markov_games.stage_gap",
            "q",
            "shape",
            lambda: markov_games.stage_gap(jnp.full(4, 0.25), jnp.zeros((4, 3)), (2, 2)),
        ),
        Case(
            "markov_games.stage_gap",
            "num_actions",
            "type",
            lambda: markov_games.stage_gap(jnp.full(4, 0.25), jnp.zeros((4, 2)), (2.5, 2)),
        ),
        Case(
            "rapo.completion_log_probs",
            "tokens",
            "shape",
            lambda: rapo.completion_log_probs(None, None, jnp.zeros((2, 8), jnp.int32)),
        ),
        Case(
            "rapo.completion_log_probs",
            "tokens",
            "dtype",
            lambda: rapo.completion_log_probs(None, None, jnp.zeros((2, 12))),
        ),
        Case(
            "rapo.completions",
            "reply",
            "shape",
            lambda: rapo.completions(
                rapo.World(), _rbatch(), jnp.zeros((2, 2), jnp.int32), psycot=False
            ),
        ),
        Case(
            "rapo.ideal_reply",
            "batch.profiles",
            "range",
            lambda: rapo.ideal_reply(rapo.World(), _rbatch(profile=9)),
        ),
        Case(
            "rapo.ideal_reply",
            "batch.questions",
            "range",
            lambda: rapo.ideal_reply(rapo.World(), _rbatch(question=4)),
        ),
        Case(
            "rapo.prompts",
            "batch.profiles",
            "shape",
            lambda: rapo.prompts(
                rapo.World(), rapo.Batch(jnp.zeros((2, 3), jnp.int32), jnp.zeros(2, jnp.int32))
            ),
        ),
        Case(
            "rapo.prompts",
            "batch.questions",
            "dtype",
            lambda: rapo.prompts(
                rapo.World(), rapo.Batch(jnp.zeros((2, 4), jnp.int32), jnp.zeros(2))
            ),
        ),
        Case(
            "rapo.score",
            "completion",
            "shape",
            lambda: rapo.score(rapo.World(), _rbatch(), jnp.zeros((3, 13), jnp.int32)),
        ),
        Case(
            "rapo.score",
            "world.generic_pay",
            "range",
            lambda: rapo.score(
                rapo.World(generic_pay=0.5), _rbatch(), jnp.zeros((2, 13), jnp.int32)
            ),
        ),
        Case(
            "scale.ar_scale_loss",
            "w",
            "range",
            lambda: scale.ar_scale_loss(
                None, (None, None), _toks(), _labs(), _toks(), _labs(), w=0.0
            ),
        ),
        Case(
            "scale.ar_scale_loss",
            "self_labels",
            "shape",
            lambda: scale.ar_scale_loss(
                None, (None, None), _toks(), _labs(), _toks(), _labs(3), w=2.0
            ),
        ),
        Case(
            "scale.ar_scale_loss",
            "self_weight",
            "range",
            lambda: scale.ar_scale_loss(
                None, (None, None), _toks(), _labs(), _toks(), _labs(), w=2.0, self_weight=NAN
            ),
        ),
        Case(
            "scale.mlp_denoiser",
            "dim",
            "range",
            lambda: scale.mlp_denoiser(0, 2, seeds=jnp.arange(1)),
        ),
        Case(
            "scale.mlp_denoiser",
            "seeds",
            "dtype",
            lambda: scale.mlp_denoiser(2, 2, seeds=jnp.ones(1)),
        ),
        Case(
            "scale.mlp_denoiser",
            "seeds",
            "shape",
            lambda: scale.mlp_denoiser(2, 2, seeds=jnp.arange(4).reshape(2, 2)),
        ),
        Case(
            "scale.rank_pairs",
            "x_b",
            "shape",
            lambda: scale.rank_pairs(
                jnp.ones((3, 2)), jnp.ones((3, 1)), _labs(3), jnp.ones(3), jnp.ones(3)
            ),
        ),
        Case(
            "scale.rank_pairs",
            "reward_b",
            "shape",
            lambda: scale.rank_pairs(
                jnp.ones((3, 2)), jnp.ones((3, 2)), _labs(3), jnp.ones(3), jnp.ones(2)
            ),
        ),
        Case(
            "scale.sequence_log_prob",
            "tokens",
            "dtype",
            lambda: scale.sequence_log_prob(None, None, jnp.ones((2, 2)), _labs()),
        ),
        Case(
            "scale.sequence_log_prob",
            "labels",
            "shape",
            lambda: scale.sequence_log_prob(None, None, _toks(), _labs(3)),
        ),
        Case(
            "scale.token_model",
            "num_classes",
            "range",
            lambda: scale.token_model(0, seeds=jnp.arange(1)),
        ),
        Case(
            "scale.token_model",
            "high",
            "range",
            lambda: scale.token_model(2, seeds=jnp.arange(1), low=1.0, high=0.0),
        ),
        Case(
            "scale.token_model",
            "seeds",
            "shape",
            lambda: scale.token_model(2, seeds=jnp.zeros((), jnp.int32)),
        ),
        Case(
            "scale.unet_denoiser",
            "size",
            "type",
            lambda: scale.unet_denoiser(7.5, 2, seeds=jnp.arange(1)),
        ),
        Case(
            "scale.unet_denoiser",
            "seeds",
            "range",
            lambda: scale.unet_denoiser(8, 2, seeds=jnp.arange(0)),
        ),
    ]


def _all_cases() -> list[Case]:
    return [
        *_ievi_cases(),
        *_lrnn_cases(),
        *_core_cases(),
        *_core_more_cases(),
        *_kernel_cases(),
        *_crce_cases(),
        *_kffm_cases(),
        *_lamp_cases(),
        *_lqzo_cases(),
        *_steam_cases(),
        *_ropmb_cases(),
        *_named_in_issue_cases(),
        *_key_first_cases(),
        *_owned_cases(),
        *_boundary_cases(),
    ]


CASES = _all_cases()


def _names(arg: str) -> re.Pattern[str]:
    """The argument as a whole word (``x`` must not match inside ``max``)."""
    return re.compile(rf"(?<![\w]){re.escape(arg)}(?![\w])")


def _rejudge(result):
    from jaxpapers.core.experiment import rejudge

    return rejudge(result)


#: A stored P17 record whose entry lacks the row its rule reads.
_NO_RULE_ROW = {
    "paper": "P17",
    "size": "quick",
    "seeds": 2,
    "experiments": [{"id": "model_error_matters_random_small_error", "rows": [], "extras": {}}],
}

CASES += [
    Case("core.experiment.rejudge", "result", "type", lambda: _rejudge([1, 2])),
    Case("core.experiment.rejudge", "result", "range", lambda: _rejudge(_NO_RULE_ROW)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input_raises_value_error_naming_the_argument(case: Case):
    with pytest.raises(ValueError) as info:
        case.call()
    assert _names(case.arg).search(str(info.value)), (case.id, str(info.value))


def test_check_helpers_accept_good_input_and_pass_tracers():
    """The helpers never refuse a good value, nor raise on a tracer (values unknown there)."""
    from jaxpapers.core import checks

    checks.check_key("key", jax.random.key(0))
    checks.check_key("key", jax.random.PRNGKey(0))
    checks.check_range("gamma", 0.0, 0.0, 1.0, high_open=True)
    checks.check_range("b", np.array([0.5, 1.0]), 0.0, low_open=True)
    assert checks.check_int("n", np.int64(3), minimum=1) == 3
    checks.check_dtype("x", jnp.ones(2), "floating")
    checks.check_same_dtype(a=jnp.ones(2), b=jnp.zeros(3))

    def f(key, x, n):
        checks.check_key("key", key)
        checks.check_range("x", x, 0.0, 1.0)
        checks.check_finite("x", x)
        checks.check_int("n", n, minimum=5)
        return x * 2

    out = jax.jit(f)(jax.random.key(0), jnp.asarray(NAN), jnp.int32(1))
    assert np.isnan(out)
    jax.vmap(lambda k: checks.check_key("key", k))(jax.random.split(jax.random.key(0), 3))
    for bad in (0, np.int32(0), jnp.zeros(2), jax.random.split(jax.random.key(0), 2)):
        with pytest.raises(ValueError, match="key"):
            checks.check_key("key", bad)
    checks.check_ndim("x", jnp.ones((2, 3)), (1, 2))
    with pytest.raises(ValueError, match=r"x has shape \(2,\) \(1 axes\); expected 2 axes"):
        checks.check_ndim("x", jnp.ones(2), 2)
    with pytest.raises(ValueError, match="n=True; expected an integer, not a bool"):
        checks.check_int("n", True)
    with pytest.raises(ValueError, match=r"dtypes must match: a is float32, b is int32"):
        checks.check_same_dtype(a=jnp.ones(2), b=jnp.zeros(2, jnp.int32))


# ----------------------------------------------------------------------------------------------
# Every export is classified.

PAPERS = (
    "audit", "cayley", "cfshap", "codi", "crce", "graphons", "ievi", "ivp", "kffm", "lamp",
    "ldp_rl", "lqzo", "lrnn", "markov_games", "multiclass", "rapo", "ropmb", "scale", "steam",
)  # fmt: skip

_TEXT = "takes text or chat transcripts only (no array, ranged scalar or key)"
_FACTORY = "a factory of a config or of nothing (no array, ranged scalar or key)"
_NO_ARGS = "takes no arguments"
_STEP_ALGEBRA = (
    "traced step algebra inside compiled solves: no value checks, NaN contract in its module "
    "docstring (jaxpapers.core.diffusion)"
)
_RUNNER = (
    "the experiment runner (registered experiments, result rows, files), not a function of "
    "user arrays"
)
_VERDICTS = "the verdict engine's rules and formatting over measured result rows (issue 32)"
_MINILM = "loads the optional MiniLM files from a path"
_PLACEMENT = "device placement of a pytree"
_SERVER = "starts an HTTP server (host and port; errors come from the socket layer)"

#: Exports with no bad-input row, and why. Classes, constants and module objects are left out by
#: kind (``_exported_functions`` skips them); these are functions.
LEFT_OUT: dict[str, str] = {
    "lrnn.evaluate_expression": "a pure-Python token-list evaluator (no array, range or key)",
    "lrnn.task_spec": "takes a task name only",
    "lrnn.seed_logits": "takes a graphdef only (returns a function)",
    "lrnn.make_mixer": "a layer factory of a spec string and sizes (the layers check inputs)",
    "lrnn.init_models": "takes a config and Python seeds",
    "lrnn.fit": "a training driver over SeedModels and a batch function (config-level)",
    "kernels.default_interpret": "no arguments",
    "kernels.has_accelerator": "no arguments",
    "audit.awareness_rates": "scores chat transcripts with a chat model (no array, range or key)",
    "audit.check_refinement": "is itself the check of a Refinement config",
    "audit.deployment_systems": "takes a scenario name only",
    "audit.dish_tool_result": _TEXT,
    "audit.feature_counts": _TEXT,
    "audit.fit_realism_judge": _TEXT,
    "audit.make_awareness_scorer": _FACTORY,
    "audit.make_pairwise_judge": _FACTORY,
    "audit.make_scorer": _FACTORY,
    "audit.make_target": _FACTORY,
    "audit.make_writer": _FACTORY,
    "audit.parse_score": _TEXT,
    "audit.render": _TEXT,
    "audit.rule_awareness": _TEXT,
    "audit.tool_call": _TEXT,
    "codi.ssl_optimizer": "an optimiser factory of a config (no array, range or key)",
    "cfshap.tabulate": "takes an SCM and a model only (no array, range or key)",
    "core.chat.atomic_write_text": "writes a text file (path and text only)",
    "core.chat.create_app": "builds an HTTP app around chat models (no array, range or key)",
    "core.chat.serve": _SERVER,
    "core.chat.start_server": _SERVER,
    "core.compilation.default_cache_dir": _NO_ARGS,
    "core.compilation.enable_compilation_cache": "sets the compilation cache folder (a path)",
    "core.compilation.backend_started": _NO_ARGS,
    "core.fit.all_finite": "any pytree; every value is valid input (returns whether it is finite)",
    "core.fit.keep_where": "any pytrees and a boolean; every value is valid input",
    "core.experiment.config_digest": _RUNNER,
    "core.experiment.paper_config": _RUNNER,
    "core.data.text.afinn_valence": "loads a bundled word list",
    "core.data.text.vader_sentiment": "loads a bundled word list",
    "core.diffusion.ddim_noise_std": _STEP_ALGEBRA,
    "core.diffusion.eps_to_score": _STEP_ALGEBRA,
    "core.diffusion.eps_to_x0": _STEP_ALGEBRA,
    "core.diffusion.lagged_coefficient": _STEP_ALGEBRA,
    "core.diffusion.lagged_estimate": _STEP_ALGEBRA,
    "core.diffusion.renoise": _STEP_ALGEBRA,
    "core.diffusion.renoise_x0_coefficient": _STEP_ALGEBRA,
    "core.diffusion.score_to_eps": _STEP_ALGEBRA,
    "core.diffusion.tweedie_denoise": _STEP_ALGEBRA,
    "core.diffusion.x0_to_eps": _STEP_ALGEBRA,
    "core.diffusion.x0_to_score": _STEP_ALGEBRA,
    "core.diffusion.zero_count": _NO_ARGS,
    "core.distributed.initialize": "process-group set-up (jax.distributed), configuration only",
    "core.distributed.is_primary": _NO_ARGS,
    "core.experiment.Verdict": _RUNNER,
    "core.experiment.apply_preconditions": _RUNNER,
    "core.experiment.experiments_for": _RUNNER,
    "core.experiment.paper_seeds": _RUNNER,
    "core.experiment.progress": _RUNNER,
    "core.experiment.render_markdown": _RUNNER,
    "core.experiment.render_text": _RUNNER,
    "core.experiment.run_paper": _RUNNER,
    "core.experiment.summarise": _RUNNER,
    "core.experiment.write_json_atomic": _RUNNER,
    "core.nn.bert.load_minilm": _MINILM,
    "core.nn.bert.load_safetensors": _MINILM,
    "core.nn.bert.load_tokenizer": _MINILM,
    "core.nn.bert.minilm_dir": _NO_ARGS,
    "core.nn.bert.tokenize": "needs the optional MiniLM tokenizer files (not installed everywhere)",
    "core.train.data_parallel_mesh": "device placement (a list of devices)",
    "core.train.make_train_step": "a factory of functions (loss and optimiser)",
    "core.train.replicate": _PLACEMENT,
    "core.train.shard_batch": _PLACEMENT,
    "core.verdicts.Verdict": _VERDICTS,
    "core.verdicts.seeds_needed": "total by contract: None for zero, non-finite or negative input",
    "core.verdicts.describe_comparison": _VERDICTS,
    "core.verdicts.evaluate_rule": _VERDICTS,
    "core.verdicts.format_number": _VERDICTS,
    "graphons.edge": _NO_ARGS,
    "graphons.triangle": _NO_ARGS,
    "ivp.desirable_profile": _NO_ARGS,
    "lamp.lagged_coefficient": _STEP_ALGEBRA,
    "lqzo.materialize": "pytree plumbing (no array of the user's, range or key)",
    "lqzo.merge_scaled": "module plumbing (graphdef and state)",
    "lqzo.split_scales": "takes a module only",
    "lqzo.zo_state": "reads an optimiser state",
    "markov_games.bernstein_exp3": _NO_ARGS,
    "markov_games.chicken": _NO_ARGS,
    "markov_games.exp3_ix": _NO_ARGS,
    "markov_games.shapley_game": _NO_ARGS,
    "multiclass.parameter_free_gaptron": _NO_ARGS,
    "multiclass.perceptron": _NO_ARGS,
    "rapo.all_profiles": "takes a World config only",
    "rapo.build_prompt": _TEXT,
    "rapo.format_psycot": _TEXT,
    "ropmb.Method": "a typing alias (Literal of method names), not a function",
}

#: Functions that take arrays, ranged scalars or a key and have no row yet. This list may only
#: shrink: a new export needs a row (or a reason in LEFT_OUT).
NOT_YET_COVERED: set[str] = set()


def _exported_functions() -> dict[str, Any]:
    """``package.name`` -> function for every exported function (not class, not constant)."""
    out: dict[str, Any] = {}

    def add(prefix: str, module: Any) -> None:
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isclass(obj) or not callable(obj):
                continue
            out[f"{prefix}.{name}"] = obj

    for paper in PAPERS:
        add(paper, importlib.import_module(f"jaxpapers.{paper}"))
    import jaxpapers.core as core

    for info in pkgutil.walk_packages(core.__path__, "jaxpapers.core."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        add(info.name.removeprefix("jaxpapers."), module)
    add("kernels", importlib.import_module("jaxpapers_kernels"))
    return out


def test_every_export_is_classified():
    exported = _exported_functions()
    covered = {c.fn for c in CASES}
    left_out = set(LEFT_OUT)
    unclassified = sorted(set(exported) - covered - left_out - NOT_YET_COVERED)
    assert not unclassified, f"exported functions with no bad-input row: {unclassified}"
    stale = sorted((left_out | NOT_YET_COVERED) - set(exported))
    assert not stale, f"LEFT_OUT / NOT_YET_COVERED name functions that are not exported: {stale}"
    both = sorted(covered & (left_out | NOT_YET_COVERED))
    assert not both, f"covered functions still listed as left out: {both}"
