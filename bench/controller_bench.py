"""Controller benchmark against a real kube-apiserver: many TrainJobs reporting progress.

Starts the e2e control plane (kube-apiserver + etcd, built from Go modules and cached; without Go
the bench says why and exits 0), runs ``trainjob-advisor run`` as its own process with the
ServiceAccount identity, creates ``--jobs`` TrainJobs and updates each one's
``status.trainerStatus`` every ``--interval`` seconds for ``--duration`` seconds, like the Trainer
status server would. It measures, for the controller process only, CPU (cores) and peak RSS, the
latency from each progress update to the TrainJobForecast write that reflects it (watched, per
update, including coalesced ones), the forecast age, and the API write rate. Ratios are printed
against baselines measured in the same run: writes per progress update (the naive controller
writes once per update: 1.0) and the controller's CPU per update.

    python bench/controller_bench.py                      # the target: 1000 jobs, 5 s, 5 min
    python bench/controller_bench.py --jobs 100 --duration 60   # a quick look
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict, deque
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT))

TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
ADVISOR = ("advisor.trainjob-advisor.io", "v1alpha1", "trainjobforecasts")
MERGE = "application/merge-patch+json"


def rfc3339(ts: float) -> str:
    """With microseconds, so that the controller's watch-lag metric is not rounded to seconds."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mib(pid: int) -> tuple[float, float]:
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def rss_slope(samples: list[tuple[float, float]], after_s: float) -> float | None:
    """MiB per hour, least squares over the samples taken after ``after_s`` (None: too few)."""
    late = [(t, m) for t, m in samples if t >= after_s]
    if len(late) < 3:
        return None
    n = len(late)
    mt = sum(t for t, _ in late) / n
    mm = sum(m for _, m in late) / n
    var = sum((t - mt) ** 2 for t, _ in late)
    if var <= 0:
        return None
    return round(3600.0 * sum((t - mt) * (m - mm) for t, m in late) / var, 2)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def scrape(port: int) -> dict[str, float]:
    """Metric families summed over labels; histogram buckets kept as ``name{le}``."""
    out: dict[str, float] = defaultdict(float)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("trainjob_advisor_") and " " in line:
            name, value = line.rsplit(" ", 1)
            base = name.split("{", 1)[0]
            if base.endswith("_bucket") and 'le="' in name:
                stage = name.split('stage="', 1)[1].split('"', 1)[0] if 'stage="' in name else None
                le = name.split('le="', 1)[1].split('"', 1)[0]
                base += "{" + (f'stage="{stage}",' if stage else "") + f'le="{le}"' + "}"
            out[base] += float(value)
    return out


def histogram_quantile(
    m0: dict[str, float], m1: dict[str, float], name: str, q: float, labels: str = ""
) -> float | str | None:
    """The bucket upper bound holding quantile q of the observations made between two scrapes;
    ``">B"`` when it lies above the largest finite bound B, None without observations.
    ``labels`` selects one label set (e.g. ``stage="queue"``)."""
    prefix = name + "_bucket{" + labels
    buckets = sorted(
        (float(k.rsplit("le=", 1)[1].strip('"}')), m1[k] - m0.get(k, 0.0)) for k in m1 if k.startswith(prefix)
    )
    total = buckets[-1][1] if buckets else 0.0
    if not total:
        return None
    finite = [b for b, _ in buckets if b != float("inf")]
    for bound, count in buckets:
        if count >= q * total:
            return bound if bound != float("inf") else f">{max(finite, default=0):g}"
    return None


