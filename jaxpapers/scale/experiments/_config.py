"""The configuration of one run size of the P04 experiments (``SIZES`` in ``__init__``)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Every size-dependent setting of P04.

    Attributes:
      steps: Adam steps per mixture model (every method).
      batch: real-data batch (also the DPO batch).
      hidden, depth: the mixture MLP denoiser's width and hidden layers (``depth`` also digits').
      n_eval: labelled samples scored per seed on the mixtures.
      sample_steps: DDIM steps at evaluation (SCALE's NFE) and of SCALE's self samples.
      refresh: SCALE: optimiser steps between refreshes of its self-generated buffer.
      self_batch: SCALE: self samples per refresh (also the token model's).
      replay: SCALE (diffusion beds): refreshes held in the self network's replay buffer
        (``Method.replay``; 1 = the last refresh only).
      mg_w, scale_w: the guidance scales trained into MG and SCALE where one scale is trained
        (digits, token model); on the mixtures MG and SCALE are tuned over the grid and
        ``scale_w`` is the scale of the SCALE model that Diffusion-DPO fine-tunes and whose self
        network is diagnosed.
      self_fit_samples, self_fit_steps: mixtures: fresh self samples and Adam steps of a self
        network fitted offline (the self-score diagnostic and the oracle's frozen self score).
      dpo_pairs, dpo_steps: Diffusion-DPO on SCALE: pairs and Adam steps.
      dpo_betas: Diffusion-DPO's beta grid, tuned per seed by the sliced Wasserstein distance of
        a validation draw to held-out validation samples (never by the ranking signal).
      digits_steps, digits_hidden, digits_eval: the digits bed's training steps, MLP width and
        samples scored per seed.
      classifier_steps: Adam steps of the digits bed's held-out classifier.
      ar_steps, ar_finetune, ar_width: the token model's pre-training steps, CCA's fine-tuning
        steps, and its width.
      cca_beta: CCA's beta.
    """

    steps: int
    batch: int
    hidden: int
    depth: int
    n_eval: int
    sample_steps: int
    refresh: int
    self_batch: int
    replay: int
    mg_w: float
    scale_w: float
    dpo_pairs: int
    dpo_steps: int
    dpo_betas: tuple[float, ...]
    digits_steps: int
    digits_hidden: int
    digits_eval: int
    classifier_steps: int
    ar_steps: int
    ar_finetune: int
    ar_width: int
    cca_beta: float
    self_fit_samples: int
    self_fit_steps: int
