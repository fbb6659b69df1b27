"""Per-player bandits stacked over players with padded arms (so ``A_i`` may differ)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.markov_games._bandits import Bandit, BanditState
from jaxpapers.markov_games._game import joint_actions

METHODS = ("paper", "baseline")


def check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method={method!r}; expected one of {METHODS}")


def is_paper(method: str) -> bool:
    """The paper's learners use the empirical-Bernstein bandit; the baselines EXP3-IX."""
    check_method(method)
    return method == "paper"


class PlayerTables:
    """Static tables of a game's action structure (host NumPy; become constants under jit)."""

    def __init__(self, num_actions: tuple[int, ...]):
        self.num_actions = num_actions
        self.m = len(num_actions)
        self.width = max(num_actions)
        self.mask = np.arange(self.width)[None, :] < np.array(num_actions)[:, None]
        self.table = joint_actions(num_actions)
        self.strides = np.array(
            [math.prod(num_actions[i + 1 :]) for i in range(self.m)], dtype=np.int32
        )
        self.arms = np.array(num_actions, dtype=np.float32)

    def init(self, bandit: Bandit, batch: tuple[int, ...], dtype) -> BanditState:
        one = bandit.init(self.width, dtype)
        return jax.tree.map(lambda x: jnp.broadcast_to(x, (*batch, self.m, *x.shape)), one)

    def probs(self, bandit: Bandit, states: BanditState):
        """``[m, width]`` distributions of all players (states stacked over players)."""
        return jax.vmap(bandit.probs)(states, jnp.asarray(self.mask))

    def sample(self, key, probs):
        """Own actions ``[m]`` and the joint index."""
        keys = jax.random.split(key, self.m)
        acts = jax.vmap(lambda k, p: jax.random.categorical(k, jnp.log(p)))(keys, probs)
        return acts, jnp.sum(acts * jnp.asarray(self.strides))

    def update(self, bandit: Bandit, states, acts, losses):
        return jax.vmap(bandit.update)(states, acts, losses, jnp.asarray(self.mask))

    def joint(self, probs):
        """``[J]`` product distribution of the players' ``[m, width]`` marginals."""
        idx = jnp.asarray(self.table)
        return jnp.prod(probs[jnp.arange(self.m)[None, :], idx], axis=-1)
