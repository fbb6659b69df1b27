"""Deep sequence models: a residual stack of recurrent mixers and GLU MLPs (flax.nnx)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxpapers.lrnn._layers import BDLRU, HLRU, LRU

_SPEC = re.compile(r"^(lru|hlru(\d+)|bdlru(\d+))$")


def parse_mixer(spec: str) -> tuple[str, int]:
    """Split a mixer name: ``"lru"`` -> ``("lru", 1)``, ``"hlru4"`` -> ``("hlru", 4)``, etc."""
    m = _SPEC.match(spec) if isinstance(spec, str) else None
    if m is None:
        raise ValueError(f"mixer={spec!r}; expected 'lru', 'hlru<K>' or 'bdlru<b>' (e.g. 'hlru2')")
    if m.group(2) is not None:
        return "hlru", int(m.group(2))
    if m.group(3) is not None:
        return "bdlru", int(m.group(3))
    return "lru", 1


def make_mixer(
    spec: str, d_model: int, d_state: int, *, mode: str = "auto", rngs: nnx.Rngs
) -> LRU | HLRU | BDLRU:
    """Build the recurrent layer named by ``spec``: ``"lru"``, ``"hlru<K>"`` or ``"bdlru<b>"``."""
    kind, k = parse_mixer(spec)
    if kind == "hlru":
        return HLRU(d_model, d_state, k, mode=mode, rngs=rngs)
    if kind == "bdlru":
        return BDLRU(d_model, d_state, k, mode=mode, rngs=rngs)
    return LRU(d_model, d_state, mode=mode, rngs=rngs)


class ResidualBlock(nnx.Module):
    """``x + mixer(norm(x))`` then ``x + GLU(norm(x))`` (pre-norm, RMSNorm, SiLU-gated MLP)."""

    def __init__(self, mixer: nnx.Module, d_model: int, expand: int = 2, *, rngs: nnx.Rngs):
        self.norm1 = nnx.RMSNorm(d_model, rngs=rngs)
        self.mixer = mixer
        self.norm2 = nnx.RMSNorm(d_model, rngs=rngs)
        self.up = nnx.Linear(d_model, 2 * expand * d_model, rngs=rngs)
        self.down = nnx.Linear(expand * d_model, d_model, rngs=rngs)

    def __call__(self, x: Float[Array, "*batch T d"]) -> Float[Array, "*batch T d"]:
        x = x + self.mixer(self.norm1(x))
        gate, val = jnp.split(self.up(self.norm2(x)), 2, axis=-1)
        return x + self.down(jax.nn.silu(gate) * val)


class SequenceModel(nnx.Module):
    """Token embedding, ``n_layers`` residual blocks with one mixer kind, RMSNorm, linear head.

    Args:
      vocab: number of input tokens.
      n_out: number of output classes per position.
      mixer: ``"lru"``, ``"hlru<K>"`` or ``"bdlru<b>"``.
      d_model: residual width.
      d_state: recurrent state width per layer (complex for the LRU).
      n_layers: number of residual blocks.
      mode: scan order of every mixer.
    """

    def __init__(
        self,
        vocab: int,
        n_out: int,
        *,
        mixer: str,
        d_model: int,
        d_state: int,
        n_layers: int = 2,
        mode: str = "auto",
        rngs: nnx.Rngs,
    ):
        if n_layers < 1:
            raise ValueError(f"n_layers={n_layers}; expected at least 1")
        parse_mixer(mixer)
        self.vocab = vocab
        self.embed = nnx.Embed(vocab, d_model, rngs=rngs)
        self.blocks = nnx.List(
            [
                ResidualBlock(
                    make_mixer(mixer, d_model, d_state, mode=mode, rngs=rngs), d_model, rngs=rngs
                )
                for _ in range(n_layers)
            ]
        )
        self.norm = nnx.RMSNorm(d_model, rngs=rngs)
        self.head = nnx.Linear(d_model, n_out, rngs=rngs)

    def __call__(self, tokens: Int[Array, "*batch T"]) -> Float[Array, "*batch T n_out"]:
        if jnp.ndim(tokens) < 1 or not jnp.issubdtype(jnp.asarray(tokens).dtype, jnp.integer):
            raise ValueError(
                f"tokens has shape {jnp.shape(tokens)} and dtype {jnp.asarray(tokens).dtype}; "
                "expected integer tokens [..., T]"
            )
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))
