"""The P05 pipeline: warm-up (plain / Psy-CoT), then GRPO vs RAPO under two judges, vmapped.

Both training stages are :func:`jaxpapers.core.fit.fit`: the warm-up of :func:`sft_loss` and the
RL stage of :func:`rl_loss` (on-policy: each step's rollouts are drawn inside its loss from that
step's policy), each one program vmapped over the policies.

Regularisers are fixed a priori, for both methods alike: the k3 KL coefficient to the warm-up
policy is :data:`KL_BETA` = 0.04 for GRPO and RAPO (DeepSeekMath's GRPO value, and TRL's
``GRPOConfig.beta`` default until TRL set it to 0.0), as RAPO's own weights (:data:`RAPO`, alpha
= 1, gamma = 0.5) are fixed. Only the Adam step size is tuned, on one grid shared by both methods
(``Config.grid``, gradient clip 1.0 throughout). Why not tune beta too: under a hackable judge the
proxy reward rises as the policy leaves the reference, so selecting beta by that reward can strip
GRPO of its only regulariser (a grid over beta did so, ``results/P05/NOTES.md``) while RAPO's
regulariser, not on the grid, stays; the comparison would then be of a regularised RAPO with an
unregularised GRPO.

Tuning: each (method, judge) keeps the step size with the best mean *reward of the judge it trains
on* over *validation* profiles (unseen in training, disjoint from the test profiles every verdict
reads), the same rule for GRPO and RAPO (:func:`chosen`). Under the hackable judge that is the
practitioner's criterion: the reward model is the only judge available while training (hacking
is by definition invisible to it), and no method is then selected on the signals it is judged on
(exact fidelity and generic-phrase rate on test profiles). Selecting the hackable-judge cells by
validation *fidelity* instead would hand the tuner the truth the setting lacks; it is reported as
a sensitivity check (the ``hacking`` extras), with both methods at every grid point.
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
    completion_log_probs,
    draw_batch,
    prompts,
    rl_loss,
    rl_optimizer,
    role_pmi,
    score,
    sft_loss,
    stereotyped_split,
)
from jaxpapers.rapo._world import EMPATHY, LOGIC, RESPONSE


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
    #: the tuning grid, ``(Adam step size, KL coefficient)`` points shared by GRPO and RAPO: the
    #: step size is tuned, the KL coefficient is :data:`KL_BETA` at every point (fixed a priori)
    grid: tuple[tuple[float, float], ...] = ((3e-4, 0.04), (1e-3, 0.04))


WORLD = World()
#: the k3 KL coefficient of both methods, fixed a priori (not tuned): 0.04 is DeepSeekMath's GRPO
#: setting (Shao et al. 2024, section 4.2) and was TRL's ``GRPOConfig.beta`` default (TRL later
#: set the default to 0.0, without a KL term)
KL_BETA = 0.04
#: RAPO's weights; GRPO is the same program with both set to 0.
RAPO = {"alpha": 1.0, "gamma": 0.5}
#: the tuning signal of each judge's cells (keyed by ``hackable``): the validation mean of the
#: reward the method trains on (see :func:`chosen`)
TUNING = {True: "hackable_reward", False: "fidelity"}


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
def reinforce(graphdef, states, refs, keys, hp, profiles, sizes, config):
    """``rl_steps`` GRPO/RAPO updates of every policy (clipped Adam on :func:`rl_loss`); a
    :class:`FitResult` per policy whose ``aux`` holds the step metrics ``[policies, steps]``.

    ``hp`` holds each policy's ``alpha``, ``gamma``, ``hackable``, ``learning_rate`` and
    ``beta`` (arrays over the policies: one program for every method, judge and grid point).

    Step ``t``'s key ``k_t`` splits into the prompts' key and the rollouts' key (once, in the
    batch function, which hands the rollouts' key to the loss with the prompts).
    """

    def one(state, ref, key, a, c, h, lr, b):
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
                beta=b,
            )

        return fit(
            loss_fn,
            state,
            rl_optimizer(config=config, learning_rate=lr),
            steps=sizes.rl_steps,
            key=key,
            batch_fn=batch_fn,
            has_aux=True,
        )

    fields = ("alpha", "gamma", "hackable", "learning_rate", "beta")
    return jax.vmap(one)(states, refs, keys, *(hp[f] for f in fields))


#: token classes of :func:`pmi_by_class`, at completion positions of the Psy-CoT format
PMI_CLASSES = ("temperament (empathy step)", "plan (logic step)", "reply: own role token",
               "reply: generic token")  # fmt: skip


@partial(jax.jit, static_argnames=("graphdef", "n"))
def pmi_by_class(graphdef, states, keys, profiles, n: int):
    """Mean PMI of each :data:`PMI_CLASSES` token class on ``n`` sampled rollouts per policy, under
    RAPO's reference (profile and role reasoning masked), ``[policies, classes]`` (NaN where a
    class has no token). (The profile-only reference is not measured: the warm-up is trained to
    read the role-masked context, not a context with the profile masked and the plan visible.)"""

    def one(state, key):
        k_batch, k_sample = jax.random.split(key)
        batch = draw_batch(profiles, n, key=k_batch)
        tokens = sample(
            graphdef, state, prompts(WORLD, batch), key=k_sample, max_new_tokens=COMPLETION_LEN
        )
        comp = tokens[:, PROMPT_LEN:]

        def lp(contexts, targets):
            return completion_log_probs(graphdef, state, targets, context=contexts)

        own = prompts(WORLD, batch)[:, 1:5]
        replied = jnp.cumsum(comp == RESPONSE, axis=1) > 0
        after_logic = jnp.cumsum(comp == LOGIC, axis=1) > 0
        is_own = jnp.any(comp[:, :, None] == own[:, None, :], axis=2)
        generic = comp >= WORLD.generic_offset
        reply = replied & (comp != RESPONSE)
        classes = [
            (jnp.roll(comp, 1, axis=1) == EMPATHY) & ~replied,
            after_logic & ~replied & (comp != LOGIC),
            reply & is_own,
            reply & generic,
        ]
        pmi = role_pmi(lp, tokens)[0]
        return jnp.stack([jnp.sum(pmi * c) / jnp.sum(c) for c in classes]).astype(jnp.float32)

    return jax.vmap(one)(states, keys)


def split_sets(world: World) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training, validation, test and out-of-distribution profiles: the held-out stereotyped
    profiles of :func:`~jaxpapers.rapo.stereotyped_split` halved (a fixed permutation) into
    validation (RL tuning) and test (the RL verdicts); the profiles that break the stereotype
    are the out-of-distribution set of the warm-up experiments."""
    train, held_out, ood = stereotyped_split(world)
    order = np.random.default_rng(1).permutation(len(held_out))
    half = len(held_out) // 2
    return train, held_out[order[:half]], held_out[order[half:]], ood


