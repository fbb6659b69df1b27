"""The P05 pipeline: warm-up (plain / Psy-CoT), then GRPO vs RAPO under two judges, vmapped.

Both training stages are :func:`jaxpapers.core.fit.fit`: the warm-up of :func:`sft_loss` and the
RL stage of :func:`rl_loss` (on-policy: each step's rollouts are drawn inside its loss from that
step's policy), each one program vmapped over the policies.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.fit import fit
from jaxpapers.core.nn.decoder import DecoderLM, sample
from jaxpapers.core.pytrees import stack_trees
from jaxpapers.rapo import (
    COMPLETION_LEN,
    PROMPT_LEN,
    RLConfig,
    Scores,
    StepMetrics,
    World,
    draw_batch,
    prompts,
    rl_loss,
    score,
    sft_loss,
    split_profiles,
)


class Config(NamedTuple):
    """Every size-dependent setting of the P05 pipeline (one per run size, ``SIZES``)."""

    d_model: int
    layers: int
    sft_steps: int
    sft_batch: int
    rl_steps: int
    prompts_per_step: int
    group_size: int
    eval_prompts: int


WORLD = World()
#: RAPO's weights; GRPO is the same program with both set to 0.
RAPO = {"alpha": 1.0, "gamma": 0.5}


def init_policies(sizes: Config, seeds: list[int]):
    """``graphdef`` and the seeds' initial states stacked on a leading axis."""
    states = []
    for s in seeds:
        model = DecoderLM(
            WORLD.vocab_size,
            d_model=sizes.d_model,
            num_heads=4,
            num_layers=sizes.layers,
            max_len=PROMPT_LEN + COMPLETION_LEN,
            rngs=nnx.Rngs(s),
        )
        graphdef, state = nnx.split(model)
        states.append(state)
    return graphdef, stack_trees(states)


@partial(jax.jit, static_argnames=("graphdef", "sizes"))
def warmup(graphdef, states, keys, psycot, profiles, sizes: Config):
    """Supervised warm-up of each (state, key, format) by Adam; a :class:`FitResult` per policy.

    Step ``t``'s key ``k_t`` splits into the batch's key and the loss's key.
    """

    def one(state, key, flag):
        def batch_fn(_t, k):
            return draw_batch(profiles, sizes.sft_batch, key=jax.random.split(k)[0])

        def loss_fn(p, batch, k):
            k_loss = jax.random.split(k)[1]
            return sft_loss(graphdef, p, WORLD, batch, key=k_loss, psycot=flag)

        return fit(
            loss_fn, state, optax.adam(3e-3), steps=sizes.sft_steps, key=key, batch_fn=batch_fn
        )

    return jax.vmap(one)(states, keys, psycot)


@partial(jax.jit, static_argnames=("n",))
def _draw(keys, profiles, n: int):
    """Each policy's evaluation prompts and sampling key (``draw_batch`` per key)."""

    def one(key):
        k_batch, k_sample = jax.random.split(key)
        return draw_batch(profiles, n, key=k_batch), k_sample

    return jax.vmap(one)(keys)


@partial(jax.jit, static_argnames=("graphdef",))
def _evaluate(graphdef, states, keys, batches, temperature):
    def one(state, key, batch):
        tokens = sample(
            graphdef,
            state,
            prompts(WORLD, batch),
            key=key,
            max_new_tokens=COMPLETION_LEN,
            temperature=temperature,
        )
        return jax.tree.map(jnp.mean, score(WORLD, batch, tokens[:, PROMPT_LEN:]))

    return jax.vmap(one)(states, keys, batches)


def evaluate(graphdef, states, keys, profiles, n: int, temperature: float = 0.0):
    """Mean scores of each policy on ``n`` prompts drawn from ``profiles``.

    The prompts are drawn outside the sampling program and the temperature is traced, so every
    evaluation (seen / unseen profiles, greedy / sampled) of a given number of policies shares
    one compiled program.
    """
    batches, sample_keys = _draw(keys, profiles, n)
    return _evaluate(graphdef, states, sample_keys, batches, jnp.float32(temperature))


@partial(jax.jit, static_argnames=("graphdef", "sizes", "config"))
def reinforce(graphdef, states, refs, keys, alpha, gamma, hackable, profiles, sizes, config):
    """``rl_steps`` GRPO/RAPO updates of every policy (Adam on :func:`rl_loss`); a
    :class:`FitResult` per policy whose ``aux`` holds the step metrics ``[policies, steps]``.

    Step ``t``'s key ``k_t`` splits into the prompts' key and the rollouts' key (once, in the
    batch function, which hands the rollouts' key to the loss with the prompts).
    """

    def one(state, ref, key, a, c, h):
        def batch_fn(_t, k):
            k_batch, k_step = jax.random.split(k)
            return draw_batch(profiles, sizes.prompts_per_step, key=k_batch), k_step

        def loss_fn(s, batch, _k):
            prompts_, k_step = batch
            return rl_loss(
                graphdef,
                s,
                ref,
                WORLD,
                prompts_,
                key=k_step,
                config=config,
                alpha=a,
                gamma=c,
                hackable=h,
            )

        return fit(
            loss_fn,
            state,
            optax.adam(config.learning_rate),
            steps=sizes.rl_steps,
            key=key,
            batch_fn=batch_fn,
            has_aux=True,
        )

    return jax.vmap(one)(states, refs, keys, alpha, gamma, hackable)


