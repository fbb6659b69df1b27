"""Tests of jaxpapers.graphons against closed forms, float64 loops and networkx."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from helpers import tolerance

from jaxpapers.graphons import (
    NeuralGraphon,
    PatternGraph,
    TailObjective,
    TuranObjective,
    clique,
    clique_construction,
    cycle,
    edge,
    grid_density,
    hub_construction,
    matrix_density,
    optimise_graphon,
    path,
    plain_mc_density,
    solve_shift,
    step_density,
    symmetric_mc_density,
    triangle,
)


def _injective_density_loop(H: PatternGraph, A: np.ndarray) -> float:
    m = A.shape[0]
    total, count = 0.0, 0
    for phi in itertools.permutations(range(m), H.num_nodes):
        total += np.prod([A[phi[a], phi[b]] for a, b in H.edges])
        count += 1
    return total / count


def _step_density_loop(H, sizes, values) -> float:
    k = len(sizes)
    total = 0.0
    for phi in itertools.product(range(k), repeat=H.num_nodes):
        w = np.prod([sizes[i] for i in phi])
        total += w * np.prod([values[phi[a], phi[b]] for a, b in H.edges])
    return total


def test_step_density_closed_forms_and_loop():
    p, a, b = 0.3, 0.4, 0.25
    tol = tolerance(jnp.float32)
    np.testing.assert_allclose(
        step_density(cycle(4), jnp.ones(1), jnp.full((1, 1), p)), p**4, **tol
    )
    clique_w = jnp.array([[1.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(
        step_density(triangle(), jnp.array([a, 1 - a]), clique_w), a**3, **tol
    )
    hub = jnp.array([[1.0, 1.0], [1.0, 0.0]])
    np.testing.assert_allclose(
        step_density(triangle(), jnp.array([b, 1 - b]), hub), 3 * b**2 - 2 * b**3, **tol
    )
    rng = np.random.default_rng(0)
    sizes = rng.dirichlet(np.ones(3))
    values = rng.uniform(size=(3, 3))
    values = (values + values.T) / 2
    for H in (clique(4), cycle(5), path(4)):
        np.testing.assert_allclose(
            step_density(H, jnp.asarray(sizes), jnp.asarray(values)),
            _step_density_loop(H, sizes, values),
            rtol=1e-5,
        )


def test_matrix_density_is_the_injective_u_statistic():
    rng = np.random.default_rng(1)
    A = rng.uniform(size=(7, 7))
    A = (A + A.T) / 2
    with jax.enable_x64(True):
        for H in (triangle(), clique(4), cycle(4)):
            np.testing.assert_allclose(
                matrix_density(H, jnp.asarray(A)), _injective_density_loop(H, A), rtol=1e-10
            )


def test_monte_carlo_estimators_are_unbiased(key):
    a, p = 0.35, 0.3
    values = jnp.array([[0.9, p], [p, 0.2]])
    exact = float(step_density(cycle(4), jnp.array([a, 1 - a]), values))

    def W(x, y):
        return values[(x >= a).astype(int), (y >= a).astype(int)]

    keys = jax.random.split(key, 200)
    for est in (  # jitted: one compiled program per estimator instead of one per operation
        jax.jit(jax.vmap(lambda k: symmetric_mc_density(cycle(4), W, key=k, num_points=40)))(keys),
        jax.jit(jax.vmap(lambda k: plain_mc_density(cycle(4), W, key=k, num_tuples=400)))(keys),
    ):
        se = float(est.std()) / np.sqrt(len(keys))
        assert abs(float(est.mean()) - exact) < 4.5 * se


def test_neural_graphon_symmetric_bounded_jit_vmap(key):
    g = NeuralGraphon(key=key, width=12, depth=1)
    x, y = jax.random.uniform(jax.random.key(1), (2, 50))
    w = jax.jit(g.__call__)(x, y)
    np.testing.assert_allclose(w, g(y, x), **tolerance(jnp.float32))
    assert bool(((w > 0) & (w < 1)).all())
    per = jax.vmap(lambda a, b: g(a, b))(x, y)
    np.testing.assert_allclose(per, w, **tolerance(jnp.float32))
    # the pair matrix (one network pass, symmetrised by transposition) = logits pair by pair
    L = np.asarray(jax.jit(lambda p: g.logit_matrix(p))(x[:7]))
    np.testing.assert_array_equal(L, L.T)
    xs, ys = np.meshgrid(np.asarray(x[:7]), np.asarray(x[:7]), indexing="ij")
    want = np.asarray(g.logits(xs.ravel(), ys.ravel())).reshape(7, 7)  # f(x, y) and f(y, x)
    np.testing.assert_allclose(L, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    np.testing.assert_allclose(g.matrix(x[:7]), jax.nn.sigmoid(L), **tolerance(jnp.float32))


def test_shift_solver_implicit_gradient_matches_finite_differences():
    with jax.enable_x64(True):
        L0 = jax.random.normal(jax.random.key(3), (12, 12), jnp.float64)
        L0 = L0 + L0.T
        direction = jax.random.normal(jax.random.key(4), (12, 12), jnp.float64)
        direction = direction + direction.T

        def shift(eps, H=triangle()):
            return solve_shift(H, L0 + eps * direction, 0.05).shift

        sol = solve_shift(triangle(), L0, 0.05)
        assert abs(float(sol.residual)) < 1e-12
        grad = jax.grad(shift)(0.0)
        h = 1e-5
        fd = (shift(h) - shift(-h)) / (2 * h)
        np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_optimise_graphon_reduces_the_objective(key):
    g = NeuralGraphon(key=key, width=12, depth=1, sharpness=2.0)
    obj = TailObjective(triangle(), 0.2, 1.0)
    res = optimise_graphon(
        obj, g, key=jax.random.key(1), steps=60, num_points=16, learning_rate=2e-2
    )
    assert bool(res.finite)
    assert float(res.losses[-10:].mean()) < float(res.losses[:10].mean())
    turan = TuranObjective(edge(), triangle())
    res = optimise_graphon(turan, g, key=jax.random.key(1), steps=5, num_points=8)
    assert res.losses.shape == (5,)


def test_reference_constructions_meet_the_target():
    p, delta = 0.1, 3.0
    for c, blocks in (
        (clique_construction(p, delta), lambda a: [[1.0, p], [p, p]]),
        (hub_construction(p, delta), lambda b: [[1.0, 1.0], [1.0, p]]),
    ):
        t = step_density(
            triangle(), jnp.array([c.parameter, 1 - c.parameter]), jnp.array(blocks(c.parameter))
        )
        np.testing.assert_allclose(t, (1 + delta) * p**3, rtol=1e-4)


def test_sampled_graph_densities_match_networkx():
    nx = pytest.importorskip("networkx", reason="networkx is not installed")
    n = 24
    g = NeuralGraphon(key=jax.random.key(5), width=12, depth=1)
    x = jax.random.uniform(jax.random.key(6), (n,))
    probs = np.asarray(g.matrix(x))
    upper = np.triu(np.random.default_rng(0).uniform(size=(n, n)) < probs, 1)
    adj = (upper | upper.T).astype(np.float64)
    G = nx.from_numpy_array(adj)
    falling3 = n * (n - 1) * (n - 2)
    falling4 = falling3 * (n - 3)
    triangles = sum(nx.triangles(G).values()) // 3
    squares = sum(1 for c in nx.simple_cycles(G, length_bound=4) if len(c) == 4)
    with jax.enable_x64(True):
        A = jnp.asarray(adj)
        np.testing.assert_allclose(
            matrix_density(triangle(), A), 6 * triangles / falling3, rtol=1e-12
        )
        np.testing.assert_allclose(matrix_density(cycle(4), A), 8 * squares / falling4, rtol=1e-12)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: PatternGraph(3, [(0, 0), (1, 2)]), "self-loop"),
        (lambda: PatternGraph(3, [(0, 5)]), "outside"),
        (lambda: PatternGraph(3, [(0, 1), (1, 0)]), "repeat"),
        (lambda: solve_shift(edge(), jnp.zeros((4, 4)), 1.5), "densities lie in"),
        (lambda: TailObjective(triangle(), 1.2, 0.5), "p in \\(0, 1\\)"),
        (lambda: TailObjective(triangle(), 0.0, 0.5), "p in \\(0, 1\\)"),
        (lambda: step_density(triangle(), jnp.array([0.5, 0.6]), jnp.eye(2)), "sizes"),
        (lambda: matrix_density(clique(4), jnp.ones((3, 3))), "cannot hold"),
    ],
)
def test_bad_inputs(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_control_variate_is_exact_on_grid_aligned_step_graphons():
    """When W's blocks are unions of grid cells, U and U_g coincide: the estimate is exact."""
    sizes = jnp.array([0.25, 0.25, 0.5])
    values = jnp.array([[0.9, 0.2, 0.0], [0.2, 0.6, 0.3], [0.0, 0.3, 0.8]])
    edges = jnp.cumsum(sizes)[:-1]

    def W(x, y):
        return values[
            jnp.searchsorted(edges, x, side="right"), jnp.searchsorted(edges, y, side="right")
        ]

    for H in (triangle(), cycle(4)):
        exact = float(step_density(H, sizes, values))
        for seed in range(3):
            est = symmetric_mc_density(
                H, W, key=jax.random.key(seed), num_points=24, control_grid=8
            )
            np.testing.assert_allclose(float(est), exact, rtol=1e-5, atol=1e-7)


