"""Parse the downward-API annotations file the kubelet writes into a pod.

Why a parser of our own: the file is not JSON or YAML. The kubelet writes one ``key="value"``
line per annotation, sorted by key, with each value quoted the way Go's ``strconv.Quote`` does
(``\\n``, ``\\"``, ``\\u00e9`` …); a multi-line annotation therefore stays on one line. Reading it
needs nothing but the standard library, which matters inside a training image.
"""

from __future__ import annotations

__all__ = ["AnnotationFormatError", "parse_annotations", "unquote_go"]


class AnnotationFormatError(ValueError):
    """A line of the annotations file is not ``key="go-quoted value"``."""


_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
}
_HEX_WIDTH = {"x": 2, "u": 4, "U": 8}


def unquote_go(quoted: str) -> str:
    """Undo Go's ``strconv.Quote``: ``'"a\\tb"'`` -> ``'a<TAB>b'``.

    Raises :class:`AnnotationFormatError` on a missing quote or a malformed escape.
    """
    if len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"':
        raise AnnotationFormatError(f"value is not double-quoted: {quoted[:40]!r}")
    body = quoted[1:-1]
    if "\\" not in body and '"' not in body:
        return body  # the common case: nothing escaped
    out: list[str] = []
    raw_bytes = bytearray()  # \xHH and octal escapes are bytes of a UTF-8 sequence

    def flush_bytes() -> None:
        if raw_bytes:
            out.append(raw_bytes.decode("utf-8", errors="replace"))
            raw_bytes.clear()

    i = 0
    while i < len(body):
        ch = body[i]
        if ch == '"':
            raise AnnotationFormatError(f"unescaped quote inside value: {quoted[:40]!r}")
        if ch != "\\":
            flush_bytes()
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(body):
            raise AnnotationFormatError(f"dangling backslash in value: {quoted[:40]!r}")
        esc = body[i + 1]
        if esc in _SIMPLE_ESCAPES:
            flush_bytes()
            out.append(_SIMPLE_ESCAPES[esc])
            i += 2
        elif esc in _HEX_WIDTH:
            width = _HEX_WIDTH[esc]
            digits = body[i + 2 : i + 2 + width]
            try:
                code = int(digits, 16) if len(digits) == width else -1
            except ValueError:
                code = -1
            if code < 0:
                raise AnnotationFormatError(f"bad \\{esc} escape in value: {quoted[:40]!r}")
            if esc == "x":
                raw_bytes.append(code)
            else:
                flush_bytes()
                out.append(chr(code))
            i += 2 + width
        elif esc in "01234567":
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or any(d not in "01234567" for d in digits) or int(digits, 8) > 255:
                raise AnnotationFormatError(f"bad octal escape in value: {quoted[:40]!r}")
            raw_bytes.append(int(digits, 8))
            i += 4
        else:
            raise AnnotationFormatError(f"unknown escape \\{esc} in value: {quoted[:40]!r}")
    flush_bytes()
    return "".join(out)


def parse_annotations(text: str) -> dict[str, str]:
    """Parse the whole file into a dict. Blank lines are ignored; a malformed line raises
    :class:`AnnotationFormatError` naming its line number."""
    result: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key:
            raise AnnotationFormatError(f'line {lineno}: expected key="value", got {line[:60]!r}')
        try:
            result[key] = unquote_go(value)
        except AnnotationFormatError as exc:
            raise AnnotationFormatError(f"line {lineno} ({key}): {exc}") from None
    return result
