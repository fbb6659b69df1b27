"""Shared test set-up: strict rank promotion, an explicit PRNG key, float64 on demand."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# `jaxpapers reproduce` keeps compiled programs in a persistent cache; the suite's runs (in process
# or in subprocesses, which inherit this) use a folder of their own, never the user's cache.
os.environ.setdefault("JAXPAPERS_CACHE_DIR", tempfile.mkdtemp(prefix="jaxpapers-test-xla-"))

# Tests compile under the smoke size's policy (``jaxpapers.core.compilation.COMPILE_POLICY``:
# backend optimisation level 0, no fusion emitters): most test time is compiling small programs,
# and on a 2-core machine this cuts a trivial program's compile from ~42 to ~17 ms and the suite's
# CPU time by more than half. The semantics are the same; only code generation differs (results
# agree at the tolerances the tests use). Subprocesses started by tests (examples, ``jaxpapers
# reproduce``) inherit it. Set ``JAXPAPERS_TEST_DEFAULT_XLA=1`` to test with XLA's defaults.
from jaxpapers.core.compilation import use_compile_policy

if not os.environ.get("JAXPAPERS_TEST_DEFAULT_XLA"):
    use_compile_policy("smoke")

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
