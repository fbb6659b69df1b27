"""Digits test bed: inpainting, deblurring and 2x super-resolution of sklearn's digits (16x16,
[-1, 1]); PSNR and SSIM against the ground truth.

The denoiser (``Config.digits.kind``): at ``--full`` a U-Net trained here; in quick and smoke mode
the exact denoiser of ``kde_components`` training digits (chosen at random) smoothed by an
isotropic Gaussian kernel (a Gaussian mixture with per-pixel variance ``kde_var``; no training).
Quick mode cannot afford the U-Net (training plus one compile of a U-Net sampling program per task
and backbone), nor a kernel over all 1,400 training digits (every step touches a [1400, 256]
array per chain). The kernel denoiser is exact for its smoothed distribution, so the quick digits
rows measure the samplers' integration on image-shaped operators, not a learned score's errors;
the learned-denoiser claim is resolved at ``--full``. The digits experiments run at ``--full``
only (``Experiment.sizes``); ``--quick --experiments digits_inpaint`` still runs the kernel
version.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.data.digits import load_digits
from jaxpapers.core.diffusion import DenoiserTerm, GaussianMixture, NNXEps
from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.metrics import psnr
from jaxpapers.core.nn.unet import UNet
from jaxpapers.core.train import train
from jaxpapers.lamp import AveragePool, GaussianBlur, Inpainting, LinearOperator, sample_posterior
from jaxpapers.lamp._image_metrics import ssim
from jaxpapers.lamp.experiments._common import BACKBONES, GRIDS, SCH, Config, build, tune
from jaxpapers.lamp.experiments._mixture import DEFAULT_LAG

DIGITS_SIGMA_Y = 0.05
TASKS = ("inpaint", "deblur", "sr2")
TRAIN, VAL = 1400, 1500  # images [0, 1400) train, [1400, 1500) validation, [1500, ...) test


def digits16() -> np.ndarray:
    """The 1,797 digits at 16x16 in [-1, 1]."""
    return load_digits(size=16, value_range=(-1.0, 1.0)).images


class KernelEps(eqx.Module):
    """Exact epsilon-predictor of the training digits smoothed by a Gaussian kernel, on images."""

    mixture: GaussianMixture

    def __call__(self, x: jax.Array, t: jax.Array) -> jax.Array:
        return self.mixture.eps(x.reshape(-1), t, SCH).reshape(x.shape)


def digits_model(ctx: Context, config: Config) -> NNXEps | KernelEps:
    """The digits denoiser: the kernel denoiser, or the U-Net trained here (once per run of the
    paper, ``ctx.cached``; an interrupted training resumes from its orbax checkpoint)."""
    spec = config.digits
    if spec.kind == "kernel":
        pick = np.random.default_rng(0).choice(TRAIN, spec.kde_components, replace=False)
        means = digits16()[np.sort(pick)].reshape(spec.kde_components, -1)
        return KernelEps(GaussianMixture(means, np.ones(spec.kde_components), spec.kde_var))
    data = digits16()[:TRAIN]
    graphdef, params = nnx.split(UNet(1, spec.channels, emb=64, rngs=nnx.Rngs(0)), nnx.Param)

    def batch_fn(step: int) -> np.ndarray:
        return data[np.random.default_rng(step).integers(0, data.shape[0], spec.batch)]

    def loss_fn(p, x0, key):
        kt, ke = jax.random.split(key)
        t = jax.random.uniform(kt, (x0.shape[0],), minval=1e-3, maxval=1.0)
        eps = jax.random.normal(ke, x0.shape)
        xt = SCH.alpha(t)[:, None, None] * x0 + SCH.sigma(t)[:, None, None] * eps
        pred = nnx.merge(graphdef, p)(xt[..., None], t)[..., 0]
        return jnp.mean((pred - eps) ** 2)

    def fit_unet():
        opt = optax.adam(optax.cosine_decay_schedule(2e-3, spec.steps, alpha=0.05))
        res = train(
            loss_fn,
            params,
            opt,
            batch_fn,
            steps=spec.steps,
            key=jax.random.key(0),
            checkpoint_dir=ctx.checkpoint_dir("digits_unet"),
            checkpoint_every=spec.checkpoint_every,
            desc="digits denoiser",
        )
        return res.params

    return NNXEps(graphdef, ctx.cached("digits_unet", fit_unet), "unet")


@jax.jit
def heldout_eps_mse(eps_fn: NNXEps, images: jax.Array) -> jax.Array:
    """Epsilon-prediction MSE on held-out digits at 16 fixed noise levels (1 = predicting 0)."""
    ts = jnp.linspace(0.02, 0.98, 16)

    def at(t, k):
        z = jax.random.normal(k, images.shape)
        xt = SCH.alpha(t) * images + SCH.sigma(t) * z
        return jnp.mean((jax.vmap(lambda x: eps_fn(x, t))(xt) - z) ** 2)

    return jnp.mean(jax.vmap(at)(ts, jax.random.split(jax.random.key(123), ts.shape[0])))


def operator(task: str) -> LinearOperator:
    if task == "inpaint":
        return Inpainting(np.random.default_rng(0).random((16, 16)) < 0.3)
    if task == "deblur":
        return GaussianBlur((16, 16), 1.5)
    return AveragePool((16, 16), 2)


@functools.partial(jax.jit, static_argnames=("kind", "num_steps"))
def _run(eps_fn, kind, num_steps, op, ys, hps, strengths, key):
    """Reconstructions ``[configs, images, 16, 16]`` (clipped) and counted NFE of
    :func:`sample_posterior` for every (knob, strength) configuration."""
    term = DenoiserTerm(eps_fn, SCH)
    keys = jax.random.split(key, ys.shape[0])

    def one(hp, strength):
        sampler = build(kind, op, DIGITS_SIGMA_Y, hp, strength, DEFAULT_LAG)

        def run(y, k):
            out = sample_posterior(term, sampler, y, key=k, num_steps=num_steps, throw=False)
            return out.x, out.nfe

        x, nfe = jax.vmap(run)(ys, keys)
        return jnp.clip(x, -1.0, 1.0), nfe

    return jax.vmap(one)(hps, strengths)


@jax.jit
def _measure(op: LinearOperator, images: jax.Array, seed) -> jax.Array:
    keys = jax.random.split(jax.random.key(50_000 + seed), images.shape[0])
    noise = jax.vmap(lambda k: jax.random.normal(k, op.out_shape))(keys)
    return jax.vmap(op.apply)(images) + DIGITS_SIGMA_Y * noise


@jax.jit
def _scores(x: jax.Array, truth: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Mean PSNR and SSIM per leading index of ``x [C, N, H, W]`` against ``truth [N, H, W]``
    (or ``[C, N, H, W]``)."""
    truth = jnp.broadcast_to(truth, x.shape)
    p = jax.vmap(lambda xi, ti: jnp.mean(psnr(xi, ti, data_range=2.0)))(x, truth)
    s = jax.vmap(lambda xi, ti: jnp.mean(ssim(xi, ti, data_range=2.0)))(x, truth)
    return p, s


