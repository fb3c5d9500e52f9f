"""A local stand-in for the kubelet's downward-API volume, for examples, tests and dry runs.

Why it imitates the kubelet so closely: the listener must cope with how the real file changes.
The kubelet (``pkg/volume/util/atomic_writer.go``) never rewrites a file in place. It writes the
new content into a fresh directory ``..<timestamp>``, points a temporary symlink ``..data_tmp``
at it, renames that over ``..data`` (one atomic step), and removes the old directory; the
visible ``annotations`` is a symlink to ``..data/annotations``. A reader therefore sees either the
old or the new file, never half of one, but the inode behind the path changes on every update.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["DownwardAPIVolume", "format_annotations", "quote_go"]

_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def quote_go(text: str) -> str:
    """Quote like Go's ``strconv.Quote`` (what the kubelet uses for annotation values)."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def format_annotations(annotations: Mapping[str, str]) -> str:
    """The file content: one ``key="value"`` line per annotation, sorted by key."""
    return "".join(f"{key}={quote_go(annotations[key])}\n" for key in sorted(annotations))


class DownwardAPIVolume:
    """A directory laid out and updated the way the kubelet does it.

    ``DownwardAPIVolume(root).write({"advisor.trainjob-advisor.io/checkpoint-request": "17"})``
    makes ``root/annotations`` show that annotation; :attr:`path` is what the listener reads.
    """

    def __init__(self, root: str | os.PathLike[str], filename: str = "annotations") -> None:
        self.root = Path(root)
        self.filename = filename
        self.root.mkdir(parents=True, exist_ok=True)
        self._serial = 0

    @property
    def path(self) -> Path:
        return self.root / self.filename

    def write(self, annotations: Mapping[str, str]) -> Path:
        """Publish a new annotations set with the kubelet's atomic symlink swap."""
        self._serial += 1
        stamp = datetime.fromtimestamp(time.time(), UTC).strftime("%Y_%m_%d_%H_%M_%S")
        new_dir = self.root / f"..{stamp}.{os.getpid()}{self._serial:06d}"
        new_dir.mkdir()
        (new_dir / self.filename).write_text(format_annotations(annotations), encoding="utf-8")
        data = self.root / "..data"
        old_target = os.readlink(data) if data.is_symlink() else None
        tmp = self.root / "..data_tmp"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        os.symlink(new_dir.name, tmp)
        os.replace(tmp, data)  # rename(2): the atomic step
        visible = self.path
        if not visible.is_symlink():
            os.symlink(os.path.join("..data", self.filename), visible)
        if old_target is not None and old_target != new_dir.name:
            shutil.rmtree(self.root / old_target, ignore_errors=True)
        return visible
