"""Probe hidden, context-dependent values of concealing personas: questionnaire vs strategic.

Then let a chat model (here a three-line Python agent behind the chat interface; an
``OpenAIChat`` pointed at a real server works the same) choose the questions.

    python examples/ivp.py

What you should see: for 4 personas that conceal their values, the strategic prober recovers
their hidden value ranking better than a fixed questionnaire (Spearman 0.75 against 0.52, top-3
0.71 against 0.58) and its questions are far more acceptable to them (0.79 against 0.20); then
a three-turn interview in which a chat model picks the questions. Four personas make this a
demonstration; ``jaxpapers reproduce P18`` measures it over seeds.
"""

import jax

from jaxpapers import ivp
from jaxpapers.core.chat import FunctionChatModel

pc = ivp.PersonaConfig()
bank = ivp.make_question_bank(config=ivp.BankConfig(scenarios=12), key=jax.random.key(0))
library = ivp.profile_library(64, key=jax.random.key(1), config=pc)
personas = ivp.sample_personas(4, 0.9, key=jax.random.key(2), config=pc)  # they conceal
config = ivp.ProberConfig(turns=10)

scores = {}
for policy in ("questionnaire", "strategic"):
    ep = ivp.probe(
        policy, bank, library, personas, key=jax.random.key(3), persona_config=pc, config=config
    )
    rho = float(ivp.spearman(ep.profile, personas.profiles).mean())
    scores[policy] = rho
    top3 = float(ivp.top_k_accuracy(ep.profile, personas.profiles).mean())
    print(
        f"{policy:14s} Spearman {rho:.2f}  top-3 {top3:.2f}  acceptability "
        f"{1 - float(ep.penalty.mean()):.2f}"
    )


better = scores["strategic"] > scores["questionnaire"]
print(
    "Expected: strategic probing ranks the hidden values better (higher Spearman): "
    + ("as expected." if better else "NOT as expected.")
)


def ask_in_order(messages):  # any ChatModel can pick the next question by its number
    return str(messages[-1]["content"].count("Q") + 11)  # scenario questions 11, 12, ...


prober = ivp.ChatModelProber(
    FunctionChatModel(ask_in_order),
    bank,
    library,
    persona_config=pc,
    config=ivp.ProberConfig(turns=3),
)
persona = ivp.persona_chat_model(personas, 0, bank, persona_config=pc)
talk = prober.interview(persona, "family", key=jax.random.key(4))
for m in talk.transcript.messages():
    print(f"{m['role']:>9}: {m['content']}")
