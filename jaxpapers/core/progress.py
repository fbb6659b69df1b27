"""Progress bars that stay quiet when the output is not a terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress(
    iterable: Iterable[T], *, total: int | None = None, desc: str | None = None
) -> Iterator[T]:
    """Wrap ``iterable`` in a tqdm bar on a terminal (stderr), and pass it through otherwise."""
    if not sys.stderr.isatty():
        yield from iterable
        return
    from tqdm.auto import tqdm

    yield from tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True)
