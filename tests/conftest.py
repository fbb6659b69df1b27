"""Shared test set-up: strict rank promotion, an explicit PRNG key, float64 on demand."""

from __future__ import annotations

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax
import numpy as np
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture
def key() -> jax.Array:
    """A fixed PRNG key: tests are reproducible."""
    return jax.random.key(0)


@pytest.fixture
def rng() -> np.random.Generator:
    """A fixed NumPy generator for float64 references and random inputs."""
    return np.random.default_rng(0)


@pytest.fixture
def x64():
    """Run the test body with 64-bit JAX types enabled (for comparisons with float64 NumPy)."""
    with jax.enable_x64(True):
        yield


def pytest_collection_modifyitems(config, items):
    """Heaviest files first (those with a ``slow`` or smoke-run test): ``make test`` distributes
    whole files (``--dist loadfile``: a file's compiled programs and module fixtures are built in
    one worker), and a long file handed out last would run alone at the end."""
    heavy = {item.path for item in items if item.get_closest_marker("slow") or "smoke" in item.name}
    items.sort(key=lambda item: item.path not in heavy)  # stable: file order kept otherwise
