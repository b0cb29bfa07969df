"""Where a command will write, checked before it starts: an output file or folder that cannot be
made is refused with a plain reason (``x.txt is a file``), not an ``[Errno 20]`` at the end.

The check is a real probe: the folders that are missing are made, a temporary file (or folder) is
created where the output would go, and everything the probe made is removed again.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

__all__ = ["unwritable_file", "unwritable_folder"]


def unwritable_file(path: Path) -> str | None:
    """Why no file could be written at ``path`` (``None``: it can)."""
    if path.is_dir():
        return "is a directory"
    if path.exists():
        return None if _writable(path) else "is not writable"
    return _probe(path.parent, folder=False)


def unwritable_folder(path: Path) -> str | None:
    """Why no folder could be made (or written into) at ``path`` (``None``: it can)."""
    if path.exists() and not path.is_dir():
        return "is a file: give a folder"
    return _probe(path, folder=True)


def _writable(path: Path) -> bool:
    try:
        with path.open("a"):
            return True
    except OSError:
        return False


def _probe(target: Path, *, folder: bool) -> str | None:
    """Makes the missing folders down to ``target``, creates a temporary file (or, for a
    folder output, a temporary folder) in ``target``, and removes all it made again."""
    existing = target
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory (a file): nothing can be made in it"
    created: list[Path] = []
    try:
        for part in _missing_folders(existing, target):
            part.mkdir()
            created.append(part)
        if folder:
            created.append(Path(tempfile.mkdtemp(dir=target, prefix=".teamtr-probe-")))
        else:
            with tempfile.TemporaryFile(dir=target):
                pass
    except OSError as exc:
        kind = "folder" if folder else "file"
        return f"cannot create a {kind} in {target} ({exc.strerror or exc})"
    finally:
        for part in reversed(created):
            part.rmdir()
    return None


def _missing_folders(existing: Path, target: Path) -> list[Path]:
    """The folders from ``existing`` (which exists) down to ``target``, outermost first."""
    parts = target.relative_to(existing).parts
    return [existing.joinpath(*parts[: i + 1]) for i in range(len(parts))]
