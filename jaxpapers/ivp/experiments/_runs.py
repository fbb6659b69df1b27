"""Run functions of the P18 experiments (declared in ``__init__``).

One sweep probes every persona (all concealment levels x seeds, flattened into one batch) with
each baseline prober in one compiled call per prober; the experiments read it through
``ctx.cached("sweep", ...)`` (a :class:`Sweep`). The distilled prober is trained on the teacher's
transcripts of a batch of the same shape (so the teacher's compiled program is reused) and
evaluated on the sweep's personas.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.ivp import (
    CONTEXTS,
    VALUES,
    BankConfig,
    PersonaConfig,
    Personas,
    ProberConfig,
    StudentConfig,
    distill_prober,
    make_question_bank,
    pooled_profile,
    probe,
    profile_library,
    sample_personas,
    spearman,
    top_k_accuracy,
    transcript_tokens,
)

BASELINE_POLICIES = ("questionnaire", "random", "strategic")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Every size-dependent setting of the P18 experiments (one per run size, ``SIZES``)."""

    personas: int
    library: int
    scenarios: int
    turns: int
    levels: tuple[float, ...]
    student_steps: int
    student_batch: int
    student_width: int
    student_layers: int


class Summary(NamedTuple):
    """One prober's metrics per (level, seed) ``[L, S]`` (means over personas and contexts);
    the ``_per_context`` fields ``[L, S, C]``."""

    spearman: np.ndarray
    top3: np.ndarray
    acceptability: np.ndarray
    explicit_share: np.ndarray
    context_blind_spearman: np.ndarray
    oracle_context_blind_spearman: np.ndarray
    spearman_per_context: np.ndarray
    context_blind_spearman_per_context: np.ndarray


class Sweep(NamedTuple):
    """The baseline probers on the sweep's personas (a :class:`Summary` each) and the true mean
    profile's Spearman correlation with each context's profile ``[L, S]``."""

    levels: tuple[float, ...]
    questionnaire: Summary
    random: Summary
    strategic: Summary
    oracle_context_blind_spearman: np.ndarray


class DistilledRun(NamedTuple):
    """The distilled prober on the sweep's personas, and its training."""

    summary: Summary
    train_question_accuracy: float
    losses: np.ndarray
    finite: bool
    train_transcripts: int


class Exact(NamedTuple):
    """The questionnaire on deterministic Likert-grid personas, per seed."""

    spearman: list[float]
    top3: list[float]
    mass: list[float]
    acceptability: list[float]
    library_size: int


def setup(config: Config) -> dict[str, Any]:
    """The benchmark's fixed parts: persona model, question bank, hypothesis library."""
    pc = PersonaConfig()
    bank = make_question_bank(config=BankConfig(scenarios=config.scenarios), key=jax.random.key(0))
    library = profile_library(config.library, key=jax.random.key(1), config=pc)
    return {"persona": pc, "bank": bank, "library": library, "prober": ProberConfig(config.turns)}


def sweep_personas(ctx: Context, config: Config, pc: PersonaConfig) -> Personas:
    """Personas of every (level, seed), flattened to ``[L * S * N]`` in that order."""
    parts = [
        sample_personas(
            config.personas, level, key=jax.random.fold_in(jax.random.key(1000 + s), li), config=pc
        )
        for li, level in enumerate(config.levels)
        for s in ctx.seed_list
    ]
    return Personas(*(jnp.concatenate(x) for x in zip(*parts, strict=True)))


@jax.jit
def _measure(ep, truth, library):
    return {
        "spearman": spearman(ep.profile, truth),
        "top3": top_k_accuracy(ep.profile, truth),
        "acceptability": 1.0 - ep.penalty.mean(-1),
        "explicit_share": (ep.questions < len(VALUES)).mean(-1),
        "context_blind_spearman": spearman(pooled_profile(ep.log_post, library)[:, None], truth),
        "oracle_context_blind_spearman": spearman(truth.mean(1, keepdims=True), truth),
    }


def _summary(ep, personas: Personas, library, shape) -> Summary:
    """Per-(level, seed) means of the metrics, ``[L, S]``; per context ``[L, S, C]``."""
    m = {k: np.asarray(v) for k, v in _measure(ep, personas.profiles, library).items()}
    out = {k: v.reshape(*shape, -1).mean(-1) for k, v in m.items()}
    for k in ("spearman", "context_blind_spearman"):
        out[f"{k}_per_context"] = m[k].reshape(*shape, -1, len(CONTEXTS)).mean(2)
    return Summary(**{k: v.astype(np.float64) for k, v in out.items()})


def sweep(ctx: Context, config: Config) -> Sweep:
    env = setup(config)
    personas = sweep_personas(ctx, config, env["persona"])
    shape = (len(config.levels), ctx.seeds)
    out: dict[str, Any] = {}
    for policy in BASELINE_POLICIES:
        ep = probe(
            policy,
            env["bank"],
            env["library"],
            personas,
            key=jax.random.key(77),
            persona_config=env["persona"],
            config=env["prober"],
        )
        out[policy] = _summary(ep, personas, env["library"], shape)
    mean_truth = personas.profiles.mean(1, keepdims=True)
    oracle = np.asarray(spearman(mean_truth, personas.profiles)).reshape(*shape, -1).mean(-1)
    oracle = oracle.astype(np.float64)
    return Sweep(levels=tuple(config.levels), oracle_context_blind_spearman=oracle, **out)


