r"""One tabular MDP type for the planning, RL and game papers: transitions ``P[S, A, S']``.

:class:`TabularMDP` holds a finite MDP as arrays, with one axis order everywhere:

- ``P[s, a, s'] = Pr(s' | s, a)``, shape ``[S, A, S]``;
- ``R[s, a]``, the expected reward of taking ``a`` in ``s``, shape ``[S, A]``;
- ``gamma``, the discount (a scalar array, so MDPs of different discounts stack and ``vmap``);
- ``horizon``, static: ``None`` for the infinite-horizon discounted problem
  (:math:`V = \max_a R + \gamma P V`, which needs ``gamma < 1``), or the number of steps ``H``
  of an episodic problem (:math:`V_h = \max_a R + \gamma P V_{h+1}`, :math:`V_H = 0`; ``gamma``
  is then usually 1);
- ``initial``, the start distribution ``[S]`` of an episode (default: state 0).

How the papers use it:

- P17 (``jaxpapers.ievi``, discounted planning): ``TabularMDP(P, R, gamma=0.99)``.
- P15 (``jaxpapers.ldp_rl``, episodic RL): ``TabularMDP(P, R, horizon=H)`` (``gamma = 1``, every
  episode starts in state 0).
- P14 (``jaxpapers.markov_games``, episodic multi-player games) uses the two extensions of the
  array shapes, and nothing else: **a leading step axis** on ``P`` and ``R`` (one kernel per step of
  a time-inhomogeneous episode, ``P[h, s, a, s']``; then ``horizon`` must equal ``P.shape[0]``) and
  **a trailing players axis** on ``R`` (``R[h, s, a, i]``, player ``i``'s reward). The action axis
  is then the players' *joint* action, flattened row-major; the game
  (``markov_games.MarkovGame``) holds a ``TabularMDP`` together with the players' action counts,
  which is all the joint axis needs to be unflattened. A single-agent MDP is the case of no
  players axis; every rule below applies to both.

Validation: building a ``TabularMDP`` checks shapes always and values (stochastic rows of ``P``,
finite ``R``, ``gamma`` in range, ``initial`` a distribution) when they are concrete, raising a
``ValueError`` that names the argument, its shape and what was expected. :func:`check_mdp`
repeats the checks for an instance a function receives (one built by a tree operation, e.g.
``eqx.tree_at``, skips the constructor), naming it by the caller's argument name. Under
``jax.jit`` (traced values) only the shapes are checked, as everywhere in ``jaxpapers.core.checks``.

Examples:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.core.mdp import TabularMDP
    >>> P = jnp.array([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]]])  # [S, A, S']
    >>> mdp = TabularMDP(P, jnp.array([[0.0, 1.0], [2.0, 2.0]]), gamma=0.5)
    >>> mdp.num_states, mdp.num_actions, mdp.horizon
    (2, 2, None)
    >>> TabularMDP(P, jnp.zeros((2, 2)), gamma=1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gamma=1.0; expected a finite value in [0, 1) (horizon=None is the ...)
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_int, check_range, is_concrete

__all__ = ["ROW_SUM_TOL", "TabularMDP", "check_mdp", "check_transitions"]

#: Rows of ``P`` may miss 1 by rounding (Dirichlet rows in float32 miss by ~1e-7); accept this
#: much (and this much below 0).
ROW_SUM_TOL = 1e-5


def check_transitions(P, name: str = "P", *, steps: bool | None = False) -> None:
    """Raise ``ValueError`` unless ``P`` is ``[S, A, S]`` (with ``steps``: ``[H, S, A, S]``;
    ``None``: either) of non-negative rows that sum to 1 (values checked when concrete).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.core.mdp import check_transitions
        >>> check_transitions(jnp.full((2, 3, 2), 0.6))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: rows of P must sum to 1 (each P[s, a, :] is a distribution); ... off by 0.2
    """
    shape = tuple(np.shape(P))
    ndims = {False: (3,), True: (4,), None: (3, 4)}[steps]
    if len(shape) not in ndims or shape[-1] != shape[-3]:
        want = " or ".join({3: "[S, A, S]", 4: "[H, S, A, S]"}[n] for n in ndims)
        raise ValueError(f"{name} has shape {shape}; expected {want} (P[..., s, a, s'])")
    if is_concrete(P) and np.size(P):
        # min, max and float64 row sums: no float64 copy of a large P
        arr = np.asarray(P)
        low, high = float(arr.min()), float(arr.max())
        if not (np.isfinite(low) and np.isfinite(high)) or low < -ROW_SUM_TOL:
            raise ValueError(
                f"{name} must hold finite non-negative probabilities; {name} of shape {shape} "
                f"holds values in [{low:.3g}, {high:.3g}]"
            )
        err = float(np.abs(arr.sum(-1, dtype=np.float64) - 1.0).max())
        if err > ROW_SUM_TOL:
            raise ValueError(
                f"rows of {name} must sum to 1 (each {name}[s, a, :] is a distribution); the "
                f"worst row of {name} of shape {shape} is off by {err:.3g}"
            )


def _check_distribution(name: str, p) -> None:
    if not is_concrete(p):
        return
    arr = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or arr.min() < -ROW_SUM_TOL:
        raise ValueError(f"{name} of shape {arr.shape} must hold finite non-negative probabilities")
    err = abs(float(arr.sum()) - 1.0)
    if err > ROW_SUM_TOL:
        raise ValueError(f"{name} of shape {arr.shape} sums to {arr.sum():.6g}; expected 1")


def _check_gamma(gamma, horizon, name: str, values: bool = True) -> None:
    if np.ndim(gamma) != 0:
        raise ValueError(f"{name}gamma has shape {np.shape(gamma)}; expected a scalar")
    if values:
        if horizon is None:
            try:
                check_range(f"{name}gamma", gamma, 0.0, 1.0, high_open=True)
            except ValueError as err:
                raise ValueError(f"{err} (horizon=None is the discounted problem)") from None
        else:
            check_range(f"{name}gamma", gamma, 0.0, 1.0)


def _validate(P, R, gamma, horizon, initial, name: str, values: bool) -> None:
    """The checks of :class:`TabularMDP` (``name`` prefixes the fields, e.g. ``"mdp."``)."""
    if values:
        check_transitions(P, f"{name}P", steps=None)
    else:
        shape = tuple(np.shape(P))
        if len(shape) not in (3, 4) or shape[-1] != shape[-3]:
            raise ValueError(
                f"{name}P has shape {shape}; expected [S, A, S] or [H, S, A, S] (P[..., s, a, s'])"
            )
    P_shape, R_shape = tuple(np.shape(P)), tuple(np.shape(R))
    if R_shape[: len(P_shape) - 1] != P_shape[:-1] or len(R_shape) - len(P_shape) not in (-1, 0):
        raise ValueError(
            f"{name}R has shape {R_shape}; expected {list(P_shape[:-1])} to match {name}P "
            f"{P_shape} ([..., S, A]; or with a trailing players axis, [..., S, A, m])"
        )
    if values and is_concrete(R) and not np.all(np.isfinite(np.asarray(R))):
        bad = int(np.size(R) - np.count_nonzero(np.isfinite(np.asarray(R))))
        raise ValueError(f"{name}R of shape {R_shape} holds {bad} non-finite value(s) (NaN or inf)")
    if horizon is not None:
        check_int(f"{name}horizon", horizon, minimum=1)
    if len(P_shape) == 4 and horizon != P_shape[0]:
        raise ValueError(
            f"{name}horizon={horizon}; expected {P_shape[0]}, the steps of {name}P {P_shape} "
            "(a time-inhomogeneous model has one kernel per step)"
        )
    _check_gamma(gamma, horizon, name, values)
    S = P_shape[-1]
    if tuple(np.shape(initial)) != (S,):
        raise ValueError(f"{name}initial has shape {np.shape(initial)}; expected ({S},)")
    if values:
        _check_distribution(f"{name}initial", initial)


class TabularMDP(eqx.Module):
    """A finite MDP: ``P[S, A, S']``, ``R[S, A]``, a discount and a horizon (module docstring).

    Args:
      P: ``[S, A, S]`` transition probabilities (``[H, S, A, S]``: one kernel per step).
      R: ``[S, A]`` expected rewards, matching ``P``'s leading axes (``[..., S, A, m]``: one
        reward per player).
      gamma: discount in ``[0, 1)`` for ``horizon=None``, in ``[0, 1]`` otherwise (default 1:
        the undiscounted episodic problem). Stored as a scalar array of ``P``'s dtype.
      horizon: ``None`` (infinite horizon, discounted) or the steps ``H >= 1`` of an episode
        (static: it sets loop lengths).
      initial: ``[S]`` start distribution (default: state 0).

    Raises:
      ValueError: naming the argument, its shape and what was expected (see the module docstring
        for what is checked when).
    """

    P: Float[Array, "*H S A S"]
    R: Float[Array, "*H S A *m"]
    gamma: Float[Array, ""]
    initial: Float[Array, " S"]
    horizon: int | None = eqx.field(static=True)

    def __init__(self, P, R, *, gamma=1.0, horizon: int | None = None, initial=None):
        _check_gamma(gamma, horizon, "")  # as given (the stored scalar has P's dtype)
        self.P = jnp.asarray(P)
        self.R = jnp.asarray(R)
        dtype = self.P.dtype if jnp.issubdtype(self.P.dtype, jnp.floating) else None
        self.gamma = jnp.asarray(gamma, dtype)
        S = self.P.shape[-1] if self.P.ndim else 0
        self.initial = (
            jax.nn.one_hot(0, S, dtype=dtype) if initial is None else jnp.asarray(initial, dtype)
        )
        self.horizon = None if horizon is None else check_int("horizon", horizon, minimum=1)

    def __check_init__(self) -> None:
        _validate(self.P, self.R, self.gamma, self.horizon, self.initial, "", values=True)

    @property
    def num_states(self) -> int:
        return self.P.shape[-1]

    @property
    def num_actions(self) -> int:
        """``A``: the size of the action axis (the joint actions of a Markov game)."""
        return self.P.shape[-2]

    @property
    def num_players(self) -> int | None:
        """``m`` when ``R`` carries a players axis, else ``None`` (a single-agent MDP)."""
        return self.R.shape[-1] if self.R.ndim == self.P.ndim else None

    @property
    def time_homogeneous(self) -> bool:
        """Whether one kernel serves every step (``P`` is ``[S, A, S]``)."""
        return self.P.ndim == 3


def check_mdp(
    mdp: TabularMDP,
    name: str = "mdp",
    *,
    values: bool = True,
    discounted: bool | None = None,
    time_homogeneous: bool | None = None,
    players: bool | None = False,
) -> None:
    """Raise ``ValueError`` unless ``mdp`` is a valid :class:`TabularMDP` of the required kind.

    Repeats the constructor's checks (an instance built by a tree operation skips them), the
    fields named ``f"{name}.P"`` etc.; ``values=False`` checks shapes only (for hot eager paths).

    Args:
      mdp: the instance.
      name: the caller's argument name, used in messages.
      values: also check values (when concrete).
      discounted: ``True`` requires ``horizon=None``, ``False`` an episodic ``horizon``; ``None``
        either.
      time_homogeneous: ``True`` requires ``P`` of ``[S, A, S]``, ``False`` one kernel per step;
        ``None`` either.
      players: ``False`` requires ``R`` without a players axis, ``True`` with one; ``None``
        either.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxpapers.core.mdp import TabularMDP, check_mdp
        >>> mdp = TabularMDP(jnp.full((2, 1, 2), 0.5), jnp.zeros((2, 1)), horizon=3)
        >>> check_mdp(mdp, discounted=True)
        Traceback (most recent call last):
        ...
        ValueError: mdp.horizon=3; expected None (the infinite-horizon discounted problem)
    """
    if not isinstance(mdp, TabularMDP):
        raise ValueError(f"{name} must be a TabularMDP; got {type(mdp).__name__}")
    _validate(mdp.P, mdp.R, mdp.gamma, mdp.horizon, mdp.initial, f"{name}.", values=values)
    if discounted is True and mdp.horizon is not None:
        raise ValueError(
            f"{name}.horizon={mdp.horizon}; expected None (the infinite-horizon discounted problem)"
        )
    if discounted is False and mdp.horizon is None:
        raise ValueError(f"{name}.horizon=None; expected the steps H >= 1 of an episode")
    if time_homogeneous is not None and mdp.time_homogeneous != time_homogeneous:
        want = "[S, A, S]" if time_homogeneous else "[H, S, A, S] (one kernel per step)"
        raise ValueError(f"{name}.P has shape {tuple(mdp.P.shape)}; expected {want}")
    if players is not None and (mdp.num_players is not None) != players:
        want = "[..., S, A, m] (one reward per player)" if players else "[..., S, A]"
        raise ValueError(f"{name}.R has shape {tuple(mdp.R.shape)}; expected {want}")