class Pipeline(NamedTuple):
    """What the P05 experiments read (one run of the pipeline, cached).

    Attributes:
      cells: ``(hackable judge, method, seed)`` of each RL run, in the order of the RL rows.
      sft_loss_last: ``[2 * seeds]`` final warm-up loss (Psy-CoT seeds, then plain).
      warmup_unseen, warmup_seen: greedy :class:`Scores` means of each warm-up (Psy-CoT seeds,
        then plain) on unseen and on training profiles.
      curves: :class:`StepMetrics` of every RL step, ``[cells, steps]``.
      final_unseen, start_unseen: sampled :class:`Scores` means on unseen profiles after RL
        and of its starting policy, per cell.
      finite: whether every RL run applied every step.
    """

    cells: tuple[tuple[bool, str, int], ...]
    sft_loss_last: np.ndarray
    warmup_unseen: Scores
    warmup_seen: Scores
    curves: StepMetrics
    final_unseen: Scores
    start_unseen: Scores
    finite: bool


def run_pipeline(sizes: Config, seeds: list[int]) -> Pipeline:
    """Warm-up both formats per seed, then GRPO and RAPO under the hackable and the exact judge:
    warm-up losses, held-out fidelity of each warm-up, RL curves and final held-out scores per
    (seed, method, judge)."""
    train, unseen = split_profiles(WORLD)
    train_j, unseen_j = jnp.asarray(train), jnp.asarray(unseen)
    graphdef, init = init_policies(sizes, seeds)
    n = len(seeds)
    both = jax.tree.map(lambda x: jnp.concatenate([x, x]), init)
    flags = jnp.array([True] * n + [False] * n)
    keys = jnp.stack([jax.random.key(10_000 + s) for s in seeds] * 2)
    warmed = warmup(graphdef, both, keys, flags, train_j, sizes)
    warm = warmed.params
    eval_keys = jnp.stack([jax.random.key(20_000 + s) for s in seeds] * 2)
    # both warm-up evaluations in one call (2n policies, as many as the RL cells below)
    batches = [_draw(eval_keys, p, sizes.eval_prompts) for p in (unseen_j, train_j)]
    both_warm = jax.tree.map(lambda x: jnp.concatenate([x, x]), warm)
    scores = _evaluate(
        graphdef,
        both_warm,
        jnp.concatenate([b[1] for b in batches]),
        jax.tree.map(lambda *x: jnp.concatenate(x), *[b[0] for b in batches]),
        jnp.float32(0.0),
    )
    ood = jax.tree.map(lambda x: x[: 2 * n], scores)
    seen = jax.tree.map(lambda x: x[2 * n :], scores)

    # RL from each seed's Psy-CoT warm-up: (judge, method, seed) flattened
    cells = [(h, m, i) for h in (True, False) for m in ("GRPO", "RAPO") for i in range(n)]
    idx = np.array([i for _, _, i in cells])
    psy = jax.tree.map(lambda x: x[:n], warm)
    start = jax.tree.map(lambda x: x[idx], psy)
    alpha = jnp.array([RAPO["alpha"] if m == "RAPO" else 0.0 for _, m, _ in cells])
    gamma = jnp.array([RAPO["gamma"] if m == "RAPO" else 0.0 for _, m, _ in cells])
    hack = jnp.array([h for h, _, _ in cells])
    rl_keys = jnp.stack([jax.random.key(30_000 + seeds[i]) for _, _, i in cells])
    config = RLConfig(group_size=sizes.group_size)
    rl = reinforce(graphdef, start, start, rl_keys, alpha, gamma, hack, train_j, sizes, config)
    final, curves = rl.params, rl.aux
    fin_keys = jnp.stack([jax.random.key(40_000 + seeds[i]) for _, _, i in cells])
    final_ood = evaluate(graphdef, final, fin_keys, unseen_j, sizes.eval_prompts, temperature=1.0)
    start_ood = evaluate(graphdef, start, fin_keys, unseen_j, sizes.eval_prompts, temperature=1.0)

    return Pipeline(
        cells=tuple((bool(h), m, int(seeds[i])) for h, m, i in cells),
        sft_loss_last=np.asarray(warmed.losses[:, -1]),
        warmup_unseen=ood,
        warmup_seen=seen,
        curves=curves,
        final_unseen=final_ood,
        start_unseen=start_ood,
        finite=bool(np.asarray(rl.finite).all()),
    )
