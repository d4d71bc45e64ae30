"""The same scenario under other policies: each run's peer per policy (its own experiment and repeat first), for the
run page, the stop queue and the experiment page; a sub-agent's peer is the matching sub-agent of its coordinator's."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from copy import copy

from django.db import connection

from ..models import Run
from .common import HEAVY_FIELDS
from .prepared import Prepared

# How a peer was found, best first: its ``pairing`` attribute.
PAIRINGS = ("same experiment and repeat", "same experiment", "newest run")


def experiment_repeats(rows: list[dict]) -> dict[int, tuple]:
    """Each experiment run's place, ``(experiment, scenario, policy, repeat)``: the originals of one
    scenario and policy count repeats in the order they were created; a re-run takes the repeat of the
    run it re-runs (``rerun_of``), however late it was made."""
    by_id = {row["id"]: row for row in rows}
    counted: dict[tuple, int] = defaultdict(int)
    place: dict[int, tuple] = {}
    for row in sorted(rows, key=lambda r: r["id"]):
        root, hops = row, 0
        while root["rerun_of_id"] in by_id and hops < len(rows):
            root, hops = by_id[root["rerun_of_id"]], hops + 1
        if root is row:
            group = (row["experiment_id"], row["scenario"], row["policy_name"])
            place[row["id"]] = (*group, counted[group])
            counted[group] += 1
        else:
            place[row["id"]] = place[root["id"]]
    return place


def _newest_per_policy(*, scenarios: list[str], finished: bool) -> dict[tuple[str, str], int]:
    """The newest top-level run of each (scenario, policy) of ``scenarios``, by ``created_at`` then id.

    One query whose cost grows with the number of policies, not of runs: a recursive walk hops from
    each policy name to the next in the (scenario, policy_name, parent, -created_at, -id) index (a
    skip scan neither database does by itself), then takes each policy's newest run from the same
    index; a grouped MAX(id) would read every run of the scenario. The newest run is ordered by the
    whole index's key (the first three are equal anyway): ordered by its date alone, PostgreSQL may
    read the newest runs of all through the date index until one matches, and the cost it expects for
    that can set its JIT compiling a query that is cheaper to run than to compile.
    """
    status = "AND r.status = %s " if finished else ""
    seeds = " UNION ALL ".join("SELECT %s AS scenario" for _ in scenarios)
    table = Run._meta.db_table
    sql = (
        f"WITH RECURSIVE policies(scenario, name) AS ("
        f" SELECT s.scenario, (SELECT r.policy_name FROM {table} r WHERE r.scenario = s.scenario"
        f" AND r.parent_id IS NULL ORDER BY r.policy_name LIMIT 1) FROM ({seeds}) s"
        f" UNION ALL"
        f" SELECT p.scenario, (SELECT r.policy_name FROM {table} r WHERE r.scenario = p.scenario"
        f" AND r.parent_id IS NULL AND r.policy_name > p.name ORDER BY r.policy_name LIMIT 1)"
        f" FROM policies p WHERE p.name IS NOT NULL"
        f") SELECT p.scenario, p.name, (SELECT r.id FROM {table} r WHERE r.scenario = p.scenario"
        f" AND r.policy_name = p.name AND r.parent_id IS NULL {status}"
        f"ORDER BY r.scenario, r.policy_name, r.parent_id, r.created_at DESC, r.id DESC LIMIT 1)"
        f" FROM policies p WHERE p.name IS NOT NULL"
    )
    params = [*scenarios, *([Run.Status.FINISHED] if finished else [])]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {(scenario, policy): pk for scenario, policy, pk in cursor.fetchall() if pk is not None}


def run_policy_peers(*, runs: list[Run], finished: bool = False, fields: Iterable[str] = ()) -> dict[int, list[Run]]:
    """For each run, one run of its scenario under each other policy, ordered by policy name, each with
    a ``pairing`` (``PAIRINGS``): from the run's own experiment and repeat when there is one (the newest
    re-run standing in for a run that was re-run), else from its experiment, else the newest anywhere.
    ``finished``: only runs that have ended; ``fields``: the only columns read of each (default: all
    but ``HEAVY_FIELDS``). Three queries, whatever the number of runs."""
    scenarios = {r.scenario for r in runs if r.scenario}
    out: dict[int, list[Run]] = {r.pk: [] for r in runs}
    if not scenarios:
        return out
    experiments = {r.experiment_id for r in runs if r.experiment_id}
    mates = []
    if experiments:
        top = Run.objects.filter(scenario__in=scenarios, parent__isnull=True, experiment_id__in=experiments)
        mates = list(top.order_by().values("id", "experiment_id", "scenario", "policy_name", "rerun_of_id", "status"))
    place = experiment_repeats(mates)
    status = {row["id"]: row["status"] for row in mates}
    newest_in_place: dict[tuple, int] = {}
    for pk, key in place.items():  # the newest re-run stands in for its repeat
        newest_in_place[key] = max(pk, newest_in_place.get(key, 0))
    if finished:
        newest_in_place = {k: pk for k, pk in newest_in_place.items() if status[pk] == Run.Status.FINISHED}
    newest_in_experiment: dict[tuple, int] = {}
    for (experiment, scenario, policy, _), pk in newest_in_place.items():
        key = (experiment, scenario, policy)
        newest_in_experiment[key] = max(pk, newest_in_experiment.get(key, 0))
    newest = _newest_per_policy(scenarios=sorted(scenarios), finished=finished)
    chosen: dict[int, list[tuple[str, int, str]]] = {}
    for run in runs:
        mine = place.get(run.pk) or (run.experiment_id, run.scenario, run.policy_name, 0)
        picks = []
        for scenario, policy in newest:
            if scenario != run.scenario or policy == run.policy_name:
                continue
            if (found := newest_in_place.get((run.experiment_id, scenario, policy, mine[3]))) is not None:
                picks.append((policy, found, PAIRINGS[0]))
            elif (found := newest_in_experiment.get((run.experiment_id, scenario, policy))) is not None:
                picks.append((policy, found, PAIRINGS[1]))
            else:
                picks.append((policy, newest[(scenario, policy)], PAIRINGS[2]))
        chosen[run.pk] = sorted(picks)
    wanted = sorted({pk for picks in chosen.values() for _, pk, _ in picks})
    fetched = {r.pk: r for r in _peers_read(tuple(fields))(ids=wanted)} if wanted else {}
    for run_pk, picks in chosen.items():
        for _, pk, pairing in picks:
            peer = copy(fetched[pk])
            peer.pairing = pairing
            out[run_pk].append(peer)
    return out


_PEER_READS: dict[tuple[str, ...], Prepared] = {}


def _peers_read(fields: tuple[str, ...]) -> Prepared:
    """The read of peers by id with ``fields`` (none: all but ``HEAVY_FIELDS``), compiled once per
    process for each set of fields a page asks for."""
    read = _PEER_READS.get(fields)
    if read is None:
        runs = Run.objects.only(*fields) if fields else Run.objects.defer(*HEAVY_FIELDS)
        read = _PEER_READS[fields] = Prepared(lambda ids: runs.filter(id__in=ids))
    return read


# How a sub-agent's peer was matched among the sub-agents of its coordinator's peer, best first.
SUB_AGENT_PAIRINGS = ("same job", "same step", "same position")


def _step_places(children: list[Run]) -> dict[int, tuple[int | None, int]]:
    """Each sub-agent's step and its place among those of that step (a step retried ran several)."""
    counted: dict[int | None, int] = defaultdict(int)
    places = {}
    for child in children:
        places[child.pk] = (child.parent_step, counted[child.parent_step])
        counted[child.parent_step] += 1
    return places


