"""Policy tuning: a grid of policy settings, the Pareto frontier of savings against wrong stops.

``--sweep 'plateau.probability=0.6,0.7,0.8,0.9' --sweep 'plateau.for=5m,10m,20m'`` names policy
fields by their path below ``spec.rules`` (``plateau.probability``) or below ``spec``
(``safety.minRuntime``), with the values to try; the grid is every combination. Each setting is
applied to every policy document of the file that has that rule or section (a file's pre-training
policy without a plateau rule keeps its own), and checked by the policy loader, so an unknown field
or a value out of range is one clear error before anything runs.

The frontier: a setting is on it when no other setting saves at least as much with no more wrong
stops (one better on either). The best setting within a wrong-stop budget (``--max-wrong 1%``) is
the one that saves most among those whose wrong-stop rate is *shown* to be within it: whose
one-sided 95% upper confidence bound (exact binomial, Clopper-Pearson) on the rate is within the
budget. The rate is over the runs the policy judged (selected, and looked at past its minRuntime,
minSteps and minProgress): 300 smoke tests over before any policy looks at them cannot be wrong
stops, and counted in they diluted the rate into any budget. 0 wrong stops of 30 runs bounds the
rate only below ~9.5%, so a small set of runs may qualify no setting at all; the command then
says so and names the best by point rate only as information. A setting whose rules judge a
metric no run reports is never named (``unnamed``): its rule judged nothing.

The frontier's plot is ``advisor.sweep_plot``'s.

Runs spread over a process pool (every core by default) or, with ``--ray ADDRESS``, a Ray cluster
(the optional ``ray`` extra), for grids that outgrow one machine.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CONFIDENCE",
    "Setting",
    "SweepError",
    "best_within",
    "edge_fields",
    "grid",
    "max_wrong_reading",
    "pareto",
    "parse_max_wrong",
    "parse_sweeps",
    "passed_over",
    "policies_with",
    "run_tasks",
    "spec_path",
    "sweep_table",
    "unnamed",
    "wrong_upper",
]

#: sections of ``spec`` a sweep may name directly (everything else is a rule under ``spec.rules``)
_SPEC_SECTIONS = ("safety", "selector")


class SweepError(ValueError):
    """A malformed sweep expression or a setting the policies reject (one line)."""


@dataclass(frozen=True)
class Setting:
    """One point of the grid: ``((field, value), ...)`` in the order the sweeps were given."""

    values: tuple[tuple[str, Any], ...]

    @property
    def label(self) -> str:
        return " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in self.values)


def _scalar(text: str) -> Any:
    """A number, ``true`` / ``false`` (a boolean field's values, as YAML 1.2 spells them: ``yes`` or
    ``on`` stay text, which a boolean field refuses by name), else the text."""
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    value = yaml.safe_load(text)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else text.strip()


def parse_sweeps(exprs: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """``["plateau.probability=0.6,0.7"]`` -> ``[("plateau.probability", [0.6, 0.7])]``."""
    out: list[tuple[str, list[Any]]] = []
    for expr in exprs:
        m = re.fullmatch(r"\s*([A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z][A-Za-z0-9]*)*)\s*=\s*(.+?)\s*", expr)
        if not m:
            raise SweepError(f"--sweep {expr!r}: expected FIELD=V1,V2,... (e.g. plateau.probability=0.7,0.8)")
        _check_field(expr, m.group(1))
        values = [v.strip() for v in m.group(2).split(",")]
        if any(not v for v in values):
            raise SweepError(f"--sweep {expr!r}: an empty value in the list")
        if m.group(1) in (f for f, _v in out):
            raise SweepError(f"--sweep {expr!r}: {m.group(1)} is swept twice")
        out.append((m.group(1), [_scalar(v) for v in values]))
    return out


def _sweepable() -> dict[str, bool]:
    """Every field a sweep may name (``plateau.probability``, ``safety.minRuntime``), from the
    policy model's schema, each with whether it is a map whose keys are free (``matchLabels``)."""
    from policies.crd import PolicySpec, object_schema

    out: dict[str, bool] = {}

    def walk(schema: Mapping[str, Any], path: str) -> None:
        props = schema.get("properties")
        if not props:
            out[path] = schema.get("type") == "object"
            return
        for key, sub in props.items():
            walk(sub, f"{path}.{key}")

    spec = object_schema(PolicySpec)["properties"]
    for rule, schema in spec["rules"]["properties"].items():
        walk(schema, rule)
    for section in _SPEC_SECTIONS:
        walk(spec[section], section)
    return out


def _check_field(expr: str, field: str) -> None:
    """An unknown field is told the fields there are (those of its rule, when it names one)."""
    fields = _sweepable()
    if field in fields or any(field.startswith(f"{f}.") for f, free in fields.items() if free):
        return
    head = field.split(".")[0]
    own = [f for f in fields if f.split(".")[0] == head]
    if own:
        valid = ", ".join(own)
    else:
        heads = list(dict.fromkeys(f.split(".")[0] for f in fields))
        valid = "RULE.FIELD or SECTION.FIELD, such as plateau.probability, plateau.for, safety.minRuntime"
        valid += f"; rules and sections: {', '.join(heads)}"
    raise SweepError(f"--sweep {expr!r}: unknown policy field {field!r} (valid: {valid})")


