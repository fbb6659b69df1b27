"""The persistent compilation cache: a second process reuses the first one's executables."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jaxpapers.core.compilation import default_cache_dir, enable_compilation_cache

PROGRAM = """
import sys
import jax, jax.numpy as jnp
from jaxpapers.core.compilation import enable_compilation_cache
enable_compilation_cache(sys.argv[1])
f = jax.jit(lambda x: jnp.sin(x) @ jnp.cos(x).T + 1.0)
print(repr(float(f(jnp.arange(64.0).reshape(8, 8) / 64).sum())))
"""


def _run(folder):
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(folder)], capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_second_process_reuses_the_cache(tmp_path):
    first = _run(tmp_path)
    entries = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert entries, "the first process wrote no cache entry"
    second = _run(tmp_path)
    assert second == first
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == entries


def test_cache_folder_defaults_and_bad_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXPAPERS_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("JAXPAPERS_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x" / "jaxpapers" / "xla"
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file"):
        enable_compilation_cache(tmp_path / "file")
    with pytest.raises(ValueError, match="path=''"):
        enable_compilation_cache("")


POLICY = """
import os, sys
import jax, jax.numpy as jnp
from jaxpapers.core.compilation import COMPILE_POLICY, backend_started, use_compile_policy
before = backend_started()
applied = use_compile_policy(sys.argv[1])
jnp.ones(3).block_until_ready()
late = use_compile_policy("full" if sys.argv[1] != "full" else "quick")
print(before, applied, backend_started(), late, repr(os.environ.get("XLA_FLAGS", "")))
"""


@pytest.mark.parametrize("size", ["smoke", "quick"])
def test_compile_policy_is_set_before_the_backend_and_fixed_after(size):
    from jaxpapers.core.compilation import COMPILE_POLICY

    env = {k: v for k, v in __import__("os").environ.items() if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = "--xla_dump_disable_metadata=true"  # the user's own flags are kept, first
    out = subprocess.run(
        [sys.executable, "-c", POLICY, size], capture_output=True, text=True, check=True, env=env
    ).stdout.split(maxsplit=4)
    assert out[:4] == ["False", "True", "True", "False"]
    assert eval(out[4]) == f"--xla_dump_disable_metadata=true {COMPILE_POLICY[size]}"


def test_compile_policy_rejects_unknown_sizes():
    from jaxpapers.core.compilation import use_compile_policy

    with pytest.raises(ValueError, match="size='huge'"):
        use_compile_policy("huge")
