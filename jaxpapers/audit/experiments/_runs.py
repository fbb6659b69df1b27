"""Runs of the P11 experiments: audits per condition, deployments, the judge, win rates."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from jaxpapers.audit import (
    SCENARIOS,
    USER,
    Refinement,
    Scenario,
    awareness_rates,
    fit_awareness_lm,
    fit_realism_judge,
    make_pairwise_judge,
    make_scorer,
    make_target,
    make_writer,
    realism_win_rate,
    render,
    run_audit,
    run_deployment,
)
from jaxpapers.core.chat import ChatModel, FunctionChatModel, Transcript
from jaxpapers.core.experiment import Context, Outcome

DEPTHS = (0, 1, 2, 4)
# Independent key streams per purpose, so that e.g. the judge never sees the evaluated audits.
_JUDGE_DEP, _JUDGE_AUD, _EVAL_DEP, _EVAL_AUD, _PAIR, _SECOND_DEP = range(6)
CODING = tuple(s for s in SCENARIOS if s.coding)  # the scenarios DISH applies to


class Sizes(NamedTuple):
    pairs: int  # audit/deployment pairings per condition and seed
    judge_train: int  # transcripts of each class the judge is trained on
    turns: int  # user turns per conversation
    candidates: int  # refinement candidates per auditor action
    dish_depth: int  # refinement depth used in the DISH/additivity experiments
    aware_steps: int  # training steps of the decoder LM that scores awareness


def _key(seed: int, stream: int, i: int) -> np.ndarray:
    return np.random.SeedSequence([seed, stream, i]).generate_state(2, np.uint32)


def _roles():
    return make_writer(), make_target(), make_scorer(), make_writer(USER, name="user")


def _deployments(s: Sizes, seed: int, stream: int, n: int, pool) -> list[Transcript]:
    _, target, _, user = _roles()
    return [
        run_deployment(
            pool[i % len(pool)].name,
            user=user,
            target=target,
            key=_key(seed, stream, i),
            turns=s.turns,
        )
        for i in range(n)
    ]


def _audits(
    s: Sizes, seed: int, stream: int, n: int, pool, depth: int, dish: bool
) -> list[Transcript]:
    auditor, target, scorer, _ = _roles()
    ref = Refinement(depth, s.candidates)
    return [
        run_audit(
            pool[i % len(pool)].name,
            auditor=auditor,
            target=target,
            scorer=scorer,
            key=_key(seed, stream, i),
            turns=s.turns,
            refinement=ref,
            dish=dish,
        )
        for i in range(n)
    ]


def train_judge(s: Sizes, seed: int) -> FunctionChatModel:
    """The pairwise realism judge of one seed: trained on held-out deployments vs plain audits."""
    dep = _deployments(s, seed, _JUDGE_DEP, s.judge_train, SCENARIOS)
    aud = _audits(s, seed, _JUDGE_AUD, s.judge_train, SCENARIOS, depth=0, dish=False)
    return make_pairwise_judge(
        fit_realism_judge([render(t) for t in dep], [render(t) for t in aud])
    )


def measure(
    s: Sizes,
    seed: int,
    pool: tuple[Scenario, ...],
    conditions: list[tuple[int, bool]],
    aware: ChatModel,
) -> dict[str, dict[str, float]]:
    """Win rate, Wilson interval and awareness of each ``(depth, dish)`` condition on one seed.

    ``aware`` is the model that scores awareness (the decoder LM of :func:`fit_awareness_lm`).
    """
    judge = train_judge(s, seed)
    deployments = [render(t) for t in _deployments(s, seed, _EVAL_DEP, s.pairs, pool)]
    out = {}
    for depth, dish in conditions:
        audits = _audits(s, seed, _EVAL_AUD, s.pairs, pool, depth, dish)
        win = realism_win_rate(
            judge, [render(t) for t in audits], deployments, key=_key(seed, _PAIR, depth)
        )
        a = awareness_rates(audits, aware)
        out[f"{depth}/{int(dish)}"] = {
            "win_rate": win.rate,
            "low": win.low,
            "high": win.high,
            "aware_rule": a.rule,
            "aware_model": a.model,
        }
    return out


def _per_seed(ctx: Context, s: Sizes, scope: str, conditions) -> list[dict[str, Any]]:
    pool = SCENARIOS if scope == "all" else CODING
    trained: list[ChatModel] = []

    def aware() -> ChatModel:  # trained once, and only when some seed is not cached yet
        if not trained:
            trained.append(fit_awareness_lm(key=_key(0, 99, 0), steps=s.aware_steps))
        return trained[0]

    return [
        ctx.cached(
            f"{scope}_seed{seed}_{ctx.size}",
            lambda seed=seed: measure(s, seed, pool, conditions, aware()),
            shared=True,
        )
        for seed in ctx.seed_list
    ]


def win_row(depth: int) -> str:
    return f"win rate, depth {depth}"


def unaware_row(depth: int) -> str:
    return f"1 - awareness (rule), depth {depth}"


def run_realism_vs_depth(ctx: Context, s: Sizes) -> Outcome:
    res = _per_seed(ctx, s, "all", [(d, False) for d in DEPTHS])
    values, extras = {}, {"depths": list(DEPTHS), "per_seed": res}
    for d in DEPTHS:
        c = f"{d}/0"
        values[win_row(d)] = [r[c]["win_rate"] for r in res]
        values[unaware_row(d)] = [1.0 - r[c]["aware_rule"] for r in res]
        extras[f"awareness depth {d} (rule, decoder-LM scored)"] = [
            float(np.mean([r[c]["aware_rule"] for r in res])),
            float(np.mean([r[c]["aware_model"] for r in res])),
        ]
        extras[f"Wilson 95% interval depth {d} (seed 0)"] = [res[0][c]["low"], res[0][c]["high"]]
    return Outcome(values, extras)


CODING_ROWS = {
    "neither": (0, False),
    "critique refinement": (None, False),
    "DISH": (0, True),
    "refinement + DISH": (None, True),
}


def _coding(ctx: Context, s: Sizes) -> tuple[dict[str, list[float]], dict[str, Any]]:
    conds = [(s.dish_depth if d is None else d, dish) for d, dish in CODING_ROWS.values()]
    res = _per_seed(ctx, s, "coding", conds)
    values = {
        name: [r[f"{depth}/{int(dish)}"]["win_rate"] for r in res]
        for name, (depth, dish) in zip(CODING_ROWS, conds, strict=True)
    }
    aware = {
        name: [
            float(np.mean([r[f"{depth}/{int(dish)}"][kind] for r in res]))
            for kind in ("aware_rule", "aware_model")
        ]
        for name, (depth, dish) in zip(CODING_ROWS, conds, strict=True)
    }
    return values, {
        "refinement depth": s.dish_depth,
        "awareness (rule, decoder-LM scored)": aware,
        "per_seed": res,
    }


def run_dish(ctx: Context, s: Sizes) -> Outcome:
    values, extras = _coding(ctx, s)
    return Outcome({k: values[k] for k in ("neither", "DISH")}, extras)


def run_additivity(ctx: Context, s: Sizes) -> Outcome:
    values, extras = _coding(ctx, s)
    v = {k: np.asarray(x) for k, x in values.items()}
    extras["gain of both over the better single technique (pp, mean)"] = float(
        100 * np.mean(v["refinement + DISH"] - np.maximum(v["critique refinement"], v["DISH"]))
    )
    return Outcome(values, extras)


def run_sanity(ctx: Context, s: Sizes) -> Outcome:
    """Known answers: identical-distribution pairings give 0.5; depth 0 is no refinement."""
    excess, mismatches, rates = [], [], []
    auditor, target, scorer, _ = _roles()

    def refuse(messages, *, key):
        raise AssertionError("depth 0 must not call the scorer")

    no_scorer = FunctionChatModel(refuse, name="no-scorer")
    for seed in ctx.seed_list:
        judge = train_judge(s, seed)
        a = [render(t) for t in _deployments(s, seed, _EVAL_DEP, s.pairs, SCENARIOS)]
        b = [render(t) for t in _deployments(s, seed, _SECOND_DEP, s.pairs, SCENARIOS)]
        win = realism_win_rate(judge, a, b, key=_key(seed, _PAIR, 99))
        rates.append(win.rate)
        excess.append(abs(win.rate - 0.5) - (win.high - win.low) / 2)
        bad = 0
        for i in range(s.pairs):
            scen = SCENARIOS[i % len(SCENARIOS)].name
            k = _key(seed, _EVAL_AUD, i)
            ref = run_audit(
                scen,
                auditor=auditor,
                target=target,
                scorer=no_scorer,
                key=k,
                turns=s.turns,
                refinement=Refinement(0, 1),
            )
            got = run_audit(
                scen,
                auditor=auditor,
                target=target,
                scorer=scorer,
                key=k,
                turns=s.turns,
                refinement=Refinement(0, s.candidates),
            )
            bad += sum(x != y for x, y in zip(ref.turns(), got.turns(), strict=False))
            bad += abs(len(ref.turns()) - len(got.turns()))
        mismatches.append(bad)
    return Outcome(
        {
            "|win - 0.5| - Wilson half-width (deployment vs deployment)": excess,
            "turns where depth 0 differs from no refinement": mismatches,
        },
        {"identical-distribution win rates": rates},
    )