class DigitsResult(NamedTuple):
    """Every backbone with and without LAMP on one digits task.

    Attributes:
      nfe: sampler steps.
      denoiser: the denoiser's settings and its held-out epsilon-prediction MSE.
      tuned, tuned_on_grid_edge: each row's knob and whether it is at an end of its grid.
      psnr, ssim: per-seed mean PSNR / SSIM of each row (``"X"``, ``"X+LAMP"``).
      examples: four test digits: truth, measurement (adjoint) and each row's reconstruction.
    """

    nfe: int
    denoiser: dict
    tuned: dict[str, float]
    tuned_on_grid_edge: dict[str, bool]
    psnr: dict[str, list[float]]
    ssim: dict[str, list[float]]
    examples: dict[str, list]


def digits_task(ctx: Context, config: Config, task: str) -> DigitsResult:
    """PSNR/SSIM of every backbone with and without LAMP on one task (cached, shared by the PSNR
    and SSIM experiments)."""

    def compute() -> DigitsResult:
        eps = digits_model(ctx, config)
        op = operator(task)
        n, n_img = config.digits_nfe, config.digits_images
        data = digits16()
        seeds = ctx.seed_list
        # Validation as large as the pooled test set of all seeds, so that the tuning call and
        # the test call (every grid value, both strengths, all seeds at once) share one compile.
        val = np.resize(data[TRAIN:VAL], (n_img * len(seeds), 16, 16))
        test = data[VAL:]
        y_val = _measure(op, jnp.asarray(val), 77_777)
        idx = [np.random.default_rng(s).choice(test.shape[0], n_img, replace=False) for s in seeds]
        truth = jnp.asarray(np.concatenate([test[i] for i in idx]))
        y = jnp.concatenate(
            [_measure(op, jnp.asarray(test[i]), s) for i, s in zip(idx, seeds, strict=True)]
        )
        out = DigitsResult(
            nfe=n,
            denoiser={
                **config.digits._asdict(),
                "heldout_eps_mse": float(heldout_eps_mse(eps, jnp.asarray(test))),
            },
            tuned={},
            tuned_on_grid_edge={},
            psnr={},
            ssim={},
            examples={
                "truth": np.asarray(truth[:4]).round(3).tolist(),
                "measurement": np.asarray(jax.vmap(op.adjoint)(y[:4])).round(3).tolist(),
            },
        )
        for kind in BACKBONES:
            grid = np.float32(GRIDS[kind][1])
            labels = (kind, f"{kind}+LAMP")
            if config.tune:
                hps = np.concatenate([grid, grid])
                strengths = np.repeat(np.float32([0.0, 1.0]), grid.size)
                x, _ = _run(eps, kind, n, op, y_val, hps, strengths, jax.random.key(3))
                neg = -np.asarray(_scores(x, jnp.asarray(val))[0])
                tuned = [tune(neg[: grid.size], kind, True), tune(neg[grid.size :], kind, True)]
                pick = [
                    int(np.argmax(grid == tuned[0][0])),
                    grid.size + int(np.argmax(grid == tuned[1][0])),
                ]
            else:
                tuned = [tune(None, kind, False)] * 2
                hps, strengths, pick = np.float32([t[0] for t in tuned]), np.float32([0, 1]), [0, 1]
            x, nfe = _run(eps, kind, n, op, y, hps, strengths, jax.random.key(11))
            x, nfe = x[np.asarray(pick)], np.asarray(nfe)[np.asarray(pick)]
            if not int(nfe.min()) == int(nfe.max()) == n:
                raise RuntimeError(f"{kind}: counted NFE {nfe} differs from {n} steps")
            for j, (label, (hp, edge)) in enumerate(zip(labels, tuned, strict=True)):
                out.tuned[label], out.tuned_on_grid_edge[label] = hp, edge
                xs = x[j].reshape(len(seeds), n_img, 16, 16)
                ts = truth.reshape(len(seeds), n_img, 16, 16)
                p, q = (np.asarray(v) for v in _scores(xs, ts))
                out.psnr[label], out.ssim[label] = p.tolist(), q.tolist()
                out.examples[label] = np.asarray(x[j, :4]).round(3).tolist()
        return out

    return ctx.cached(f"digits_{task}", compute)


