"""Prometheus metrics of the controller (``trainjob_advisor_*``).

A dedicated ``CollectorRegistry`` per ``Metrics`` object, so that tests and benchmarks can run
several controllers in one process. Per-job gauges are removed when a job goes away, and the
per-queue gauges are rebuilt from the same ``summarize`` the CLI uses, so a dashboard and
``trainjob-advisor status --by queue`` never disagree.

A job's series are labelled ``namespace``, ``kind`` (TrainJob, PyTorchJob) and ``job`` (its
name): a TrainJob and a PyTorchJob may share a name in one namespace (the controller advises the
kind it saw first), and a series named by namespace and name alone would not say which it is.
``trainjob_advisor_actions_total`` carries the ``policy`` whose decision it counts (empty for
the advisor undoing its own write on a job no policy governs any more): policies are few, so
the label's cardinality stays bounded.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from advisor.controller.render import judged_forecast, shows_eta
from advisor.controller.summary import HORIZONS, NOT_LEARNING, QueueSummary
from advisor.forecast.core import holds_trend
from advisor.model import LEARNING_LABELS, ActionKind, JobView, Phase

__all__ = ["Metrics"]

# no ``*_created`` series beside each counter and histogram: a timestamp per label set that
# doubles the counters' series and that no query of docs/metrics.md reads (a platform trial
# counted 24 of them)
disable_created_metrics()

_JOB = ("namespace", "kind", "job")
#: latency buckets (seconds) of the update pipeline, wide enough that an overloaded controller
#: still lands in a finite bucket
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


#: what the controller writes besides the actions on jobs (``api_writes`` / ``write_errors`` kinds)
WRITE_KINDS = ("event", "trainjobforecast-status", "advisorpolicy-status")


class Metrics:
    """``per_job=False`` (``run --no-job-metrics``): no series names a job (namespace and name,
    step, forecast), for clusters where the metrics endpoint may not reveal tenants' runs; the
    per-queue and controller series stay."""

    def __init__(self, registry: CollectorRegistry | None = None, *, per_job: bool = True) -> None:
        self.per_job = per_job
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.progress = Gauge(
            "trainjob_advisor_job_progress_ratio", "Fraction of total steps done", _JOB, registry=r
        )
        self.step = Gauge("trainjob_advisor_job_step", "Latest observed step", _JOB, registry=r)
        self.eta = Gauge(
            "trainjob_advisor_job_eta_seconds", "Forecast time to completion (mean)", _JOB, registry=r
        )
        self.plateau = Gauge(
            "trainjob_advisor_job_plateau_probability",
            "P(plateau) of the series the run is judged by (the PLATEAU column)",
            _JOB,
            registry=r,
        )
        self.divergence = Gauge(
            "trainjob_advisor_job_divergence_probability", "P(divergence)", _JOB, registry=r
        )
        self.final_loss = Gauge(
            "trainjob_advisor_job_predicted_final_loss", "Predicted final loss (mean)", _JOB, registry=r
        )
        self.learning_state = Gauge(
            "trainjob_advisor_job_learning_state_probability",
            "P(each learning state) of the run (learning, plateaued, overfitting, diverging, hung)",
            (*_JOB, "state"),
            registry=r,
        )
        self.best_eval_step = Gauge(
            "trainjob_advisor_job_best_eval_step", "Step of the best eval value so far", _JOB, registry=r
        )
        self.final_value = Gauge(
            "trainjob_advisor_job_predicted_final_value",
            "Predicted final value (mean) of each series the run reports: the training loss "
            "(series=loss) and each eval metric, in its own units",
            (*_JOB, "series"),
            registry=r,
        )
        self.judged = Gauge(
            "trainjob_advisor_job_judged_series_info",
            "The series the run is judged by (1): its eval metric, else the training loss",
            (*_JOB, "series"),
            registry=r,
        )
        #: the series labels set per job, to remove them with the job (or when a series goes)
        self._series: dict[tuple[str, str, str], set[tuple[str, ...]]] = {}
        self.actions = Counter(
            "trainjob_advisor_actions_total",
            "Actions by policy, kind, mode and outcome",
            ("policy", "kind", "mode", "outcome"),
            registry=r,
        )
        self.forecast_latency = Histogram(
            "trainjob_advisor_forecast_duration_seconds",
            "Time to evaluate one job (forecast + policy)",
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
        )
        self.update_latency = Histogram(
            "trainjob_advisor_update_to_status_seconds",
            "Time from observing a progress update to writing the TrainJobForecast that reflects it",
            registry=r,
            buckets=LATENCY_BUCKETS,
        )
        self.pipeline = Histogram(
            "trainjob_advisor_pipeline_seconds",
            "Where a progress update spends its time on the way to the TrainJobForecast: "
            "watch (reported -> event received), queue (received -> applied by the engine), "
            "engine (applied -> status handed to the writer), writer_wait (handed -> write started), "
            "write (one API write)",
            ("stage",),
            registry=r,
            buckets=LATENCY_BUCKETS,
        )
        self.non_learning_gpu_hours = Counter(
            "trainjob_advisor_non_learning_gpu_hours_total",
            "GPU-hours held by runs while their state was "
            f"{', '.join(NOT_LEARNING[:-1])} or {NOT_LEARNING[-1]} (not learning)",
            ("namespace",),
            registry=r,
        )
        self.samples = Counter(
            "trainjob_advisor_samples_total", "Progress samples by outcome", ("result",), registry=r
        )
        self.forged_acks = Counter(
            "trainjob_advisor_forged_acknowledgements_total",
            "Checkpoint acknowledgements naming a request the job never had (ignored)",
            registry=r,
        )
        self.api_writes = Counter(
            "trainjob_advisor_api_writes_total", "Writes to the API server by kind", ("kind",), registry=r
        )
        self.status_writes = Counter(
            "trainjob_advisor_status_writes_total",
            "TrainJobForecast status writes by form: full (merge patch) or delta (JSON patch appending "
            "the new history points)",
            ("form",),
            registry=r,
        )
        self.write_errors = Counter(
            "trainjob_advisor_api_write_errors_total", "Failed writes by kind", ("kind",), registry=r
        )
        self.api_unreachable = Gauge(
            "trainjob_advisor_api_unreachable_seconds",
            "How long the controller's writes have failed for want of the API server (refused, timed "
            "out, 429/5xx, no answer since); 0 while it reaches it. Alert on this rather than on the "
            "write errors, which count every retry",
            registry=r,
        )
        self.jobs = Gauge("trainjob_advisor_watched_jobs", "Jobs the controller currently tracks", registry=r)
        from advisor import __version__

        self.build_info = Gauge(
            "trainjob_advisor_build_info",
            "1, labelled with the controller's version",
            ("version",),
            registry=r,
        )
        self.build_info.labels(__version__).set(1)
        self.leader = Gauge(
            "trainjob_advisor_leader",
            "1 while this replica holds the leader Lease and may act (1 without leader election)",
            registry=r,
        )
        self.leader.set(1)
        self.policies_listed = Gauge(
            "trainjob_advisor_policies_listed",
            "0 while the AdvisorPolicies could not be listed since start-up: no job is acted on",
            registry=r,
        )
        self.policies_listed.set(1)
        self.queue_jobs = Gauge(
            "trainjob_advisor_queue_jobs", "Runs per queue and state", ("queue", "state"), registry=r
        )
        self.queue_gpus = Gauge(
            "trainjob_advisor_queue_gpus", "GPUs held by advised runs", ("queue",), registry=r
        )
        self.queue_not_learning = Gauge(
            "trainjob_advisor_queue_gpus_not_learning",
            "GPUs held by runs that no longer learn",
            ("queue",),
            registry=r,
        )
        self.queue_freeing = Gauge(
            "trainjob_advisor_queue_gpus_expected_free",
            "GPUs expected to free up within the horizon (from ETA intervals)",
            ("queue", "horizon"),
            registry=r,
        )
        # every write counter with each kind it counts at 0 from the start: a series that appears
        # only at its first failure gives rate() and increase() nothing to compare it with, and an
        # alert on it misses that first failure (a platform trial found them absent until then)
        for kind in (*WRITE_KINDS, *(k.value for k in ActionKind if k is not ActionKind.RECOMMEND)):
            self.write_errors.labels(kind)
            self.api_writes.labels(kind)
        for form in ("full", "delta"):
            self.status_writes.labels(form)

    # ---------------------------------------------------------------------------------- per job
    def observe_job(self, view: JobView, *, state: str | None = None) -> None:
        """The job's gauges; ``state``: its STATE, without an ETA while hung or not running (as
        the column shows)."""
        if not self.per_job:
            return
        labels = (view.namespace, view.kind, view.name)
        self.step.labels(*labels).set(view.step)
        if view.total_steps:
            self.progress.labels(*labels).set(min(1.0, view.step / view.total_steps))
        fc = view.forecast
        learning = view.learning_state
        if view.phase is not Phase.RUNNING:
            # finished, released, suspended, queued: no verdict of a run that does not run stays
            # on a dashboard or fires an alert (STATE shows the phase); its final values stay
            self._forget_verdicts(*labels)
        elif fc is not None or learning is not None:
            judged = judged_forecast(view)[1] or fc
            # "don't know" (no finite forecast, or fewer points than hold a trend: the PLATEAU
            # column's "-") is no series: its 0.5 fired alerts on every job in its first minute
            known = judged is not None and math.isfinite(judged.final_loss.mean) and holds_trend(judged)
            if known and judged is not None:
                self.plateau.labels(*labels).set(judged.plateau_probability)
            else:
                with contextlib.suppress(KeyError):
                    self.plateau.remove(*labels)
            if fc is not None:
                self.divergence.labels(*labels).set(fc.divergence_probability)
            if (
                fc is not None
                and fc.eta_seconds is not None
                and math.isfinite(fc.eta_seconds.mean)
                and (state is None or shows_eta(state))
            ):
                self.eta.labels(*labels).set(fc.eta_seconds.mean)
            else:
                with contextlib.suppress(KeyError):
                    self.eta.remove(*labels)
            if learning is not None and (known or learning.label in ("diverging", "hung")):
                for label, p in learning.probabilities.items():
                    self.learning_state.labels(*labels, label).set(p)
            elif learning is not None:
                # the state of a run whose judged series holds no trend yet reads its even odds
                # of plateaued and learning, the same "don't know"
                for label in LEARNING_LABELS:
                    with contextlib.suppress(KeyError):
                        self.learning_state.remove(*labels, label)
        if fc is None and learning is None:
            return
        if fc is not None and math.isfinite(fc.final_loss.mean):
            self.final_loss.labels(*labels).set(fc.final_loss.mean)
        if learning is not None and learning.best_step is not None:
            self.best_eval_step.labels(*labels).set(learning.best_step)
        self._observe_series(view)

    def _forget_verdicts(self, namespace: str, kind: str, name: str) -> None:
        """Remove the job's gauges that judge a running run (plateau, divergence, ETA, state)."""
        for gauge in (self.eta, self.plateau, self.divergence):
            with contextlib.suppress(KeyError):
                gauge.remove(namespace, kind, name)
        for label in LEARNING_LABELS:
            with contextlib.suppress(KeyError):
                self.learning_state.remove(namespace, kind, name, label)

    def _observe_series(self, view: JobView) -> None:
        """Each series' predicted final value and which one the run is judged by."""
        labels = (view.namespace, view.kind, view.name)
        finals = {"loss": view.forecast} | dict(view.learning_state.series if view.learning_state else {})
        judged, _ = judged_forecast(view)
        now: set[tuple[str, ...]] = set()
        for series, fc in finals.items():
            if fc is not None and math.isfinite(fc.final_loss.mean):
                self.final_value.labels(*labels, series).set(fc.final_loss.mean)
                now.add(("final", series))
        self.judged.labels(*labels, judged).set(1)
        now.add(("judged", judged))
        for gone in self._series.get(labels, set()) - now:
            self._remove_series(labels, gone)
        self._series[labels] = now

    def _remove_series(self, labels: tuple[str, str, str], entry: tuple[str, ...]) -> None:
        gauge = self.final_value if entry[0] == "final" else self.judged
        with contextlib.suppress(KeyError):
            gauge.remove(*labels, entry[1])

    def forget_job(self, namespace: str, kind: str, name: str) -> None:
        """Remove every series of the job (``kind``: TrainJob or PyTorchJob)."""
        for entry in self._series.pop((namespace, kind, name), set()):
            self._remove_series((namespace, kind, name), entry)
        self._forget_verdicts(namespace, kind, name)
        for gauge in (self.progress, self.step, self.final_loss, self.best_eval_step):
            with contextlib.suppress(KeyError):
                gauge.remove(namespace, kind, name)

    # -------------------------------------------------------------------------------- per queue
    def set_queues(self, summaries: Iterable[QueueSummary]) -> None:
        for gauge in (self.queue_jobs, self.queue_gpus, self.queue_not_learning, self.queue_freeing):
            gauge.clear()
        for s in summaries:
            for state, count in s.states.items():
                self.queue_jobs.labels(s.queue, state).set(count)
            self.queue_gpus.labels(s.queue).set(s.gpus)
            self.queue_not_learning.labels(s.queue).set(s.gpus_not_learning)
            for label, _ in HORIZONS:
                self.queue_freeing.labels(s.queue, label).set(s.gpus_freeing[label])
