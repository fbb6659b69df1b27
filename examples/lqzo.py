"""LQZO in a few lines: quantize a model to INT2, fine-tune its scales with LQZO (no backprop).

About 8 CPU-seconds:  python examples/lqzo.py

What you should see: an MLP trained briefly on the digits, quantized to INT2, then its scales
fine-tuned by LQZO with forward passes only. Expected: test accuracy rises (about 0.81 -> 0.87);
the script checks that it does.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.data.digits import load_digits
from jaxpapers.lqzo import (
    make_config,
    merge_scaled,
    quantize_linears,
    split_scales,
    zo_gradient,
)


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(64, 128, rngs=rngs)
        self.l2 = nnx.Linear(128, 10, rngs=rngs)

    def __call__(self, x):
        return self.l2(jax.nn.relu(self.l1(x)))


def xent(logits, y):
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


digits = load_digits()
x, y = digits.images.reshape(-1, 64), digits.labels
xtr, ytr, xte, yte = x[:1200], y[:1200], x[1200:], y[1200:]

# 1. A full-precision model trained briefly with Adam (stands in for a pretrained model).
model = MLP(nnx.Rngs(0))
opt = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)


@nnx.jit
def fo_step(model, opt, xb, yb):
    loss, grads = nnx.value_and_grad(lambda m: xent(m(xb), yb))(model)
    opt.update(model, grads)
    return loss


for i in range(30):
    fo_step(
        model, opt, xtr[i * 40 % 1200 : i * 40 % 1200 + 40], ytr[i * 40 % 1200 : i * 40 % 1200 + 40]
    )

# 2. Quantize every linear layer to INT2 (group size 16 along the input dimension).
# use_kernel="auto": the fused Pallas kernel on GPU/TPU, the jnp path on CPU.
quantize_linears(model, bits=2, group_size=16, use_kernel="auto")
graphdef, scales0, rest = split_scales(model)


def accuracy(delta):
    logits = merge_scaled(graphdef, scales0, delta, rest)(xte)
    return float(jnp.mean(jnp.argmax(logits, axis=1) == yte))


# 3. LQZO on multiplicative scale corrections: two forward passes per step, no gradients.
delta = jax.tree.map(jnp.zeros_like, scales0)
# zo_gradient yields the pseudo-gradient g * U V^T; any optax chain can follow it. fused=True
# hands the quantized layers the perturbation as seeds: on the kernel path both forward passes
# regenerate U V^T inside the kernel and never form it.
config = make_config(
    eps=1e-2, clip=100.0, rank=2, nu=50, noise="bag", bag_k=4, isotropic=True, fused=True
)
optimizer = optax.chain(
    zo_gradient(config=config, key=jax.random.key(0)),
    optax.add_decayed_weights(1e-4),
    optax.sgd(optax.cosine_decay_schedule(5e-2, 600)),
)
state = optimizer.init(delta)


@jax.jit
def zo_step(delta, state, xb, yb):
    value_fn = lambda d: xent(merge_scaled(graphdef, scales0, d, rest)(xb), yb)
    updates, state = optimizer.update(None, state, delta, value_fn=value_fn)
    return optax.apply_updates(delta, updates), state


before = accuracy(delta)
print(f"INT2 accuracy before LQZO: {before:.3f}")
rng = np.random.default_rng(0)
for _ in range(600):
    idx = rng.integers(0, len(ytr), 64)
    delta, state = zo_step(delta, state, xtr[idx], ytr[idx])
after = accuracy(delta)
print(f"INT2 accuracy after 600 LQZO steps: {after:.3f}")
print(
    "Expected: LQZO raises the INT2 model's test accuracy without a single gradient: "
    + ("as expected." if after > before else "NOT as expected.")
)