def sub_agent_policy_peers(*, run: Run, fields: Iterable[str]) -> list[Run]:
    """A sub-agent's peers: under each other policy, the sub-agent of its coordinator's peer
    (``run_policy_peers``) that did the same job (the same label, e.g. "sub-agent 3: Look up order
    1050…"), else the one started by the same step (in the same place among that step's, else its
    first), else the one in the same place among its coordinator's sub-agents; none for a policy whose
    coordinator ran no matching one. Each one's ``pairing`` names both matches. Six queries, whatever
    the number of runs and sub-agents."""
    parent = Run.objects.only("id", "scenario", "policy_name", "experiment_id", "rerun_of_id").get(pk=run.parent_id)
    coordinators = run_policy_peers(runs=[parent], fields=("id", "policy_name"))[parent.pk]
    fields = {*fields, "parent", "parent_step", "label"}
    below: dict[int, list[Run]] = defaultdict(list)
    family = Run.objects.only(*fields).filter(parent_id__in=[parent.pk, *(c.pk for c in coordinators)])
    for child in family.order_by("id"):
        below[child.parent_id].append(child)
    mine = below[parent.pk]
    position = next((i for i, c in enumerate(mine) if c.pk == run.pk), None)
    step, place = _step_places(mine).get(run.pk, (None, 0))
    out = []
    for coordinator in coordinators:
        theirs = below[coordinator.pk]
        places = _step_places(theirs)
        same_step = [c for c in theirs if step is not None and c.parent_step == step]
        same_place = [c for c in same_step if places[c.pk][1] == place]
        same_job = [c for c in theirs if run.label and c.label == run.label]
        if same_job:
            match, how = same_job[0], SUB_AGENT_PAIRINGS[0]
        elif same_step:
            match, how = (same_place or same_step)[0], SUB_AGENT_PAIRINGS[1]
        elif position is not None and position < len(theirs):
            match, how = theirs[position], SUB_AGENT_PAIRINGS[2]
        else:
            continue
        peer = copy(match)
        peer.pairing = f"{how}, under coordinator #{coordinator.pk} ({coordinator.pairing})"
        out.append(peer)
    return out
