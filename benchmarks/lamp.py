"""P07 LAMP: per-step time and compiled memory of each backbone with and without LAMP.

The denoiser is the flax.nnx U-Net of ``jaxpapers.core.nn.unet`` (untrained weights: timing does
not depend on them) on 16x16 inpainting, a batch of measurements vmapped through one
``diffrax.diffeqsolve`` per sample. Per-step time = median wall time of a full jitted sampling run
/ number of steps. The overhead is the median of paired ratios (each repeat times LAMP and its
backbone back to back in alternating order, :func:`jaxpapers.core.bench.paired_time_ratio`), so
a load change on a shared machine cancels; its quartiles are in the row. Rows:

* ``<backbone>_step_time`` / ``<backbone>+lamp_step_time`` (seconds per step);
* ``lamp_overhead_per_step`` (DPS, the row the issue names) and
  ``lamp_overhead_per_step_<backbone>``: LAMP step time / backbone step time - 1;
* ``<backbone>_peak_bytes`` / ``<backbone>+lamp_peak_bytes`` and ``lamp_memory_ratio_<backbone>``
  from XLA's compiled ``memory_analysis()``;
* ``diffrax_over_plain_loop_time``: LAMP over DPS through ``diffrax.diffeqsolve`` (the solver's
  ``step`` evaluating the denoiser term, state carried by diffrax) over the same transition in a
  plain ``lax.fori_loop`` (same keys, same outputs; checked), i.e. the price of the diffrax drive.
"""

from __future__ import annotations

import jax
import numpy as np
from flax import nnx

from jaxpapers.core.bench import bench_main, executable_memory, paired_time_ratio, row
from jaxpapers.core.diffusion import DenoiserTerm, NNXEps, VPSchedule, time_grid
from jaxpapers.core.nn.unet import UNet
from jaxpapers.lamp import DDRM, DPS, DiffPIR, Inpainting, lamp, sample_posterior


def run(quick: bool = True) -> list[dict]:
    batch, steps, repeats = (8, 10, 21) if quick else (64, 50, 31)
    channels = (32, 64) if quick else (64, 128)
    sch = VPSchedule()
    graphdef, params = nnx.split(UNet(1, channels, emb=64, rngs=nnx.Rngs(0)), nnx.Param)
    den = DenoiserTerm(NNXEps(graphdef, params, "unet"), sch)
    op = Inpainting(np.random.default_rng(0).random((16, 16)) < 0.3)
    ys = jax.random.normal(jax.random.key(0), (batch, *op.out_shape))
    keys = jax.random.split(jax.random.key(1), batch)
    backbones = {
        "dps": DPS(op, 0.05, zeta=1.0),
        "diffpir": DiffPIR(op, 0.05, lam=1.0, zeta=0.3),
        "ddrm": DDRM(op, 0.05),
    }

    def sampler_fn(sampler):
        # The sampler (with the U-Net weights) is an argument, so weights are not constants; one
        # compiled executable is both timed and asked for its memory.
        def f(s, y, k):
            def one(yi, ki):
                return sample_posterior(den, s, yi, key=ki, num_steps=steps).x

            return jax.vmap(one)(y, k)

        return jax.jit(f).lower(sampler, ys, keys).compile(), sampler

    rows = []
    for name, bb in backbones.items():
        f_bb, s_bb = sampler_fn(bb)
        f_l, s_l = sampler_fn(lamp(bb, 1.0))
        paired = paired_time_ratio(
            lambda f=f_l, s=s_l: f(s, ys, keys),
            lambda f=f_bb, s=s_bb: f(s, ys, keys),
            repeats=repeats,
            warmup=1,
        )
        t_b, t_l = paired["baseline_time"] / steps, paired["time"] / steps
        rows.append(row(f"{name}_step_time", "time", t_b, "s", batch=batch, steps=steps))
        rows.append(row(f"{name}+lamp_step_time", "time", t_l, "s", batch=batch, steps=steps))
        overhead = paired["ratio"] - 1.0
        spread = {"q25": paired["q25"] - 1.0, "q75": paired["q75"] - 1.0, "repeats": repeats}
        rows.append(row(f"lamp_overhead_per_step_{name}", "ratio", overhead, "1", **spread))
        if name == "dps":
            rows.append(
                row(
                    "lamp_overhead_per_step",
                    "ratio",
                    overhead,
                    "1",
                    backbone="DPS",
                    denoiser=f"UNet{channels}",
                    **spread,
                )
            )
        m_b = executable_memory(f_bb)["peak"]
        m_l = executable_memory(f_l)["peak"]
        rows.append(row(f"{name}_peak_bytes", "memory", m_b, "bytes"))
        rows.append(row(f"{name}+lamp_peak_bytes", "memory", m_l, "bytes"))
        rows.append(row(f"lamp_memory_ratio_{name}", "ratio", m_l / m_b, "1"))
    rows.append(_diffrax_over_plain_loop(den, lamp(backbones["dps"]), ys, keys, steps, repeats))
    return rows


def _plain_loop(term, sampler, y, key, steps):
    """The sampler's transition in a ``lax.fori_loop`` (what diffeqsolve runs, minus diffrax)."""
    k0, k1 = jax.random.split(key)
    x = jax.random.normal(k0, sampler.operator.in_shape, y.dtype)
    ts = time_grid(steps).astype(y.dtype)
    s = sampler.with_key(k1)
    state = s.init(term, -ts[0], -ts[-1], x, y)

    def body(i, carry):
        x, st = carry
        x1, _, _, st, _ = s.step(term, -ts[i], -ts[i + 1], x, y, st, False)
        return x1, st

    return jax.lax.fori_loop(0, steps, body, (x, state))[0]


def _diffrax_over_plain_loop(term, sampler, ys, keys, steps, repeats):
    diffrax_fn = jax.jit(
        jax.vmap(lambda y, k: sample_posterior(term, sampler, y, key=k, num_steps=steps).x)
    )
    plain_fn = jax.jit(jax.vmap(lambda y, k: _plain_loop(term, sampler, y, k, steps)))
    a, b = np.asarray(diffrax_fn(ys, keys)), np.asarray(plain_fn(ys, keys))
    # Same arithmetic in two differently fused float32 programs (the untrained U-Net's outputs
    # reach 1e3): agreement to float32 rounding relative to the output scale.
    np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-5 * float(np.abs(b).max()))
    paired = paired_time_ratio(
        lambda: diffrax_fn(ys, keys), lambda: plain_fn(ys, keys), repeats=repeats, warmup=1
    )
    return row(
        "diffrax_over_plain_loop_time",
        "ratio",
        paired["ratio"],
        "1",
        sampler="LAMP over DPS",
        q25=paired["q25"],
        q75=paired["q75"],
        repeats=repeats,
    )


if __name__ == "__main__":
    bench_main("lamp", run)
