"""Leader election on a ``coordination.k8s.io`` Lease: at most one controller acts at a time.

Exactly-once actions assume one writer. Two replicas (an upgrade's surge, a second install, a
rescheduled pod whose predecessor is only partitioned) would each record and carry out the same
decision. So the controller does nothing (no listing, no watch, no write) until it holds the
Lease, and stops acting as soon as it cannot prove it still holds it. The algorithm is client-go's
``leaderelection`` with a Lease lock:

* a candidate takes the Lease when it does not exist, when it holds it, or when its holder has
  not renewed it for ``lease_duration_s``, measured on the *candidate's own monotonic clock* from
  the moment it last saw the record change (``renewTime`` written by another machine is never
  compared with the local clock, so clock skew between nodes cannot shorten the lease);
* every write is a ``replace`` carrying the ``resourceVersion`` it read, so of two candidates
  that race, the API server lets exactly one win (the other gets 409);
* the leader renews every ``retry_period_s`` and considers itself leader only while its last
  successful renewal is younger than ``renew_deadline_s`` (< ``lease_duration_s``): a leader cut
  off from the API server stops acting ``lease_duration_s - renew_deadline_s`` before anyone can
  take over;
* on a clean shutdown the leader releases the Lease (``holderIdentity`` cleared), so the standby
  takes over within one ``retry_period_s``; after a crash, within ``lease_duration_s +
  retry_period_s`` of the last renewal.

The clock and the API are injected, so the state machine is unit-tested without waiting.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from advisor.controller.retry import status_of

__all__ = ["LeaderElector", "LeaseConfig", "default_identity"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseConfig:
    namespace: str = "trainjob-advisor-system"
    name: str = "trainjob-advisor"
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("leader election needs 0 < retry period < renew deadline < lease duration")

    @property
    def takeover_s(self) -> float:
        """The longest a standby waits after the leader's last renewal when the leader died."""
        return self.lease_duration_s + self.retry_period_s


