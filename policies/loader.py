"""Loading AdvisorPolicy objects from YAML, JSON or dicts into validated ``Policy`` values.

The loader walks the ``FieldSpec`` of each dataclass (``policies.fields``), so it knows exactly
what the CRD schema knows. It collects every problem with its field path before raising one
``PolicyError``, and it rejects unknown fields (a misspelt ``probabilty`` must not silently fall
back to a default), as ``kubectl`` does with strict field validation.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from advisor.protocol import GROUP, VERSION
from advisor.sources.normalize import canonical_name, series_name
from policies.errors import PolicyError
from policies.fields import MAX_ITEMS, MAX_STRING, FieldSpec, field_specs, parse_duration
from policies.spec import Policy, PolicySpec

#: what a metric that is the training loss is called (canonical names)
_TRAINING_LOSS_NAMES = ("loss", "train_loss", "training_loss")

__all__ = [
    "API_VERSION",
    "KIND",
    "load_policies",
    "load_policy",
    "parse_spec",
    "policies_from_text",
    "read_policy_file",
    "yaml_problem",
]

API_VERSION = f"{GROUP}/{VERSION}"
KIND = "AdvisorPolicy"
#: metadata.name of a cluster-scoped object: a DNS-1123 subdomain
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
_NAME_RE = re.compile(NAME_PATTERN)

Errors = list[tuple[str, str]]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _scalar(spec: FieldSpec, value: Any, path: str, errors: Errors) -> Any:
    kind = spec.kind
    if kind == "bool":
        if isinstance(value, bool):
            return value
        errors.append((path, f"must be a boolean, got {value!r}"))
        return None
    if kind in ("int", "float"):
        ok = isinstance(value, int) if kind == "int" else isinstance(value, int | float)
        if isinstance(value, bool) or not ok:
            errors.append((path, f"must be {'an integer' if kind == 'int' else 'a number'}, got {value!r}"))
            return None
        if isinstance(value, float) and not math.isfinite(value):
            errors.append((path, f"must be finite, got {value!r}"))
            return None
        _check_range(spec, value, path, errors)
        return float(value) if kind == "float" else int(value)
    if kind == "duration":
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            errors.append((path, str(exc)))
            return None
        _check_range(spec, seconds, path, errors)
        return seconds
    if kind in ("str", "enum"):
        if not isinstance(value, str):
            errors.append((path, f"must be a string, got {value!r}"))
            return None
        if kind == "enum" and value not in spec.enum:
            errors.append((path, f"must be one of {', '.join(spec.enum)}, got {value!r}"))
            return None
        if spec.min_length is not None and len(value) < spec.min_length:
            errors.append(
                (
                    path,
                    "must not be empty"
                    if spec.min_length == 1
                    else f"must be at least {spec.min_length} characters",
                )
            )
        limit = spec.max_length if spec.max_length is not None else MAX_STRING
        if len(value) > limit:
            errors.append((path, f"must be at most {limit} characters"))
        return spec.cls(value) if spec.cls is not None else value
    raise AssertionError(kind)


def _check_range(spec: FieldSpec, value: float, path: str, errors: Errors) -> None:
    lo, hi = spec.minimum, spec.maximum
    bad = (lo is not None and (value <= lo if spec.exclusive_minimum else value < lo)) or (
        hi is not None and (value >= hi if spec.exclusive_maximum else value > hi)
    )
    if bad:
        shown = int(value) if float(value).is_integer() else value
        errors.append((path, f"must be in {spec.bounds_text()}, got {shown}"))


def _value(spec: FieldSpec, value: Any, path: str, errors: Errors) -> Any:
    if spec.kind == "object":
        assert spec.cls is not None
        return _bind(spec.cls, value, path, errors)
    if spec.kind in ("objlist", "strlist"):
        if not isinstance(value, list | tuple):
            errors.append((path, f"must be a list, got {value!r}"))
            return None
        if len(value) > MAX_ITEMS:
            errors.append((path, f"must have at most {MAX_ITEMS} items, got {len(value)}"))
            return None
        out = []
        for i, item in enumerate(value):
            ipath = f"{path}[{i}]"
            if spec.kind == "objlist":
                assert spec.cls is not None
                out.append(_bind(spec.cls, item, ipath, errors))
            elif isinstance(item, str) and 0 < len(item) <= MAX_STRING:
                out.append(item)
            else:
                errors.append(
                    (ipath, f"must be a non-empty string of at most {MAX_STRING} characters, got {item!r}")
                )
        return tuple(out)
    if spec.kind == "strmap":
        if not isinstance(value, Mapping):
            errors.append((path, f"must be a map of strings, got {value!r}"))
            return None
        if len(value) > MAX_ITEMS:
            errors.append((path, f"must have at most {MAX_ITEMS} entries, got {len(value)}"))
            return None
        for k, v in value.items():
            if not isinstance(v, str) or len(v) > MAX_STRING:
                errors.append(
                    (_join(path, str(k)), f"must be a string of at most {MAX_STRING} characters, got {v!r}")
                )
            elif spec.enum and v not in spec.enum:
                errors.append((_join(path, str(k)), f"must be one of {', '.join(spec.enum)}, got {v!r}"))
        return {str(k): v for k, v in value.items() if isinstance(v, str)}  # a dict: policies must pickle
    return _scalar(spec, value, path, errors)


def _bind(cls: type, data: Any, path: str, errors: Errors) -> Any:
    """Build ``cls`` from a mapping, appending every problem to ``errors``."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        errors.append((path, f"must be an object, got {data!r}"))
        return None
    specs = field_specs(cls)
    known = {spec.key for _, spec, _ in specs}
    for key in data:
        if key not in known:
            errors.append((_join(path, str(key)), f"unknown field (known: {', '.join(sorted(known))})"))
    kwargs: dict[str, Any] = {}
    before = len(errors)
    for attr, spec, _ in specs:
        if spec.required and data.get(spec.key) is None:
            errors.append((_join(path, spec.key), "is required"))
            continue
        if spec.key not in data:
            continue
        raw = data[spec.key]
        fpath = _join(path, spec.key)
        if raw is None:  # the API server drops nulls before validating; so do we (default applies)
            continue
        value = _value(spec, raw, fpath, errors)
        if value is not None:
            kwargs[attr] = value
    if len(errors) > before:
        return None
    obj = cls(**kwargs)
    check = getattr(obj, "check", None)
    if check is not None:
        errors.extend((_join(path, sub), reason) for sub, reason in check())
    return obj


