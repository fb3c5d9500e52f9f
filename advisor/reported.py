"""A training job's progress report as a controller reads it back from the cluster.

Why one module for this: the back-test and the simulator must feed the core exactly what the
controller would see, through the same parser, or their verdicts measure a different advisor. A
report (``advisor.training.report.Report``: the step, what the reporter knows of the run's length,
its metrics and checkpoint acknowledgements) is rendered by the training helper's own Kubeflow
channel into the ``status.trainerStatus`` a TrainJob carries (``KubeflowStatusChannel.payload``:
metric values as text, ``lastUpdatedTime`` in whole seconds as ``metav1.Time`` stores it,
``progressPercentage`` only when the total is known) and read back by
``advisor.sources.sample_from_object``, the function the controller calls on every watch event.
Whatever the reporter omits (total steps, learning rate) is absent from the sample too.
"""

from __future__ import annotations

from typing import Any

from advisor.model import ProgressSample
from advisor.sources.trainerstatus import sample_from_object
from advisor.training.channels import KubeflowStatusChannel
from advisor.training.report import Report

__all__ = ["read_back", "trainjob_body"]

#: rendering only: the channel never posts (no URL is dialled, no SDK is imported)
_CHANNEL = KubeflowStatusChannel(url="http://reported.invalid", use_sdk=False)


def trainjob_body(report: Report, *, name: str, namespace: str) -> dict[str, Any]:
    """The TrainJob object (the parts a controller reads) once ``report`` reached the status server."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "status": _CHANNEL.payload(report),
    }


def read_back(report: Report, *, name: str, namespace: str, now: float) -> ProgressSample | None:
    """The sample the controller's parser makes of ``report`` (None: the object reports no
    progress). ``now`` is the observer's clock, as the controller passes its own."""
    return sample_from_object(trainjob_body(report, name=name, namespace=namespace), now=now)
