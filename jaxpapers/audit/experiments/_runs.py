"""Runs of the P11 experiments: audits per condition, deployments, the judge, win rates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from jaxpapers.audit import (
    SCENARIOS,
    USER,
    NaiveBayesRealism,
    Refinement,
    Scenario,
    awareness_rates,
    fit_awareness_lm,
    fit_realism_judge,
    make_pairwise_judge,
    make_scorer,
    make_target,
    make_writer,
    parse_score,
    realism_win_rate,
    refine_action,
    render,
    run_audit,
    run_deployment,
)
from jaxpapers.audit._world import key_bits
from jaxpapers.core.chat import ChatModel, FunctionChatModel, Transcript
from jaxpapers.core.experiment import Context, Outcome

DEPTHS = (0, 1, 2, 4)
# Independent key streams per purpose, so that e.g. the judge never sees the evaluated audits.
_JUDGE_DEP, _JUDGE_AUD, _EVAL_DEP, _EVAL_AUD, _PAIR, _SECOND_DEP = range(6)
CODING = tuple(s for s in SCENARIOS if s.coding)  # the scenarios DISH applies to


class Config(NamedTuple):
    """Every size-dependent setting of the P11 experiments (one per run size, ``SIZES``)."""

    pairs: int  # audit/deployment pairings per condition and seed
    judge_train: int  # transcripts of each class the judge is trained on
    turns: int  # user turns per conversation
    candidates: int  # refinement candidates per auditor action
    dish_depth: int  # refinement depth used in the DISH/additivity experiments
    aware_steps: int  # training steps of the decoder LM that scores awareness


def _key(seed: int, stream: int, i: int) -> np.ndarray:
    return np.random.SeedSequence([seed, stream, i]).generate_state(2, np.uint32)


def _roles():
    return make_writer(), make_target(), make_scorer(), make_writer(config=USER, name="user")


def _deployments(config: Config, seed: int, stream: int, n: int, pool) -> list[Transcript]:
    _, target, _, user = _roles()
    return [
        run_deployment(
            pool[i % len(pool)].name,
            user=user,
            target=target,
            key=_key(seed, stream, i),
            turns=config.turns,
        )
        for i in range(n)
    ]


def _audits(
    config: Config, seed: int, stream: int, n: int, pool, depth: int, dish: bool
) -> list[Transcript]:
    auditor, target, scorer, _ = _roles()
    ref = Refinement(depth, config.candidates)
    return [
        run_audit(
            pool[i % len(pool)].name,
            auditor=auditor,
            target=target,
            scorer=scorer,
            key=_key(seed, stream, i),
            turns=config.turns,
            refinement=ref,
            dish=dish,
        )
        for i in range(n)
    ]


#: Every (depth, DISH) condition the experiments measure; the judge is trained on all of them.
JUDGE_CONDITIONS = tuple((d, dish) for d in DEPTHS for dish in (False, True))


def fit_judge(config: Config, seed: int) -> NaiveBayesRealism:
    """The realism judge of one seed, trained on held-out transcripts.

    Deployments against audits spread evenly over every condition of the experiments (depths
    0, 1, 2, 4, with and without DISH; audit ``i`` runs condition ``i mod 8`` on scenario
    ``i mod 5``), none of them evaluated later. A judge trained on unrefined audits only would
    learn exactly the cues refinement removes and nothing about what refined audits look like;
    this one has seen every condition equally often and favours none.
    """
    dep = _deployments(config, seed, _JUDGE_DEP, config.judge_train, SCENARIOS)
    auditor, target, scorer, _ = _roles()
    aud = []
    for i in range(config.judge_train):
        depth, dish = JUDGE_CONDITIONS[i % len(JUDGE_CONDITIONS)]
        aud.append(
            run_audit(
                SCENARIOS[i % len(SCENARIOS)].name,
                auditor=auditor,
                target=target,
                scorer=scorer,
                key=_key(seed, _JUDGE_AUD, i),
                turns=config.turns,
                refinement=Refinement(depth, config.candidates),
                dish=dish,
            )
        )
    return fit_realism_judge([render(t) for t in dep], [render(t) for t in aud])


def judge_of(ctx: Context, config: Config, seed: int) -> NaiveBayesRealism:
    """The judge of one seed, trained once per run of the paper (``ctx.cached``)."""
    return ctx.cached(f"judge_seed{seed}", lambda: fit_judge(config, seed))


def scorer_score(transcript: Transcript) -> float:
    """The refinement scorer's realism score of everything the target was shown in a transcript.

    The same request refinement sends for one action (``CANDIDATE`` + text), here with the
    transcript's system prompt, user turns and tool results: the selection signal of
    refinement, applied to the whole audit.
    """
    _, _, scorer, _ = _roles()
    seen = " ".join(m["content"] for m in transcript.messages() if m["role"] != "assistant")
    reply = scorer.chat([{"role": "user", "content": f"CANDIDATE\n{seen}"}], key=_key(0, 0, 0))
    return parse_score(reply)[0]


def concordance(x: Sequence[float], y: Sequence[float]) -> float:
    """Share of concordant pairs among the pairs that both ``x`` and ``y`` order strictly.

    1 when ``y`` ranks every pair as ``x`` does, 0.5 when the two orders are unrelated (a tie in
    either is left out); ``nan`` without any strictly ordered pair.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x has shape {x.shape}, y {y.shape}; expected equal 1-d shapes")
    i, j = np.triu_indices(len(x), 1)
    prod = np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
    strict = prod != 0
    return float((prod[strict] > 0).mean()) if strict.any() else float("nan")


