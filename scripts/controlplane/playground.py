"""Play a training job on the dev cluster: Kueue's TrainJob integration and the Trainer's progress.

minimalkueue runs Kueue's queueing and admission but no job integrations, and there is no
Trainer controller nor GPU: a TrainJob on the dev cluster gets no Workload, no pods and no
progress. This helper plays those parts for one TrainJob, so a person can watch the advisor:

* creates (with ``--setup``) a ResourceFlavor, a ClusterQueue of ``--quota`` GPUs and the
  LocalQueue ``--queue`` in the namespace;
* creates the TrainJob, its Workload (owned by it, as Kueue's integration does) and, once Kueue
  admits it, two pods with the JobSet label the advisor annotates for checkpoints;
* reports ``status.trainerStatus`` from a curve file (CSV/TSV, JSONL or an HF
  ``trainer_state.json``: any file ``trainjob-advisor forecast`` reads) at ``--steps-per-second``,
  every ``--every`` steps, as Hugging Face's callback would: the training loss, and the file's
  ``eval_loss`` when it has one (its latest evaluation at or before the step, repeated in the
  reports after it as the callback merges the last one), so the run state, the overfitting rule
  and the best eval step can be watched too;
* when the advisor releases the quota (``Workload.spec.active=false``), plays the eviction (the
  reservation is released, reporting stops); ``trainjob-advisor resume`` (or setting
  ``spec.active=true``) lets Kueue admit it again and reporting resumes from the last step;
* answers the advisor's checkpoint requests as the training helpers do: a request annotated on
  the pod is acknowledged in the next report (``last_checkpoint_step`` = that step,
  ``last_checkpoint_request`` = its id), so a policy that checkpoints before it releases goes on;
* at the end of the curve, sets TrainJob ``Complete`` and Workload ``Finished``.

Usage: see docs/dev-control-plane.md ("Watch the advisor work").
"""

from __future__ import annotations

import argparse
import bisect
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

TRAINER = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
MERGE = "application/merge-patch+json"


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cond(kind: str, status: str, reason: str) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": reason,
        "lastTransitionTime": _rfc3339(time.time()),
    }