class Tracker:
    """Per job: the updates sent (step, wall time) and the latency until a TJF shows them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: dict[str, deque[tuple[int, float]]] = defaultdict(deque)
        self.latencies: list[float] = []
        self.sent_at: list[float] = []  # when the update of each latency was sent
        self.forecast_ages: list[float] = []
        self.tjf_events = 0
        self.object_bytes: list[int] = []  # size of the stored TrainJobForecast, sampled

    def on_sent(self, key: str, step: int, at: float) -> None:
        with self.lock:
            self.sent[key].append((step, at))

    def on_tjf(self, key: str, status: dict[str, Any], at: float) -> None:
        step = (status.get("progress") or {}).get("step") or 0
        with self.lock:
            self.tjf_events += 1
            if self.tjf_events % 50 == 1:
                self.object_bytes.append(len(json.dumps(status, separators=(",", ":"))))
            queue = self.sent[key]
            while queue and queue[0][0] <= step:
                sent_at = queue.popleft()[1]
                self.latencies.append(at - sent_at)
                self.sent_at.append(sent_at)
        fc = status.get("forecast") or {}
        if fc.get("updatedAt") and status.get("observedAt"):
            age = datetime.fromisoformat(
                status["observedAt"].replace("Z", "+00:00")
            ) - datetime.fromisoformat(fc["updatedAt"].replace("Z", "+00:00"))
            self.forecast_ages.append(age.total_seconds())


def watch_forecasts(api: Any, tracker: Tracker, stop: threading.Event) -> None:
    from kubernetes import client, watch

    custom = client.CustomObjectsApi(api)
    rv = None
    while not stop.is_set():
        w = watch.Watch()
        try:
            for ev in w.stream(
                custom.list_cluster_custom_object, *ADVISOR, resource_version=rv, timeout_seconds=30
            ):
                obj = ev["object"]
                rv = obj["metadata"].get("resourceVersion", rv)
                if ev["type"] in ("ADDED", "MODIFIED") and obj.get("status"):
                    key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
                    tracker.on_tjf(key, obj["status"], time.time())
                if stop.is_set():
                    break
        except Exception as exc:  # a 410 Gone or a dropped stream: resume from a fresh list
            print(f"  (watch restarted: {str(exc)[:80]})", file=sys.stderr)
            rv = None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=5.0, help="seconds between a job's progress updates")
    ap.add_argument("--duration", type=float, default=300.0, help="seconds of updates")
    ap.add_argument("--namespaces", type=int, default=10)
    ap.add_argument("--senders", type=int, default=32, help="threads sending updates")
    ap.add_argument("--write-interval", type=float, default=2.0)
    ap.add_argument("--forecast-interval", type=float, default=30.0)
    ap.add_argument("--max-writes-per-second", type=float, default=250.0)
    ap.add_argument("--metrics-port", type=int, default=18080)
    ap.add_argument("--keep", action="store_true", help="keep the run directory (logs, etcd data)")
    ap.add_argument("--writer-threads", type=int, default=32)
    ap.add_argument(
        "--history-points",
        type=int,
        default=300,
        help="the controller's --history-points; a soak that must reach steady state within its "
        "duration lowers it (each job's history stops growing after this many updates)",
    )
    args = ap.parse_args(argv)

    import controlplane as cp
    from kubernetes import client

    from simulator.curves import CurveSpec

    run_dir = Path(tempfile.mkdtemp(prefix="trainjob-advisor-bench-"))
    try:
        plane = cp.start_control_plane(run_dir, with_kueue=False)
    except cp.Unavailable as exc:
        print(f"controller bench skipped: {exc}")
        return 0
    ctl = None
    stop = threading.Event()
    stack = contextlib.ExitStack()
    try:
        admin = plane.api_client(plane.admin_kubeconfig)
        admin.configuration.connection_pool_maxsize = args.senders + 4
        admin = client.ApiClient(admin.configuration)
        custom = client.CustomObjectsApi(admin)
        namespaces = [f"bench-{i}" for i in range(args.namespaces)]
        for ns in namespaces:
            plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        keys = [(namespaces[i % len(namespaces)], f"job-{i:05d}") for i in range(args.jobs)]
        t = time.time()
        with ThreadPoolExecutor(args.senders) as pool:
            list(
                pool.map(
                    lambda k: custom.create_namespaced_custom_object(
                        *TRAINER[:2],
                        k[0],
                        TRAINER[2],
                        {
                            "apiVersion": "trainer.kubeflow.org/v1alpha1",
                            "kind": "TrainJob",
                            "metadata": {"name": k[1]},
                            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}},
                        },
                    ),
                    keys,
                )
            )
        print(f"created {args.jobs} TrainJobs in {time.time() - t:.1f}s")

        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        log_file = stack.enter_context((run_dir / "controller.log").open("wb"))
        ctl = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "advisor",
                "run",
                "-A",
                f"--kubeconfig={plane.controller_kubeconfig}",
                f"--metrics-port={args.metrics_port}",
                "--metrics-host=127.0.0.1",
                "--no-kueue",
                "--no-pytorchjobs",
                f"--write-interval={args.write_interval}",
                f"--forecast-interval={args.forecast_interval}",
                f"--max-writes-per-second={args.max_writes_per_second}",
                f"--writer-threads={args.writer_threads}",
                f"--history-points={args.history_points}",
                "--log-level=warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
        for _ in range(240):
            try:
                if (
                    urllib.request.urlopen(f"http://127.0.0.1:{args.metrics_port}/readyz", timeout=1).status
                    == 200
                ):
                    break
            except OSError:
                time.sleep(0.5)
        time.sleep(2)
        tracker = Tracker()
        watcher = threading.Thread(target=watch_forecasts, args=(admin, tracker, stop), daemon=True)
        watcher.start()
        spec = CurveSpec(
            total_steps=100_000, l_inf=1.6, a=2.5, alpha=0.8, x0=0.05, schedule="constant", noise=0.004
        )
        cpu0, wall0, m0 = proc_cpu_seconds(ctl.pid), time.time(), scrape(args.metrics_port)
        loads: list[float] = []
        rss_samples: list[tuple[float, float]] = []  # (seconds since the first update, RSS MiB)
        sent = errors = 0
        patch_seconds: list[float] = []  # the API server's write latency, as the Trainer sees it
        lock = threading.Lock()

        def send(i: int, rnd: int) -> None:
            nonlocal sent, errors
            ns, name = keys[i]
            step = 50 * (rnd + 1)
            now = time.time()
            body = {
                "status": {
                    "trainerStatus": {
                        "lastUpdatedTime": rfc3339(now),
                        "metrics": [
                            {"name": "current_step", "value": str(step)},
                            {"name": "total_steps", "value": "100000"},
                            {"name": "loss", "value": f"{spec.observed(step + 37 * i):.5f}"},
                        ],
                    }
                }
            }
            tracker.on_sent(f"{ns}/{name}", step, now)
            try:
                started = time.perf_counter()
                custom.patch_namespaced_custom_object_status(
                    *TRAINER[:2], ns, TRAINER[2], name, body, _content_type=MERGE
                )
                with lock:
                    sent += 1
                    patch_seconds.append(time.perf_counter() - started)
            except Exception:
                with lock:
                    errors += 1

        rounds = int(args.duration / args.interval)
        pool = ThreadPoolExecutor(args.senders)
        # a job whose previous update is still queued skips this one (as the Trainer's status server
        # would only ever report its latest state): the run keeps to its duration when the API server
        # cannot take the offered rate, and says how many updates it had to skip
        inflight: dict[int, Any] = {}
        skipped = 0
        try:
            for rnd in range(rounds):
                start = time.time()
                for i in range(args.jobs):  # spread each round's updates over the interval
                    target = start + args.interval * i / args.jobs
                    delay = target - time.time()
                    if delay > 0:
                        time.sleep(delay)
                    if i in inflight and not inflight[i].done():
                        skipped += 1
                        continue
                    inflight[i] = pool.submit(send, i, rnd)
                rss, _ = proc_rss_mib(ctl.pid)
                rss_samples.append((time.time() - wall0, rss))
                loads.append(os.getloadavg()[0])
                print(
                    f"  round {rnd + 1}/{rounds}: sent {sent}, skipped {skipped}, errors {errors}, "
                    f"controller RSS {rss:.0f} MiB, latencies so far {len(tracker.latencies)}",
                    flush=True,
                )
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        time.sleep(max(args.write_interval, 5.0) + 3)  # let the last updates land
        cpu1, wall1, m1 = proc_cpu_seconds(ctl.pid), time.time(), scrape(args.metrics_port)
        _, peak = proc_rss_mib(ctl.pid)
        stop.set()
        elapsed = wall1 - wall0
        writes = m1["trainjob_advisor_api_writes_total"] - m0.get("trainjob_advisor_api_writes_total", 0.0)
        cores = (cpu1 - cpu0) / elapsed
        lat = tracker.latencies
        half = wall0 + args.duration / 2
        missing = sum(len(q) for q in tracker.sent.values())
        result = {
            "jobs": args.jobs,
            "interval_s": args.interval,
            "duration_s": round(elapsed, 1),
            "updates_sent": sent,
            "updates_offered": rounds * args.jobs,
            "updates_skipped_sender_behind": skipped,
            "update_errors": errors,
            "updates_per_s": round(sent / elapsed, 1),
            "updates_per_s_offered": round(args.jobs / args.interval, 1),
            "controller_cpu_cores": round(cores, 3),
            "controller_peak_rss_mib": round(peak, 1),
            "latency_p50_s": round(percentile(lat, 0.5), 3),
            "latency_p99_s": round(percentile(lat, 0.99), 3),
            "latency_max_s": round(max(lat) if lat else float("nan"), 3),
            # the same over the updates sent in the second half (after the start-up: 1,000 objects
            # created); the figures above are the honest ones, this one says what steady state is
            "latency_p50_p99_second_half_s": [round(percentile(late, q), 3) for q in (0.5, 0.99)]
            if (late := [x for x, t in zip(lat, tracker.sent_at, strict=True) if t >= half])
            else None,
            "updates_never_reflected": missing,
            "forecast_age_p50_s": round(percentile(tracker.forecast_ages, 0.5), 1),
            "tjf_writes": int(writes),
            "tjf_writes_per_s": round(writes / elapsed, 1),
            "write_ratio_vs_one_write_per_update": round(writes / max(sent, 1), 3),
            "cpu_ms_per_update": round(1000 * (cpu1 - cpu0) / max(sent, 1), 3),
            "controller_observe_to_written_p50_s": histogram_quantile(
                m0, m1, "trainjob_advisor_update_to_status_seconds", 0.5
            ),
            "controller_observe_to_written_p99_s": histogram_quantile(
                m0, m1, "trainjob_advisor_update_to_status_seconds", 0.99
            ),
            "pipeline_stage_p50_p99_s": {
                stage: [
                    histogram_quantile(m0, m1, "trainjob_advisor_pipeline_seconds", q, f'stage="{stage}",')
                    for q in (0.5, 0.99)
                ]
                for stage in ("watch", "queue", "engine", "writer_wait", "write")
            },
            "apiserver_patch_p50_s": round(percentile(patch_seconds, 0.5), 3),
            "apiserver_patch_p99_s": round(percentile(patch_seconds, 0.99), 3),
            "tjf_status_bytes_mean": round(sum(tracker.object_bytes) / max(1, len(tracker.object_bytes))),
            # least-squares slope of the controller's RSS over the second half of the run (after
            # the start-up has created every object): flat memory is a slope near 0
            "rss_mib_start_end": [round(rss_samples[0][1], 1), round(rss_samples[-1][1], 1)]
            if rss_samples
            else None,
            "rss_slope_mib_per_hour_second_half": rss_slope(rss_samples, args.duration / 2),
            # the same once every job's history has reached its bound (one point per update, so
            # after history_points rounds; None when the run is shorter): the steady state a
            # long-running controller lives in, where any growth left is a leak
            "history_bound_reached_after_s": (bound_at := args.history_points * args.interval),
            "rss_slope_mib_per_hour_after_history_bound": rss_slope(rss_samples, bound_at + args.interval),
            "rss_mib_at_history_bound_and_end": [
                round(min(rss_samples, key=lambda s: abs(s[0] - bound_at))[1], 1),
                round(rss_samples[-1][1], 1),
            ]
            if rss_samples and bound_at < rss_samples[-1][0]
            else None,
            "load_average_1m_mean_max": [round(sum(loads) / max(1, len(loads)), 2), max(loads, default=0.0)],
            "evaluations": int(
                m1.get("trainjob_advisor_forecast_duration_seconds_count", 0)
                - m0.get("trainjob_advisor_forecast_duration_seconds_count", 0)
            ),
        }
        print(json.dumps(result, indent=2))
        print(
            f"\ntargets: CPU <= 1 core: {cores:.2f} ({'ok' if cores <= 1 else 'OVER'}); "
            f"RSS <= 500 MiB: {peak:.0f} ({'ok' if peak <= 500 else 'OVER'}); "
            f"p99 update->forecast <= 5 s: {result['latency_p99_s']} "
            f"({'ok' if result['latency_p99_s'] <= 5 else 'OVER'}); "
            f"writes/update {result['write_ratio_vs_one_write_per_update']} vs 1.0 for a naive controller"
        )
        return 0
    finally:
        stop.set()
        if ctl is not None:
            ctl.terminate()
            try:
                ctl.wait(timeout=30)
            except subprocess.TimeoutExpired:
                ctl.kill()
        plane.stop()
        stack.close()
        if args.keep:
            print(f"run directory kept: {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
