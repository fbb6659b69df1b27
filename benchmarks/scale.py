"""P04 SCALE: sampling time and memory of one-pass SCALE against two-pass CFG, and the cost of a
SCALE training step (its self-generated samples included) against a plain conditional step.

Network: the class-conditional U-Net of ``jaxpapers.core.nn.unet`` on 16x16 one-channel images
(channels (16, 32) quick, (32, 64) full; untrained weights: timing does not depend on them).
Sampling: deterministic DDIM through the diffusion core, a batch of 32 (quick) at 10 steps; CFG
evaluates the conditional and the null pass as one batch of 64, SCALE one batch of 32. Times are
medians of ABBA-paired ratios (:func:`jaxpapers.core.bench.paired_time_ratio`); memory is XLA's
``memory_analysis()`` of the same programs (:func:`jaxpapers.core.bench.compiled_memory`). The
training-step row times whole jitted runs of ``fit`` (20 steps, two refresh blocks of SCALE with
``refresh=10``, ``self_steps=10``, ``self_batch`` = batch) and divides by the steps, so SCALE's
figure includes its amortised self-sample generation (2 x 10 passes of a batch every 10 steps,
i.e. ~2 forward passes per step), the stop-gradient self-network pass on real data and the self
network's forward/backward pass on self samples.
Rows: ``scale_sampling_over_cfg_time``, ``scale_train_step_over_conditional_time``,
``scale_sampling_memory_over_cfg`` (plus the absolute times and bytes they come from).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxpapers.core.bench import bench_main, compiled_memory, paired_time_ratio, row
from jaxpapers.scale import ArrayData, Method, fit, sample_cfg, sample_one_pass, unet_denoiser


def run(quick: bool = True) -> list[dict]:
    batch, steps, repeats = (32, 10, 15) if quick else (128, 25, 31)
    channels = (16, 32) if quick else (32, 64)
    net, params = unet_denoiser(16, 10, seeds=jnp.arange(1), channels=channels)
    params = jax.tree.map(lambda a: a[0], params)
    labels = jnp.arange(batch, dtype=jnp.int32) % 10
    key = jax.random.key(0)

    scale_fn = jax.jit(lambda p, k: sample_one_pass(net, p, labels, key=k, num_steps=steps).x)
    cfg_fn = jax.jit(lambda p, k: sample_cfg(net, p, labels, key=k, num_steps=steps, w=2.0).x)
    paired = paired_time_ratio(
        lambda: scale_fn(params, key), lambda: cfg_fn(params, key), repeats=repeats
    )
    info = {
        "batch": batch,
        "steps": steps,
        "net": f"UNet{channels}",
        "q25": paired["q25"],
        "q75": paired["q75"],
        "repeats": repeats,
    }
    rows = [
        row("scale_sampling_time", "time", paired["time"], "s", batch=batch, steps=steps),
        row("cfg_sampling_time", "time", paired["baseline_time"], "s", batch=batch, steps=steps),
        row("scale_sampling_over_cfg_time", "ratio", paired["ratio"], "1", **info),
    ]
    m_s = compiled_memory(scale_fn, params, key)["peak"]
    m_c = compiled_memory(cfg_fn, params, key)["peak"]
    rows += [
        row("scale_sampling_peak_bytes", "memory", m_s, "bytes"),
        row("cfg_sampling_peak_bytes", "memory", m_c, "bytes"),
        row("scale_sampling_memory_over_cfg", "ratio", m_s / m_c, "1", batch=batch),
    ]
    rows.append(_train_step_row(net, params, batch, repeats))
    return rows


def _train_step_row(net, params, batch, repeats):
    data = ArrayData(
        jax.random.normal(jax.random.key(1), (256, 16, 16, 1)),
        jnp.arange(256, dtype=jnp.int32) % 10,
    )
    n_steps = 20
    scale = Method("scale", w=1.5, refresh=10, self_steps=10, self_batch=batch)
    cond = Method("conditional")

    def runner(method):
        return jax.jit(
            lambda p, k: fit(net, method, p, data, key=k, steps=n_steps, batch=batch).losses
        )

    f_s, f_c = runner(scale), runner(cond)
    k = jax.random.key(3)
    paired = paired_time_ratio(lambda: f_s(params, k), lambda: f_c(params, k), repeats=repeats)
    return row(
        "scale_train_step_over_conditional_time",
        "ratio",
        paired["ratio"],
        "1",
        scale_step_s=paired["time"] / n_steps,
        conditional_step_s=paired["baseline_time"] / n_steps,
        refresh=10,
        self_steps=10,
        self_batch=batch,
        q25=paired["q25"],
        q75=paired["q75"],
    )


if __name__ == "__main__":
    bench_main("scale", run)
