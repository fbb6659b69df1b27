r"""Custom :class:`diffrax.AbstractSolver` bases for discrete reverse-diffusion samplers.

:class:`AbstractDiffusionSolver` (the main interface): a solver whose ``step`` evaluates the
:class:`~jaxpapers.core.diffusion.DenoiserTerm` passed to ``diffrax.diffeqsolve`` and keeps its
multistep memory, its PRNG key and its evaluation count in the diffrax solver state.
:func:`solve_diffusion` runs one on a grid of diffusion times with :class:`UncheckedStepTo`;
diffrax's ``SaveAt(ts=...)``, progress meters and adjoints apply unchanged.

No host callbacks by default. diffrax's ``StepTo`` validates its grid at run time with
``equinox.error_if``, and ``diffeqsolve(throw=True)`` checks the result the same way; each
``error_if`` lowers to a host callback, which makes a jitted program run synchronously (the call
returns only once the program has run: no asynchronous dispatch) and costs a device-host round trip
on an accelerator. The solves here therefore step with :class:`UncheckedStepTo` (``StepTo``
without the run-time checks) and default to ``throw=False``, as a user's jitted training loop
needs:

* the grid is checked in Python by :func:`check_time_grid` (1-D, at least two times, strictly
  decreasing) where it is concrete (built outside any ``jit``); a grid traced inside ``jit`` is
  checked for its shape only, the values are the caller's responsibility (``time_grid`` grids are
  valid by construction);
* a failed solve (a non-finite state stops it) is reported in the returned ``result``
  (:class:`DiffusionSolution`) instead of raised, as with diffrax's
  ``throw=False``; samplers that return only ``(x, nfe)`` (``sample_ddim``) mark a failed sample
  with NaN. ``solve_diffusion(..., throw=True)`` restores diffrax's checked path (``StepTo``'s
  run-time grid checks and the raise), host callbacks included.

With ``save_ts``, diffrax itself checks ``SaveAt(ts=...)`` with ``equinox.error_if`` inside
``diffeqsolve``; that callback cannot be avoided through diffrax's API.

Discrete samplers (DDPM, DDIM, and posterior samplers built on them) are not discretisations of
one vector field: each step is a map :math:`x_{t} \mapsto x_{t'}` that calls the denoiser, may
draw noise, and may keep a memory of earlier steps; :class:`AbstractDiffusionSolver` lets one
``diffrax.diffeqsolve`` run any such map on a grid given by :class:`UncheckedStepTo`.

Time convention: diffrax integrates forward in its own time :math:`\tau`; the discrete solver
uses :math:`\tau = -t`, so the decreasing diffusion grid :math:`t_0 > t_1 > \dots` becomes the
increasing diffrax grid :math:`-t_0 < -t_1 < \dots`.

The PRNG key of a stochastic sampler is part of the solver state: it starts as the solver's
``key`` field and step ``i`` draws from the ``i``-th split (a documented key in solver state,
rather than a Brownian path: the discrete samplers draw fresh noise per step, not increments of
one Wiener process).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from diffrax._custom_types import (
    VF,
    Args,
    BoolScalarLike,
    DenseInfo,
    IntScalarLike,
    RealScalarLike,
    Y,
)
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree, Real, UInt32

from jaxpapers.core.checks import is_concrete
from jaxpapers.core.diffusion._nfe import zero_count
from jaxpapers.core.diffusion._term import DenoiserTerm


class UncheckedStepTo(diffrax.AbstractStepSizeController[IntScalarLike, None]):
    """``diffrax.StepTo`` without its run-time checks: steps to the prespecified times ``ts``.

    Same ``wrap`` / ``init`` / ``adapt_step_size`` as diffrax 0.7's ``StepTo`` (so the same steps
    and bit-identical solves), but ``wrap`` does not check that ``ts`` is strictly increasing and
    ``init`` does not check ``t0 == ts[0]`` and ``t1 == ts[-1]``: those checks are
    ``equinox.error_if`` calls, host callbacks in the compiled program. The caller guarantees them
    (the solvers here validate a concrete grid with :func:`check_time_grid` and always pass
    ``t0=ts[0]``, ``t1=ts[-1]``); with a bad grid the solve runs on it silently. One difference
    in the loop: diffrax ends a ``StepTo`` solve after ``len(ts) - 1`` steps (an optimisation
    keyed on the class), this one when the time reaches ``t1``; they agree unless a grid time
    lies within 100 ulps of ``t1`` (diffrax then clips that step to ``t1``, and ``StepTo`` adds a
    zero-length step).

    Attributes:
      ts: the times to step to (diffrax time), at least two; ``ts[0] = t0``, ``ts[-1] = t1``.
    """

    ts: Real[Array, " times"] = eqx.field(converter=jnp.asarray)

    def __check_init__(self):
        if self.ts.ndim != 1:
            raise ValueError("`ts` must be one-dimensional.")
        if len(self.ts) < 2:
            raise ValueError("`ts` must have length at least 2.")

    def wrap(self, direction: IntScalarLike) -> UncheckedStepTo:
        return type(self)(ts=self.ts * direction)

    def init(
        self,
        terms: PyTree[diffrax.AbstractTerm],
        t0: RealScalarLike,
        t1: RealScalarLike,
        y0: Y,
        dt0: None,
        args: Args,
        func: Callable[[PyTree[diffrax.AbstractTerm], RealScalarLike, Y, Args], VF],
        error_order: RealScalarLike | None,
    ) -> tuple[RealScalarLike, IntScalarLike]:
        del terms, t0, t1, y0, args, func, error_order
        if dt0 is not None:
            raise ValueError(
                "`dt0` should be `None`. Step location is already determined "
                f"by {type(self).__name__}(ts=...).",
            )
        return self.ts[1], 2

    def adapt_step_size(
        self,
        t0: RealScalarLike,
        t1: RealScalarLike,
        y0: Y,
        y1_candidate: Y,
        args: Args,
        y_error: Y | None,
        error_order: RealScalarLike | None,
        controller_state: IntScalarLike,
    ) -> tuple[bool, RealScalarLike, RealScalarLike, bool, IntScalarLike, diffrax.RESULTS]:
        del t0, y0, y1_candidate, args, y_error, error_order
        return (
            True,
            t1,
            self.ts[controller_state],
            False,
            controller_state + 1,
            diffrax.RESULTS.successful,
        )


def unwrap_term(terms: PyTree[diffrax.AbstractTerm]) -> DenoiserTerm:
    """The :class:`DenoiserTerm` inside diffrax's wrappers (diffrax wraps terms to fix the
    direction of time before a solver sees them)."""
    term = terms
    while not isinstance(term, DenoiserTerm):
        inner = getattr(term, "term", None)
        if inner is None:
            raise TypeError(f"terms is a {type(terms).__name__}; expected a DenoiserTerm")
        term = inner
    return term


class DiffusionSolverState(NamedTuple):
    """Solver state of an :class:`AbstractDiffusionSolver` (diffrax carries it between steps).

    Attributes:
      memory: the solver's multistep memory (e.g. the previous data prediction), or ``None``.
      key: raw PRNG key data (``jax.random.key_data``; raw so that diffrax's error check can
        carry it); each step splits the key and draws from the second half.
      nfe: exact number of denoiser evaluations so far (``int32``).
    """

    memory: PyTree
    key: UInt32[Array, ...]
    nfe: Int[Array, ""]


def _raw_key(key: PRNGKeyArray) -> UInt32[Array, ...]:
    key = jnp.asarray(key)
    return jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key


class AbstractDiffusionSolver(diffrax.AbstractSolver[DiffusionSolverState]):
    r"""Base of the discrete reverse-diffusion solvers that evaluate a :class:`DenoiserTerm`.

    A subclass implements :meth:`init_memory` and :meth:`transition` (one step from diffusion
    time ``t`` to ``t_next < t``, evaluating the denoiser through ``terms.denoise``) and holds a
    ``key`` field (``None`` for deterministic solvers). diffrax's time is :math:`\tau = -t`.
    """

    term_structure: ClassVar = DenoiserTerm
    interpolation_cls: ClassVar[Callable[..., diffrax.LocalLinearInterpolation]] = (
        diffrax.LocalLinearInterpolation
    )

    def order(self, terms: DenoiserTerm) -> int | None:
        return 1

    def init_memory(self, terms: DenoiserTerm, y0: Y, args: Args) -> PyTree:
        """The multistep memory before the first step (default: ``None``)."""
        return None

    @abc.abstractmethod
    def transition(
        self,
        terms: DenoiserTerm,
        x: Float[Array, ...],
        t: Float[Array, ""],
        t_next: Float[Array, ""],
        args: Args,
        memory: PyTree,
        key: PRNGKeyArray,
        nfe: Int[Array, ""],
    ) -> tuple[Float[Array, ...], PyTree, Int[Array, ""]]:
        """Return ``(x_next, memory, nfe)`` after one step from ``t`` to ``t_next`` (diffusion
        times), evaluating the denoiser through ``terms.denoise`` (which counts)."""

    def init(
        self, terms: DenoiserTerm, t0: RealScalarLike, t1: RealScalarLike, y0: Y, args: Args
    ) -> DiffusionSolverState:
        key = getattr(self, "key", None)
        key = _raw_key(jax.random.key(0) if key is None else key)
        return DiffusionSolverState(self.init_memory(terms, y0, args), key, zero_count())

    def step(
        self,
        terms: DenoiserTerm,
        t0: RealScalarLike,
        t1: RealScalarLike,
        y0: Y,
        args: Args,
        solver_state: DiffusionSolverState,
        made_jump: BoolScalarLike,
    ) -> tuple[Y, None, DenseInfo, DiffusionSolverState, diffrax.RESULTS]:
        del made_jump
        key, sub = jax.random.split(jax.random.wrap_key_data(solver_state.key))
        t, t_next = -jnp.asarray(t0, y0.dtype), -jnp.asarray(t1, y0.dtype)
        y1, memory, nfe = self.transition(
            unwrap_term(terms), y0, t, t_next, args, solver_state.memory, sub, solver_state.nfe
        )
        finite = jnp.all(jnp.isfinite(y1))
        result = diffrax.RESULTS.where(finite, diffrax.RESULTS.successful, _NONFINITE)
        state = DiffusionSolverState(memory, jax.random.key_data(key), nfe)
        return y1, None, {"y0": y0, "y1": y1}, state, result

    def func(self, terms: DenoiserTerm, t0: RealScalarLike, y0: Y, args: Args) -> Y:
        return terms.vf(t0, y0, args)


# diffrax stops the solve at the first non-successful step (and raises with ``throw=True``).
_NONFINITE = diffrax.RESULTS.nonfinite


class DiffusionSolution(NamedTuple):
    """Output of :func:`solve_diffusion`.

    Attributes:
      x: the state at the last grid time (shape of the initial state).
      nfe: exact number of denoiser evaluations (``int32``).
      memory: the solver's multistep memory after the last step.
      ts: the diffusion times of ``ys`` (``None`` unless ``save_ts`` was given).
      ys: the states at ``save_ts`` (``[len(save_ts), *x.shape]``) or ``None``.
      result: diffrax's ``RESULTS``: ``successful``, or why the solve stopped (e.g.
        ``RESULTS.nonfinite``; then ``x`` is not finite). With the default ``throw=False`` the
        caller checks it (``sol.result == diffrax.RESULTS.successful``, a traced boolean).
    """

    x: Float[Array, ...]
    nfe: Int[Array, ""]
    memory: PyTree
    ts: Float[Array, " s"] | None
    ys: Float[Array, "s ..."] | None
    result: diffrax.RESULTS


def check_time_grid(ts: Float[Array, " n"], dtype: Any = None) -> Float[Array, " n"]:
    """Validate a decreasing diffusion-time grid in Python; returns it as a JAX array.

    Always checks the shape (1-D, at least two times: one step). Where ``ts`` is concrete (built
    outside ``jit``, or closed over by a jitted function) it also checks the values: strictly
    decreasing (which also rejects NaN), after a cast to ``dtype`` (the dtype the solve steps in,
    where a fine grid can collapse: ``bfloat16``). These are the checks diffrax's ``StepTo``
    makes at run time with ``equinox.error_if`` (``-ts`` strictly increasing; ``t0``/``t1`` are
    the grid's ends by construction here). A grid traced inside ``jit`` is not checked for its
    values: that would need a host callback; the caller guarantees it (``sample_ddim`` checks its
    ``time_grid`` at trace time; ``solve_diffusion(..., throw=True)`` checks at run time).

    Args:
      ts: the grid, ``[n + 1]`` diffusion times.
      dtype: the dtype the values are checked in (default: that of ``ts``).

    Raises:
      ValueError: naming ``ts``, on a bad shape or a concrete grid that is not strictly
        decreasing.
    """
    shape = np.shape(ts)
    if len(shape) != 1 or shape[0] < 2:
        raise ValueError(f"ts must be 1-D with at least 2 times (1 step); got shape {shape}")
    if is_concrete(ts):
        _check_decreasing(np.asarray(ts), dtype)
    return jnp.asarray(ts)


def _check_decreasing(host: np.ndarray, dtype: Any = None) -> None:
    """``check_time_grid``'s value check on a host array (NumPy only: runs no JAX program)."""
    host = host if dtype is None else host.astype(dtype)
    if not np.all(host[1:] < host[:-1]):
        raise ValueError(
            f"ts must be strictly decreasing (diffusion times, in {host.dtype}); got {host}"
        )


def solve_diffusion(
    term: DenoiserTerm,
    solver: AbstractDiffusionSolver,
    x_init: Float[Array, ...],
    ts: Float[Array, " n"],
    *,
    args: Args = None,
    save_ts: Float[Array, " s"] | None = None,
    adjoint: diffrax.AbstractAdjoint | None = None,
    progress_meter: diffrax.AbstractProgressMeter | None = None,
    throw: bool = False,
) -> DiffusionSolution:
    r"""Run a diffusion solver on the decreasing grid ``ts`` with one ``diffrax.diffeqsolve``.

    Args:
      term: the :class:`DenoiserTerm` (the denoiser and the schedule).
      solver: an :class:`AbstractDiffusionSolver` (``DDIM``, ``DPMSolverPP2M``, a posterior
        sampler).
      x_init: state at ``ts[0]``, any shape.
      ts: ``[n + 1]`` strictly decreasing diffusion times (``n >= 1`` steps); checked by
        :func:`check_time_grid` (its values only where concrete).
      args: passed to the term and every step (a measurement, class labels).
      save_ts: optional decreasing diffusion times inside ``[ts[-1], ts[0]]`` to save the
        trajectory at (``diffrax.SaveAt(ts=-save_ts)``; between grid times it is interpolated
        linearly).
      adjoint: diffrax adjoint (default ``RecursiveCheckpointAdjoint``).
      progress_meter: e.g. ``diffrax.TqdmProgressMeter()``.
      throw: ``False`` (default): no host callbacks in the program (asynchronous dispatch, no
        device-host round trip); the grid steps with :class:`UncheckedStepTo` and a failed
        solve (a non-finite state stops it) is reported in ``result``, not raised, as with
        diffrax's ``throw=False``. ``True``: diffrax's checked path, ``diffrax.StepTo``
        (checks the grid at run time, also a traced one) and ``diffeqsolve(throw=True)``
        (raises on a failed solve); both are ``equinox.error_if`` host callbacks. The samples
        are bit-identical either way.

    Returns:
      :class:`DiffusionSolution`; check ``result`` unless ``throw=True``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxpapers.core.diffusion import DDIM, DenoiserTerm, VPSchedule, solve_diffusion
      >>> term = DenoiserTerm(lambda x, t: 0.5 * x, VPSchedule())
      >>> ts = jnp.linspace(1.0, 0.0, 11)
      >>> sol = solve_diffusion(term, DDIM(), jnp.ones(3), ts)
      >>> sol.x.shape, int(sol.nfe)
      ((3,), 10)
    """
    if not isinstance(term, DenoiserTerm):
        raise TypeError(f"term is a {type(term).__name__}; expected a DenoiserTerm")
    if not isinstance(solver, AbstractDiffusionSolver):
        raise TypeError(f"solver is a {type(solver).__name__}; expected an AbstractDiffusionSolver")
    ts = check_time_grid(ts, x_init.dtype)
    taus = -ts.astype(x_init.dtype)
    if save_ts is None:
        saveat = diffrax.SaveAt(t1=True, solver_state=True)
    else:
        saveat = diffrax.SaveAt(
            subs=(
                diffrax.SubSaveAt(t1=True),
                diffrax.SubSaveAt(ts=-jnp.asarray(save_ts, x_init.dtype)),
            ),
            solver_state=True,
        )
    sol = diffrax.diffeqsolve(
        term,
        solver,
        t0=taus[0],
        t1=taus[-1],
        dt0=None,
        y0=x_init,
        args=args,
        stepsize_controller=diffrax.StepTo(ts=taus) if throw else UncheckedStepTo(ts=taus),
        saveat=saveat,
        max_steps=int(ts.shape[0]) - 1,
        adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        progress_meter=diffrax.NoProgressMeter() if progress_meter is None else progress_meter,
        throw=throw,
    )
    state: DiffusionSolverState = sol.solver_state
    if save_ts is None:
        return DiffusionSolution(sol.ys[0], state.nfe, state.memory, None, None, sol.result)
    final, traj = sol.ys
    return DiffusionSolution(final[0], state.nfe, state.memory, -sol.ts[1], traj, sol.result)