class Pipeline(NamedTuple):
    """What the P05 experiments read (one run of the pipeline, cached).

    Attributes:
      cells: ``(hackable judge, method, learning rate, beta, seed)`` of each RL run, in the order
        of the RL arrays.
      sft_loss_last: ``[2 * seeds]`` final warm-up loss (Psy-CoT seeds, then plain).
      warmup_ood, warmup_test, warmup_seen: greedy :class:`Scores` means of each warm-up
        (Psy-CoT seeds, then plain) on out-of-distribution profiles (breaking the training
        stereotype), on held-out test profiles (stereotyped, in distribution, never trained on)
        and on training profiles (memorised).
      curves: :class:`StepMetrics` of every RL step, ``[cells, steps]``.
      val: sampled :class:`Scores` means on validation profiles after RL, per cell (the tuning
        signals).
      final_unseen: sampled :class:`Scores` means on test profiles after RL, per cell.
      start_unseen: sampled :class:`Scores` means on test profiles of each seed's starting
        policy (the Psy-CoT warm-up), ``[seeds]``, the same prompts and keys as its cells.
      finite: ``[cells]`` whether each RL run applied every step.
      pmi: ``[seeds, len(PMI_CLASSES)]`` mean PMI per token class of the Psy-CoT warm-ups'
        rollouts under RAPO's reference.
    """

    cells: tuple[tuple[bool, str, float, float, int], ...]
    sft_loss_last: np.ndarray
    warmup_ood: Scores
    warmup_test: Scores
    warmup_seen: Scores
    curves: StepMetrics
    val: Scores
    final_unseen: Scores
    start_unseen: Scores
    finite: np.ndarray
    pmi: np.ndarray


