"""How the runner compiles: one XLA policy per run size, and JAX's persistent compilation cache.

**The policy.** XLA compiles dominate a quick run on two CPU cores, so the runner
(``jaxpapers reproduce``, ``jaxpapers bench`` and the test suite) picks the code generation of a
run size in one place, :data:`COMPILE_POLICY`, before the first program is compiled:

- ``smoke`` (tests, CI): backend optimisation level 0 and no fusion emitters: a trivial program
  compiles in ~17 instead of ~42 ms; results agree with the default at the tests' tolerances.
- ``quick`` (``make reproduce``): LLVM optimisation level 1 instead of 2: 10-16% less compile time
  on the training steps measured, runs no slower, and losses bit-identical to the default where
  compared (XLA uses no fast-math at either level).
- ``full``: XLA's defaults.

The options go through ``XLA_FLAGS``, which XLA reads once, when JAX first creates a backend; so the
policy is process-wide and :func:`use_compile_policy` must run before the first computation (the
CLI calls it first thing). No paper, experiment or library function sets compile options itself;
a library user keeps XLA's defaults unless they set ``XLA_FLAGS`` themselves.

**The cache.** JAX can keep every compiled executable on disk (``jax_compilation_cache_dir``),
keyed on the program, its shapes, the compile options (``XLA_FLAGS`` included), the backend and the
jax/jaxlib versions, so a second process that builds the same program loads it instead of
compiling it again: the same executables, bit for bit. The runner turns it on for its own process
(``--no-compile-cache`` turns it off); a library user who wants it in their own program calls
:func:`enable_compilation_cache` once, before the first compile.

Examples:
    >>> import os
    >>> from jaxpapers.core.compilation import COMPILE_POLICY, default_cache_dir
    >>> isinstance(default_cache_dir(), os.PathLike)  # ~/.cache/jaxpapers/xla by default
    True
    >>> COMPILE_POLICY["quick"]
    '--xla_backend_optimization_level=1'
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "COMPILE_POLICY",
    "backend_started",
    "default_cache_dir",
    "enable_compilation_cache",
    "use_compile_policy",
]

#: ``XLA_FLAGS`` of each run size (see the module docstring for what each costs and saves).
COMPILE_POLICY: dict[str, str] = {
    "smoke": "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false",
    "quick": "--xla_backend_optimization_level=1",
    "full": "",
}


def backend_started() -> bool:
    """Whether JAX has created a backend in this process (after which ``XLA_FLAGS`` is fixed)."""
    import sys

    bridge = sys.modules.get("jax._src.xla_bridge")
    return bool(bridge is not None and getattr(bridge, "_backends", None))


def use_compile_policy(size: str) -> bool:
    """Compile this process's programs with the policy of run size ``size``.

    Rewrites ``XLA_FLAGS`` to the user's own flags (kept, first) followed by
    :data:`COMPILE_POLICY` ``[size]``, dropping another size's policy flags. Call it before the
    first JAX computation; afterwards XLA no longer reads ``XLA_FLAGS`` and the call changes
    nothing.

    Args:
      size: ``"smoke"``, ``"quick"`` or ``"full"``.

    Returns:
      True when the policy is in force for this process's programs (applied now, or already in
      ``XLA_FLAGS`` when the backend started); False when the backend started under another one.

    Raises:
      ValueError: if ``size`` is not a run size.
    """
    if size not in COMPILE_POLICY:
        raise ValueError(f"size={size!r}; expected one of {tuple(COMPILE_POLICY)}")
    managed = {f for flags in COMPILE_POLICY.values() for f in flags.split()}
    current = os.environ.get("XLA_FLAGS", "").split()
    own = [f for f in current if f not in managed]
    wanted = COMPILE_POLICY[size].split()
    if [f for f in current if f in managed] == wanted:
        return True
    if backend_started():
        return False
    os.environ["XLA_FLAGS"] = " ".join([*own, *wanted])
    return True


def default_cache_dir() -> Path:
    """``$JAXPAPERS_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/jaxpapers/xla`` (default
    ``~/.cache/jaxpapers/xla``)."""
    if os.environ.get("JAXPAPERS_CACHE_DIR"):
        return Path(os.environ["JAXPAPERS_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "jaxpapers" / "xla"


def enable_compilation_cache(path: str | Path | None = None) -> Path:
    """Keep compiled programs in ``path`` (default :func:`default_cache_dir`) and reuse them.

    Every program is cached, however quick its compile (``jax_persistent_cache_min_compile_time_secs
    = 0``): a quick run is hundreds of sub-second compiles.

    Args:
      path: the cache folder; created if missing.

    Returns:
      The folder in use.

    Raises:
      ValueError: if ``path`` is empty or names an existing file.
    """
    import jax

    if path is not None and not str(path).strip():
        raise ValueError("path='' names no folder; expected a cache folder or None")
    folder = Path(path).expanduser() if path is not None else default_cache_dir()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"path={str(folder)!r} is a file; expected a folder for the cache")
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder
