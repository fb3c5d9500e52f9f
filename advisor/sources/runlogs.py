"""The run logs a command line names: a file stands for itself, a folder for every run log under it.

``backtest``, ``compare`` and ``simulate --curves`` find their runs here, in every subfolder of a
folder given (hidden files and folders, such as ``.ipynb_checkpoints``, left out). Each log gets a
name unique among those found, which is what the commands key it by and print: its path relative
to the folder given (``lr1e-3/trainer_state.json`` in HF's ``<sweep>/<run>/trainer_state.json``
layout, where every run's file has the same name), a file given alone its file name; logs whose
names would clash (``trainer_state.json`` given twice, two folders holding an ``a.csv``) are named
by their path as given instead.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from advisor.sources.assemble import SourceError

__all__ = ["INDEX_NAMES", "RUN_LOG_SUFFIXES", "RunLog", "find_run_logs", "is_run_log"]

#: what a folder's run logs are named (its plots, scripts and notes are not runs); each also as .gz
RUN_LOG_SUFFIXES = (".json", ".jsonl", ".csv", ".tsv", ".txt", ".log")
#: index files: runs' GPUs and groups, never runs themselves
INDEX_NAMES = ("index.csv", "runs.csv")


@dataclass(frozen=True)
class RunLog:
    """One run log found: where it is read from, its unique name, and the folder it was found in
    (``root``: the folder given; a file given alone: its own folder)."""

    path: Path
    name: str
    root: Path
    in_folder: bool  # found in a folder given (not named itself)

    @property
    def relative(self) -> Path:
        """Its path relative to ``root``."""
        return self.path.relative_to(self.root)


def is_run_log(path: Path) -> bool:
    """A folder's run log: one of ``RUN_LOG_SUFFIXES``, gzip-compressed or not (``train.csv.gz``
    is read as a file given alone is), and no index."""
    name = path.name.lower()
    return name.removesuffix(".gz").endswith(RUN_LOG_SUFFIXES) and name not in INDEX_NAMES


def _broken_link(path: Path) -> bool:
    return path.is_symlink() and not path.exists()


def _in_folder(folder: Path) -> list[Path]:
    """The run logs under ``folder``; a broken symbolic link named as one is among them (reading
    it fails, and the commands count it as the bad run it is rather than pass over it)."""
    return sorted(
        p
        for p in folder.rglob("*")
        if is_run_log(p)
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
        and (p.is_file() or _broken_link(p))
    )


def find_run_logs(args: Sequence[Path]) -> list[RunLog]:
    """The run logs ``args`` name, in order (a folder's sorted), each once, with unique names.
    Raises ``SourceError`` for an argument that does not exist or a folder with no run log."""
    found: list[tuple[Path, Path, bool]] = []
    seen: set[str] = set()
    for arg in args:
        if arg.is_dir():
            logs = _in_folder(arg)
            if not logs:
                raise SourceError(
                    arg,
                    f"folder: no runs in it (looked for {', '.join(RUN_LOG_SUFFIXES)}, each also as .gz)",
                )
            entries = [(p, arg, True) for p in logs]
        elif arg.exists() or _broken_link(arg):
            entries = [(arg, arg.parent, False)]
        else:
            raise SourceError(arg, "no such file or folder")
        for path, root, in_folder in entries:
            key = os.path.normpath(path)
            if key not in seen:  # the same file named twice (a folder and a file in it) is one run
                seen.add(key)
                found.append((path, root, in_folder))
    relative = [path.relative_to(root).as_posix() for path, root, _ in found]
    clash = Counter(relative)
    names = [
        rel if clash[rel] == 1 else Path(os.path.normpath(path)).as_posix()
        for rel, (path, _root, _) in zip(relative, found, strict=True)
    ]
    taken: set[str] = set()
    out: list[RunLog] = []
    for name, (path, root, in_folder) in zip(names, found, strict=True):
        unique, k = name, 2
        while unique in taken:  # a path as given that is also another log's relative path
            unique, k = f"{name} ({k})", k + 1
        taken.add(unique)
        out.append(RunLog(path, unique, root, in_folder))
    return out
