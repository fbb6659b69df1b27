r"""A small decoder-only transformer language model in flax.nnx with KV-cache sampling.

GPT-2-style pre-LN blocks (Radford et al. 2019): learned token and position embeddings, then per
layer ``h += W_o MHA_causal(LN h)``, ``h += W_2 gelu(W_1 LN h)``, a final LayerNorm and an untied
linear read-out to ``vocab_size`` logits.

The KV cache is a functional pytree (:class:`KVCache`), passed in and returned, so the model stays
pure under ``jax.jit``: a call with ``T`` new tokens at cache position ``i`` writes their keys and
values at ``[i, i + T)`` and lets query ``i + s`` attend to every cached key at position
``<= i + s``. Prefill (``i = 0``, ``T = P``) and one-token decoding are the same code.

:func:`sample` is jitted with the graph definition static and the weights an argument
(``nnx.split``);
jitting a bound nnx method would bake the weights into the program as constants.

Examples:
    >>> import jax, jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxpapers.core.nn.decoder import DecoderLM, sample
    >>> lm = DecoderLM(11, d_model=16, num_heads=2, num_layers=1, max_len=12, rngs=nnx.Rngs(0))
    >>> lm(jnp.zeros((2, 5), jnp.int32)).shape
    (2, 5, 11)
    >>> graphdef, state = nnx.split(lm)
    >>> out = sample(graphdef, state, jnp.ones((2, 3), jnp.int32), key=jax.random.key(0),
    ...              max_new_tokens=4)
    >>> out.shape
    (2, 7)

References:
    Radford et al. 2019, "Language Models are Unsupervised Multitask Learners".
    Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration" (top-p), arXiv:1904.09751.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_key, check_labels, check_positive, check_range


class KVCache(NamedTuple):
    """Keys and values of every layer for ``max_len`` positions, and how many are filled."""

    keys: Float[Array, "layers batch max_len heads head_dim"]
    values: Float[Array, "layers batch max_len heads head_dim"]
    index: Int[Array, ""]


class DecoderBlock(nnx.Module):
    """One pre-LN causal self-attention block."""

    def __init__(self, d_model: int, num_heads: int, mlp_dim: int, *, rngs: nnx.Rngs):
        self.num_heads = num_heads
        self.ln1 = nnx.LayerNorm(d_model, rngs=rngs)
        self.qkv = nnx.Linear(d_model, 3 * d_model, rngs=rngs)
        self.proj = nnx.Linear(d_model, d_model, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d_model, rngs=rngs)
        self.fc1 = nnx.Linear(d_model, mlp_dim, rngs=rngs)
        self.fc2 = nnx.Linear(mlp_dim, d_model, rngs=rngs)

    def __call__(
        self,
        h: jax.Array,
        q_pos: jax.Array,
        past: tuple[jax.Array, jax.Array] | None,
        index: jax.Array | None,
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``h [B, T, D]`` at positions ``q_pos [T]`` -> new ``h`` and this layer's keys/values.

        With ``past = (k, v)`` of shape ``[B, L, H, Dh]`` the new keys/values are written at
        ``index`` and attention runs over all ``L`` cached positions (unfilled ones are masked
        because their position exceeds every query's).
        """
        b, t, d = h.shape
        dh = d // self.num_heads
        qkv = self.qkv(self.ln1(h)).reshape(b, t, 3, self.num_heads, dh)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        if past is not None:
            k = jax.lax.dynamic_update_slice(past[0], k.astype(past[0].dtype), (0, index, 0, 0))
            v = jax.lax.dynamic_update_slice(past[1], v.astype(past[1].dtype), (0, index, 0, 0))
        k_pos = jnp.arange(k.shape[1])
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.asarray(dh, h.dtype))
        causal = k_pos[None, :] <= q_pos[:, None]
        scores = jnp.where(causal[None, None], scores, jnp.finfo(scores.dtype).min)
        attn = jax.nn.softmax(scores, axis=-1)
        h = h + self.proj(jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, t, d))
        h = h + self.fc2(jax.nn.gelu(self.fc1(self.ln2(h))))
        return h, k, v


