"""P02 LQZO: peak memory of one LQZO step vs one inference forward vs one backprop step.

Model: all-MiniLM-L6-v2 (6 layers, 22.7M parameters) with every linear layer quantized to INT4
(g = 64) for inference and LQZO, full precision for backprop; a mean-pool + linear head and
cross-entropy loss. Memory is XLA's compiled ``memory_analysis()`` (arguments + outputs +
temporaries - aliases) measured in a subprocess started with
``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`` so that XLA:CPU does not hide a fused
forward's internal buffers (see FACTS.md). Rows ``*_body`` repeat the comparison for the six
encoder layers alone (input: embedded tokens), where the 47 MB float embedding table no longer
dominates the arguments.

Kernel timings (fused Pallas kernel vs the jnp reference) are reported only where a GPU ran
them: interpret-mode timings on CPU are meaningless.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FLAG = "--xla_cpu_experimental_ynn_fusion_type="


def _memory_figures(quick: bool) -> dict[str, dict[str, int]]:
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from jaxpapers.core.bench import compiled_memory
    from jaxpapers.core.nn.bert import load_minilm, mean_pool
    from jaxpapers.lqzo import lqzo, mezo, quantize_linears, split_scales

    batch, seq = (8, 32) if quick else (32, 128)
    fp = load_minilm()
    q = quantize_linears(nnx.clone(fp), bits=4, group_size=64)
    head = jnp.ones((384, 2), jnp.float32) / 384
    ids = jnp.ones((batch, seq), jnp.int32)
    mask = jnp.ones((batch, seq), jnp.int32)
    y = jnp.zeros((batch,), jnp.int32)
    hidden = jnp.ones((batch, seq, 384), jnp.float32)

    def xent(pooled):
        logits = pooled @ head
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    def loss_of(model, body: bool):
        if body:
            return xent(mean_pool(model(None, mask, hidden=hidden), mask))
        return xent(mean_pool(model(ids, mask), mask))

    out: dict[str, dict[str, int]] = {}
    for body in (False, True):
        tag = "_body" if body else ""
        qdef, scales, rest = split_scales(q)
        fdef, params, frest = nnx.split(fp, nnx.Param, ...)

        def infer(scales, rest, body=body, qdef=qdef):
            return loss_of(nnx.merge(qdef, scales, rest), body)

        opt = lqzo(1e-3, key=jax.random.key(0), rank=4)
        state = opt.init(scales)

        def lqzo_step(scales, state, rest, body=body, qdef=qdef, opt=opt):
            value = lambda s: loss_of(nnx.merge(qdef, s, rest), body)
            updates, state = opt.update(None, state, scales, value_fn=value)
            return optax.apply_updates(scales, updates), state

        def backprop(params, frest, body=body, fdef=fdef):
            g = jax.grad(lambda p: loss_of(nnx.merge(fdef, p, frest), body))(params)
            return jax.tree.map(lambda p, d: p - 1e-3 * d, params, g)

        mopt = mezo(1e-3, key=jax.random.key(0))
        mstate = mopt.init(params)

        def mezo_step(params, mstate, frest, body=body, fdef=fdef, mopt=mopt):
            value = lambda p: loss_of(nnx.merge(fdef, p, frest), body)
            updates, mstate = mopt.update(None, mstate, params, value_fn=value)
            return optax.apply_updates(params, updates), mstate

        def fp_infer(params, frest, body=body, fdef=fdef):
            return loss_of(nnx.merge(fdef, params, frest), body)

        out[f"inference_int4{tag}"] = compiled_memory(infer, scales, rest)
        out[f"lqzo_step_int4{tag}"] = compiled_memory(lqzo_step, scales, state, rest)
        out[f"inference_fp{tag}"] = compiled_memory(fp_infer, params, frest)
        out[f"backprop_fp{tag}"] = compiled_memory(backprop, params, frest)
        out[f"mezo_step_fp{tag}"] = compiled_memory(mezo_step, params, mstate, frest)
    out["_setting"] = {"batch": batch, "seq": seq}
    return out


def _kernel_rows(quick: bool) -> list[dict]:
    import jax
    import jax.numpy as jnp
    from jaxpapers_kernels.quant_matmul import (
        LowRankSpec,
        pack_codes,
        perturbed_quant_matmul,
        perturbed_quant_matmul_reference,
    )

    from jaxpapers.core.bench import interleaved_median_times, row

    if jax.default_backend() != "gpu":
        return []
    m, k, n = (256, 1536, 1536) if quick else (2048, 4096, 4096)
    key = jax.random.key(0)
    codes = pack_codes(jax.random.randint(key, (k, n), 0, 16), 4)
    scales = jnp.full((k // 64, n), 0.01, jnp.float32)
    zeros = jnp.full((k // 64, n), 8.0, jnp.float32)
    x = jax.random.normal(key, (m, k), jnp.float32)
    seeds = jnp.asarray([1, 2], jnp.uint32)
    spec = LowRankSpec(4, 4, (96, 1024)) if quick else LowRankSpec(4, 4, (512, 512))
    kw = dict(bits=4, group_size=64, spec=spec)
    ref = jax.jit(
        lambda x, s: perturbed_quant_matmul_reference(x, codes, s, zeros, seeds, 0.1, **kw)
    )
    times = interleaved_median_times(
        {
            "kernel": lambda: perturbed_quant_matmul(x, codes, scales, zeros, seeds, 0.1, **kw),
            "reference": lambda: ref(x, scales),
        }
    )
    moved = x.size * 4 + codes.size + 2 * scales.size * 4 + m * n * 4
    return [
        row("quant_matmul_kernel", "time", times["kernel"], "s", bytes_moved=moved),
        row("quant_matmul_reference", "time", times["reference"], "s"),
        row(
            "quant_matmul_reference_over_kernel_time",
            "ratio",
            times["reference"] / times["kernel"],
            "x",
        ),
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
        rows += [
            row(
                f"lqzo_step_over_inference_memory{tag}",
                "ratio",
                mem[f"lqzo_step_int4{tag}"]["peak"] / inf,
                "x",
            ),
            row(
                f"backprop_over_inference_memory{tag}",
                "ratio",
                mem[f"backprop_fp{tag}"]["peak"] / inf,
                "x",
            ),
            row(
                f"backprop_over_fp_inference_memory{tag}",
                "ratio",
                mem[f"backprop_fp{tag}"]["peak"] / mem[f"inference_fp{tag}"]["peak"],
                "x",
            ),
            row(
                f"mezo_step_over_inference_memory{tag}",
                "ratio",
                mem[f"mezo_step_fp{tag}"]["peak"] / inf,
                "x",
            ),
        ]
    return rows + _kernel_rows(quick)


if __name__ == "__main__":
    worker = os.environ.get("LQZO_BENCH_WORKER")
    if worker:
        print(json.dumps(_memory_figures(worker == "quick")))
    else:
        from jaxpapers.core.bench import bench_main

        bench_main("lqzo", run)
