"""ContrastiveCAMs for your own flax CNN, and one CR-CE training step.

Any network works once it is split into a feature extractor and a ``head`` mapping the feature
map ``[B, h, w, K]`` to logits: here a two-layer flax.nnx CNN written from scratch.

    python examples/crce.py

Scale it up with more scenes and steps and a deeper network (``jaxpapers reproduce P09`` trains
the paper's CNNs on Waterbirds-like scenes).
"""

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxpapers.core.data.scenes import SceneConfig, make_scenes
from jaxpapers.crce import CRCE, cell_fractions, contrastive_cam, cr_ce_loss, grad_cam


class MyCNN(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.c1 = nnx.Conv(3, 8, (3, 3), strides=2, rngs=rngs)
        self.c2 = nnx.Conv(8, 16, (3, 3), strides=2, rngs=rngs)
        self.fc = nnx.Linear(16, 3, rngs=rngs)

    def features(self, x):
        return jax.nn.relu(self.c2(jax.nn.relu(self.c1(x))))

    def head(self, a):  # any differentiable map from the feature map to logits
        return self.fc(jnp.mean(a, axis=(1, 2)))


scenes = make_scenes(SceneConfig(num_objects=1, num_classes=3), 32, key=jax.random.key(0))
images, labels = scenes.image, scenes.main_class
context = 1.0 - cell_fractions(scenes.instances > 0, (8, 8))  # background share of each cell

model = nnx.jit(lambda: MyCNN(nnx.Rngs(0)))()  # built by one compiled program, not op by op
optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)


@nnx.jit
def step(model, optimizer):
    def loss_fn(model):
        out = cr_ce_loss(model.head, model.features(images), labels, context, config=CRCE(1.0))
        return out.loss, out

    (_, out), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
    optimizer.update(model, grads)
    return out.ce, out.penalty


for _ in range(30):
    ce, penalty = step(model, optimizer)
print(
    f"after 30 CR-CE steps: CE {float(ce):.3f}, "
    f"penalty (logit margin on context)^2 {float(penalty):.3f}"
)


@nnx.jit
def cams(model):
    feats = model.features(images)
    pred = jnp.argmax(model.head(feats), -1)
    return contrastive_cam(model.head, feats, pred), grad_cam(model.head, feats, pred)


ccam, gcam = cams(model)  # [32, 8, 8] each; ContrastiveCAM is signed
print("ContrastiveCAM", ccam.shape, "sums to the logit margin:", float(ccam[0].sum()))
print("Grad-CAM", gcam.shape)
