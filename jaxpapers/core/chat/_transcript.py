"""Transcripts: JSON-serialisable conversations with branches, saved atomically as they grow."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxpapers.core.chat._base import ROLES, Message

FORMAT = "jaxpapers.transcript/1"


@dataclass
class Turn:
    """One message of a transcript plus free JSON metadata (``kind``, tool name, scores...)."""

    role: str
    content: str
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role={self.role!r}; expected one of {ROLES}")
        if not isinstance(self.content, str):
            raise ValueError(f"content is a {type(self.content).__name__}; expected str")

    def message(self) -> Message:
        """The turn as a chat :class:`Message`."""
        return Message(role=self.role, content=self.content)


@dataclass
class Branch:
    """A line of turns that continues ``parent`` after its first ``fork_at`` turns."""

    name: str
    parent: str | None = None
    fork_at: int = 0
    turns: list[Turn] = field(default_factory=list)


@dataclass
class Transcript:
    """A conversation tree: branches fork from earlier points (rollback) and keep their history.

    With ``path`` set, every change (:meth:`append`, :meth:`rollback`) rewrites the JSON file
    atomically (temporary file, ``fsync``, ``os.replace``), so an interrupted run keeps every
    finished turn and the file never holds half a write.

    Examples:
        >>> t = Transcript(meta={"seed": 0})
        >>> _ = t.append("user", "hello")
        >>> _ = t.append("assistant", "hi")
        >>> _ = t.rollback(1)  # drop the reply on a new branch, keep it on "main"
        >>> _ = t.append("assistant", "hello there")
        >>> [m["content"] for m in t.messages()], len(t.messages("main"))
        (['hello', 'hello there'], 2)
        >>> Transcript.from_json(t.to_json()) == t
        True
    """

    meta: dict[str, Any] = field(default_factory=dict)
    branches: dict[str, Branch] = field(default_factory=lambda: {"main": Branch("main")})
    active: str = "main"
    path: Path | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.path is not None:
            self.path = Path(self.path)
        if self.active not in self.branches:
            raise ValueError(f"active={self.active!r}; expected one of {list(self.branches)}")

    def turns(self, branch: str | None = None) -> list[Turn]:
        """Every turn on ``branch`` (default: the active one), its ancestors' prefix included."""
        name = self.active if branch is None else branch
        if name not in self.branches:
            raise ValueError(f"branch={name!r}; expected one of {list(self.branches)}")
        b = self.branches[name]
        prefix = [] if b.parent is None else self.turns(b.parent)[: b.fork_at]
        return prefix + list(b.turns)

    def messages(self, branch: str | None = None) -> list[Message]:
        """The branch as chat messages (what a model is shown)."""
        return [t.message() for t in self.turns(branch)]

    def append(self, role: str, content: str, **meta: Any) -> Turn:
        """Add a turn to the active branch and save (when ``path`` is set)."""
        turn = Turn(role, content, dict(meta))
        json.dumps(turn.meta)  # fail here, not at save time, on non-JSON metadata
        self.branches[self.active].turns.append(turn)
        self._autosave()
        return turn

    def rollback(self, keep: int, name: str | None = None) -> str:
        """Start a new active branch holding the first ``keep`` turns of the active one.

        The old branch stays in the transcript unchanged. Returns the new branch's name.
        """
        n = len(self.turns())
        if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= n:
            raise ValueError(f"keep={keep!r}; expected an int in [0, {n}]")
        name = f"b{len(self.branches)}" if name is None else name
        if name in self.branches:
            raise ValueError(f"name={name!r}; a branch of that name exists")
        self.branches[name] = Branch(name, parent=self.active, fork_at=keep)
        self.active = name
        self._autosave()
        return name

    def to_json(self) -> str:
        """The transcript as a JSON string (``path`` is not part of it)."""
        return json.dumps(
            {
                "format": FORMAT,
                "meta": self.meta,
                "active": self.active,
                "branches": [dataclasses.asdict(b) for b in self.branches.values()],
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str, *, path: str | os.PathLike | None = None) -> Transcript:
        """Parse :meth:`to_json` output (``ValueError`` on another format)."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} document")
        branches = {
            b["name"]: Branch(b["name"], b["parent"], b["fork_at"], [Turn(**t) for t in b["turns"]])
            for b in data["branches"]
        }
        return cls(meta=data["meta"], branches=branches, active=data["active"], path=path)

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Write the JSON atomically to ``path`` (default: ``self.path``); returns the path."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("path=None and the transcript has no path; expected a file path")
        atomic_write_text(target, self.to_json())
        return target

    @classmethod
    def load(cls, path: str | os.PathLike) -> Transcript:
        """Read a saved transcript; later changes keep saving to ``path``."""
        return cls.from_json(Path(path).read_text(), path=path)

    def _autosave(self) -> None:
        if self.path is not None:
            self.save()


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` by ``text`` in one step: a reader sees the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
