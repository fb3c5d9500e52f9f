"""The downward-API annotations file: Go-quoted values, one per line, parsed exactly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.training.annotations import AnnotationFormatError, parse_annotations, unquote_go
from advisor.training.localpod import format_annotations, quote_go


def test_parses_the_kubelet_format() -> None:
    text = (
        'advisor.trainjob-advisor.io/checkpoint-request="1732960000123"\n'
        'kubernetes.io/config.seen="2026-11-30T10:00:00.000000000Z"\n'
        'note="line one\\nline \\"two\\"\\t\\u00e9"\n'
    )
    assert parse_annotations(text) == {
        "advisor.trainjob-advisor.io/checkpoint-request": "1732960000123",
        "kubernetes.io/config.seen": "2026-11-30T10:00:00.000000000Z",
        "note": 'line one\nline "two"\té',
    }


def test_value_may_contain_equals_signs_and_blank_lines_are_ignored() -> None:
    assert parse_annotations('\na="x=y=z"\n\n') == {"a": "x=y=z"}


def test_byte_escapes_form_utf8() -> None:
    assert unquote_go('"\\xc3\\xa9-\\303\\251"') == "é-é"


@pytest.mark.parametrize(
    "line",
    ["no-equals-sign", "key=unquoted", 'key="dangling\\"', 'key="bad \\q escape"', 'key="\\x4"', '="v"'],
)
def test_malformed_lines_raise_with_the_line_number(line: str) -> None:
    with pytest.raises(AnnotationFormatError, match="line 2"):
        parse_annotations(f'ok="1"\n{line}\n')


@given(st.dictionaries(st.from_regex(r"[a-z0-9./-]{1,30}", fullmatch=True), st.text(max_size=40), max_size=6))
def test_round_trip_through_go_quoting(annotations: dict[str, str]) -> None:
    assert parse_annotations(format_annotations(annotations)) == annotations


def test_quote_go_matches_strconv_quote_on_known_cases() -> None:
    # expected values are what Go's strconv.Quote returns for these inputs
    assert quote_go('a"b\\c') == '"a\\"b\\\\c"'
    assert quote_go("tab\there\n") == '"tab\\there\\n"'
    assert quote_go("\x01") == '"\\x01"'
    assert quote_go("é") == '"é"'