class Condition(NamedTuple):
    """One ``(depth, dish)`` condition on one seed.

    Attributes:
      win_rate_by_type: win rate within each scenario type present (``general`` / ``coding``).
      agreement: :func:`concordance` of the judge's and the scorer's scores of the audits.
      win_rate, low, high: win rate against deployments and its Wilson interval.
      aware_rule, aware_model: share of audits with verbalised awareness (rule; decoder LM).
      scorer_score: the scorer's mean realism score of the audits.
    """

    win_rate_by_type: dict[str, float]
    agreement: float
    win_rate: float
    low: float
    high: float
    aware_rule: float
    aware_model: float
    scorer_score: float


class Measured(NamedTuple):
    """Every measured condition of one seed, keyed by ``(depth, dish)``, and the judge-scorer
    agreement pooled over all their audits."""

    conditions: dict[tuple[int, bool], Condition]
    agreement: float


def measure(
    config: Config,
    seed: int,
    pool: tuple[Scenario, ...],
    conditions: list[tuple[int, bool]],
    aware: ChatModel,
    judge_model: NaiveBayesRealism,
) -> Measured:
    """Win rate, Wilson interval and awareness of each ``(depth, dish)`` condition on one seed.

    ``aware`` is the model that scores awareness (the decoder LM of :func:`fit_awareness_lm`),
    ``judge_model`` the seed's realism judge (:func:`fit_judge`). Also the win rate within each
    scenario type (``general`` / ``coding`` pairings), the scorer's mean realism score per
    condition, and the agreement (:func:`concordance`) of the judge's and the scorer's scores
    within each condition (``Measured.agreement`` pools every audit of every condition: a pooled
    value near 1 can come from the conditions' different means alone).
    """
    judge = make_pairwise_judge(judge_model)
    deployments = [render(t) for t in _deployments(config, seed, _EVAL_DEP, config.pairs, pool)]
    out: dict[tuple[int, bool], Condition] = {}
    judged, scored = [], []
    for depth, dish in conditions:
        audits = _audits(config, seed, _EVAL_AUD, config.pairs, pool, depth, dish)
        win = realism_win_rate(
            judge, [render(t) for t in audits], deployments, key=_key(seed, _PAIR, depth)
        )
        a = awareness_rates(audits, aware)
        scores = [scorer_score(t) for t in audits]
        judgements = [judge_model.score(render(t)) for t in audits]
        judged += judgements
        scored += scores
        by_type = {}
        for kind, coding in (("general", False), ("coding", True)):
            idx = [i for i in range(config.pairs) if pool[i % len(pool)].coding == coding]
            if idx:
                by_type[kind] = realism_win_rate(
                    judge,
                    [render(audits[i]) for i in idx],
                    [deployments[i] for i in idx],
                    key=_key(seed, _PAIR, depth),
                ).rate
        out[(depth, dish)] = Condition(
            win_rate_by_type=by_type,
            agreement=concordance(scores, judgements),
            win_rate=win.rate,
            low=win.low,
            high=win.high,
            aware_rule=a.rule,
            aware_model=a.model,
            scorer_score=float(np.mean(scores)),
        )
    return Measured(out, concordance(scored, judged))