class Player:
    """One TrainJob's Kueue integration and Trainer, against the API server of ``api_client``."""

    def __init__(self, api_client: Any, namespace: str, name: str, *, queue: str, gpus: int) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.ns, self.name, self.queue, self.gpus = namespace, name, queue, gpus
        self.workload = f"trainjob-{name}-play"
        #: the last checkpoint request answered, and the step it was saved at
        self._answered: str | None = None
        self._saved_step = 0

    # -- setup -----------------------------------------------------------------------------------
    def setup_queues(self, quota: int) -> None:
        cq = f"{self.queue}-cq"
        for plural, body in (
            ("resourceflavors", {"metadata": {"name": cq}}),
            (
                "clusterqueues",
                {
                    "metadata": {"name": cq},
                    "spec": {
                        "namespaceSelector": {},
                        "resourceGroups": [
                            {
                                "coveredResources": ["nvidia.com/gpu"],
                                "flavors": [
                                    {
                                        "name": cq,
                                        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": str(quota)}],
                                    }
                                ],
                            }
                        ],
                    },
                },
            ),
        ):
            self._create_cluster(plural, {"apiVersion": "/".join(KUEUE), "kind": _kind(plural), **body})
        self._create_ns(
            "localqueues",
            {
                "apiVersion": "/".join(KUEUE),
                "kind": "LocalQueue",
                "metadata": {"name": self.queue},
                "spec": {"clusterQueue": cq},
            },
            KUEUE,
        )

    def create_job(self) -> None:
        body = {
            "apiVersion": "/".join(TRAINER[:2]),
            "kind": "TrainJob",
            "metadata": {"name": self.name, "labels": {"kueue.x-k8s.io/queue-name": self.queue}},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {
                    "numNodes": 1,
                    "resourcesPerNode": {"limits": {"nvidia.com/gpu": str(self.gpus)}},
                },
            },
        }
        job = self._create_ns("trainjobs", body, TRAINER[:2])
        meta = job["metadata"]
        container = {
            "name": "node",
            "image": "trainer:latest",
            "resources": {"requests": {"nvidia.com/gpu": str(self.gpus)}},
        }
        self._create_ns(
            "workloads",
            {
                "apiVersion": "/".join(KUEUE),
                "kind": "Workload",
                "metadata": {
                    "name": self.workload,
                    "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                    "ownerReferences": [
                        {
                            "apiVersion": "/".join(TRAINER[:2]),
                            "kind": "TrainJob",
                            "name": self.name,
                            "uid": meta["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "queueName": self.queue,
                    "podSets": [
                        {"name": "node", "count": 1, "template": {"spec": {"containers": [container]}}}
                    ],
                },
            },
            KUEUE,
        )

    # -- Kueue's side ----------------------------------------------------------------------------
    def wl(self) -> dict[str, Any]:
        return cast(
            dict[str, Any],
            self.custom.get_namespaced_custom_object(*KUEUE, self.ns, "workloads", self.workload),
        )

    def admitted(self) -> bool:
        conds = (self.wl().get("status") or {}).get("conditions") or []
        return any(c["type"] == "Admitted" and c["status"] == "True" for c in conds)

    def active(self) -> bool:
        return self.wl().get("spec", {}).get("active", True) is not False

    def start_pods(self) -> None:
        from kubernetes import client

        body = {
            "metadata": {
                "name": f"{self.name}-node-0-0",
                "labels": {"jobset.sigs.k8s.io/jobset-name": self.name},
            },
            "spec": {"containers": [{"name": "node", "image": "trainer:latest"}]},
        }
        try:
            self.core.create_namespaced_pod(self.ns, cast(Any, client.V1Pod.from_dict(body)))
        except client.exceptions.ApiException as exc:
            if exc.status != 409:
                raise

    def evict(self) -> None:
        """What Kueue's job integration does after a deactivation: the reservation is released."""
        conds = [
            c
            for c in (self.wl().get("status") or {}).get("conditions") or []
            if c["type"] not in ("QuotaReserved", "Admitted", "Requeued")
        ]
        conds += [
            _cond("QuotaReserved", "False", "Pending"),
            _cond("Admitted", "False", "NoReservation"),
            _cond("Requeued", "False", "Deactivated"),
        ]
        self.custom.patch_namespaced_custom_object_status(
            *KUEUE,
            self.ns,
            "workloads",
            self.workload,
            {"status": {"admission": None, "conditions": conds}},
            _content_type=MERGE,
        )

    def finish(self) -> None:
        self.custom.patch_namespaced_custom_object_status(
            *TRAINER[:2],
            self.ns,
            TRAINER[2],
            self.name,
            {"status": {"conditions": [_cond("Complete", "True", "JobsCompleted")]}},
            _content_type=MERGE,
        )
        conds = (self.wl().get("status") or {}).get("conditions") or []
        self.custom.patch_namespaced_custom_object_status(
            *KUEUE,
            self.ns,
            "workloads",
            self.workload,
            {"status": {"conditions": [*conds, _cond("Finished", "True", "Succeeded")]}},
            _content_type=MERGE,
        )

    # -- the Trainer's side ----------------------------------------------------------------------
    def checkpoint_request(self) -> str | None:
        """The checkpoint request the advisor annotated on the pod, if any."""
        from kubernetes import client

        from advisor.protocol import CHECKPOINT_REQUEST_ANNOTATION

        try:
            pod = self.core.read_namespaced_pod(f"{self.name}-node-0-0", self.ns)
        except client.exceptions.ApiException:
            return None
        meta = pod.metadata
        value = ((meta.annotations if meta is not None else None) or {}).get(CHECKPOINT_REQUEST_ANNOTATION)
        return str(value) if value else None

    def report(self, step: int, total: int, loss: float, eval_loss: float | None = None) -> None:
        metrics = [
            {"name": "current_step", "value": str(step)},
            {"name": "total_steps", "value": str(total)},
            {"name": "loss", "value": f"{loss:.6g}"},
        ]
        if eval_loss is not None:
            metrics.append({"name": "eval_loss", "value": f"{eval_loss:.6g}"})
        request = self.checkpoint_request()
        if request is not None and request != self._answered:
            self._answered, self._saved_step = request, step  # saved at this step, then reported
        if self._answered is not None:
            metrics += [
                {"name": "last_checkpoint_step", "value": str(self._saved_step)},
                {"name": "last_checkpoint_request", "value": self._answered},
            ]
        status = {
            "metrics": metrics,
            "lastUpdatedTime": _rfc3339(time.time()),
            "progressPercentage": min(100, 100 * step // total),
        }
        self.custom.patch_namespaced_custom_object_status(
            *TRAINER[:2],
            self.ns,
            TRAINER[2],
            self.name,
            {"status": {"trainerStatus": status}},
            _content_type=MERGE,
        )

    # -- helpers ---------------------------------------------------------------------------------
    def _create_cluster(self, plural: str, body: dict[str, Any]) -> None:
        from kubernetes import client

        try:
            self.custom.create_cluster_custom_object(*KUEUE, plural, body)
        except client.exceptions.ApiException as exc:
            if exc.status != 409:
                raise

    def _create_ns(self, plural: str, body: dict[str, Any], gv: tuple[str, str]) -> dict[str, Any]:
        from kubernetes import client

        try:
            return cast(
                dict[str, Any], self.custom.create_namespaced_custom_object(*gv, self.ns, plural, body)
            )
        except client.exceptions.ApiException as exc:
            if exc.status != 409:
                raise
            name = body["metadata"]["name"]
            return cast(dict[str, Any], self.custom.get_namespaced_custom_object(*gv, self.ns, plural, name))


def _kind(plural: str) -> str:
    return {"resourceflavors": "ResourceFlavor", "clusterqueues": "ClusterQueue"}[plural]


def latest_eval(evals: Sequence[tuple[float, float]], step: int) -> float | None:
    """The eval loss of the latest evaluation at or before ``step`` (None: none yet)."""
    at = bisect.bisect_right([s for s, _ in evals], step)
    return evals[at - 1][1] if at else None


def play(
    player: Player,
    steps: list[int],
    losses: list[float],
    total: int,
    *,
    rate: float,
    every: int,
    evals: Sequence[tuple[float, float]] = (),
    out: Any = sys.stdout,
) -> None:
    """Report the curve at ``rate`` steps per second while the Workload is admitted; play eviction
    and re-admission; finish the run at its last step. ``evals``: (step, eval loss) in step order,
    each reported from its step on."""
    sleep = every / rate
    i = 0
    reporting = False
    while i < len(steps):
        if not player.active():
            if reporting:
                print(
                    f"{player.name}: quota released by the advisor at step {steps[i - 1]}; evicted", file=out
                )
                player.evict()
                reporting = False
            time.sleep(1.0)
            continue
        if not player.admitted():
            time.sleep(0.5)
            continue
        if not reporting:
            player.start_pods()
            print(f"{player.name}: admitted; reporting from step {steps[i]}", file=out)
            reporting = True
        player.report(steps[i], total, losses[i], latest_eval(evals, steps[i]))
        i += 1
        time.sleep(sleep)
    player.finish()
    print(f"{player.name}: finished at step {steps[-1]} of {total}", file=out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("curve", help="a loss curve file (CSV/TSV step,loss; JSONL; HF trainer_state.json)")
    p.add_argument("--name", default="demo", help="TrainJob name (default demo)")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube/config")
    p.add_argument("--queue", default="team-queue", help="LocalQueue name (default team-queue)")
    p.add_argument(
        "--setup", action="store_true", help="create the ResourceFlavor, ClusterQueue and LocalQueue"
    )
    p.add_argument("--quota", type=int, default=16, help="ClusterQueue GPUs with --setup (default 16)")
    p.add_argument("--gpus", type=int, default=8, help="GPUs of the job (default 8)")
    p.add_argument(
        "--every", type=int, default=10, help="report every N steps, like HF logging_steps (default 10)"
    )
    p.add_argument("--steps-per-second", type=float, default=20.0, help="replay speed (default 20)")
    args = p.parse_args(argv)
    from kubernetes import config

    from advisor.sources import SourceError, load_curve

    try:
        curve = load_curve(args.curve)
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.every < 1 or args.steps_per_second <= 0:
        print("error: --every must be >= 1 and --steps-per-second > 0", file=sys.stderr)
        return 2
    try:
        evaluated = load_curve(args.curve, metric="eval_loss")
        evals = sorted(zip(evaluated.steps, evaluated.values, strict=True))
    except SourceError:
        evals = []  # a file without evaluations: the training loss alone
    total = curve.total_steps or int(max(curve.steps))
    picked = [
        (int(s), float(v)) for s, v in zip(curve.steps, curve.values, strict=True) if int(s) % args.every == 0
    ]
    if not picked:
        print(f"error: no step of {args.curve} is a multiple of --every {args.every}", file=sys.stderr)
        return 2
    api_client = config.new_client_from_config(config_file=args.kubeconfig)
    player = Player(api_client, args.namespace, args.name, queue=args.queue, gpus=args.gpus)
    if args.setup:
        player.setup_queues(args.quota)
    player.create_job()
    play(
        player,
        [s for s, _ in picked],
        [v for _, v in picked],
        total,
        rate=args.steps_per_second,
        every=args.every,
        evals=evals,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
