"""A log file's bytes as its text: gzip-compressed or not, within a size limit, UTF-8.

What every log goes through before its format is told, whether ``advisor.sources.files`` read it
from a path or was handed its bytes (standard input). Bytes that are no text, or hold nothing, are
refused here (``SourceError``, with the line where they stop being text).
"""

from __future__ import annotations

from pathlib import Path

from advisor.sources.loaded_curve import SourceError

__all__ = ["MAX_FILE_BYTES", "decode"]

#: files larger than this are refused (a 24,000-step trainer_state.json is ~3 MB)
MAX_FILE_BYTES = 512 * 1024 * 1024

_GZIP_MAGIC = b"\x1f\x8b"


def _gunzip(path: str | Path, data: bytes) -> bytes:
    """A gzip-compressed log (``train.csv.gz``), read as its text: decompressed up to the same
    size limit as a plain file, so that a small archive cannot expand without bound."""
    import zlib

    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(data, MAX_FILE_BYTES + 1)
    except zlib.error as exc:
        raise SourceError(path, f"gzip-compressed but does not decompress: {exc}") from None
    if len(out) > MAX_FILE_BYTES or inflate.unconsumed_tail:
        raise SourceError(path, f"decompresses to more than the limit of {MAX_FILE_BYTES} bytes")
    if not inflate.eof:
        raise SourceError(path, "gzip-compressed but truncated (the archive ends early)")
    return out


def decode(path: str | Path, data: bytes) -> str:
    """The text of a log's bytes (``path`` names it in errors), gunzipped first when gzip's."""
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip(path, data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SourceError(path, "not UTF-8 text (a binary file?)", line=line) from None
    if "\x00" in text:
        raise SourceError(
            path, "not a text file (it holds NUL bytes)", line=text[: text.index("\x00")].count("\n") + 1
        )
    if not text.strip():
        raise SourceError(path, "empty file")
    return text