def run_psnr(ctx: Context, config: Config, *, task: str) -> Outcome:
    """PSNR rows of one task: ``X``, ``X+LAMP`` and ``LAMP-X`` (paired per-seed difference)."""
    r = digits_task(ctx, config, task)
    values = {}
    for kind in BACKBONES:
        values[kind] = r.psnr[kind]
        values[f"{kind}+LAMP"] = r.psnr[f"{kind}+LAMP"]
        values[f"LAMP-{kind}"] = list(np.subtract(r.psnr[f"{kind}+LAMP"], r.psnr[kind]))
    extras = {
        "nfe": r.nfe,
        "denoiser": r.denoiser,
        "tuned": r.tuned,
        "tuned_on_grid_edge": r.tuned_on_grid_edge,
        "examples": r.examples,
        "task": task,
        "sigma_y": DIGITS_SIGMA_Y,
        "lag": DEFAULT_LAG,
    }
    return Outcome(values, extras)


def run_ssim(ctx: Context, config: Config) -> Outcome:
    """SSIM rows of every task and the paired LAMP - backbone difference pooled over tasks."""
    values: dict[str, list[float]] = {}
    for task in TASKS:
        r = digits_task(ctx, config, task)
        for kind in BACKBONES:
            values[f"{task} {kind}"] = r.ssim[kind]
            values[f"{task} {kind}+LAMP"] = r.ssim[f"{kind}+LAMP"]
    pooled = {}
    for kind in BACKBONES:
        diffs = [np.subtract(values[f"{t} {kind}+LAMP"], values[f"{t} {kind}"]) for t in TASKS]
        pooled[f"LAMP-{kind} (mean over tasks)"] = list(np.mean(diffs, axis=0))
    return Outcome({**values, **pooled})