def test_control_variate_is_unbiased_and_cuts_variance_on_neural_graphons():
    g = NeuralGraphon(key=jax.random.key(1), sharpness=2.0)
    keys = jax.random.split(jax.random.key(2), 400)
    H = triangle()
    draw = lambda grid: jax.jit(
        jax.vmap(lambda k: symmetric_mc_density(H, g, key=k, num_points=32, control_grid=grid))
    )(keys)
    plain_u, with_cv = np.asarray(draw(0), np.float64), np.asarray(draw(16), np.float64)
    truth = float(grid_density(H, g, 192))  # midpoint rule; error << the tolerance below
    se = with_cv.std() / np.sqrt(len(keys))
    assert abs(with_cv.mean() - truth) < 4 * se + 2e-4
    assert abs(plain_u.mean() - truth) < 4 * plain_u.std() / np.sqrt(len(keys)) + 2e-4
    assert with_cv.var() < 0.1 * plain_u.var()


@pytest.mark.parametrize("bad", [-1, 2.5])
def test_control_grid_must_be_a_non_negative_int(bad):
    with pytest.raises(ValueError, match="control_grid"):
        symmetric_mc_density(
            triangle(), lambda x, y: x * y, key=jax.random.key(0), num_points=8, control_grid=bad
        )


def test_initial_graphons_program_equals_init_per_seed():
    """P19's initial graphons (one vmapped program) equal ``NeuralGraphon(key=...)`` per seed."""
    from jaxpapers.graphons.experiments import _runs

    seeds = np.array([0, 3], np.int32)
    stacked = _runs._init_graphons(seeds, sharpness=2.0)
    for i, seed in enumerate(seeds):
        one = NeuralGraphon(key=jax.random.key(int(seed)), sharpness=2.0)
        for a, b in zip(jax.tree.leaves(stacked), jax.tree.leaves(one), strict=True):
            assert np.array_equal(np.asarray(a)[i], np.asarray(b))


