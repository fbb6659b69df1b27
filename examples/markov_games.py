"""P14 in a minute: CCE gaps, an LP CCE, and the simulator / online CCE learners on a random
3-player Markov game, several seeds at once with ``jax.vmap``."""

import jax
import jax.numpy as jnp

from jaxpapers.markov_games import (
    CHICKEN_PAYOFFS,
    cce_gap,
    lp_cce,
    markov_lp_cce,
    online_cce,
    random_game,
    simulator_cce,
)

# Ground truth: Chicken's welfare-maximising CCE (LP) and a Markov CCE of a random game.
print(
    "Chicken LP CCE:", lp_cce(CHICKEN_PAYOFFS).weights, "welfare", lp_cce(CHICKEN_PAYOFFS).welfare
)
game = random_game(jax.random.key(0), 2, 2, (2, 2, 2))
print("gap of the LP CCE:", float(cce_gap(game, jnp.asarray(markov_lp_cce(game))).gap))

# Simulator setting: the paper's learner vs the sum_i A_i baseline, 4 seeds vmapped.
keys = jax.random.split(jax.random.key(1), 4)
for method in ("paper", "baseline"):
    res = jax.vmap(lambda k, m=method: simulator_cce(game, key=k, epsilon=1.0, method=m))(keys)
    gaps = jax.vmap(lambda p: cce_gap(game, p).gap)(res.policy)
    print(
        f"simulator {method:8s} samples {res.samples.tolist()} exact gaps {gaps.round(3).tolist()}"
    )

# Online setting: V-learning with the empirical-Bernstein bandit (certified gap <= epsilon).
res = online_cce(game, key=jax.random.key(2), epsilon=1.0)
print(
    "online: transitions",
    int(res.samples),
    "certificate",
    float(res.certificate),
    "exact gap",
    float(cce_gap(game, res.policy).gap),
)
