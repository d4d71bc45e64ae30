"""Faults of the broker: it loses the messages it held, or it is down when an experiment is launched.

Each test owns its broker (a redis-server on a free port, or a broker folder in a temporary
directory), so it runs in both CI passes whatever broker the rest of the session uses.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.urls import reverse

from tracer.experiments import experiment_launch
from tracer.models import Experiment, Run

from .conftest import FAST_RECOVERY, OUTAGE_S, OwnRedis, filesystem_broker, sending_to
from .harness import assert_recovered, every_run_ended, session_snapshot, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

# 16 runs of 1 to 10 steps: with 0.25 s after each step and two pool processes they take about 5 s,
# so most are still queued when the broker loses its messages 1 s after the launch.
SCENARIOS = [
    "refund-too-old",
    "refund-flaky-payment",
    "lookup-flaky",
    "lookup-empty",
    "room-book-permission",
    "currency-unsupported",
    "fatal-credentials",
    "stuck-model",
]
POLICIES = ["starter", "structured"]


@dataclass
class LossyBroker:
    """A broker of the test's own and how to make it lose every message it holds."""

    kind: str
    url: str
    transport_options: dict
    worker_env: dict
    redis: OwnRedis | None = None
    folder: Path | None = None

    def waiting(self, queue: str) -> int:
        """Messages the broker holds for ``queue``."""
        if self.redis is not None:
            return self.redis.queue_length(queue)
        return len(list((self.folder / "queue").glob(f"*.{queue}.msg")))

    def lose_messages(self, queue: str) -> None:
        if self.redis is not None:  # kill -9 and start again, empty: nothing was saved
            self.redis.restart()
        else:  # the queued message files deleted from the broker folder
            for message in (self.folder / "queue").glob(f"*.{queue}.msg"):
                message.unlink(missing_ok=True)


@pytest.fixture(params=["redis", "filesystem"])
def lossy_broker(request) -> LossyBroker:
    if request.param == "redis":
        redis = request.getfixturevalue("own_redis")
        return LossyBroker("redis", redis.url, {}, {"CELERY_BROKER_URL": redis.url}, redis=redis)
    folder = request.getfixturevalue("broker_folder")
    url, options = filesystem_broker(folder)
    return LossyBroker(
        "filesystem", url, options, {"CELERY_BROKER_URL": None, "RLT_BROKER_DIR": str(folder)}, folder=folder
    )


def test_runs_whose_messages_the_broker_lost_are_sent_again_and_every_run_ends(lossy_broker, start_worker):
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    worker = start_worker(step_delay_s=0.25, beat=True, env={**lossy_broker.worker_env, **FAST_RECOVERY})
    with sending_to(lossy_broker.url, lossy_broker.transport_options):
        experiment = experiment_launch(scenarios=SCENARIOS, policies=POLICIES)
        time.sleep(1.0)
        held = lossy_broker.waiting(queue)
        lossy_broker.lose_messages(queue)
        fault_at = time.monotonic()
        queued = session_snapshot().count(lambda r: r.status == Run.Status.QUEUED)
        assert lossy_broker.waiting(queue) == 0
        assert held > 0 and queued > 0, "every message had been taken before the fault: nothing was lost"

        snapshot = wait_for(
            session_snapshot, every_run_ended, timeout=120, what="every run to end after the loss", workers=[worker]
        )
    recovered_s = snapshot.read_at - fault_at
    figures = assert_recovered(snapshot, experiment_id=experiment.pk)
    assert figures.resent > 0, "no run's task was sent again: the lost runs ended some other way"
    assert worker.proc.poll() is None, "the worker died instead of reconnecting"
    print(
        f"\n[faults] broker lost its messages ({lossy_broker.kind}): {held} messages and {queued} queued runs at the "
        f"loss; {figures}; every run ended {recovered_s:.1f} s after the loss"
    )


def test_every_run_ends_after_redis_is_down_under_running_workers_and_comes_back_empty(own_redis, start_worker):
    """Redis gone for OUTAGE_S while runs execute: runs under way go on (they write to the database),
    the worker reconnects, and the sweep sends again the queued runs whose messages were lost."""
    worker = start_worker(step_delay_s=0.25, beat=True, env={"CELERY_BROKER_URL": own_redis.url, **FAST_RECOVERY})
    with sending_to(own_redis.url):
        experiment = experiment_launch(scenarios=SCENARIOS, policies=POLICIES)
        wait_for(
            session_snapshot,
            lambda s: s.count(lambda r: r.status == Run.Status.RUNNING and r.step_count > 0) >= 1,
            timeout=60,
            what="a run with steps",
            workers=[worker],
        )
        held = own_redis.queue_length(settings.CELERY_TASK_DEFAULT_QUEUE)
        own_redis.kill()
        down_at = time.monotonic()
        time.sleep(OUTAGE_S)
        own_redis.start()  # empty: the messages it held are gone
        at_restart = session_snapshot()
        snapshot = wait_for(
            session_snapshot,
            every_run_ended,
            timeout=120 + OUTAGE_S,
            what="every run to end after Redis came back",
            workers=[worker],
        )
    figures = assert_recovered(snapshot, experiment_id=experiment.pk)
    queued = at_restart.count(lambda r: r.status == Run.Status.QUEUED)
    assert worker.proc.poll() is None, "the worker died with the broker"
    print(
        f"\n[faults] Redis down {OUTAGE_S:.0f} s, back empty: {held} messages lost, {queued} runs queued when it "
        f"came back; {figures}; every run ended {snapshot.read_at - down_at:.1f} s after it went down"
    )


@pytest.mark.parametrize("broker", ["redis", "filesystem"])
def test_a_launch_while_the_broker_is_down_names_the_broker_and_writes_nothing(broker, request, admin_client):
    if broker == "filesystem":
        pytest.skip(
            "not applicable: the filesystem broker is a folder on this machine, always reachable; "
            "a missing or unwritable folder is a configuration error at start, not an outage"
        )
    own_redis = request.getfixturevalue("own_redis")
    own_redis.kill()
    with sending_to(own_redis.url):
        started = time.monotonic()
        with pytest.raises(ValidationError) as refused:
            experiment_launch(scenarios=["refund-too-old"], policies=["starter"])
        refused_s = time.monotonic() - started
        message = " ".join(refused.value.messages)
        assert "broker" in message and f"127.0.0.1:{own_redis.port}" in message, message
        assert Experiment.objects.count() == 0 and Run.objects.count() == 0

        # The same through the dashboard: the launch page again, saying why, not a server error.
        response = admin_client.post(
            reverse("tracer:launch"),
            {"scenarios": ["refund-too-old"], "policies": ["starter"], "model_backend": "simulated", "repeats": 1},
        )
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    for line in refused.value.messages:
        assert line in page, f"the launch page does not say {line!r}"
    assert Experiment.objects.count() == 0 and Run.objects.count() == 0
    assert refused_s < 15, f"the launch took {refused_s:.1f} s to give up on the broker"
    print(f"\n[faults] broker down at launch (redis): refused in {refused_s:.2f} s: {message}")