class DecoderLM(nnx.Module):
    """Decoder-only transformer LM: tokens ``[B, T]`` -> next-token logits ``[B, T, V]``.

    Args:
      vocab_size: number of token ids.
      d_model: width (a multiple of ``num_heads``).
      num_heads: attention heads.
      num_layers: transformer blocks.
      max_len: longest sequence (positions are learned up to it; the KV cache holds this many).
      mlp_ratio: hidden width of the MLP as a multiple of ``d_model``.
      rngs: ``nnx.Rngs`` for the initial weights.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        d_model: int,
        num_heads: int,
        num_layers: int,
        max_len: int,
        mlp_ratio: int = 4,
        rngs: nnx.Rngs,
    ):
        for name, value in [
            ("vocab_size", vocab_size),
            ("d_model", d_model),
            ("num_heads", num_heads),
            ("num_layers", num_layers),
            ("max_len", max_len),
            ("mlp_ratio", mlp_ratio),
        ]:
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"{name}={value!r}; expected a positive int")
        if d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        self.vocab_size, self.d_model, self.num_heads = vocab_size, d_model, num_heads
        self.num_layers, self.max_len = num_layers, max_len
        self.token = nnx.Embed(vocab_size, d_model, rngs=rngs)
        self.position = nnx.Param(0.02 * jax.random.normal(rngs.params(), (max_len, d_model)))
        self.blocks = nnx.List(
            [
                DecoderBlock(d_model, num_heads, mlp_ratio * d_model, rngs=rngs)
                for _ in range(num_layers)
            ]
        )
        self.ln_f = nnx.LayerNorm(d_model, rngs=rngs)
        self.head = nnx.Linear(d_model, vocab_size, rngs=rngs)

    def init_cache(self, batch: int, dtype=jnp.float32) -> KVCache:
        """An empty :class:`KVCache` for ``batch`` sequences of up to ``max_len`` tokens."""
        shape = (
            self.num_layers,
            batch,
            self.max_len,
            self.num_heads,
            self.d_model // self.num_heads,
        )
        return KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), jnp.zeros((), jnp.int32))

    def __call__(
        self, tokens: Int[Array, "batch time"], *, cache: KVCache | None = None
    ) -> Float[Array, "batch time vocab"] | tuple[Float[Array, "batch time vocab"], KVCache]:
        """Next-token logits; with ``cache``, ``(logits, updated cache)``.

        Args:
          tokens: ``[B, T]`` int ids; without a cache they sit at positions ``0 .. T-1``, with a
            cache at ``cache.index .. cache.index + T - 1``.
          cache: a :class:`KVCache` from :meth:`init_cache` (or a previous call).

        Returns:
          ``[B, T, V]`` logits, or ``(logits, cache)`` when ``cache`` is given.
        """
        if tokens.ndim != 2:
            raise ValueError(f"tokens has shape {tokens.shape}; expected [batch, time]")
        t = tokens.shape[1]
        if t > self.max_len:
            raise ValueError(
                f"tokens has {t} positions; the model holds at most max_len={self.max_len}"
            )
        if not jnp.issubdtype(tokens.dtype, jnp.integer):
            raise ValueError(f"tokens has dtype {tokens.dtype}; expected integer ids")
        start = jnp.zeros((), jnp.int32) if cache is None else cache.index
        q_pos = start + jnp.arange(t)
        pos = jax.lax.dynamic_slice_in_dim(self.position[...], start, t, axis=0)
        h = self.token(tokens) + pos[None]
        keys, values = [], []
        for i, block in enumerate(self.blocks):
            past = None if cache is None else (cache.keys[i], cache.values[i])
            h, k, v = block(h, q_pos, past, start)
            keys.append(k)
            values.append(v)
        logits = self.head(self.ln_f(h))
        if cache is None:
            return logits
        return logits, KVCache(jnp.stack(keys), jnp.stack(values), cache.index + t)


def token_log_probs(
    logits: Float[Array, "*batch time vocab"], targets: Int[Array, "*batch time"]
) -> Float[Array, "*batch time"]:
    """``log softmax(logits)[..., targets]``: the log-probability of each target token."""
    if jnp.ndim(logits) < 1 or jnp.shape(targets) != jnp.shape(logits)[:-1]:
        raise ValueError(
            f"targets has shape {jnp.shape(targets)}; expected {jnp.shape(logits)[:-1]} to match "
            f"logits {jnp.shape(logits)}"
        )
    check_labels("targets", targets, jnp.shape(logits)[-1])
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]


def filter_top_p(logits: Float[Array, "*batch vocab"], top_p: float | jax.Array) -> jax.Array:
    """Nucleus filter: keep the smallest set of most likely tokens with mass >= ``top_p``.

    Tokens outside the nucleus get ``-inf``; the most likely token is always kept.
    """
    if jnp.ndim(logits) < 1:
        raise ValueError(f"logits has shape {jnp.shape(logits)}; expected [..., vocab]")
    check_range("top_p", top_p, 0.0, 1.0, low_open=True)
    probs = jax.nn.softmax(logits, axis=-1)
    sorted_p = -jnp.sort(-probs, axis=-1)
    mass_before = jnp.cumsum(sorted_p, axis=-1) - sorted_p
    kept = jnp.where(mass_before < top_p, sorted_p, jnp.inf)
    threshold = jnp.min(kept, axis=-1, keepdims=True)
    return jnp.where(probs >= threshold, logits, -jnp.inf)


def _pick(logits: jax.Array, key: jax.Array, temperature: jax.Array, top_p: jax.Array) -> jax.Array:
    greedy = jnp.argmax(logits, axis=-1)
    scaled = filter_top_p(logits / jnp.maximum(temperature, 1e-6), top_p)
    drawn = jax.random.categorical(key, scaled, axis=-1)
    return jnp.where(temperature > 0, drawn, greedy).astype(jnp.int32)


@partial(jax.jit, static_argnames=("graphdef", "max_new_tokens", "use_cache", "eos_id"))
def _sample(graphdef, state, prompt, key, temperature, top_p, max_new_tokens, use_cache, eos_id):
    model = nnx.merge(graphdef, state)
    b, p = prompt.shape
    total = p + max_new_tokens
    keys = jax.random.split(key, max_new_tokens)
    buf = jnp.zeros((b, total), jnp.int32).at[:, :p].set(prompt)
    done0 = jnp.zeros((b,), bool)

    def finish(tok, done):
        if eos_id is None:
            return tok, done
        tok = jnp.where(done, eos_id, tok)
        return tok, done | (tok == eos_id)

    if use_cache:
        logits, cache = model(prompt, cache=model.init_cache(b))
        tok, done = finish(_pick(logits[:, -1], keys[0], temperature, top_p), done0)
        buf = buf.at[:, p].set(tok)

        def step(carry, i):
            buf, cache, tok, done = carry
            logits, cache = model(tok[:, None], cache=cache)
            tok, done = finish(_pick(logits[:, -1], keys[i], temperature, top_p), done)
            buf = jax.lax.dynamic_update_slice(buf, tok[:, None], (0, p + i))
            return (buf, cache, tok, done), None

        (buf, *_), _ = jax.lax.scan(step, (buf, cache, tok, done), jnp.arange(1, max_new_tokens))
        return buf

    def full_step(carry, i):
        buf, done = carry
        logits = model(buf)
        last = jax.lax.dynamic_index_in_dim(logits, p + i - 1, axis=1, keepdims=False)
        tok, done = finish(_pick(last, keys[i], temperature, top_p), done)
        return (jax.lax.dynamic_update_slice(buf, tok[:, None], (0, p + i)), done), None

    (buf, _), _ = jax.lax.scan(full_step, (buf, done0), jnp.arange(max_new_tokens))
    return buf


def sample(
    graphdef: nnx.GraphDef,
    state: nnx.State,
    prompt: Int[Array, "batch prompt_len"],
    *,
    key: jax.Array,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    use_cache: bool = True,
    eos_id: int | None = None,
) -> Int[Array, "batch total"]:
    """Autoregressive sampling from a :class:`DecoderLM` given as ``nnx.split(model)``.

    Args:
      graphdef, state: ``nnx.split(model)`` (the state is a traced argument, not a constant).
      prompt: ``[B, P]`` int ids (all prompts have the same length ``P >= 1``).
      key: PRNG key.
      max_new_tokens: tokens to draw; ``P + max_new_tokens <= max_len``.
      temperature: softmax temperature; ``0`` is greedy decoding.
      top_p: nucleus mass in ``(0, 1]`` (1 keeps every token).
      use_cache: decode with the KV cache (``O(T)`` per token) or recompute the whole prefix.
      eos_id: once a sequence emits this id it keeps emitting it.

    Returns:
      ``[B, P + max_new_tokens]`` int32: the prompt followed by the drawn tokens.
    """
    check_key("key", key)
    if prompt.ndim != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompt has shape {prompt.shape}; expected [batch, prompt_len >= 1]")
    if not (isinstance(max_new_tokens, int) and max_new_tokens >= 1):
        raise ValueError(f"max_new_tokens={max_new_tokens!r}; expected an int >= 1")
    model_len = int(jnp.shape(state["position"])[0])
    if prompt.shape[1] + max_new_tokens > model_len:
        raise ValueError(
            f"prompt length {prompt.shape[1]} + max_new_tokens={max_new_tokens} exceeds the "
            f"model's max_len={model_len}"
        )
    check_positive("temperature", temperature, allow_zero=True)
    check_positive("top_p", top_p)
    if isinstance(top_p, float | int) and top_p > 1:
        raise ValueError(f"top_p={top_p!r}; expected a nucleus mass in (0, 1]")
    return _sample(
        graphdef,
        state,
        jnp.asarray(prompt, jnp.int32),
        key,
        jnp.asarray(temperature, jnp.float32),
        jnp.asarray(top_p, jnp.float32),
        max_new_tokens,
        use_cache,
        eos_id,
    )


__all__ = [
    "DecoderBlock",
    "DecoderLM",
    "KVCache",
    "filter_top_p",
    "sample",
    "token_log_probs",
]
