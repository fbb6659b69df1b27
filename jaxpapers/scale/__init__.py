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
clipped to the data range; no gradient flows through them. They enter a replay buffer holding the
last ``Method.replay`` refreshes, from which the self term draws ``self_batch`` samples a step:
:math:`\psi` estimates the score of the model's own distribution, and fitting it to one refresh
of ``self_batch`` points at a time makes its error (which the guided network inherits times
``w - 1``, below) a variance term of order ``1 / self_batch``; ``R`` replayed refreshes divide
that variance by ``R`` at the cost of a lag of about ``(R - 1) refresh / 2`` steps of the generator
(``_train.py``). Two choices were forced by
measurement or analysis: (1) the self network :math:`\psi` has its own weights (a shared network
with a branch flag let the self branch's fit to the model's early, poor samples degrade the
guided branch: floored log-likelihood -11.8 vs -2.6 on the 2-D mixture); (2) the contrast samples
come from the likelihood model, not from the guided network, because a guided network that
generates its own contrast samples follows :math:`g_{n+1} = w d - (w-1) g_n`, which oscillates
for ``w >= 2``.

What the guided network learns for a given self network (``_oracle.py``): for a fixed
:math:`\psi`, :math:`\mathcal L_{\rm real}` is least squares in :math:`\epsilon_\theta` alone,
minimised where :math:`\tfrac1w\epsilon_\theta + (1-\tfrac1w)\epsilon_\psi = \epsilon_d`, i.e.
:math:`\epsilon_{\theta^*} = \epsilon_d + (w-1)(\epsilon_d - \epsilon_\psi)`: the error of
:math:`\psi` enters the trained guidance times ``w - 1``. The experiments therefore report a
diagnostic of :math:`\psi` (its distance to a self network refitted offline on fresh samples of
the final likelihood model, against the contrast of that refit with the exact data predictor)
and an oracle SCG row (the conditional model and a self network fitted offline to its samples,
combined at sampling time into :math:`\epsilon_c + (w-1)(\epsilon_c - \epsilon_\psi)`, two
passes a step: the target a one-pass network would be distilled toward, ``_oracle.fit_scg``),
which separates "SCG does not help at this size" from "SCALE does not learn SCG".

Baselines (``_losses.py``): conditional training with label dropout (for CFG); GFT (the
:math:`\beta`-conditioned model, :math:`\beta\epsilon_\theta(x, c, \beta) + (1-\beta)
\mathrm{sg}[\epsilon_\theta(x, \varnothing, 1)]`, sampled at :math:`\beta = 1/w`); Model-Guidance
(target shifted by :math:`(1 - 1/w)\,\mathrm{sg}[\epsilon_{\bar\theta}(x, c) -
\epsilon_{\bar\theta}(x, \varnothing)]`, EMA teacher; the coefficient makes the fixed point CFG
of scale ``w``); CCA for the token model (Chen et al. 2024); Diffusion-DPO on top of SCALE
(``_dpo.py``; Wallace et al. 2023), pairs ranked by a reward set by the experiment.

The experiments (``jaxpapers reproduce P04``; numbers in ``results/RESULTS.md``, measurement
notes in ``results/P04/NOTES.md``) check the limits (CFG at ``w = 1``, GFT at ``beta = 1``, MG at
``w = 1``, SCALE at ``w = 1`` without its self term equal conditional training, exactly) and CFG of
a trained model against the closed-form guided mixture score, then compare, at equal training
steps, CFG / GFT / MG / SCALE on 2-D and 8-D class-conditional checkerboard mixtures (exact class
log-likelihood, support precision, k-NN recall, sliced Wasserstein), SCALE at half of CFG's NFE,
SCALE + DPO, digits (accuracy and Frechet distance under a held-out classifier, sample grids) and
CCA vs SCALE on the token model. Quick mode runs the 2-D bed only (``sanity_limits`` and every
``mixture2d_*`` claim); the 8-D mixture, digits and token-model studies, each a test bed with its
own training and evaluation programs, run at ``--full`` and smoke. The samplers are the core's
diffrax DDIM solver; the digits samplers clip their predicted :math:`\hat x_0` to the data range
``[-1, 1]`` at every step (``x0_range``, the core's :func:`~jaxpapers.core.diffusion.clip_x0`).
The self network is only as good as the samples it sees: early in training they are poor, and the
contrast :math:`\epsilon_d - \epsilon_s` is extrapolated where the self samples do not reach.
Knobs expected to matter at ``--full``: training length (the contrast is meant for a nearly
converged model whose residual error is structured), a warm start of SCALE from a trained
conditional model, the refresh period, ``self_batch`` and ``replay`` (the self network's
data), and ``w``
(guided networks that generate their own contrast would be unstable beyond 2).

Example::

    net, ps = mlp_denoiser(2, num_classes, seeds=jnp.arange(1))
    p0 = jax.tree.map(lambda a: a[0], ps)
    res = fit(net, Method("scale", w=1.5, refresh=10, self_steps=10), p0, ArrayData(x, y),
              key=key, steps=2000, batch=256)
    guided, _self = res.params
    out = sample_one_pass(net, guided, labels, key=key, num_steps=10)  # out.nfe == 10

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
from jaxpapers.scale._oracle import (
    fit_scg,
    fit_self_score,
    sample_scg,
    scg_loss,
    scg_target,
    self_score_error,
)
from jaxpapers.scale._sampling import sample_cfg, sample_one_pass
from jaxpapers.scale._train import (
    ArrayData,
    FitResult,
    Method,
    SelfBuffer,
    fit,
    fit_many,
    self_samples,
)

__all__ = [
    "ARMethod",
    "ArrayData",
    "ClassMixture",
    "Denoiser",
    "FitResult",
    "Method",
    "MixtureMetrics",
    "PreferencePairs",
    "SelfBuffer",
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
    "fit_scg",
    "fit_self_score",
    "frechet_distance",
    "gft_loss",
    "mg_loss",
    "mixture_metrics",
    "mlp_denoiser",
    "noise_batch",
    "rank_pairs",
    "sample_cfg",
    "sample_one_pass",
    "sample_scg",
    "scale_loss",
    "scg_loss",
    "scg_target",
    "self_samples",
    "self_score_error",
    "sequence_log_prob",
    "token_model",
    "unet_denoiser",
]