def run_pipeline(sizes: Config, seeds: list[int]) -> Pipeline:
    """Warm-up both formats per seed, then GRPO and RAPO under the hackable and the exact judge
    at every grid point: warm-up losses, test fidelity of each warm-up, RL curves, validation
    and final test scores per (judge, method, grid point, seed)."""
    train, val, test, ood_profiles = split_sets(WORLD)
    train_j, val_j, test_j, ood_j = (jnp.asarray(p) for p in (train, val, test, ood_profiles))
    graphdef, init = init_policies(sizes, seeds)
    n = len(seeds)
    both = jax.tree.map(lambda x: jnp.concatenate([x, x]), init)
    flags = jnp.array([True] * n + [False] * n)
    keys = jnp.stack([jax.random.key(10_000 + s) for s in seeds] * 2)
    warmed = warmup(graphdef, both, keys, flags, train_j, sizes)
    warm = warmed.params
    eval_keys = jnp.stack([jax.random.key(20_000 + s) for s in seeds] * 2)
    # the three warm-up evaluations in one call
    sets = (ood_j, test_j, train_j)
    batches = [_draw(eval_keys, p, sizes.eval_prompts) for p in sets]
    all_warm = jax.tree.map(lambda x: jnp.concatenate([x] * len(sets)), warm)
    scores = _evaluate(
        graphdef,
        all_warm,
        jnp.concatenate([b[1] for b in batches]),
        jax.tree.map(lambda *x: jnp.concatenate(x), *[b[0] for b in batches]),
        jnp.float32(0.0),
    )
    ood, held, seen = (jax.tree.map(lambda x, k=k: x[2 * n * k : 2 * n * (k + 1)], scores)
                       for k in range(len(sets)))  # fmt: skip
    psy = jax.tree.map(lambda x: x[:n], warm)
    pmi_keys = jnp.stack([jax.random.key(50_000 + s) for s in seeds])
    pmi = pmi_by_class(graphdef, psy, pmi_keys, train_j, 64)

    # RL from each seed's Psy-CoT warm-up: (judge, method, learning rate, beta, seed) flattened
    cells = [
        (h, m, lr, b, i)
        for h in (True, False)
        for m in ("GRPO", "RAPO")
        for lr, b in sizes.grid
        for i in range(n)
    ]
    idx = np.array([c[-1] for c in cells])
    start = jax.tree.map(lambda x: x[idx], psy)
    hp = {
        "alpha": jnp.array([RAPO["alpha"] if c[1] == "RAPO" else 0.0 for c in cells]),
        "gamma": jnp.array([RAPO["gamma"] if c[1] == "RAPO" else 0.0 for c in cells]),
        "hackable": jnp.array([c[0] for c in cells]),
        "learning_rate": jnp.array([c[2] for c in cells], jnp.float32),
        "beta": jnp.array([c[3] for c in cells], jnp.float32),
    }
    rl_keys = jnp.stack([jax.random.key(30_000 + seeds[i]) for i in idx])
    config = RLConfig(group_size=sizes.group_size)
    rl = reinforce(graphdef, start, start, rl_keys, hp, train_j, sizes, config)
    final, curves = rl.params, rl.aux
    fin_keys = jnp.stack([jax.random.key(40_000 + seeds[i]) for i in idx])
    val_keys = jnp.stack([jax.random.key(60_000 + seeds[i]) for i in idx])
    final_val = evaluate(graphdef, final, val_keys, val_j, sizes.eval_prompts, temperature=1.0)
    final_ood = evaluate(graphdef, final, fin_keys, test_j, sizes.eval_prompts, temperature=1.0)
    seed_keys = jnp.stack([jax.random.key(40_000 + s) for s in seeds])
    start_ood = evaluate(graphdef, psy, seed_keys, test_j, sizes.eval_prompts, temperature=1.0)

    return Pipeline(
        cells=tuple((bool(h), m, float(lr), float(b), int(seeds[i])) for h, m, lr, b, i in cells),
        sft_loss_last=np.asarray(warmed.losses[:, -1]),
        warmup_ood=ood,
        warmup_test=held,
        warmup_seen=seen,
        curves=curves,
        val=final_val,
        final_unseen=final_ood,
        start_unseen=start_ood,
        finite=np.asarray(rl.finite),
        pmi=np.asarray(pmi),
    )


def chosen(
    out: Pipeline, *, hackable: bool, method: str, criterion: str | None = None
) -> tuple[float, float]:
    """The grid point ``(learning rate, beta)`` of ``method`` under the judge with the best mean
    validation score over the seeds (the first of equals).

    The score (``criterion``, a :class:`Scores` field) is by default the reward of the judge the
    method trains on (:data:`TUNING`): the hackable judge's reward for the hackable-judge cells,
    the fidelity for the exact-judge cells. ``criterion="fidelity"`` selects the hackable-judge
    cells by the exact judge on validation characters instead (a sensitivity check).
    """
    field = criterion or TUNING[hackable]
    values = np.asarray(getattr(out.val, field))
    points: dict[tuple[float, float], list[float]] = {}
    for (h, m, lr, b, _), v in zip(out.cells, values, strict=True):
        if h == hackable and m == method:
            points.setdefault((lr, b), []).append(float(v))
    return max(points, key=lambda p: np.mean(points[p]))


def cell_indices(
    out: Pipeline, *, hackable: bool, method: str, criterion: str | None = None
) -> list[int]:
    """Indices of the cells of ``method`` under the judge at its chosen grid point, in seed
    order."""
    lr, b = chosen(out, hackable=hackable, method=method, criterion=criterion)
    return [i for i, c in enumerate(out.cells) if c[:4] == (hackable, method, lr, b)]