def test_optimise_graphon_keeps_the_per_step_keys_and_step_index():
    """The loop (``jaxpapers.core.fit.fit``) draws step ``t``'s points from the ``t``-th key of
    ``split(key, steps)`` and passes ``t`` to the objective, as the former hand-written scan did:
    the same trajectory as that loop written out step by step."""
    steps, points, lr = 6, 16, 2e-2
    g = NeuralGraphon(key=jax.random.key(0), width=12, depth=1, sharpness=2.0)
    obj = TailObjective(triangle(), 0.2, 1.0)
    res = optimise_graphon(
        obj, g, key=jax.random.key(1), steps=steps, num_points=points, learning_rate=lr
    )
    opt = optax.adam(lr)
    graphdef, params = nnx.split(g, nnx.Param)
    state, losses, values = opt.init(params), [], []
    for t, k in enumerate(jax.random.split(jax.random.key(1), steps)):
        x = jax.random.uniform(k, (points,))
        loss_fn = lambda p, x=x, t=t: obj(nnx.merge(graphdef, p), x, jnp.asarray(t))
        (loss, value), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        losses.append(float(loss))
        values.append(float(value))
    assert bool(res.finite)
    np.testing.assert_allclose(np.asarray(res.losses), losses, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(res.values), values, rtol=1e-4)
    # The result's module is its parameters merged into the graphon's graph.
    for a, b in zip(
        jax.tree.leaves(res.graphon),
        jax.tree.leaves(nnx.merge(nnx.graphdef(g), res.params)),
        strict=True,
    ):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    # The tail's loss does not depend on a constant offset of the logits (the shift solver takes
    # it back), so the gradients of ``head_bias`` and ``shift`` are rounding noise that Adam
    # scales up to full steps: compare the other parameters.
    want = nnx.merge(graphdef, params)
    for name in ("embed", "embed_bias", "blocks", "block_bias", "head"):
        got, ref = np.asarray(getattr(res.graphon, name)), np.asarray(getattr(want, name))
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, err_msg=name)


