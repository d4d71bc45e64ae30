"""Scenario packs in the dashboard: startup refuses a bad pack, the launch page groups scenarios by pack,
and a pack's scenario runs through a real worker that loaded the pack from its environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse

from agents.events import ListRecorder
from agents.run import run_scenario
from agents.scenarios import ENV_VAR, registry_load, registry_use
from tests.conftest import WorkerProcess, purge_test_queue
from tracer.experiments import experiment_launch
from tracer.models import Experiment, Run

ROOT = Path(__file__).resolve().parents[2]
PACK_MODULE = "examples.inventory_pack"


@pytest.fixture
def with_inventory_pack():
    """This process knows the example pack, as a web process started with RLT_SCENARIO_PACKS would."""
    with registry_use(registry_load(PACK_MODULE)) as loaded:
        yield loaded


def pack_boxes(html: str) -> dict[str, list[str]]:
    """The scenario checkboxes of each pack's fieldset on the launch page, by pack name."""
    groups = re.findall(r'<fieldset class="pack" id="pack-([\w-]+)">(.*?)</fieldset>', html, re.S)
    return {name: re.findall(r'name="scenarios" value="([^"]+)"', body) for name, body in groups}


def test_the_web_process_refuses_to_start_with_a_pack_it_cannot_load():
    env = {**os.environ, ENV_VAR: f"{PACK_MODULE},mypkg.nope"}
    env.pop("RLT_TEST_DB_FILE", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert done.stderr.rstrip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: "
        f"{ENV_VAR}: could not import 'mypkg.nope': ModuleNotFoundError: No module named 'mypkg'"
    )


@pytest.mark.django_db
def test_the_launch_page_groups_the_scenarios_by_pack(admin_client, with_inventory_pack):
    response = admin_client.get(reverse("tracer:launch"))
    assert response.status_code == 200
    html = response.content.decode()
    boxes = pack_boxes(html)
    assert list(boxes) == ["lessons", "inventory"]
    assert boxes["lessons"] == [s.name for s in with_inventory_pack.packs[0].scenarios]
    assert boxes["inventory"] == ["inventory-warehouse-name", "inventory-short-stock", "inventory-flaky-scanner"]
    assert "Inventory (example pack)" in html


@pytest.mark.django_db
def test_launching_a_pack_scenario_queues_it_and_an_unknown_one_is_named(admin_client, with_inventory_pack):
    response = admin_client.post(
        reverse("tracer:launch"),
        {
            "scenarios": ["inventory-short-stock"],
            "policies": ["structured"],
            "model_backend": "simulated",
            "repeats": 1,
        },
    )
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("tracer:experiment", args=[experiment.pk])
    assert list(experiment.runs.values_list("scenario", flat=True)) == ["inventory-short-stock"]
    with pytest.raises(ValidationError) as caught:
        experiment_launch(scenarios=["inventory-overflow"], policies=["structured"])
    assert caught.value.message_dict["scenarios"][0].startswith("unknown scenario 'inventory-overflow'")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_run_experiment_runs_a_pack_scenario_through_a_worker_that_loaded_the_pack(with_inventory_pack):
    purge_test_queue()
    worker = WorkerProcess(env={ENV_VAR: PACK_MODULE})
    try:
        worker.wait_ready()
        out = StringIO()
        call_command(
            "run_experiment",
            "--scenario",
            "inventory-short-stock,inventory-warehouse-name",
            "--policy",
            "starter,structured",
            "--wait",
            "--timeout",
            "120",
            stdout=out,
            stderr=StringIO(),
        )
    finally:
        worker.stop()
    runs = list(Run.objects.order_by("id"))
    assert len(runs) == 4
    for run in runs:
        expected = ListRecorder()
        run_scenario(run.scenario, run.policy_settings, recorder=expected, seed=run.pk)
        what = f"{run.scenario} under {run.policy_name}"
        assert run.status == Run.Status.FINISHED and run.worker_name.startswith(worker.name), what
        assert run.verdict == ("pass" if expected.end.verdict.passed else "fail"), what
        assert run.verdict_reason == expected.end.verdict.reason, what
        assert run.step_count == len(expected.steps), what
    short = next(r for r in runs if r.scenario == "inventory-short-stock" and r.policy_name == "starter")
    assert short.verdict_reason == (
        "answered ✓; nothing reserved ✓; reservation asked for once ✗ (asked 6 times); "
        "answer gives the 3 units in stock ✗"
    )
    table = out.getvalue()
    assert re.search(r"^inventory-short-stock\s+structured\s+1\s+1\b", table, re.M), table
