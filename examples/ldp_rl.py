"""LDP contextual bandit and episodic RL in a few lines: privacy costs regret, exactly e^eps.

Run: python examples/ldp_rl.py
"""

import jax

from jaxpapers import ldp_rl

# The release is eps-LDP: the exact worst-case likelihood ratio of unary encoding is e^eps.
probs = ldp_rl.unary_output_probabilities(4, 1.0)
print(f"unary encoding, eps=1: exact privacy loss {ldp_rl.max_privacy_loss(probs):.6f}")

# EXP3 on unary-encoded losses, 16 seeds in one vmapped call per privacy level.
bandit = ldp_rl.random_contextual_bandit(jax.random.key(0), 4, 4)
keys = jax.random.split(jax.random.key(1), 16)
for eps in (None, 8.0, 1.0):
    regret = jax.vmap(lambda k, e=eps: ldp_rl.exp3_ldp(bandit, 2000, e, key=k).regret[-1])(keys)
    print(f"EXP3 eps={eps}: regret after 2000 rounds {float(regret.mean()):7.1f}")

# UCBVI on unary-encoded transitions (H = 3 releases at eps / 3 each).
mdp = ldp_rl.random_episodic_mdp(jax.random.key(2), 3, 2, 3)
for eps in (None, 8.0):
    out = ldp_rl.ucbvi_ldp(mdp, 1000, eps, key=jax.random.key(3))
    print(f"UCBVI eps={eps}: regret after 1000 episodes {float(out.regret[-1]):7.1f}")
