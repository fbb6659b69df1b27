"""P02 LQZO: memory and time of one LQZO step against inference, MeZO and backprop.

Model: all-MiniLM-L6-v2 (6 layers, 22.7M parameters) with every linear layer quantized to INT4
(g = 64) for inference and LQZO, full precision for MeZO and backprop; a mean-pool + linear head
and cross-entropy loss; batch 8 x 32 tokens (quick) or 32 x 128 (full).

* Memory: XLA's compiled ``memory_analysis()`` (arguments + outputs + temporaries - aliases),
  measured in a subprocess started with ``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=``:
  with that fusion type on, XLA:CPU reports a fused forward without its internal buffers and
  the comparison would flatter whichever program fuses more. Rows ``*_body`` repeat the
  comparison for the six encoder layers alone (input: embedded tokens), where the 47 MB float
  embedding table no longer dominates the arguments.
* ``mezo_reference_over_ours_*``: MeZO's Algorithm 1 written plainly in this file (perturb every
  tensor by ``+eps z`` from the step seed, forward, ``-2 eps z``, forward, ``+eps z`` back, then
  ``-lr g z``; ``z`` drawn tensor by tensor from ``fold_in(key, i)``) over our ``mezo`` optimiser.
* ``lqzo_step_over_inference_time``: one jitted LQZO INT4 step (two forward passes, the
  perturbation and the update) over one INT4 inference forward, default CPU path (jnp).
* ``kernel_over_reference_step_time``: one LQZO step of a two-layer INT4 MLP (1024 wide, batch
  64) with every forward through the Pallas kernel over the same step on the jnp reference path.
  Without a GPU/TPU the kernel runs in interpret mode, so on CPU this row prices the interpreter,
  not the kernel; the GPU figure is what the row is for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FLAG = "--xla_cpu_experimental_ynn_fusion_type="
EPS, LR = 1e-3, 1e-6


def _minilm_steps(quick: bool, body: bool):
    """The compared programs as ``{name: (fn, args)}`` for one setting."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from jaxpapers.core.nn.bert import load_minilm, mean_pool
    from jaxpapers.lqzo import lqzo, mezo, quantize_linears, split_scales

    batch, seq = (8, 32) if quick else (32, 128)
    fp = load_minilm()
    q = quantize_linears(nnx.clone(fp), bits=4, group_size=64, use_kernel=False)
    head = jnp.ones((384, 2), jnp.float32) / 384
    ids = jnp.ones((batch, seq), jnp.int32)
    mask = jnp.ones((batch, seq), jnp.int32)
    y = jnp.zeros((batch,), jnp.int32)
    hidden = jnp.ones((batch, seq, 384), jnp.float32)

    def loss_of(model):
        out = model(None, mask, hidden=hidden) if body else model(ids, mask)
        logits = mean_pool(out, mask) @ head
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    qdef, scales, rest = split_scales(q)
    fdef, params, frest = nnx.split(fp, nnx.Param, ...)

    def infer(scales, rest):
        return loss_of(nnx.merge(qdef, scales, rest))

    opt = lqzo(1e-3, key=jax.random.key(0), rank=4)

    def lqzo_step(scales, state, rest):
        value = lambda s: loss_of(nnx.merge(qdef, s, rest))
        updates, state = opt.update(None, state, scales, value_fn=value)
        return optax.apply_updates(scales, updates), state

    def backprop(params, frest):
        g = jax.grad(lambda p: loss_of(nnx.merge(fdef, p, frest)))(params)
        return jax.tree.map(lambda p, d: p - LR * d, params, g)

    mopt = mezo(LR, key=jax.random.key(0), eps=EPS)

    def mezo_step(params, mstate, frest):
        value = lambda p: loss_of(nnx.merge(fdef, p, frest))
        updates, mstate = mopt.update(None, mstate, params, value_fn=value)
        return optax.apply_updates(params, updates), mstate

    def mezo_reference_step(params, frest, seed):
        # MeZO (Malladi et al. 2023), Algorithm 1, written plainly.
        leaves, treedef = jax.tree.flatten(params)
        key = jax.random.key(seed)

        def perturb(leaves, scale):
            return [
                x + scale * EPS * jax.random.normal(jax.random.fold_in(key, i), x.shape, x.dtype)
                for i, x in enumerate(leaves)
            ]

        value = lambda ls: loss_of(nnx.merge(fdef, treedef.unflatten(ls), frest))
        leaves = perturb(leaves, 1.0)
        lp = value(leaves)
        leaves = perturb(leaves, -2.0)
        lm = value(leaves)
        leaves = perturb(leaves, 1.0)
        g = (lp - lm) / (2 * EPS)
        return treedef.unflatten(perturb(leaves, -LR * g / EPS))

    def fp_infer(params, frest):
        return loss_of(nnx.merge(fdef, params, frest))

    return {
        "inference_int4": (infer, (scales, rest)),
        "lqzo_step_int4": (lqzo_step, (scales, opt.init(scales), rest)),
        "inference_fp": (fp_infer, (params, frest)),
        "backprop_fp": (backprop, (params, frest)),
        "mezo_step_fp": (mezo_step, (params, mopt.init(params), frest)),
        "mezo_reference_step_fp": (mezo_reference_step, (params, frest, jnp.uint32(1))),
    }, {"batch": batch, "seq": seq}


