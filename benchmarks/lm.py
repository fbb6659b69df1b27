"""Language-model benchmark (P03, P05 and the shared decoder): throughput and step-time ratios.

* ``bert_all_layers_tokens_per_s``: all-MiniLM-L6-v2 returning every layer's states in one jitted
  call (batch 64 x 16 tokens quick; 256 x 64 full).
* ``rapo_step_over_grpo_time``: one RAPO update (rollouts, the reference forward with and without
  the profile batched together, weighted loss with the k3 KL term, Adam) over one GRPO update with
  the same KL term (rollouts, the reference forward with the profile, loss, Adam): the price of
  RAPO is the one reference forward without the profile (paired ABBA ratio; aim <= 1.2).
* ``rapo_step_over_grpo_no_ref_time``: the same RAPO update over GRPO without a KL reference at
  all (no reference forward; report).
* ``cayley_head_params_over_lm``: a Cayley-Encoder head (hidden 32, 2 rounds, 2 classes) over
  MiniLM's 7 layer states, as a fraction of MiniLM's parameters.
* ``decoder_sample_tokens_per_s`` (KV cache) and ``decoder_sample_tokens_per_s_no_cache`` (the
  whole prefix recomputed every token): a 4-layer, width-128 decoder drawing 64 (quick) or 192
  (full) tokens after an 8-token prompt for 32 sequences; and their ratio.
Times are medians after a compile warm-up on the default XLA:CPU settings.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxpapers.cayley import LayerGNN, layer_graph
from jaxpapers.core.bench import bench_main, median_time, paired_time_ratio, row
from jaxpapers.core.nn.bert import load_minilm
from jaxpapers.core.nn.decoder import DecoderLM, sample
from jaxpapers.core.pytrees import count_params
from jaxpapers.rapo import (
    COMPLETION_LEN,
    PROMPT_LEN,
    RLConfig,
    World,
    draw_batch,
    rl_step,
    split_profiles,
)


@partial(jax.jit, static_argnames=("graphdef",))
def _bert_all(graphdef, state, ids, mask):
    return nnx.merge(graphdef, state)(ids, mask, all_layers=True)


def _bert_rows(quick: bool) -> list[dict]:
    model = load_minilm()
    graphdef, state = nnx.split(model)
    b, t = (64, 16) if quick else (256, 64)
    ids = jax.random.randint(jax.random.key(0), (b, t), 1000, 20000)
    mask = jnp.ones((b, t), jnp.int32)
    secs = median_time(lambda: _bert_all(graphdef, state, ids, mask), repeats=5)
    lm = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    head = LayerGNN(layer_graph(7), 384, 2, key=jax.random.key(0), hidden=32)
    return [
        row("bert_all_layers_tokens_per_s", "throughput", b * t / secs, "tokens/s", batch=b, T=t),
        row(
            "cayley_head_params_over_lm",
            "ratio",
            count_params(head) / lm,
            f"head params {count_params(head)} / MiniLM params {lm}",
        ),
    ]


def _rl_rows(quick: bool) -> list[dict]:
    world = World()
    model = DecoderLM(
        world.vocab_size,
        d_model=32 if quick else 64,
        num_heads=4,
        num_layers=2,
        max_len=PROMPT_LEN + COMPLETION_LEN,
        rngs=nnx.Rngs(0),
    )
    graphdef, state = nnx.split(model)
    config = RLConfig(group_size=8, beta=0.04)
    no_kl = RLConfig(group_size=8)
    opt_state = optax.adam(config.learning_rate).init(state)
    train, _ = split_profiles(world)
    batch = draw_batch(jnp.asarray(train), 16 if quick else 64, key=jax.random.key(1))

    @partial(jax.jit, static_argnames=("use_pmi", "config"))
    def step(state, opt_state, key, use_pmi, config):
        a = 1.0 if use_pmi else 0.0
        return rl_step(
            graphdef,
            state,
            opt_state,
            state,
            world,
            batch,
            key=key,
            config=config,
            alpha=a,
            gamma=0.5 * a,
            use_pmi=use_pmi,
        )

    key = jax.random.key(2)
    rapo = lambda: step(state, opt_state, key, True, config)
    rows = []
    for name, base, note in [
        (
            "rapo_step_over_grpo_time",
            lambda: step(state, opt_state, key, False, config),
            "RAPO step / GRPO step, both with the k3 KL term (median of ABBA pairs)",
        ),
        (
            "rapo_step_over_grpo_no_ref_time",
            lambda: step(state, opt_state, key, False, no_kl),
            "RAPO step / GRPO step without a reference model (median of ABBA pairs)",
        ),
    ]:
        r = paired_time_ratio(rapo, base)
        rows.append(
            row(
                name,
                "ratio",
                r["ratio"],
                note,
                q25=r["q25"],
                q75=r["q75"],
                rapo_s=r["time"],
                grpo_s=r["baseline_time"],
                **({"aim": 1.2} if name == "rapo_step_over_grpo_time" else {}),
            )
        )
    return rows


def _sample_rows(quick: bool) -> list[dict]:
    new = 64 if quick else 192
    model = DecoderLM(64, d_model=128, num_heads=4, num_layers=4, max_len=8 + new, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    prompt = jax.random.randint(jax.random.key(0), (32, 8), 0, 64)
    out = {}
    for cache in (True, False):
        secs = median_time(
            lambda cache=cache: sample(
                graphdef,
                state,
                prompt,
                key=jax.random.key(1),
                max_new_tokens=new,
                use_cache=cache,
            ),
            repeats=5,
        )
        out[cache] = 32 * new / secs
    return [
        row("decoder_sample_tokens_per_s", "throughput", out[True], "tokens/s", kv_cache=True),
        row(
            "decoder_sample_tokens_per_s_no_cache",
            "throughput",
            out[False],
            "tokens/s",
            kv_cache=False,
        ),
        row(
            "decoder_kv_cache_speedup",
            "ratio",
            out[True] / out[False],
            f"tokens/s with / without the KV cache ({new} new tokens)",
        ),
    ]


def run(quick: bool = True) -> list[dict]:
    return _bert_rows(quick) + _rl_rows(quick) + _sample_rows(quick)


if __name__ == "__main__":
    bench_main("lm", run)