def distilled(ctx: Context, config: Config) -> DistilledRun:
    env = setup(config)
    bank, pc, prober = env["bank"], env["persona"], env["prober"]
    test = sweep_personas(ctx, config, pc)
    n = test.profiles.shape[0]
    grid = jnp.asarray(prober.grid)
    train = sample_personas(
        n, jax.random.choice(jax.random.key(5), grid, (n,)), key=jax.random.key(4), config=pc
    )
    teach = probe(
        "strategic",
        bank,
        env["library"],
        train,
        key=jax.random.key(6),
        persona_config=pc,
        config=prober,
    )
    q, a = bank.explicitness.shape[1], bank.valid.shape[2]
    contexts = jnp.broadcast_to(jnp.arange(len(CONTEXTS)), (n, len(CONTEXTS)))
    tokens = transcript_tokens(teach.questions, teach.answers, contexts, q, a)
    tokens = tokens.reshape(-1, tokens.shape[-1])
    student = StudentConfig(
        d_model=config.student_width,
        num_layers=config.student_layers,
        steps=config.student_steps,
        batch=config.student_batch,
    )
    fit = distill_prober(tokens, q + a + len(CONTEXTS), key=jax.random.key(7), config=student)
    ep = probe(
        "distilled",
        bank,
        env["library"],
        test,
        key=jax.random.key(77),
        persona_config=pc,
        config=prober,
        student=fit.student,
    )
    return DistilledRun(
        summary=_summary(ep, test, env["library"], (len(config.levels), ctx.seeds)),
        train_question_accuracy=float(fit.accuracy),
        losses=np.asarray(fit.losses),
        finite=bool(fit.finite),
        train_transcripts=int(tokens.shape[0]),
    )


def exact(ctx: Context, config: Config) -> Exact:
    """Deterministic non-concealing personas whose profiles lie on the Likert grid.

    The library is the quantised library (each value rounded to the nearest Likert level,
    duplicates removed) and the prober is told there is no concealment, so the ten answers are
    the profile itself: the posterior must put all its mass on the truth.
    """
    pc = PersonaConfig(beta=200.0)
    env = setup(config)
    levels = env["bank"].valid.shape[2] - 1
    library = np.unique(np.round(np.asarray(env["library"]) * levels) / levels, axis=0)
    library = jnp.asarray(library, jnp.float32)
    prober = ProberConfig(turns=len(VALUES), grid=(0.0,))
    res = {"spearman": [], "top3": [], "mass": [], "acceptability": []}
    for s in ctx.seed_list:
        idx = jax.random.randint(
            jax.random.key(2000 + s), (config.personas, len(CONTEXTS)), 0, library.shape[0]
        )
        personas = Personas(library[idx], jnp.zeros(config.personas))
        ep = probe(
            "questionnaire",
            env["bank"],
            library,
            personas,
            key=jax.random.key(s),
            persona_config=pc,
            config=prober,
            deterministic=True,
        )
        mass = jnp.take_along_axis(jnp.exp(ep.log_post).sum(-1), idx[..., None], -1)[..., 0]
        res["spearman"].append(float(spearman(ep.profile, personas.profiles).mean()))
        res["top3"].append(float(top_k_accuracy(ep.profile, personas.profiles).mean()))
        res["mass"].append(float(mass.mean()))
        res["acceptability"].append(float((1 - ep.penalty.mean(-1)).mean()))
    return Exact(**res, library_size=int(library.shape[0]))


NAMES = {"questionnaire": "questionnaire", "random": "random scenarios", "strategic": "strategic"}
ACCEPT = "strategic: social acceptability"


def _sweep(ctx: Context, config: Config) -> Sweep:
    return ctx.cached("sweep", lambda: sweep(ctx, config))


def run_sweep(ctx: Context, config: Config) -> Outcome:
    res = _sweep(ctx, config)
    high = -1
    values = {NAMES[p]: getattr(res, p).spearman[high] for p in BASELINE_POLICIES}
    values[ACCEPT] = res.strategic.acceptability[high]
    values[RANDOM_ACCEPT] = res.random.acceptability[high]
    values["questionnaire: social acceptability"] = res.questionnaire.acceptability[high]
    by_level = {
        NAMES[p]: {k: getattr(getattr(res, p), k) for k in ("spearman", "acceptability")}
        for p in BASELINE_POLICIES
    }
    table = {
        f"c={lvl}": {
            NAMES[p]: {
                k: float(np.mean(getattr(getattr(res, p), k)[i]))
                for k in ("spearman", "top3", "acceptability", "explicit_share")
            }
            for p in BASELINE_POLICIES
        }
        for i, lvl in enumerate(res.levels)
    }
    extras = {
        "levels": list(res.levels),
        "rows_at_concealment": res.levels[high],
        "by_level": by_level,
        "mean_by_level (spearman, top-3, acceptability, share of explicit items)": table,
        "turns_per_context": config.turns,
        "library_size": config.library,
        "acceptability_margin": ACCEPT_MARGIN,
    }
    return Outcome(values, extras)


