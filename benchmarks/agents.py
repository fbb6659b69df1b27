"""P11/P18 benchmark: agent evaluation costs.

Rows (P11):
* ``http_over_inprocess_turn_time``: one turn (32 sampled tokens) of the local decoder LM
  (d 64, 2 layers, 256 positions) through ``jaxpapers serve`` and the ``openai`` client on
  loopback, over the same turn in process (report; the server path's overhead per turn).
  ``..._rule_target`` is the same for the rule-based target, whose turn costs ~0.3 ms, so the
  ratio is almost pure HTTP overhead.
* ``refinement_depth4_over_depth0_time``: one whole audit (3 turns, 3 candidates) at critique
  refinement depth 4 over depth 0 (report; the paper's inference-time cost).

Rows (P18, ``prober_questions_per_s``) belong to the P18 package and are added next to these.
"""

from __future__ import annotations

import jax
from flax import nnx

from jaxpapers.audit import Refinement, make_scorer, make_target, make_writer, run_audit
from jaxpapers.core.bench import bench_main, paired_time_ratio, row
from jaxpapers.core.chat import VOCAB_SIZE, LocalDecoderChat, OpenAIChat, serve
from jaxpapers.core.nn.decoder import DecoderLM


def _turn(model, messages, key):
    return lambda: model.chat(messages, key=key, temperature=1.0, max_tokens=32)


def _p11_rows(quick: bool) -> list[dict]:
    rows = []
    auditor, target, scorer = make_writer(), make_target(), make_scorer()
    key = jax.random.key(0)
    audit = run_audit("fix_tests", auditor=auditor, target=target, scorer=scorer, key=key)
    messages = audit.messages()[:2]  # system prompt + first user turn: the target's next turn
    lm = DecoderLM(VOCAB_SIZE, d_model=64, num_heads=4, num_layers=2, max_len=256, rngs=nnx.Rngs(0))
    local = LocalDecoderChat(lm, context=224, name="lm")
    repeats = 21 if quick else 61
    with serve({"target": target, "lm": local}) as server:
        for case, model in (
            ("http_over_inprocess_turn_time", local),
            ("http_over_inprocess_turn_time_rule_target", target),
        ):
            client = OpenAIChat(server.url, model=model.name, timeout=60)
            m = paired_time_ratio(
                _turn(client, messages, key), _turn(model, messages, key), repeats=repeats
            )
            rows.append(
                row(
                    case,
                    "ratio",
                    m["ratio"],
                    "HTTP turn time / in-process turn time (loopback, same seed)",
                    http_s=m["time"],
                    inprocess_s=m["baseline_time"],
                    overhead_ms=1e3 * (m["time"] - m["baseline_time"]),
                    q25=m["q25"],
                    q75=m["q75"],
                )
            )
            print(rows[-1], flush=True)

    def audit_at(depth):
        return lambda: run_audit(
            "exfiltration",
            auditor=auditor,
            target=target,
            scorer=scorer,
            key=key,
            refinement=Refinement(depth, 3),
        )

    m = paired_time_ratio(audit_at(4), audit_at(0), repeats=7 if quick else 21)
    rows.append(
        row(
            "refinement_depth4_over_depth0_time",
            "ratio",
            m["ratio"],
            "audit wall time at depth 4 / depth 0 (3 turns, 3 candidates, rule-based roles)",
            depth4_s=m["time"],
            depth0_s=m["baseline_time"],
            q25=m["q25"],
            q75=m["q75"],
        )
    )
    print(rows[-1], flush=True)
    return rows


def _ivp_rows(quick: bool) -> list[dict]:
    """``prober_questions_per_s``: strategic question choices per second (likelihoods of every
    question under the current suspicion, information gain over the (profile, concealment)
    posterior, argmax, Bayes update), jitted and vmapped over a batch of conversations."""
    import jax.numpy as jnp

    from jaxpapers import ivp
    from jaxpapers.core.bench import median_time

    pc = ivp.PersonaConfig()
    h, scenarios, batch = (256, 24, 64) if quick else (2048, 48, 256)
    bank = ivp.make_question_bank(config=ivp.BankConfig(scenarios=scenarios), key=jax.random.key(0))
    library = ivp.profile_library(h, key=jax.random.key(1), config=pc)
    honest, desirable = ivp.answer_tables(bank, library, pc.beta)
    grid = jnp.asarray(ivp.ProberConfig().grid)
    k = grid.shape[0]

    def choose(log_post, suspicion, answer):
        lik = ivp.answer_likelihood(
            honest[0], desirable[0], bank.explicitness[0], grid, suspicion, pc.suspicion
        )
        q = jnp.argmax(ivp.information_gain(log_post, lik) - 0.8 * bank.explicitness[0])
        return ivp.update_posterior(log_post, lik[q], answer), q

    step = jax.jit(jax.vmap(choose))
    log_post = jax.random.normal(jax.random.key(2), (batch, h, k))
    log_post = log_post - jax.scipy.special.logsumexp(log_post, axis=(1, 2), keepdims=True)
    args = (log_post, jnp.full(batch, 0.3), jnp.zeros(batch, jnp.int32))
    t = median_time(step, *args, repeats=21 if quick else 51)
    q = int(bank.explicitness.shape[1])
    return [
        row(
            "prober_questions_per_s",
            "throughput",
            batch / t,
            "questions/s",
            batch=batch,
            hypotheses=h * k,
            candidate_questions=q,
            step_s=t,
        )
    ]


def run(quick: bool = True) -> list[dict]:
    return _p11_rows(quick) + _ivp_rows(quick)


if __name__ == "__main__":
    bench_main("agents", run)
