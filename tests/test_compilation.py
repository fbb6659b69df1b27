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
