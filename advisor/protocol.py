"""Names shared by the controller (which asks) and the training process (which answers).

One definition, imported on both sides, so that the request annotation, the acknowledgement
metrics and the default timeout can never be spelled two ways.
"""

from __future__ import annotations

import secrets

GROUP = "advisor.trainjob-advisor.io"
VERSION = "v1alpha1"

#: pod annotation carrying the id of the latest checkpoint request (read through a downward-API volume)
CHECKPOINT_REQUEST_ANNOTATION = f"{GROUP}/checkpoint-request"
#: default path of the downward-API file with the pod's annotations
DOWNWARD_API_ANNOTATIONS_PATH = "/etc/podinfo/annotations"
#: progress metric: the step of the last completed checkpoint
ACK_STEP_METRIC = "last_checkpoint_step"
#: progress metric: the request id the last checkpoint answered
ACK_REQUEST_METRIC = "last_checkpoint_request"
#: the progress metric whose value names the eval metric the run is judged by (HF's
#: ``metric_for_best_model``: ``eval_f1``, or ``f1`` as the Trainer takes it)
JUDGED_BY_METRIC = "metric_for_best_model"
#: progress metric: seconds the last checkpoint took to write, by the training process's clock
SAVE_SECONDS_METRIC = "last_checkpoint_seconds"
#: how long the controller waits for an acknowledgement before recording a timeout
DEFAULT_CHECKPOINT_TIMEOUT_S = 600.0

#: annotation (on a TrainJob / PyTorchJob) with a deadline, RFC 3339 or epoch seconds
DEADLINE_ANNOTATION = f"{GROUP}/deadline"
#: annotation ``trainjob-advisor resume`` writes on the job it resumed (RFC 3339): the policies'
#: cooldown runs from it, so that a run its user asked back gets a full cooldown before a release
RESUMED_ANNOTATION = f"{GROUP}/resumed-at"

#: on the advisor's two CRDs: the generation of their schemas, raised whenever a field is added,
#: changed or removed (tests/controller/test_crd_generation.py records each file's digest). Helm
#: never upgrades its ``crds/``: a controller run on older CRDs wrote fields the API server pruned
#: without a word (a policy's last valid generation, the job a status was written for), so the
#: controller compares the installed generation with its own at start (``controller.crd_check``)
CRD_SCHEMA_ANNOTATION = f"{GROUP}/schema-generation"
CRD_SCHEMA_GENERATION = 3
#: the oldest installed generation Apply runs on: every status field whose loss would change what
#: the controller does is in it (2: ``lastValid``, ``job``). A generation between this and
#: ``CRD_SCHEMA_GENERATION`` lacks only fields for people (3 added ``recentActions[].at``): a
#: WARNING says so, and nothing is held
CRD_SCHEMA_REQUIRED = 2
#: default label that exempts a job from every policy
DEFAULT_EXEMPT_LABEL = f"{GROUP}/exempt"
#: PyTorchJob (Trainer v1) annotation where our training helper writes progress JSON
PYTORCHJOB_PROGRESS_ANNOTATION = f"{GROUP}/progress"

#: Kueue
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"

#: progress sources
RHOAI_TRAINER_STATUS_ANNOTATION = "trainer.opendatahub.io/trainerStatus"


def new_checkpoint_request_id() -> str:
    """A fresh checkpoint request id: 15 decimal digits.

    Numeric on purpose: the id travels back as a progress metric, and some channels keep only
    numeric metric values (HF's ``KubeflowCallback``, the RHOAI metrics JSON). 15 digits stay
    below 2**53, so a JSON number carries it exactly.
    """
    return str(10**14 + secrets.randbelow(9 * 10**14))