def default_identity() -> str:
    """The pod name (``HOSTNAME`` in a pod) plus a random suffix: unique per process."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _micro_time(wall: float) -> str:
    return datetime.fromtimestamp(wall, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """``api``: a ``kubernetes.client.CoordinationV1Api`` (or a fake with the same three methods)."""

    def __init__(
        self,
        api: Any,
        config: LeaseConfig | None = None,
        *,
        identity: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.config = config or LeaseConfig()
        self.identity = identity or default_identity()
        self._monotonic = monotonic
        self._wall = wall
        self._observed: tuple[Any, ...] | None = None  # the other holder's record, as last seen
        self._observed_at = -float("inf")  # local monotonic time it last changed
        self._renewed_at: float | None = None  # local monotonic time of our last successful write
        self._read_at: float | None = None  # local monotonic time the API server last answered a read
        self.transitions = 0

    # ------------------------------------------------------------------------------ state
    def is_leader(self) -> bool:
        """True while our last successful acquisition or renewal is younger than the renew deadline."""
        return (
            self._renewed_at is not None
            and self._monotonic() - self._renewed_at < self.config.renew_deadline_s
        )

    def in_touch(self) -> bool:
        """True while the API server answered a read of the Lease within the lease duration: a
        standby that can take over when the holder stops renewing."""
        return self._read_at is not None and self._monotonic() - self._read_at < self.config.lease_duration_s

    def _spec(self, acquire_wall: str | None, transitions: int) -> dict[str, Any]:
        now = _micro_time(self._wall())
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration_s)),
            "acquireTime": acquire_wall or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    # ------------------------------------------------------------------------------ one try
    def try_acquire_or_renew(self) -> bool:
        """One round of the election; returns whether we hold the Lease afterwards."""
        from kubernetes import client

        cfg = self.config
        started = self._monotonic()
        try:
            lease = self.api.read_namespaced_lease(cfg.name, cfg.namespace)
        except Exception as exc:
            if status_of(exc) != 404:
                log.warning("reading Lease %s/%s failed: %s", cfg.namespace, cfg.name, _reason(exc))
                return self.is_leader()
            self._read_at = started  # no Lease yet: the API server answered all the same
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=cfg.name, namespace=cfg.namespace),
                spec=client.V1LeaseSpec(**_snake(self._spec(None, 0))),
            )
            try:
                self.api.create_namespaced_lease(cfg.namespace, body)
            except Exception as exc2:
                log.info("creating Lease %s/%s lost the race: %s", cfg.namespace, cfg.name, _reason(exc2))
                return False
            self._became_leader(started, 0)
            return True
        self._read_at = started
        spec = lease.spec
        holder = spec.holder_identity if spec is not None else None
        record = (  # any write changes the resourceVersion: a renewal is seen even if renewTime is not
            lease.metadata.resource_version if lease.metadata is not None else None,
            holder,
            spec.renew_time if spec is not None else None,
            spec.lease_transitions if spec is not None else None,
            spec.lease_duration_seconds if spec is not None else None,
        )
        if record != self._observed:
            self._observed, self._observed_at = record, started
        duration = float(spec.lease_duration_seconds or cfg.lease_duration_s) if spec is not None else 0.0
        mine = holder == self.identity
        if holder and not mine and started - self._observed_at < duration:
            self._renewed_at = None
            return False  # held by another, and renewed within its duration as far as we can tell
        transitions = int(spec.lease_transitions or 0) if spec is not None else 0
        if not mine:
            transitions += 1
        acquired = (
            _micro_time_of(spec.acquire_time) if mine and spec is not None and spec.acquire_time else None
        )
        lease.spec = client.V1LeaseSpec(**_snake(self._spec(acquired, transitions)))
        try:
            # replace with the resourceVersion just read: of two racing candidates one gets 409
            self.api.replace_namespaced_lease(cfg.name, cfg.namespace, lease)
        except Exception as exc:
            log.info("writing Lease %s/%s failed: %s", cfg.namespace, cfg.name, _reason(exc))
            return self.is_leader() if mine else False
        if mine:
            self._renewed_at = started
        else:
            log.info(
                "took over Lease %s/%s from %s (not renewed for %.1fs)",
                cfg.namespace,
                cfg.name,
                holder or "nobody",
                started - self._observed_at,
            )
            self._became_leader(started, transitions)
        return True

    def _became_leader(self, at: float, transitions: int) -> None:
        self._renewed_at = at
        self.transitions = transitions
        log.info(
            "became the leader (Lease %s/%s, identity %s)",
            self.config.namespace,
            self.config.name,
            self.identity,
        )

    def release(self) -> None:
        """Give the Lease up (clean shutdown), so that a standby takes over at its next try."""
        from kubernetes import client

        if not self.is_leader():
            return
        cfg = self.config
        self._renewed_at = None
        try:
            lease = self.api.read_namespaced_lease(cfg.name, cfg.namespace)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return
            lease.spec = client.V1LeaseSpec(
                holder_identity=None,
                lease_duration_seconds=1,
                acquire_time=lease.spec.acquire_time,
                renew_time=datetime.fromtimestamp(self._wall(), tz=UTC),
                lease_transitions=lease.spec.lease_transitions,
            )
            self.api.replace_namespaced_lease(cfg.name, cfg.namespace, lease)
            log.info("released Lease %s/%s", cfg.namespace, cfg.name)
        except Exception as exc:
            log.warning("releasing Lease %s/%s failed: %s", cfg.namespace, cfg.name, _reason(exc))

    # ------------------------------------------------------------------------------ loops
    def wait_for_leadership(self, stop: threading.Event) -> bool:
        """Block until we hold the Lease (True) or ``stop`` is set (False)."""
        announced = False
        while not stop.is_set():
            if self.try_acquire_or_renew():
                return True
            if not announced:
                log.info(
                    "standing by: Lease %s/%s is held by %s",
                    self.config.namespace,
                    self.config.name,
                    (self._observed or (None, None))[1],
                )
                announced = True
            stop.wait(self.config.retry_period_s)
        return False

    def keep_renewing(self, stop: threading.Event, on_lost: Callable[[], None]) -> None:
        """Renew every retry period until ``stop``; call ``on_lost`` once if leadership is lost."""
        while not stop.wait(self.config.retry_period_s):
            self.try_acquire_or_renew()
            if not self.is_leader():
                log.error(
                    "lost the Lease %s/%s (no renewal for %.0fs): stopping",
                    self.config.namespace,
                    self.config.name,
                    self.config.renew_deadline_s,
                )
                on_lost()
                return


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "reason", None) or exc).splitlines()[0][:200]


def _micro_time_of(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return str(value) if value else None


def _snake(spec: dict[str, Any]) -> dict[str, Any]:
    """``V1LeaseSpec`` keyword arguments from the camelCase spec (times as datetimes)."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key)
        if key in ("acquireTime", "renewTime") and isinstance(value, str):
            value = datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        out[snake] = value
    return out
