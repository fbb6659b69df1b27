"""P14 in a minute: CCE gaps, an LP CCE, and the simulator / online CCE learners on a random
3-player Markov game, several seeds at once with ``jax.vmap``.

What you should see: Chicken's welfare-maximising CCE (weights on the four action profiles,
welfare 10.5); the LP's Markov CCE of a random game with gap 0; then the simulator learners (4
seeds) and the online learner with their exact CCE gaps. Expected: every learned policy's exact
gap is at most epsilon = 1, and the online learner's certificate bounds its exact gap from above
(0.99 >= 0.20 here); the script checks both. The sample counts of the two simulator methods are
not comparable in this call: by default the baseline stops on the exact gap computed from the
game's model, the paper's learner on its own empirical certificate; ``jaxpapers reproduce P14``
compares them under one stopping rule.
"""

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
game = random_game(2, 2, (2, 2, 2), key=jax.random.key(0))
print("gap of the LP CCE:", float(cce_gap(game, jnp.asarray(markov_lp_cce(game))).gap))

# Simulator setting: the paper's learner vs the sum_i A_i baseline, 4 seeds vmapped.
keys = jax.random.split(jax.random.key(1), 4)
worst = 0.0
for method in ("paper", "baseline"):
    res = jax.vmap(lambda k, m=method: simulator_cce(game, key=k, epsilon=1.0, method=m))(keys)
    gaps = jax.vmap(lambda p: cce_gap(game, p).gap)(res.policy)
    worst = max(worst, float(gaps.max()))
    print(
        f"simulator {method:8s} samples {res.samples.tolist()} exact gaps {gaps.round(3).tolist()}"
    )

# Online setting: V-learning with the empirical-Bernstein bandit (certified gap <= epsilon).
res = online_cce(game, key=jax.random.key(2), epsilon=1.0)
online_gap = float(cce_gap(game, res.policy).gap)
print(
    f"online: transitions {int(res.samples)}, certificate {float(res.certificate):.3f}, "
    f"exact gap {online_gap:.3f}"
)
ok = max(worst, online_gap) <= 1.0 and online_gap <= float(res.certificate) + 1e-6
print(
    "Expected: every exact gap <= epsilon = 1 and the certificate >= the online exact gap: "
    + ("as expected." if ok else "NOT as expected.")
)