def grid(sweeps: Sequence[tuple[str, list[Any]]]) -> list[Setting]:
    fields = [f for f, _v in sweeps]
    return [
        Setting(tuple(zip(fields, combo, strict=True)))
        for combo in itertools.product(*(v for _f, v in sweeps))
    ]


def spec_path(field: str) -> str:
    """Where a sweep field lives in an AdvisorPolicy: ``plateau.for`` is ``spec.rules.plateau.for``,
    ``safety.cooldown`` is ``spec.safety.cooldown``."""
    head = field.split(".", 1)[0]
    return f"spec.{field}" if head in _SPEC_SECTIONS else f"spec.rules.{field}"


def _set(doc: dict[str, Any], field: str, value: Any) -> bool:
    """Set ``field`` in one policy document; False when the document has no such rule/section."""
    head, *rest = field.split(".")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return False
    parent = spec if head in _SPEC_SECTIONS else spec.get("rules")
    if not isinstance(parent, dict) or not isinstance(parent.get(head), dict):
        return False
    node = parent[head]
    for key in rest[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            return False
    node[rest[-1]] = value
    return True


def policies_with(path: Path, setting: Setting) -> list[Any]:
    """The policies of ``path`` with ``setting`` applied (validated by the policy loader)."""
    from policies import PolicyError, load_policy

    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise SweepError(f"{path}: {exc}") from None
    docs = copy.deepcopy(docs)
    for field, value in setting.values:
        applied = [_set(d, field, value) for d in docs if isinstance(d, dict)]  # every document, no short cut
        if not any(applied):
            raise SweepError(
                f"--sweep {field}: no policy in {path} has a {field.split('.')[0]!r} rule or section"
            )
    out = []
    for doc in docs:
        try:
            out.append(load_policy(doc))
        except PolicyError as exc:
            raise SweepError(f"--sweep {setting.label}: {path}: " + str(exc).replace("\n", "; ")) from None
    return out


def parse_max_wrong(text: str) -> float:
    """``1%`` -> 0.01. A bare number is read as a fraction (``0.02`` is 2%) only below 1; a bare
    number of 1 or more (``1``, ``2``) is an error asking for the ``%`` sign rather than a guess:
    ``1`` read as 100% picked a "best" setting at any wrong-stop rate (an admin meant 1%)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(%?)\s*", text)
    if not m:
        raise SweepError(f"--max-wrong {text!r}: expected a share of runs with a % sign, e.g. 1% or 0.5%")
    number = float(m.group(1))
    if not m.group(2) and number >= 1:
        raise SweepError(f"--max-wrong {text!r}: write the % sign (--max-wrong {m.group(1)}%)")
    value = number / (100.0 if m.group(2) else 1.0)
    if not 0 <= value <= 1:
        raise SweepError(f"--max-wrong {text!r}: must be between 0 and 100%")
    return value


def max_wrong_reading(text: str) -> str | None:
    """How a bare ``--max-wrong`` fraction was read (``0.5`` -> ``"--max-wrong 0.5 read as the
    fraction 50.00%"``); None for the ``%`` form, which says what it means."""
    if "%" in text:
        return None
    return f"--max-wrong {text.strip()} read as the fraction {parse_max_wrong(text):.2%}"


#: the one-sided confidence of the wrong-stop rate's upper bound
CONFIDENCE = 0.95


def wrong_upper(wrong: int, runs: int, confidence: float = CONFIDENCE) -> float:
    """One-sided upper confidence bound on a wrong-stop rate from ``wrong`` of ``runs`` (exact
    binomial, Clopper-Pearson): 0 of 30 -> ~0.095. No runs bound nothing (1.0)."""
    if runs <= 0 or wrong >= runs:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(confidence, wrong + 1, runs - wrong))


def edge_fields(points: Sequence[Mapping[str, Any]], index: int) -> list[str]:
    """The swept fields (with two or more values) whose value at ``points[index]`` is an end of
    the values tried (smallest or largest when they are numbers, else first or last given), as
    ``field=value``."""
    values: dict[str, list[Any]] = {}
    for p in points:
        for field, value in p["setting"].items():
            seen = values.setdefault(field, [])
            if value not in seen:
                seen.append(value)
    out = []
    for field, tried in values.items():
        if len(tried) < 2 or all(isinstance(v, bool) for v in tried):
            continue  # a boolean has no values beyond those tried
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in tried)
        if not numeric and not all(_a_duration(v) for v in tried):
            continue  # neither do names (a metric, an action): nothing lies beyond the last one given
        ends = (min(tried), max(tried)) if numeric else (tried[0], tried[-1])
        value = points[index]["setting"][field]
        if value in ends:
            out.append(f"{field}={value}")
    return out


def _a_duration(value: Any) -> bool:
    """Whether a swept value is a duration (``10m``): ordered, with values beyond those tried."""
    from policies.fields import parse_duration

    try:
        parse_duration(value)
    except ValueError:
        return False
    return True