def parse_spec(spec: Any, *, path: str = "spec") -> PolicySpec:
    """Validate a bare ``spec`` mapping (raises ``PolicyError`` listing every problem)."""
    errors: Errors = []
    out = _bind(PolicySpec, spec, path, errors)
    if errors or out is None:
        raise PolicyError("", errors=errors or [(path, "invalid")])
    return _series_named(out)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping: YAML says keys are unique, and
    PyYAML's silent "last one wins" would let a second ``probability:`` override the first
    unnoticed (kubectl's strict field validation rejects it too). Every such key is collected in
    ``duplicates`` (line, key) as the documents are built, so that all of them are reported, not
    the one whose mapping happens to be built first."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[tuple[int, str]] = []


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str | int | float | bool):
            continue  # unhashable keys are left to construct_mapping's own error
        if key in seen:
            loader.duplicates.append((key_node.start_mark.line + 1, f"duplicate key {key!r}"))
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for a YAML error: where (line and column) and what, without PyYAML's excerpt of
    the text and its caret (several lines that a terminal or a status condition breaks up)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}" + (f" ({context})" if context else "")


def _load_all(text: str) -> list[Any]:
    """The documents of ``text`` (as ``yaml.load_all`` with a SafeLoader); raises ``PolicyError``
    naming every duplicate key, in file order."""
    loader = _StrictLoader(text)
    try:
        docs = []
        while loader.check_data():
            docs.append(loader.get_data())
    finally:
        loader.dispose()
    if loader.duplicates:
        found = sorted(loader.duplicates)
        raise PolicyError("", errors=[("", f"line {line}: {what}") for line, what in found])
    return [d for d in docs if d is not None]


def _parse_text(text: str) -> list[Any]:
    try:
        return _load_all(text)
    except yaml.constructor.ConstructorError as exc:
        raise PolicyError("", f"not valid YAML or JSON: {yaml_problem(exc)}") from None
    except yaml.YAMLError as exc:
        try:  # JSON is YAML, but JSON's own error message is clearer for JSON input
            return [json.loads(text)]
        except ValueError:
            raise PolicyError("", f"not valid YAML or JSON: {yaml_problem(exc)}") from None


def load_policy(obj: Mapping[str, Any] | str) -> Policy:
    """One AdvisorPolicy from a dict or YAML/JSON text; raises ``PolicyError(path, reason)``."""
    if isinstance(obj, str):
        docs = _parse_text(obj)
        if len(docs) != 1:
            raise PolicyError("", f"expected exactly one AdvisorPolicy document, got {len(docs)}")
        obj = docs[0]
    if not isinstance(obj, Mapping):
        raise PolicyError("", f"an AdvisorPolicy must be an object, got {type(obj).__name__}")
    errors: Errors = []
    for key, want in (("apiVersion", API_VERSION), ("kind", KIND)):
        if key not in obj:
            errors.append((key, f"is required ({want})"))
        elif obj[key] != want:
            errors.append((key, f"must be {want}, got {obj[key]!r}"))
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        errors.append(("metadata.name", "is required"))
    elif len(name) > 253 or not _NAME_RE.match(name):
        errors.append(("metadata.name", f"must be a DNS-1123 subdomain, got {name!r}"))
    for key in obj:
        if key not in ("apiVersion", "kind", "metadata", "spec", "status"):
            errors.append((str(key), "unknown field"))
    spec = _bind(PolicySpec, obj.get("spec"), "spec", errors)
    if spec is not None:
        _check_across_fields(spec, errors)
    if errors or spec is None:
        raise PolicyError("", errors=errors)
    assert isinstance(name, str)
    return Policy(name=name, spec=_series_named(spec))


