"""LDP contextual bandit and episodic RL in a few lines: privacy costs regret, exactly e^eps.

Run: python examples/ldp_rl.py

What you should see: the exact privacy loss of unary encoding at eps = 1 is 1 (the worst-case
likelihood ratio is e^eps, not less); EXP3's regret after 2000 rounds grows as the privacy
budget shrinks (about 208 without privacy, 214 at eps = 8, 468 at eps = 1, mean of 16 seeds);
and UCBVI pays far more for privacy on an MDP (about 3 -> 368 at eps = 8). Expected: the privacy
loss equals eps and regret never falls as eps shrinks; the script checks both.
"""

import jax

from jaxpapers import ldp_rl

# The release is eps-LDP: the exact worst-case likelihood ratio of unary encoding is e^eps.
probs = ldp_rl.unary_output_probabilities(4, 1.0)
loss = float(ldp_rl.max_privacy_loss(probs))
print(f"unary encoding, eps=1: exact privacy loss {loss:.6f}")

# EXP3 on unary-encoded losses, 16 seeds in one vmapped call per privacy level.
bandit = ldp_rl.random_contextual_bandit(4, 4, key=jax.random.key(0))
keys = jax.random.split(jax.random.key(1), 16)
bandit_regret = []
for eps in (None, 8.0, 1.0):
    regret = jax.vmap(lambda k, e=eps: ldp_rl.exp3_ldp(bandit, 2000, e, key=k).regret[-1])(keys)
    bandit_regret.append(float(regret.mean()))
    print(f"EXP3 eps={eps}: regret after 2000 rounds {bandit_regret[-1]:7.1f}")

# UCBVI on unary-encoded transitions (H = 3 releases at eps / 3 each).
mdp = ldp_rl.random_episodic_mdp(3, 2, 3, key=jax.random.key(2))
mdp_regret = []
for eps in (None, 8.0):
    out = ldp_rl.ucbvi_ldp(mdp, 1000, eps, key=jax.random.key(3))
    mdp_regret.append(float(out.regret[-1]))
    print(f"UCBVI eps={eps}: regret after 1000 episodes {mdp_regret[-1]:7.1f}")
exact = abs(loss - 1.0) < 1e-5
monotone = (
    bandit_regret[0] <= bandit_regret[1] <= bandit_regret[2] and mdp_regret[0] < mdp_regret[1]
)
print(
    "Expected: privacy loss exactly eps, and less privacy budget never lowers the regret: "
    + ("as expected." if exact and monotone else "NOT as expected.")
)
