"""The GAP-linear CNN: logits decompose exactly into the class activation map; bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from helpers import tolerance

from jaxpapers.core.nn.cnn import CNNConfig, ConvNet


def test_forward_shapes_and_cam_decomposition():
    net = ConvNet(CNNConfig(channels=3, widths=(4, 8), classes=3), rngs=nnx.Rngs(0))
    gdef, state = nnx.split(net)
    x = jax.random.normal(jax.random.key(1), (2, 16, 16, 3))

    def run(state, x):
        m = nnx.merge(gdef, state)
        out = m.forward(x)
        return out, m(x), m.head.kernel[...], m.head.bias[...]

    out, logits, w, b = jax.jit(run)(state, x)
    assert out.features.shape == (2, 8, 8, 8) and out.logits.shape == (2, 3)
    assert float(out.features.min()) >= 0.0
    np.testing.assert_allclose(out.logits, logits, **tolerance(np.float32))
    a = np.asarray(out.features, np.float64)
    cam = np.einsum("bhwk,kc->bchw", a, np.asarray(w, np.float64))
    np.testing.assert_allclose(
        out.logits, cam.mean(axis=(2, 3)) + np.asarray(b), **tolerance(np.float32, 10.0)
    )


def test_bad_inputs():
    with pytest.raises(ValueError, match="widths"):
        ConvNet(CNNConfig(widths=()), rngs=nnx.Rngs(0))
    net = ConvNet(CNNConfig(channels=1, widths=(4,)), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="x has shape"):
        net(jnp.zeros((2, 8, 8, 3)))
