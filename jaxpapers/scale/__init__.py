r"""P04 SCALE: self-contrastive guidance (SCG) trained into one forward pass, against
classifier-free guidance (CFG) and the CFG-mimicking guidance-free baselines GFT and MG, on
diffusion models and on a small autoregressive (decoder transformer) model.

Derivation (from the abstract and its predecessors; the paper's text was not available).
Write :math:`\epsilon_d(x, t, c) = -\sigma_t\nabla\log p^{\rm data}_t(x \mid c)` for the data
denoiser and :math:`\epsilon_s = -\sigma_t\nabla\log p^{\rm self}_t` for the denoiser of the
model's *own* samples. CFG (Ho & Salimans 2022) contrasts a conditional and an unconditional
prediction, :math:`\epsilon_\varnothing + w(\epsilon_c - \epsilon_\varnothing)`, two passes a
step. SCG contrasts the prediction on real data with the prediction on self-generated data:

.. math:: \epsilon_{\rm SCG} = \epsilon_d + (w - 1)(\epsilon_d - \epsilon_s)
          = -\sigma_t\nabla\log\big(p^{\rm data}_t\,(p^{\rm data}_t / p^{\rm self}_t)^{w-1}\big),

a score that moves samples along :math:`\nabla\log(p^{\rm data}/p^{\rm self})`, i.e. toward
where the data has more mass than the model puts: the data manifold. It vanishes when the model
is perfect. SCALE folds SCG into the likelihood objective by reparameterisation, as GFT
(Chen et al. 2025) does for CFG: solve for :math:`\epsilon_d = \tfrac1w\epsilon_{\rm SCG} +
(1 - \tfrac1w)\epsilon_s`, let a network :math:`\epsilon_\theta` *be* the SCG prediction, and
fit the implied data model with the ordinary denoising (likelihood) loss,

.. math:: \mathcal L_{\rm real} = \mathbb E\,\big\|\tfrac1w\epsilon_\theta(x_t, c) + (1 -
          \tfrac1w)\,\mathrm{sg}[\epsilon_\psi(x_t, c)] - \epsilon\big\|^2, \qquad
          \mathcal L_{\rm self} = \mathbb E\,\|\epsilon_\psi(\tilde x_t, \tilde c) -
          \tilde\epsilon\|^2,

where :math:`\tilde x_0` are the model's own samples. At the optimum :math:`\epsilon_\psi =
\epsilon_s` and :math:`\epsilon_\theta = \epsilon_{\rm SCG}`: one forward pass of
:math:`\theta` at sampling gives the SCG-enhanced prediction (half of CFG's evaluations).
``w = 1`` (and no self term) is plain conditional training. On next-token logits the same
reparameterisation reads :math:`\log p_{\rm lik} = \mathrm{log\,softmax}(\tfrac1w\ell_\theta +
(1-\tfrac1w)\mathrm{sg}[\ell_\psi])`, so that :math:`p_\theta \propto p^w_{\rm data} /
p^{w-1}_{\rm self}` (``_autoregressive.py``).

Where the self-generated samples come from (SCALE's training cost; ``_train.py``): every
``refresh`` optimiser steps, ``self_batch`` samples are drawn with deterministic DDIM of
``self_steps`` steps (the evaluation sampler) from the *likelihood model* :math:`(\epsilon_\theta
+ (w-1)\epsilon_\psi)/w` of the stop-gradient parameters, for labels drawn from the data, and
clipped to the data range; no gradient flows through them. Two choices were forced by
measurement or analysis: (1) the self network :math:`\psi` has its own weights (a shared network
with a branch flag let the self branch's fit to the model's early, poor samples degrade the
guided branch: floored log-likelihood -11.8 vs -2.6 on the 2-D mixture); (2) the contrast samples
come from the likelihood model, not from the guided network, because a guided network that
generates its own contrast samples follows :math:`g_{n+1} = w d - (w-1) g_n`, which oscillates
for ``w >= 2``.

Baselines (``_losses.py``): conditional training with label dropout (for CFG); GFT (the
:math:`\beta`-conditioned model, :math:`\beta\epsilon_\theta(x, c, \beta) + (1-\beta)
\mathrm{sg}[\epsilon_\theta(x, \varnothing, 1)]`, sampled at :math:`\beta = 1/w`); Model-Guidance
(target shifted by :math:`(1 - 1/w)\,\mathrm{sg}[\epsilon_{\bar\theta}(x, c) -
\epsilon_{\bar\theta}(x, \varnothing)]`, EMA teacher; the coefficient makes the fixed point CFG
of scale ``w``); CCA for the token model (Chen et al. 2024); Diffusion-DPO on top of SCALE
(``_dpo.py``; Wallace et al. 2023), pairs ranked by a reward set by the experiment.

What was measured (``jaxpapers reproduce P04``; numbers in ``results/RESULTS.md``): the limits
(CFG at ``w = 1``, GFT at ``beta = 1``, MG at ``w = 1``, SCALE at ``w = 1`` without its self term
equal conditional training, exactly), CFG of a trained model against the closed-form guided
mixture score, and, at equal training steps, CFG / GFT / MG / SCALE on 2-D and 8-D
class-conditional checkerboard mixtures (exact class log-likelihood, support precision, k-NN
recall, sliced Wasserstein), SCALE at half of CFG's NFE, SCALE + DPO, digits (accuracy and
Frechet distance under a held-out classifier, sample grids) and CCA vs SCALE on the token model.
At quick size (1,500 Adam steps, MLP 128 x 3, 10 DDIM steps, 3 seeds) the headline claim does
not hold: on the 2-D mixture SCALE (w = 1.5) reaches a floored class log-likelihood of
-3.09 +- 0.94 against -1.81 (GFT), -1.52 (MG), -1.61 (CFG, 20 passes) and -2.61 for the
unguided conditional model (exact samples: -0.91); it has the highest k-NN recall (0.81 vs
0.57-0.65) but lower support precision (0.76 vs 0.88-0.90). On the 8-D mixture SCALE is clearly
worse (-11.1 +- 5.2 vs -1.5 to -2.1; last quick run, before issue 12 moved the 8-D and digits
beds to ``--full``, see below). DPO on SCALE's own samples raises the likelihood (-0.87)
by collapsing onto high-reward modes (recall 0.41, SW 1.08): since its pairs are ranked by that
likelihood, ``mixture2d_dpo`` is judged on what they were not ranked by (sliced Wasserstein lower,
recall lost by less than 0.05), and does not hold (5 seeds: SW 0.40 -> 1.13, recall 0.78 ->
0.31). The self network is only as good as the samples it sees: early in training they are poor,
and the contrast :math:`\epsilon_d - \epsilon_s` is extrapolated where the self samples do not
reach. Knobs expected to matter at ``--full``: training length (the contrast is meant for a
nearly converged model whose residual error is structured), a warm start of SCALE from a
trained conditional model, the refresh period and ``self_batch`` (the self network's data), and
``w`` (1.5 here; guided networks that generate their own contrast would be unstable beyond 2).

Quick mode (issue 12) runs the 2-D bed only (``sanity_limits`` and every ``mixture2d_*`` claim); the
8-D mixture, digits and token-model studies (``mixture8d_*``, ``digits_*``, ``ar_cca``) are
registered for ``--full`` (and smoke) only. Each study is a test bed of its own, with its own
training and evaluation programs to compile, and the quick budget cannot hold more than one:
measured per study under load, the 2-D bed alone cost 133 CPU-s (training: trace 3.0, compile 16.5,
run 62.3; evaluation: trace 5.6, compile 32.3, run 9.1) and the token model about 60 (45 s of the
141 s quiet quick run). Shrinking the 2-D bed does not work: at MLP 64 x 3 and 1,000 steps its
training run fell from 62 to 25 CPU-s but every model was undertrained (CFG -4.57, GFT -5.47, MG
-4.95, SCALE -8.51, unguided -4.96) and ``sanity_limits`` failed (CFG(w=3) error to the guided
target 0.84 against 0.46 to the unguided one), so the quick sizes are unchanged. The last quick
numbers of the moved studies (3 seeds): digits accuracy SCALE 0.39 +- 0.03 vs CFG 0.72, GFT 0.73, MG
0.71; Frechet distance SCALE 262 +- 32 vs CFG 250, GFT 190, MG 248 (both claims did not hold; the
classifier was 256 wide then, 128 since the fifth pass); token
model, floored class log-likelihood SCALE (AR) -1.166 +- 0.002 vs CCA -0.985 +- 0.016, CFG on logits
-0.935 +- 0.034 (2 passes a token), conditional -1.262 +- 0.048 (``ar_cca`` did not hold). The
samplers stay on the core's diffrax DDIM solver (the design's promise); a ``lax.scan`` over the same
DDIM step gives identical samples for about 2.5x less trace and compile time per sampler copy
(measured: trace 1.6 -> 0.2, compile 3.8 -> 1.4 CPU-s), a cost the diffrax drive adds to every
sampler.
Issue 12's fourth pass (``experiments/__init__.py``) trained conditional, GFT and MG in one loop
(:func:`fit_many`), gave the DPO stage a program of its own and replaced the k-NN recall's sort by
an exact selection: 4-10% fewer CPU-s in paired quick runs under load (base 125.4 / 142.0 / 122.6,
new 119.8 / 133.1 / 109.9), every verdict identical and every row within float32 round-off; quick
mode's remaining cost is the four methods' compute-bound training (~46 CPU-s) and the compiles.
Issue 12's fifth pass found that every program holding a DDIM sampler ran synchronously on the CPU
(diffrax checked its time grid with ``equinox.error_if``, a host callback; the core's samplers
have stepped without it since the sixth pass, ``UncheckedStepTo``), so the main thread
waited in the 2-D training run and compiled nothing meanwhile; the DPO, evaluation and sanity
programs now compile on a worker thread while the training runs (identical numbers; it saves wall
time where the second core is idle). The sixth pass made the digits samples recognisable at small
sizes: every digits sampler (evaluation and SCALE's self samples) clips its predicted
:math:`\hat x_0` to the data range ``[-1, 1]`` at every step (``x0_range``, the core's
:func:`~jaxpapers.core.diffusion.clip_x0`: Ho et al. 2020's clip of the predicted image; before,
a few-step DDIM of a weak or guided network ended on saturated pixels that the classifier still
labelled as the intended class). At the study's own size (MLP 256 x 3, 1,000 steps) accuracy rose
to CFG 0.98, GFT 0.94, MG 0.97, SCALE 0.78 (from 0.77, 0.73, 0.71, 0.38; ``results/full/P04``).
A digits study in quick mode still does not fit the budget, now for cost alone: at MLP 96 x 2
and 300-600 steps the samples are recognisable digits, but the study costs ~50 CPU-s (its
training program's compile alone ~19), and the 2-D bed already fills the 2 cores (details in
``experiments/__init__.py``), so digits stay at ``--full`` and smoke.

Example::

    net, ps = mlp_denoiser(2, num_classes, seeds=jnp.arange(1))
    res = fit(net, Method("scale", w=1.5, refresh=10, self_steps=10), p0, ArrayData(x, y),
              key=key, steps=2000, batch=256)
    out = sample_one_pass(net, res.params[0], labels, key=key, num_steps=10)  # out.nfe == 10

References:
    Ho & Salimans 2022, "Classifier-Free Diffusion Guidance", arXiv:2207.12598.
    Chen et al. 2025, "Visual Generation Without Guidance" (GFT), arXiv:2501.15420.
    Tang et al. 2025, "Diffusion Models without Classifier-free Guidance" (MG), arXiv:2502.12154.
    Chen et al. 2024, "Toward Guidance-Free AR Visual Generation via Condition Contrastive
    Alignment" (CCA), arXiv:2410.09347.
    Wallace et al. 2023, "Diffusion Model Alignment Using Direct Preference Optimization",
    arXiv:2311.12908.
    Song, Meng & Ermon 2021, "Denoising Diffusion Implicit Models", arXiv:2010.02502.
"""

