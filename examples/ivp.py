"""Probe hidden, context-dependent values of concealing personas: questionnaire vs strategic.

Then let a chat model (here a three-line Python agent behind the chat interface; an
``OpenAIChat`` pointed at a real server works the same) choose the questions.

    python examples/ivp.py
"""

import jax

from jaxpapers import ivp
from jaxpapers.core.chat import FunctionChatModel

pc = ivp.PersonaConfig()
bank = ivp.make_question_bank(ivp.BankConfig(scenarios=12), key=jax.random.key(0))
library = ivp.profile_library(64, key=jax.random.key(1), config=pc)
personas = ivp.sample_personas(4, 0.9, key=jax.random.key(2), config=pc)  # they conceal
config = ivp.ProberConfig(turns=10)

for policy in ("questionnaire", "strategic"):
    ep = ivp.probe(
        policy, bank, library, personas, key=jax.random.key(3), persona_config=pc, config=config
    )
    rho = float(ivp.spearman(ep.profile, personas.profiles).mean())
    top3 = float(ivp.top_k_accuracy(ep.profile, personas.profiles).mean())
    print(
        f"{policy:14s} Spearman {rho:.2f}  top-3 {top3:.2f}  acceptability "
        f"{1 - float(ep.penalty.mean()):.2f}"
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