def pareto(points: Sequence[Mapping[str, Any]], saved: str = "saved", wrong: str = "wrong") -> list[int]:
    """Indices of the points no other point dominates (saves at least as much with no more wrong
    stops, and is better on one), by increasing wrong stops."""
    keep = []
    for i, p in enumerate(points):
        dominated = any(
            q[saved] >= p[saved] and q[wrong] <= p[wrong] and (q[saved] > p[saved] or q[wrong] < p[wrong])
            for j, q in enumerate(points)
            if j != i
        )
        if not dominated:
            keep.append(i)
    return sorted(keep, key=lambda i: (points[i][wrong], -points[i][saved]))


def best_within(
    points: Sequence[Mapping[str, Any]],
    budget: float,
    rate: str = "wrong_rate",
    exclude: Collection[int] = (),
) -> int | None:
    """The point that saves most among those whose wrong-stop rate is within ``budget``, leaving
    out the points ``exclude`` names (``unnamed``: settings that cannot be recommended)."""
    ok = [i for i, p in enumerate(points) if p[rate] <= budget and i not in exclude]
    return max(ok, key=lambda i: points[i]["saved"]) if ok else None


def unnamed(points: Sequence[Mapping[str, Any]]) -> list[int]:
    """The points never named the best setting: those whose rules judge a metric no run reports
    (``unreported_metrics``). Such a setting's rule judged nothing, so its "no wrong stops" is no
    verdict, and writing it into the policy would switch that rule off; it stays in the table and
    on the frontier, with its note."""
    return [i for i, p in enumerate(points) if p.get("unreported_metrics")]


def passed_over(
    points: Sequence[Mapping[str, Any]], budget: float, rate: str, exclude: Collection[int]
) -> int | None:
    """The point ``best_within`` would have named had ``exclude`` not left it out; None when it
    names the same point either way."""
    first = best_within(points, budget, rate)
    return first if first is not None and first in exclude else None


def default_workers() -> int:
    """Every core this process may run on (the pool's default, for sweeps and seed ranges)."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def run_tasks(
    fn: Callable[[Any], Any],
    tasks: Iterable[Any],
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    on_done: Callable[[], None] | None = None,
) -> list[Any]:
    """``[fn(t) for t in tasks]`` in order, on a process pool (``workers``, default every core; 1:
    here) or on the Ray cluster at ``ray_address``. ``fn`` and the tasks must pickle."""
    items = list(tasks)
    if ray_address is not None:
        try:
            import ray
        except ImportError:
            raise SweepError(
                "--ray needs ray, which is not installed: pip install 'trainjob-advisor[ray]'"
            ) from None
        try:
            ray.init(address=ray_address, ignore_reinit_error=True, log_to_driver=False)
        except ConnectionError as exc:
            # no Ray cluster at that address (``auto`` with none running): the user's to fix
            raise SweepError(
                f"--ray {ray_address}: no Ray cluster to connect to ({exc}); start one (ray start --head) "
                "or give --ray local for one on this machine"
            ) from None
        remote = ray.remote(fn)
        refs = [remote.remote(t) for t in items]
        out = []
        for ref in refs:
            out.append(ray.get(ref))
            if on_done is not None:
                on_done()
        return out
    n = default_workers() if workers is None else workers
    if n <= 1 or len(items) <= 1:
        results = []
        for t in items:
            results.append(fn(t))
            if on_done is not None:
                on_done()
        return results
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(n, len(items))) as ex:
        futures = [ex.submit(fn, t) for t in items]
        results = []
        for f in futures:
            results.append(f.result())
            if on_done is not None:
                on_done()
        return results


def sweep_table(points: Sequence[Mapping[str, Any]], frontier: Sequence[int], best: int | None) -> str:
    """One line per setting: saved (pooled, and min / median / max over seeds when there are
    several), wrong stops at 0.5/1/2%, the 1% wrong-stop rate and its 95% upper bound, near-end
    releases; ``*`` marks the frontier, ``>`` the best.
    Without a spread (one seed, or ``backtest``'s real runs, which have no seeds) the min / median
    / max column is left out rather than filled with dashes."""
    spreads = any(p.get("spread") for p in points)
    header = [
        "",
        "setting",
        "non-learn saved",
        "min / median / max",
        "wrong .5/1/2%",
        "wrong rate",
        f"upper {CONFIDENCE:.0%}",
        "near-end",
    ]
    body = []
    for i, p in enumerate(points):
        spread = p.get("spread")
        w = p["wrong_by_threshold"]
        mark = (">" if i == best else " ") + ("*" if i in frontier else " ")
        body.append(
            [
                mark,
                p["label"],
                f"{p['saved']:.1%}",
                "-" if not spread else " / ".join(f"{v:.0%}" for v in spread),
                f"{w.get('0.005', 0)}/{w.get('0.01', 0)}/{w.get('0.02', 0)}",
                f"{p['wrong_rate']:.2%}",
                "-" if p.get("wrong_upper") is None else f"{p['wrong_upper']:.2%}",
                str(p.get("near_end", 0)),
            ]
        )
    if not spreads:
        for cells in (header, *body):
            del cells[3]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(b) for b in body)])