def _equinox_graphon(key, *, width=48, depth=2, frequencies=(1.0, 3.0, 9.0), sharpness=4.0):
    """The former ``eqx.Module`` graphon (its ``init`` draws and its ``raw`` forward pass, with
    which the committed P19 results were computed), kept as the reference of the nnx module."""
    import math

    import equinox as eqx

    class EqxGraphon(eqx.Module):
        embed: jax.Array
        embed_bias: jax.Array
        blocks: jax.Array
        block_bias: jax.Array
        head: jax.Array
        head_bias: jax.Array
        shift: jax.Array
        frequencies: tuple = eqx.field(static=True)
        sharpness: float = eqx.field(static=True)

        def raw(self, x, y):
            z = jnp.stack([x, y], axis=-1)
            omega = jnp.asarray(self.frequencies)
            lead = (1,) * jnp.ndim(x)
            pre = jnp.einsum("...i,sij->...sj", z, self.embed) + self.embed_bias.reshape(
                lead + self.embed_bias.shape
            )
            h = jnp.sin(omega.reshape((*lead, -1, 1)) * pre).reshape(*jnp.shape(x), -1)
            for k in range(self.blocks.shape[0]):
                h = h + jnp.sin(h @ self.blocks[k] + self.block_bias[k].reshape((*lead, -1)))
            return self.sharpness * (h @ self.head + self.head_bias)

        def logits(self, x, y):
            return 0.5 * (self.raw(x, y) + self.raw(y, x)) + self.shift

    per, s = width // len(frequencies), len(frequencies)
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    c = math.sqrt(6.0 / width)
    return EqxGraphon(
        embed=jax.random.uniform(k1, (s, 2, per), minval=-1.0, maxval=1.0),
        embed_bias=jax.random.uniform(k2, (s, per), minval=-math.pi, maxval=math.pi),
        blocks=jax.random.uniform(k3, (depth, width, width), minval=-c, maxval=c),
        block_bias=jax.random.uniform(k4, (depth, width), minval=-0.1, maxval=0.1),
        head=jax.random.uniform(k5, (width,), minval=-c, maxval=c),
        head_bias=jnp.zeros(()),
        shift=jnp.zeros(()),
        frequencies=tuple(float(f) for f in frequencies),
        sharpness=float(sharpness),
    )


@pytest.mark.parametrize("seed, kwargs", [(0, {}), (7, dict(width=12, depth=1, sharpness=2.0))])
def test_initial_weights_and_logits_equal_the_former_equinox_graphon(seed, kwargs):
    """The nnx module draws the former ``eqx.Module``'s initial weights bit for bit (same key
    splits, shapes and ranges) and computes the same logits (same operations), so P19's rows
    are unchanged per seed."""
    g = NeuralGraphon(key=jax.random.key(seed), **kwargs)
    ref = _equinox_graphon(jax.random.key(seed), **kwargs)
    names = ("embed", "embed_bias", "blocks", "block_bias", "head", "head_bias", "shift")
    for name in names:
        np.testing.assert_array_equal(getattr(g, name)[...], getattr(ref, name), err_msg=name)
    assert (g.frequencies, g.sharpness) == (ref.frequencies, ref.sharpness)
    x = jax.random.uniform(jax.random.key(seed + 1), (2, 9))
    xs, ys = jnp.meshgrid(x[0], x[1], indexing="ij")
    got = jax.jit(lambda g, a, b: g.logits(a, b))(g, xs, ys)
    want = jax.jit(lambda r, a, b: r.logits(a, b))(ref, xs, ys)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(width=10), "multiple"),
        (dict(sharpness=0.0), "sharpness"),
        (dict(frequencies=()), "frequencies"),
        (dict(depth=-1), "depth"),
    ],
)
def test_neural_graphon_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NeuralGraphon(key=jax.random.key(0), **kwargs)
    with pytest.raises(ValueError, match="key"):
        NeuralGraphon(key=0)


def test_newton_keeps_the_checked_iterate_when_the_last_correction_is_large():
    # At s = 0 the residual 5e-8 meets TOL but the slope is 1e-6: the Newton-corrected point
    # -0.05 lies inside the bracket and has residual -1.25e-4; the checked s = 0 must come back.
    from jaxpapers.graphons._constraint import TOL, _newton

    with jax.enable_x64(True):

        def f(s):
            return s**3 + 1e-6 * s + 5e-8

        s = _newton(f, jnp.asarray(0.0, jnp.float64), jnp.asarray(1.0, jnp.float64))
        assert abs(float(f(s))) <= TOL
        assert float(s) == 0.0


def test_turan_rows_select_on_the_training_objective_and_report_the_pass_share():
    from jaxpapers.graphons.experiments._runs import turan_rows

    # seed 0: restart 1 has the larger rounded density but the smaller training objective;
    # seed 1: restart 0 has the better objective and fails the forbidden bound (reported as is)
    dens = np.array([0.21, 0.20, 0.22, 0.19])
    rdens = np.array([0.20, 0.22, 0.22, 0.19])
    rforb = np.array([0.0, 0.0, 0.01, 0.0])
    values, best, _ = turan_rows("k4", dens, rdens, rforb, 2 / 9, (2, 2))
    np.testing.assert_array_equal(best, [0, 0])
    np.testing.assert_allclose(values["k4"], [2 / 9 - 0.20, abs(0.22 - 2 / 9)], rtol=1e-12)
    np.testing.assert_allclose(values["k4_forbidden"], [0.0, 0.01])
    np.testing.assert_allclose(values["k4_restart_pass_share"], [1.0, 0.5])