from jaxpapers.scale._autoregressive import (
    ARMethod,
    TokenModel,
    TokenSample,
    ar_conditional_loss,
    ar_fit,
    ar_sample,
    ar_scale_loss,
    cca_loss,
    sequence_log_prob,
    token_model,
)
from jaxpapers.scale._dpo import PreferencePairs, dpo_fit, dpo_loss, rank_pairs
from jaxpapers.scale._losses import (
    conditional_loss,
    drop_labels,
    gft_loss,
    mg_loss,
    noise_batch,
    scale_loss,
)
from jaxpapers.scale._metrics import MixtureMetrics, frechet_distance, mixture_metrics
from jaxpapers.scale._mixture import ClassMixture, checkerboard_mixture
from jaxpapers.scale._network import Denoiser, mlp_denoiser, unet_denoiser
from jaxpapers.scale._sampling import sample_cfg, sample_one_pass
from jaxpapers.scale._train import ArrayData, FitResult, Method, fit, fit_many, self_samples

__all__ = [
    "ARMethod",
    "ArrayData",
    "ClassMixture",
    "Denoiser",
    "FitResult",
    "Method",
    "MixtureMetrics",
    "PreferencePairs",
    "TokenModel",
    "TokenSample",
    "ar_conditional_loss",
    "ar_fit",
    "ar_sample",
    "ar_scale_loss",
    "cca_loss",
    "checkerboard_mixture",
    "conditional_loss",
    "dpo_fit",
    "dpo_loss",
    "drop_labels",
    "fit",
    "fit_many",
    "frechet_distance",
    "gft_loss",
    "mg_loss",
    "mixture_metrics",
    "mlp_denoiser",
    "noise_batch",
    "rank_pairs",
    "sample_cfg",
    "sample_one_pass",
    "scale_loss",
    "self_samples",
    "sequence_log_prob",
    "token_model",
    "unet_denoiser",
]
