"""Online multiclass learners on one stream: mistakes, surrogate regret, stable rounds.

Run: python examples/multiclass.py

What you should see: expected mistakes over a 2000-round stream (lower is better), the surrogate
regret against the best linear predictor in hindsight (negative: fewer mistakes than that
predictor's surrogate loss) and the share of rounds on which the prediction was stable. Expected:
each stable variant makes fewer mistakes than its base learner (about 406 against 623 for the
perceptron, 478 against 734 for Gaptron), the parameter-free Gaptron, with no step size to tune,
about as few (384), and delaying the feedback by 50 rounds costs stable Gaptron only a few
percent (about 497 against 478). The script checks the first and the last.
"""

import jax

from jaxpapers import multiclass as mc
from jaxpapers.core.pytrees import stack_trees

stream, _ = mc.linear_stream(2000, 10, 4, key=jax.random.key(0), noise=0.1)
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
late = float(delayed.expected_mistakes.sum())
print(f"stable Gaptron, feedback delayed 50 rounds: {late:.1f}")
mistakes = {name: float(out.expected_mistakes[i].sum()) for i, name in enumerate(learners)}
stable_helps = (
    mistakes["stable perceptron"] < mistakes["perceptron"]
    and mistakes["stable Gaptron"] < mistakes["Gaptron"]
)
delay_cheap = late <= 1.1 * mistakes["stable Gaptron"]
outcome = "as expected." if stable_helps and delay_cheap else "NOT as expected."
print(
    "Expected: stable variants make fewer mistakes than their base learners, and a 50-round "
    f"delay costs under 10%: {outcome}"
)
