"""Jobs that real Kueue (minimalkueue) has admitted: the advisor acts only on admitted jobs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import controlplane
from controller_harness import queue_objects, workload_admitted
from harness import KUEUE, Jobs, wait_for


@contextlib.contextmanager
def admitted_jobs(plane: controlplane.ControlPlane, jobs: Jobs, names: list[str]) -> Iterator[list[str]]:
    """Create a ClusterQueue with room for all, then each TrainJob with its Workload (as Kueue's
    job integration would), and wait until Kueue has admitted every Workload; yields their names."""
    ns = jobs.ns
    cq = f"gpu-{ns[-6:]}"
    plane.apply(queue_objects(cq, ns, gpus=16 * len(names)))
    try:
        workloads = []
        for name in names:
            job = jobs.create(name, queue="queue")
            meta = job["metadata"]
            wl = f"trainjob-{name}-rel01"
            jobs.custom.create_namespaced_custom_object(
                *KUEUE,
                ns,
                "workloads",
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Workload",
                    "metadata": {
                        "name": wl,
                        "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                        "ownerReferences": [
                            {
                                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                                "kind": "TrainJob",
                                "name": name,
                                "uid": meta["uid"],
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {
                        "queueName": "queue",
                        "podSets": [
                            {
                                "name": "node",
                                "count": 2,
                                "template": {
                                    "spec": {
                                        "restartPolicy": "Never",
                                        "containers": [
                                            {
                                                "name": "node",
                                                "image": "trainer:latest",
                                                "resources": {"requests": {"nvidia.com/gpu": "8"}},
                                            }
                                        ],
                                    }
                                },
                            }
                        ],
                    },
                },
            )
            workloads.append(wl)
        wait_for(
            lambda: all(workload_admitted(jobs.custom, ns, w) for w in workloads),
            "Kueue to admit every Workload",
            timeout=max(90.0, 1.5 * len(names)),
        )
        yield workloads
    finally:
        plane.delete_namespace(ns)
        plane.delete("kueue.x-k8s.io/v1beta2", "ClusterQueue", cq, wait_s=30)
        plane.delete("kueue.x-k8s.io/v1beta2", "ResourceFlavor", cq, wait_s=30)
