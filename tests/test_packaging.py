"""Packaging: every subpackage is listed, the kernels package imports only jax, wheels are whole."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _listed_packages() -> set[str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return set(tomllib.load(f)["tool"]["setuptools"]["packages"])


def _package_dirs() -> set[str]:
    found = {"jaxpapers_kernels"}
    for init in (ROOT / "jaxpapers").rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT)
        found.add(".".join(rel.parts))
    return found


def test_every_subpackage_is_listed_in_pyproject():
    missing = _package_dirs() - _listed_packages()
    assert not missing, f"add these to [tool.setuptools] packages: {sorted(missing)}"


def test_every_listed_package_exists():
    absent = {p for p in _listed_packages() if p != "jaxpapers_kernels"} - _package_dirs()
    assert not absent, f"listed but missing on disk: {sorted(absent)}"


def test_kernels_import_only_jax():
    code = (
        "import sys, jaxpapers_kernels, pkgutil, importlib\n"
        "for m in pkgutil.iter_modules(jaxpapers_kernels.__path__):\n"
        "    importlib.import_module('jaxpapers_kernels.' + m.name)\n"
        "bad = [m for m in ('flax', 'ott', 'diffrax', 'optax', 'jaxpapers') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"jaxpapers_kernels pulled in {out.stdout.strip()}"


def test_import_jaxpapers_is_lazy():
    code = "import sys, jaxpapers; print('ott' in sys.modules, 'flax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.slow
def test_wheel_contains_every_package(tmp_path):
    pytest.importorskip("setuptools")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("jaxpapers-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for pkg in _listed_packages():
        path = pkg.replace("jaxpapers_kernels", "jaxpapers_kernels").replace(".", "/")
        assert f"{path}/__init__.py" in names, f"{pkg} missing from the wheel"
    assert "jaxpapers/py.typed" in names
    assert any(n.endswith("entry_points.txt") for n in names)