def _memory_figures(quick: bool) -> dict:
    from jaxpapers.core.bench import compiled_memory

    out: dict = {}
    for body in (False, True):
        programs, setting = _minilm_steps(quick, body)
        for name, (fn, args) in programs.items():
            out[f"{name}{'_body' if body else ''}"] = compiled_memory(fn, *args)
    out["_setting"] = setting
    return out


def _time_rows(quick: bool) -> list[dict]:
    import jax

    from jaxpapers.core.bench import paired_time_ratio, row

    programs, setting = _minilm_steps(quick, body=False)
    run = {}
    for name in ("inference_int4", "lqzo_step_int4", "mezo_step_fp", "mezo_reference_step_fp"):
        fn, args = programs[name]
        jitted = jax.jit(fn)
        run[name] = lambda f=jitted, a=args: f(*a)
    repeats = 11 if quick else 21
    lq = paired_time_ratio(run["lqzo_step_int4"], run["inference_int4"], repeats=repeats)
    mz = paired_time_ratio(run["mezo_reference_step_fp"], run["mezo_step_fp"], repeats=repeats)
    return [
        row("lqzo_step_over_inference_time", "ratio", lq["ratio"], "x", **_q(lq), **setting),
        row("mezo_reference_over_ours_time", "ratio", mz["ratio"], "x", **_q(mz), **setting),
    ]


def _q(r: dict) -> dict:
    return {k: r[k] for k in ("q25", "q75", "time", "baseline_time")}


def _kernel_rows(quick: bool) -> list[dict]:
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from jaxpapers.core.bench import paired_time_ratio, row
    from jaxpapers.lqzo import lqzo, merge_scaled, quantize_linears, split_scales
    from jaxpapers.lqzo._finetune import zeros_like_tree

    width, batch = (1024, 64) if quick else (4096, 256)

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(width, width, rngs=rngs)
            self.l2 = nnx.Linear(width, width, rngs=rngs)

        def __call__(self, x):
            return self.l2(jax.nn.gelu(self.l1(x)))

    x = jax.random.normal(jax.random.key(1), (batch, width), jnp.float32)
    steps = {}
    for name, mode in (("kernel", True), ("reference", False)):
        model = quantize_linears(MLP(nnx.Rngs(0)), bits=4, group_size=64, use_kernel=mode)
        gd, s0, rest = split_scales(model)
        delta = zeros_like_tree(s0)
        opt = lqzo(1e-3, key=jax.random.key(0), rank=4)

        def step(d, state, gd=gd, s0=s0, rest=rest, opt=opt):
            value = lambda e: jnp.mean(merge_scaled(gd, s0, e, rest)(x) ** 2)
            updates, state = opt.update(None, state, d, value_fn=value)
            return optax.apply_updates(d, updates), state

        args = (delta, opt.init(delta))
        jitted = jax.jit(step)
        steps[name] = lambda f=jitted, a=args: f(*a)
    r = paired_time_ratio(steps["kernel"], steps["reference"], repeats=5 if quick else 11)
    interpret = jax.default_backend() not in ("gpu", "tpu")
    return [
        row(
            "kernel_over_reference_step_time",
            "ratio",
            r["ratio"],
            "x",
            **_q(r),
            backend=jax.default_backend(),
            interpret=interpret,
            width=width,
            batch=batch,
        )
    ]


def run(quick: bool = True) -> list[dict]:
    from jaxpapers.core.bench import row

    env = {
        **os.environ,
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {FLAG}".strip(),
        "LQZO_BENCH_WORKER": "quick" if quick else "full",
    }
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve())],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    mem = json.loads(proc.stdout.strip().splitlines()[-1])
    setting = mem.pop("_setting")
    rows = []
    for name, m in mem.items():
        rows.append(
            row(
                name,
                "peak_memory",
                m["peak"],
                "bytes",
                temp=m["temp"],
                argument=m["argument"],
                xla_flags=FLAG,
                **setting,
            )
        )
    for tag in ("", "_body"):
        inf = mem[f"inference_int4{tag}"]["peak"]
        ratios = {
            f"lqzo_step_over_inference_memory{tag}": mem[f"lqzo_step_int4{tag}"]["peak"] / inf,
            f"backprop_over_inference_memory{tag}": mem[f"backprop_fp{tag}"]["peak"] / inf,
            f"backprop_over_fp_inference_memory{tag}": mem[f"backprop_fp{tag}"]["peak"]
            / mem[f"inference_fp{tag}"]["peak"],
            f"mezo_step_over_inference_memory{tag}": mem[f"mezo_step_fp{tag}"]["peak"] / inf,
            f"mezo_reference_over_ours_memory{tag}": mem[f"mezo_reference_step_fp{tag}"]["peak"]
            / mem[f"mezo_step_fp{tag}"]["peak"],
        }
        rows += [row(name, "ratio", value, "x") for name, value in ratios.items()]
    return rows + _time_rows(quick) + _kernel_rows(quick)


if __name__ == "__main__":
    worker = os.environ.get("LQZO_BENCH_WORKER")
    if worker:
        print(json.dumps(_memory_figures(worker == "quick")))
    else:
        from jaxpapers.core.bench import bench_main

        bench_main("lqzo", run)
