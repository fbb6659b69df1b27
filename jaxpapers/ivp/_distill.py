"""Value-Prober distillation: a small decoder LM imitates the strategic prober's questions.

A transcript of one context becomes the token sequence
``[context, q_1, a_1, q_2, a_2, ..., q_T, a_T]`` over the vocabulary ``Q`` question ids, then
``A`` answer ids, then the ``C`` context ids. The student (the core
:class:`~jaxpapers.core.nn.decoder.DecoderLM`) is trained by cross-entropy on the question tokens
only: at position ``2t`` it predicts the teacher's question ``q_{t+1}`` from the conversation so
far, i.e. it learns the map history -> next question that the teacher computes by Bayesian
inference and information gain. At test time it asks its argmax question
(:func:`jaxpapers.ivp.probe` with ``policy="distilled"``).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.core.checks import check_dtype, check_int, check_key, check_ndim, check_shape
from jaxpapers.core.fit import fit
from jaxpapers.core.nn.decoder import DecoderLM, token_log_probs
from jaxpapers.ivp._probers import Student


class StudentConfig(eqx.Module):
    """Size and training of the distilled prober."""

    d_model: int = 48
    num_heads: int = 2
    num_layers: int = 2
    steps: int = 400
    batch: int = 64
    learning_rate: float = 3e-3

    def __check_init__(self) -> None:
        for name in ("d_model", "num_heads", "num_layers", "steps", "batch"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"{name}={v!r}; expected an int >= 1")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate!r}; expected > 0")


class Distilled(NamedTuple):
    """A trained student, its loss curve, whether every step was finite (a non-finite step freezes
    the student: :func:`jaxpapers.core.fit.fit`) and its question accuracy on the training
    traces."""

    student: Student
    losses: Float[Array, " steps"]
    finite: Bool[Array, ""]
    accuracy: Float[Array, ""]


def transcript_tokens(
    questions: Int[Array, "*b turns"],
    answers: Int[Array, "*b turns"],
    contexts: Int[Array, "*b"],
    num_questions: int,
    num_answers: int,
) -> Int[Array, "*b seq"]:
    """Token sequences ``[context, q_1, a_1, ..., q_T, a_T]`` (length ``1 + 2T``)."""
    check_ndim("questions", questions, range(1, 8))
    check_shape("answers", answers, questions.shape)
    check_shape("contexts", contexts, questions.shape[:-1])
    for name, arr in (("questions", questions), ("answers", answers), ("contexts", contexts)):
        check_dtype(name, arr, "integer")
    check_int("num_questions", num_questions, minimum=1)
    check_int("num_answers", num_answers, minimum=1)
    head = (num_questions + num_answers + contexts)[..., None]
    pairs = jnp.stack([questions, num_questions + answers], axis=-1)
    flat = pairs.reshape(*questions.shape[:-1], -1)
    return jnp.concatenate([head, flat], axis=-1).astype(jnp.int32)


def _question_loss(model, tokens):
    logits = model(tokens[:, :-1])[:, 0::2]
    targets = tokens[:, 1::2]
    return -token_log_probs(logits, targets).mean(), jnp.mean(jnp.argmax(logits, -1) == targets)


@partial(jax.jit, static_argnames=("graphdef", "steps", "batch", "lr"))
def _train(graphdef, state, tokens, key, *, steps, batch, lr):
    """AdamW (cosine decay) on random batches of ``tokens``; step ``t`` draws its batch with its
    own key. Returns the :class:`FitResult` and the accuracy on every transcript."""

    def loss_fn(st, x, _key):
        return _question_loss(nnx.merge(graphdef, st), x)

    def batch_fn(_t, k):
        return tokens[jax.random.randint(k, (batch,), 0, tokens.shape[0])]

    opt = optax.adamw(optax.cosine_decay_schedule(lr, steps), weight_decay=1e-4)
    res = fit(loss_fn, state, opt, steps=steps, key=key, batch_fn=batch_fn, has_aux=True)
    _, acc = _question_loss(nnx.merge(graphdef, res.params), tokens)
    return res, acc


def distill_prober(
    tokens: Int[Array, "n seq"], vocab_size: int, *, key: jax.Array, config: StudentConfig
) -> Distilled:
    """Train a :class:`DecoderLM` on teacher transcripts (from :func:`transcript_tokens`).

    Raises:
      ValueError: no transcripts, or token ids outside ``[0, vocab_size)``.
    """
    check_key("key", key)
    if tokens.ndim != 2 or tokens.shape[0] < 1 or tokens.shape[1] < 3:
        raise ValueError(
            f"tokens has shape {tokens.shape}; expected [n >= 1 transcripts, 1 + 2T >= 3]"
        )
    if int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size:
        raise ValueError(f"tokens hold ids outside [0, vocab_size={vocab_size})")
    k_init, k_train = jax.random.split(key)

    def init(k):
        model = DecoderLM(
            vocab_size,
            d_model=config.d_model,
            num_heads=config.num_heads,
            num_layers=config.num_layers,
            max_len=tokens.shape[1],
            rngs=nnx.Rngs(params=k),
        )
        return nnx.split(model)

    # One compiled initialisation instead of dozens of eager ops.
    graphdef, _ = nnx.eval_shape(lambda: init(k_init))
    state = jax.jit(lambda k: init(k)[1])(k_init)
    res, acc = _train(
        graphdef,
        state,
        jnp.asarray(tokens, jnp.int32),
        k_train,
        steps=config.steps,
        batch=config.batch,
        lr=float(config.learning_rate),
    )
    return Distilled(Student(graphdef, res.params), res.losses, res.finite, acc)