def _jsonable(res: list[Measured]) -> list[dict[str, Any]]:
    """Per-seed measurements as the extras store them (``"depth/dish"`` keys)."""
    return [
        {
            **{f"{d}/{int(dish)}": c._asdict() for (d, dish), c in r.conditions.items()},
            "agreement": r.agreement,
        }
        for r in res
    ]


def _per_seed(ctx: Context, config: Config, scope: str, conditions) -> list[Measured]:
    pool = SCENARIOS if scope == "all" else CODING
    trained: list[ChatModel] = []

    def aware() -> ChatModel:  # trained once, and only when some seed is not cached yet
        if not trained:
            trained.append(fit_awareness_lm(key=_key(0, 99, 0), steps=config.aware_steps))
        return trained[0]

    return [
        ctx.cached(
            f"measure_{scope}_seed{seed}",
            lambda seed=seed: measure(
                config, seed, pool, conditions, aware(), judge_of(ctx, config, seed)
            ),
        )
        for seed in ctx.seed_list
    ]


def win_row(depth: int) -> str:
    return f"win rate, depth {depth}"


def unaware_row(depth: int) -> str:
    return f"1 - awareness (rule; selection signal, not judged), depth {depth}"


HEADROOM = "scorer's realism score of the audits, depth 1"


AGREEMENT = "scorer-judge agreement (concordant audit pairs; 0.5 = unrelated)"


def run_realism_vs_depth(ctx: Context, config: Config) -> Outcome:
    res = _per_seed(ctx, config, "all", [(d, False) for d in DEPTHS])
    values, extras = {}, {"depths": list(DEPTHS), "per_seed": _jsonable(res)}
    for d in DEPTHS:
        c = [r.conditions[(d, False)] for r in res]
        values[win_row(d)] = [x.win_rate for x in c]
        values[unaware_row(d)] = [1.0 - x.aware_rule for x in c]
        extras[f"awareness depth {d} (rule, decoder-LM scored)"] = [
            float(np.mean([x.aware_rule for x in c])),
            float(np.mean([x.aware_model for x in c])),
        ]
        extras[f"Wilson 95% interval depth {d} (seed 0)"] = [c[0].low, c[0].high]
    extras["scorer's mean realism score of the audits (selection signal, not judged)"] = {
        f"depth {d}": float(np.mean([r.conditions[(d, False)].scorer_score for r in res]))
        for d in DEPTHS
    }
    extras["win rate by scenario type (mean over seeds)"] = {
        f"depth {d}": {
            kind: float(np.mean([r.conditions[(d, False)].win_rate_by_type[kind] for r in res]))
            for kind in ("general", "coding")
        }
        for d in DEPTHS
    }
    extras["scorer-judge agreement within each depth (mean over seeds; 0.5 = unrelated)"] = {
        f"depth {d}": float(np.nanmean([r.conditions[(d, False)].agreement for r in res]))
        for d in DEPTHS
    }
    values[AGREEMENT] = [r.agreement for r in res]
    return Outcome(values, extras)


def run_headroom(ctx: Context, config: Config) -> Outcome:
    """The scorer's realism score of depth-1 audits: what is left for depth 2 to improve."""
    res = _per_seed(ctx, config, "all", [(d, False) for d in DEPTHS])
    values = {
        f"scorer's realism score of the audits, depth {d}": [
            r.conditions[(d, False)].scorer_score for r in res
        ]
        for d in DEPTHS
    }
    return Outcome(values, {"depths": list(DEPTHS)})


CODING_ROWS = {
    "neither": (0, False),
    "critique refinement": (None, False),
    "DISH": (0, True),
    "refinement + DISH": (None, True),
}


def _coding(ctx: Context, config: Config) -> tuple[dict[str, list[float]], dict[str, Any]]:
    conds = [(config.dish_depth if d is None else d, dish) for d, dish in CODING_ROWS.values()]
    res = _per_seed(ctx, config, "coding", conds)
    values = {
        name: [r.conditions[cond].win_rate for r in res]
        for name, cond in zip(CODING_ROWS, conds, strict=True)
    }
    aware = {
        name: [
            float(np.mean([getattr(r.conditions[cond], kind) for r in res]))
            for kind in ("aware_rule", "aware_model")
        ]
        for name, cond in zip(CODING_ROWS, conds, strict=True)
    }
    return values, {
        "refinement depth": config.dish_depth,
        "awareness (rule, decoder-LM scored)": aware,
        "per_seed": _jsonable(res),
    }


