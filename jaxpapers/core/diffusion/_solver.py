r"""A custom :class:`diffrax.AbstractSolver` that drives discrete reverse-diffusion steps.

Discrete samplers (DDPM, DDIM, and posterior samplers built on them) are not discretisations of
one vector field: each step is a map :math:`x_{t} \mapsto x_{t'}` that calls the denoiser, may
draw noise, and may keep a memory of earlier steps. :class:`ReverseDiffusionSolver` lets one
``diffrax.diffeqsolve`` run any such map (an :class:`AbstractReverseStep`) on a grid given by
``diffrax.StepTo``, with the PRNG key, the evaluation count and the step's memory carried in the
solver state.

Time convention: diffrax integrates forward in its own time :math:`\tau`; the discrete solver
uses :math:`\tau = -t`, so the decreasing diffusion grid :math:`t_0 > t_1 > \dots` becomes the
increasing diffrax grid :math:`-t_0 < -t_1 < \dots`. The term passed to ``diffeqsolve`` carries no
dynamics (the step does); it only satisfies diffrax's interface.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PyTree

from jaxpapers.core.diffusion._nfe import zero_count


class AbstractReverseStep(eqx.Module):
    """One reverse transition :math:`x_t \\to x_{t'}` (``t' < t``) of a discrete sampler."""

    @abc.abstractmethod
    def init_memory(self, x: Float[Array, ...], args: Any) -> PyTree:
        """The memory carried between steps before the first step (``None`` if unused)."""

    @abc.abstractmethod
    def __call__(
        self,
        x: Float[Array, ...],
        t: Float[Array, ""],
        t_next: Float[Array, ""],
        args: Any,
        memory: PyTree,
        key: Array,
        nfe: Int[Array, ""],
    ) -> tuple[Float[Array, ...], PyTree, Int[Array, ""]]:
        """Return ``(x_next, memory, nfe)`` after one step from ``t`` to ``t_next``.

        Args:
          x: current state at ``t``.
          t, t_next: diffusion times, ``t_next < t``.
          args: extra inputs shared by all steps (a measurement, for posterior samplers).
          memory: what the previous step returned.
          key: fresh PRNG key for this step.
          nfe: evaluation count so far.
        """


class _SolverState(NamedTuple):
    memory: PyTree
    key: Array
    nfe: Int[Array, ""]


def _no_dynamics(t: Array, y: Array, args: Any) -> Array:
    return jnp.zeros_like(y)


class ReverseDiffusionSolver(diffrax.AbstractSolver):
    """Runs an :class:`AbstractReverseStep` inside ``diffrax.diffeqsolve`` (time ``tau = -t``).

    Attributes:
      transition: the reverse step.
      key: PRNG key; step ``i`` uses the ``i``-th split of it.
    """

    transition: AbstractReverseStep
    key: Array

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable[..., diffrax.LocalLinearInterpolation]] = (
        diffrax.LocalLinearInterpolation
    )

    def order(self, terms: Any) -> int | None:
        return None

    def init(self, terms: Any, t0: Any, t1: Any, y0: Any, args: Any) -> _SolverState:
        return _SolverState(self.transition.init_memory(y0, args), self.key, zero_count())

    def step(
        self,
        terms: Any,
        t0: Any,
        t1: Any,
        y0: Any,
        args: Any,
        solver_state: _SolverState,
        made_jump: Any,
    ) -> tuple[Any, None, dict[str, Any], _SolverState, diffrax.RESULTS]:
        del terms, made_jump
        key, sub = jax.random.split(solver_state.key)
        y1, memory, nfe = self.transition(
            y0, -t0, -t1, args, solver_state.memory, sub, solver_state.nfe
        )
        state = _SolverState(memory, key, nfe)
        return y1, None, {"y0": y0, "y1": y1}, state, diffrax.RESULTS.successful

    def func(self, terms: Any, t0: Any, y0: Any, args: Any) -> Any:
        return terms.vf(t0, y0, args)


class ReverseSolution(NamedTuple):
    """Output of :func:`solve_reverse`.

    Attributes:
      x: final state at the last grid time, same shape as the initial state.
      nfe: exact number of denoiser evaluations (``int32``).
      memory: the step's memory after the last step.
    """

    x: Float[Array, ...]
    nfe: Int[Array, ""]
    memory: PyTree


def solve_reverse(
    step: AbstractReverseStep,
    x_init: Float[Array, ...],
    ts: Float[Array, " n"],
    *,
    key: Array,
    args: Any = None,
) -> ReverseSolution:
    """Run ``step`` along the decreasing grid ``ts`` with one ``diffrax.diffeqsolve`` call.

    Args:
      step: the reverse transition.
      x_init: state at ``ts[0]``, any shape.
      ts: ``[n + 1]`` strictly decreasing diffusion times (``n >= 1`` steps), e.g. from
        :func:`jaxpapers.core.diffusion.time_grid`.
      key: PRNG key.
      args: passed to every step (e.g. the measurement).

    Returns:
      :class:`ReverseSolution` with the state at ``ts[-1]`` and the exact evaluation count.
    """
    ts = jnp.asarray(ts)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(f"ts must be 1-D with at least 2 times (1 step); got shape {ts.shape}")
    taus = -ts.astype(x_init.dtype)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_no_dynamics),
        ReverseDiffusionSolver(step, key),
        t0=taus[0],
        t1=taus[-1],
        dt0=None,
        y0=x_init,
        args=args,
        stepsize_controller=diffrax.StepTo(ts=taus),
        saveat=diffrax.SaveAt(t1=True, solver_state=True),
        max_steps=int(ts.shape[0]) - 1,
        adjoint=diffrax.RecursiveCheckpointAdjoint(),
        throw=False,
    )
    state: _SolverState = sol.solver_state
    return ReverseSolution(sol.ys[0], state.nfe, state.memory)
