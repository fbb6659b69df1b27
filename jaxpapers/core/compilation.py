"""JAX's persistent compilation cache, as the runner (``jaxpapers reproduce`` / ``bench``) uses it.

XLA compiles dominate a quick run on two CPU cores. JAX can keep every compiled executable on disk
(``jax_compilation_cache_dir``) keyed on the program, its shapes, the compile options, the backend
and the jax/jaxlib versions, so a second process that builds the same program loads it instead of
compiling it again: results are the same executables, bit for bit. The runner turns the cache on
for its own process (``--no-compile-cache`` turns it off); a library user who wants it in their own
program calls :func:`enable_compilation_cache` once, before the first compile.

Examples:
    >>> import os
    >>> from jaxpapers.core.compilation import default_cache_dir
    >>> isinstance(default_cache_dir(), os.PathLike)  # ~/.cache/jaxpapers/xla by default
    True
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_dir", "enable_compilation_cache"]


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