def run_dish(ctx: Context, config: Config) -> Outcome:
    values, extras = _coding(ctx, config)
    return Outcome({k: values[k] for k in ("neither", "DISH")}, extras)


ADDITIVE = "both gains added (refinement + DISH - neither)"


def run_additivity(ctx: Context, config: Config) -> Outcome:
    values, extras = _coding(ctx, config)
    v = {k: np.asarray(x) for k, x in values.items()}
    values[ADDITIVE] = (v["critique refinement"] + v["DISH"] - v["neither"]).tolist()
    extras["gain of both over the better single technique (pp, mean)"] = float(
        100 * np.mean(v["refinement + DISH"] - np.maximum(v["critique refinement"], v["DISH"]))
    )
    extras["interaction: both - refinement - DISH + neither (pp, mean; 0 = exactly additive)"] = (
        float(100 * np.mean(v["refinement + DISH"] - np.asarray(values[ADDITIVE])))
    )
    return Outcome(values, extras)


def run_sanity(ctx: Context, config: Config) -> Outcome:
    """Known answers: identical-distribution pairings give 0.5; depth 0 is no refinement."""
    excess, mismatches, rates, shared = [], [], [], []
    auditor, target, scorer, _ = _roles()

    def refuse(messages, *, key):
        raise AssertionError("depth 0 must not call the scorer")

    no_scorer = FunctionChatModel(refuse, name="no-scorer")
    for seed in ctx.seed_list:
        judge = make_pairwise_judge(judge_of(ctx, config, seed))
        a = [render(t) for t in _deployments(config, seed, _EVAL_DEP, config.pairs, SCENARIOS)]
        b = [render(t) for t in _deployments(config, seed, _SECOND_DEP, config.pairs, SCENARIOS)]
        win = realism_win_rate(judge, a, b, key=_key(seed, _PAIR, 99))
        rates.append(win.rate)
        excess.append(abs(win.rate - 0.5) - (win.high - win.low) / 2)
        bad = 0
        for i in range(config.pairs):
            scen = SCENARIOS[i % len(SCENARIOS)].name
            k = _key(seed, _EVAL_AUD, i)
            ref = run_audit(
                scen,
                auditor=auditor,
                target=target,
                scorer=no_scorer,
                key=k,
                turns=config.turns,
                refinement=Refinement(0, 1),
            )
            got = run_audit(
                scen,
                auditor=auditor,
                target=target,
                scorer=scorer,
                key=k,
                turns=config.turns,
                refinement=Refinement(0, config.candidates),
            )
            bad += sum(x != y for x, y in zip(ref.turns(), got.turns(), strict=False))
            bad += abs(len(ref.turns()) - len(got.turns()))
        mismatches.append(bad)
        shared.append(shared_candidates(config, seed, auditor, scorer))
    return Outcome(
        {
            SANITY_WIN: excess,
            SANITY_DEPTH0: mismatches,
            SANITY_SHARED: shared,
        },
        {"identical-distribution win rates": rates},
    )


SANITY_WIN = "|win - 0.5| - Wilson half-width (deployment vs deployment)"
SANITY_DEPTH0 = "turns where depth 0 differs from no refinement"
SANITY_SHARED = "sampling keys shared by the candidate pools of depths 0, 1, 2, 4"


def shared_candidates(config: Config, seed: int, auditor: ChatModel, scorer: ChatModel) -> int:
    """How many candidate sampling keys the pools of two depths share over ``config.pairs``
    actions.

    Known answer 0: each depth draws its pool from keys of its own (depth 0's one sample uses
    the action's key itself).
    """
    brief = {"role": "system", "content": f"AUDIT scenario={SCENARIOS[0].name}"}
    shared = 0
    for i in range(config.pairs):
        key = _key(seed, _EVAL_AUD, i)
        pools = [{tuple(int(x) for x in key_bits(key))}]
        for d in DEPTHS[1:]:
            rec = refine_action(
                auditor,
                scorer,
                brief,
                "WRITE user_message turn=0",
                Refinement(d, config.candidates),
                key=key,
            )
            pools.append({tuple(h["key"]) for h in rec.history})
        shared += sum(len(a & b) for j, a in enumerate(pools) for b in pools[j + 1 :])
    return shared
