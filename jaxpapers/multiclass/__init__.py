r"""P16: online multiclass classification with surrogate losses, exploiting stable rounds.

Derivation
----------
Linear scores :math:`s_t = W_t x_t`, prediction :math:`y^*_t = \arg\max_c s_{t,c}`, and a
surrogate :math:`\ell_t(W) = \ell(W x_t, y_t)` that is at least 1 on every mistake (hinge,
smooth hinge, logistic in bits; :func:`surrogate_loss`). The *surrogate regret* against a fixed
:math:`U` is :math:`\sum_t E[\mathbb{1}\{\hat y_t \ne y_t\}] - \sum_t \ell_t(U)`.

*Perceptron.* :math:`W \leftarrow W - \nabla\ell_t(W)` on mistakes only. With gradients
:math:`\|\nabla \ell_t\|^2 \le 2\|x_t\|^2`, the classic argument gives Novikoff's
:math:`M \le 2 (R/\gamma)^2` on data separable with multiclass margin :math:`\gamma` by a unit
:math:`U` (the ``novikoff`` sanity experiment and a test), and in general
:math:`M \le \sum_t \ell_t(U) + O(\|U\|\sqrt{\sum_t \ell_t(U)} + \|U\|^2 R^2)`.

*Gaptron* (van der Hoeven 2020) runs online gradient descent on :math:`\ell_t` every round and
predicts :math:`y^*_t` with probability :math:`1-\gamma_t`, a uniform label otherwise. On a
mistake :math:`\ell_t(W_t) \ge 1` while the expected zero-one loss is at most
:math:`1 - \gamma_t/C`: this *surrogate gap* pays for OGD's
:math:`\tfrac{\eta}{2}\|\nabla\ell_t\|^2` when :math:`\gamma_t \propto \eta \|x_t\|^2`; on
correct rounds exploration costs :math:`\gamma_t (1 - 1/C)`. Here
:math:`\gamma_t = \min(1/2, a\|x_t\|^2)` (``exploration = a``; ``a = 0`` is the argmax
predictor, as a test checks).

*Stability.* A round is stable when the update leaves the prediction on :math:`x_t` unchanged.
Two consequences, derived from that definition:

- *a sharper perceptron bound* (the ``perceptron_bound`` experiment). On a perceptron mistake
  with runner-up :math:`j` (the prediction), :math:`\|W_{t+1}\|^2 = \|W_t\|^2 + 2\|x_t\|^2 -
  2(s_j - s_y)`. The classic argument drops :math:`-2(s_j - s_y) \le 0` and gets
  :math:`\|W_{T+1}\|^2 \le 2R^2 M`. On a *stable* mistake the prediction survives the update,
  :math:`s_j - \|x_t\|^2 \ge s_y + \|x_t\|^2`, so that round *shrinks* the weights by at least
  :math:`2\|x_t\|^2`: :math:`\|W_{T+1}\|^2 \le 2R^2 M_u` with :math:`M_u` the unstable mistakes.
  With :math:`\langle U, W_{T+1}\rangle \ge M - L_M(U)` (hinge of :math:`U` summed over the
  mistake rounds) this gives, for every :math:`U`,
  :math:`M - L_M(U) \le \|U\| R\sqrt{2 M_u}`, against the classic :math:`\|U\| R \sqrt{2M}`;
  the surrogate regret :math:`M - L(U) \le M - L_M(U)` inherits both. This is our reading of
  the abstract's "improved surrogate regret bound for the perceptron" (the abstract states no
  formula); the algorithm is the standard perceptron. (:func:`stable_perceptron`, hinge OGD on
  every round, is a different algorithm and not used by the experiments.)
- before :math:`y_t` is seen the learner can check whether the update would keep
  :math:`y^*_t` for *every* possible label (:math:`C` candidate updates of the scores
  :math:`s - \eta\|x\|^2 \nabla_s\ell(s, c)`). If so, exploring cannot buy anything the next
  iterate would not already predict, so the *stable Gaptron* (:func:`stable_gaptron`) sets
  :math:`\gamma_t = 0` there and pays the exploration cost only on unstable rounds.

*Parameter-free Gaptron* (:func:`parameter_free_gaptron`) replaces OGD by a
Krichevsky-Trofimov coin bet on the normalised gradients (Orabona & Pal 2016):
:math:`W_t = \tfrac{\theta_t}{t}\,\mathrm{Wealth}_{t-1}`, which needs no step size and competes
with every :math:`U` at the cost of :math:`\|U\|\sqrt{T\log(1+\|U\| T)}`; its exploration is
Gaptron's :math:`\gamma_t = \min(1/2, \eta_t\|x_t\|^2)` with the bet's implied step
:math:`\eta_t = \|W_t\|/(G\sqrt{t+1}) + 1/(G(t+1))` in place of a tuned ``a`` (no constant
set by hand), and the stability gate.

*Delayed feedback.* The label of round :math:`t` arrives at :math:`t + d`; the update uses the
scores from prediction time (:func:`run_online` keeps a ring buffer of :math:`d` examples).
Stable rounds are unaffected by the delay, which is where the improvement over the
:math:`O(d)` extra mistakes of delayed OGD comes from.

*Online-to-batch.* One pass over a training sample; the average iterate
:math:`\bar W = \tfrac1T\sum_t W_t` is the batch classifier (:func:`classification_error`).

What is measured
----------------
Every learner with a step (Gaptron, stable Gaptron; exploration ``a = eta``) is tuned on one
grid over *validation* streams drawn apart from the test streams; the perceptron (scale-free)
and the parameter-free Gaptron have no step. ``novikoff`` (sanity: mistakes / 2 (R/gamma)^2
< 1), ``perceptron_bound`` (the bound above holds on every stream for every comparator of a
ridge path, and new / old < 0.9), ``surrogate_regret`` (stable Gaptron vs the perceptron and the
tuned Gaptron, paired over seeds), ``delays`` (d in {0, 10, 100}, steps tuned per delay),
``parameter_free`` (against Gaptron at the tuned and the median step; non-inferiority to the
tuned step with a margin of 0.01 mistakes per round), ``batch`` (online-to-batch test error on
sklearn digits, step chosen on a validation split of the training part; non-inferiority, margin
0.02). Measurement history and the verdicts that moved: ``results/P16/NOTES.md``.

References:
    "Stable online multiclass classification" (NeurIPS 2026), P16.
    van der Hoeven, "Exploiting the surrogate gap in online multiclass classification",
    NeurIPS 2020, https://arxiv.org/abs/2007.12618.
    Crammer & Singer, "Ultraconservative online algorithms for multiclass problems", JMLR 2003.
    Orabona & Pal, "Coin betting and parameter-free online learning", NeurIPS 2016.
    Cesa-Bianchi, Conconi & Gentile, "On the generalization ability of on-line learning
    algorithms", IEEE Trans. IT 2004.
"""

from jaxpapers.multiclass._batch import classification_error
from jaxpapers.multiclass._comparator import Comparator, best_linear_predictor, surrogate_regret
from jaxpapers.multiclass._learners import (
    Learner,
    OnlineResult,
    gaptron,
    parameter_free_gaptron,
    perceptron,
    run_online,
    stable_gaptron,
    stable_perceptron,
)
from jaxpapers.multiclass._losses import LOSSES, margin, score_gradient, surrogate_loss
from jaxpapers.multiclass._streams import (
    Stream,
    digits_stream,
    linear_stream,
    stream_margin,
)

__all__ = [
    "LOSSES",
    "Comparator",
    "Learner",
    "OnlineResult",
    "Stream",
    "best_linear_predictor",
    "classification_error",
    "digits_stream",
    "gaptron",
    "linear_stream",
    "margin",
    "parameter_free_gaptron",
    "perceptron",
    "run_online",
    "score_gradient",
    "stable_gaptron",
    "stable_perceptron",
    "stream_margin",
    "surrogate_loss",
    "surrogate_regret",
]