def _check_across_fields(spec: PolicySpec, errors: Errors) -> None:
    """What no one field's type says: the overfitting rule compares an eval metric with the
    training loss, so naming the training loss as its metric judges nothing (it said "no
    judgement" at every look, silently)."""
    overfitting = spec.rules.overfitting
    if overfitting is not None and canonical_name(overfitting.metric) in _TRAINING_LOSS_NAMES:
        errors.append(
            (
                "spec.rules.overfitting.metric",
                f"{overfitting.metric!r} is the training loss; overfitting is an eval metric's turn while "
                "the training loss falls: name an eval metric (eval_loss, eval_accuracy, ...) or leave it "
                "empty for the job's primary one",
            )
        )


def _series_named(spec: PolicySpec) -> PolicySpec:
    """``spec`` with each rule's ``metric:`` spelt as the history names the series it denotes
    (``series_name``): written as the trainer logs it (``eval_rougeL``, ``val_loss``,
    ``train_loss``), a rule had looked for a series under a name the history never keeps, and
    judged nothing, silently."""
    rules = spec.rules
    plateau, overfitting = rules.plateau, rules.overfitting
    if plateau is not None and plateau.metric:
        plateau = replace(plateau, metric=series_name(plateau.metric))
    if overfitting is not None and overfitting.metric:
        overfitting = replace(overfitting, metric=series_name(overfitting.metric))
    if plateau is rules.plateau and overfitting is rules.overfitting:
        return spec
    return replace(spec, rules=replace(rules, plateau=plateau, overfitting=overfitting))


def read_policy_file(path: Path) -> str:
    """The text of a policy file; a binary file is a ``PolicyError``, not a UnicodeDecodeError
    (``OSError`` is left to the caller, who knows how to say that it cannot read)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PolicyError("", "not UTF-8 text (a binary file?)") from None


def load_policies(source: str | Path) -> list[Policy]:
    """Every AdvisorPolicy in a multi-document YAML file (a path) or text.

    A ``str`` that names an existing file is read; any other string is parsed as YAML/JSON text.
    Errors from document *i* are reported with the path prefixed ``[i]``.
    """
    text: str
    if isinstance(source, Path):
        text = read_policy_file(source)
    elif "\n" not in source and len(source) < 4096 and _is_file(source):
        text = read_policy_file(Path(source))
    else:
        text = source
    return policies_from_text(text)


def _is_file(name: str) -> bool:
    try:
        return Path(name).is_file()
    except OSError:  # a one-line document is no file name ("File name too long")
        return False


def _job_state(doc: Mapping[str, Any]) -> bool:
    """A job state (``policy explain --job-state``'s input: ``job``, ``now``, ``cluster``) given
    where a policy was meant: no field of a Kubernetes object, and its ``job``. Said as such, not
    as a policy missing its apiVersion, kind and name with three unknown fields."""
    return "job" in doc and not any(k in doc for k in ("apiVersion", "kind", "metadata", "spec"))


def _foreign_kind(doc: Mapping[str, Any]) -> str:
    return (
        "a job state, as policy explain --job-state reads" if _job_state(doc) else str(doc.get("kind") or "?")
    )


def _foreign(doc: object) -> bool:
    if not isinstance(doc, Mapping):
        return False
    if _job_state(doc):
        return True
    api, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api, str) or kind == "AdvisorPolicy":
        return False  # an AdvisorPolicy with a wrong apiVersion is a mistake to report
    group = api.split("/", 1)[0] if "/" in api else ""  # "v1": the core group
    return group != GROUP


def policies_from_text(
    text: str, *, skipped: list[str] | None = None, loaded: list[Policy] | None = None
) -> list[Policy]:
    """Every AdvisorPolicy in YAML/JSON text (see ``load_policies``). Given a ``skipped`` list,
    documents of other API groups (a TrainJob, a runtime, RBAC in the same manifests folder) are
    left out and their kinds appended to it, rather than reported as invalid policies. Given a
    ``loaded`` list, the policies that load are appended to it even when others in the text do
    not (``policy validate`` warns of them beside the errors)."""
    docs = _parse_text(text)
    if skipped is not None:
        skipped.extend(_foreign_kind(d) for d in docs if _foreign(d))
        docs = [d for d in docs if not _foreign(d)]
    policies: list[Policy] = []
    errors: Errors = []
    for i, doc in enumerate(docs):
        if isinstance(doc, Mapping) and _job_state(doc):
            prefix = f"[{i}]" if len(docs) > 1 else ""
            errors.append((prefix, "not an AdvisorPolicy: a job state, as policy explain --job-state reads"))
            continue
        try:
            policies.append(load_policy(doc))
            if loaded is not None:
                loaded.append(policies[-1])
        except PolicyError as exc:
            prefix = f"[{i}]" if len(docs) > 1 else ""
            errors.extend((f"{prefix}.{p}" if prefix and p else prefix + p, r) for p, r in exc.errors)
    if errors:
        raise PolicyError("", errors=errors)
    names = [p.name for p in policies]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise PolicyError("metadata.name", f"duplicate policy name(s): {', '.join(dupes)}")
    return policies
