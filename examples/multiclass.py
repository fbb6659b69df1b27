"""Online multiclass learners on one stream: mistakes, surrogate regret, stable rounds.

Run: python examples/multiclass.py
"""

import jax

from jaxpapers import multiclass as mc
from jaxpapers.core.pytrees import stack_trees

stream, _ = mc.linear_stream(jax.random.key(0), 2000, 10, 4, noise=0.1)
comparator = mc.best_linear_predictor(stream, 4)  # offline, optax L-BFGS

learners = {
    "perceptron": mc.perceptron(),
    "Gaptron": mc.gaptron(eta=0.3, exploration=0.3),
    "stable perceptron": mc.stable_perceptron(eta=0.3),
    "stable Gaptron": mc.stable_gaptron(eta=0.3, exploration=0.3),
    "parameter-free Gaptron": mc.parameter_free_gaptron(),
}
# All learners in one compiled, vmapped scan (the learners are pytrees of arrays).
out = jax.vmap(lambda lr: mc.run_online(lr, stream, 4, key=jax.random.key(1), radius=1.0))(
    stack_trees(list(learners.values()))
)
regret = mc.surrogate_regret(out.expected_mistakes, comparator.total_loss)
for i, name in enumerate(learners):
    print(
        f"{name:24s} mistakes {float(out.expected_mistakes[i].sum()):6.1f}  "
        f"surrogate regret {float(regret[i]):7.1f}  stable rounds {float(out.stable[i].mean()):.2f}"
    )

delayed = mc.run_online(mc.stable_gaptron(0.3, 0.3), stream, 4, key=jax.random.key(1), delay=50)
print(f"stable Gaptron, feedback delayed 50 rounds: {float(delayed.expected_mistakes.sum()):.1f}")