RANDOM_ACCEPT = "random scenarios: social acceptability"
TEACHER_ACCEPT = "strategic (teacher): social acceptability"
DISTILLED_ACCEPT = "distilled Value-Prober: social acceptability"
#: Non-inferiority margin of social acceptability (1 - mean intrusiveness over a context's
#: questions), set on the metric's scale before the runs: at 12 questions per context, asking
#: one question twice (repeat penalty 0.5) costs 0.5 / 12 = 0.042, and replacing one mid scenario
#: question (explicitness 0.2) by a questionnaire item (0.8) costs 0.6 / 12 = 0.05.
ACCEPT_MARGIN = 0.05


def run_indirect(ctx: Context, config: Config) -> Outcome:
    res = _sweep(ctx, config)
    high = -1
    values = {NAMES[p]: getattr(res, p).spearman[high] for p in ("questionnaire", "random")}
    extras = {
        "concealment": res.levels[high],
        "spearman_by_level": {
            NAMES[p]: np.mean(getattr(res, p).spearman, 1).tolist()
            for p in ("questionnaire", "random")
        },
        "levels": list(res.levels),
    }
    return Outcome(values, extras)


def run_contexts(ctx: Context, config: Config) -> Outcome:
    res = _sweep(ctx, config)
    st = res.strategic
    level = 0  # no concealment: isolate the effect of context
    per_ctx = np.asarray(st.spearman_per_context)[level]  # [S, C]
    values = {
        "context-blind profile (pooled posterior)": st.context_blind_spearman[level],
        "per-context posteriors": st.spearman[level],
    }
    extras = {
        "concealment": res.levels[level],
        "prober": "strategic",
        "per_context_spearman": {c: float(per_ctx[:, i].mean()) for i, c in enumerate(CONTEXTS)},
        "context_blind_spearman": {
            c: float(np.asarray(st.context_blind_spearman_per_context)[level][:, i].mean())
            for i, c in enumerate(CONTEXTS)
        },
        "oracle_context_blind_spearman (true mean profile vs each context)": float(
            np.mean(res.oracle_context_blind_spearman[level])
        ),
        "context_blind_by_level": {
            f"c={lvl}": float(np.mean(st.context_blind_spearman[i]))
            for i, lvl in enumerate(res.levels)
        },
    }
    return Outcome(values, extras)


def run_distilled(ctx: Context, config: Config) -> Outcome:
    res = _sweep(ctx, config)
    run = ctx.cached("distilled", lambda: distilled(ctx, config))
    dist, teacher = run.summary, res.strategic
    high = -1
    values = {
        "questionnaire": res.questionnaire.spearman[high],
        "random scenarios": res.random.spearman[high],
        "strategic (teacher)": teacher.spearman[high],
        "distilled Value-Prober": dist.spearman[high],
        TEACHER_ACCEPT: teacher.acceptability[high],
        DISTILLED_ACCEPT: dist.acceptability[high],
    }
    extras = {
        "concealment": res.levels[high],
        "levels": list(res.levels),
        "spearman_by_level": {
            "strategic (teacher)": np.mean(teacher.spearman, 1).tolist(),
            "distilled Value-Prober": np.mean(dist.spearman, 1).tolist(),
            "questionnaire": np.mean(res.questionnaire.spearman, 1).tolist(),
        },
        "acceptability": {
            "strategic (teacher)": float(np.mean(teacher.acceptability[high])),
            "distilled Value-Prober": float(np.mean(dist.acceptability[high])),
        },
        "top3": {
            "strategic (teacher)": float(np.mean(teacher.top3[high])),
            "distilled Value-Prober": float(np.mean(dist.top3[high])),
        },
        "explicit_share": {
            "strategic (teacher)": float(np.mean(teacher.explicit_share[high])),
            "distilled Value-Prober": float(np.mean(dist.explicit_share[high])),
        },
        "train_question_accuracy": run.train_question_accuracy,
        "train_transcripts": run.train_transcripts,
        "student_finite": run.finite,
        "student_loss": run.losses,
    }
    return Outcome(values, extras)


def run_exact(ctx: Context, config: Config) -> Outcome:
    res = ctx.cached("exact", lambda: exact(ctx, config))
    values = {
        "questionnaire: Spearman": res.spearman,
        "questionnaire: top-3 accuracy": res.top3,
        "questionnaire: posterior mass on the true profile": res.mass,
    }
    extras = {
        "acceptability": res.acceptability,
        "turns": len(VALUES),
        "beta": 200.0,
        "quantised_library_size": res.library_size,
    }
    return Outcome(values, extras)
