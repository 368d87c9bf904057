import zlib

import pytest

from actor.collect import actor_epsilon, van_der_corput
from dqn.settings.config import ActorConfig
from dqn.settings.identity import replica_number, stable_actor_id, uses_docker_dns


def apex(actor_id: int, num_actors: int) -> float:
    return actor_epsilon(ActorConfig(apex_epsilon=True, actor_id=actor_id, num_actors=num_actors), 0)


def test_van_der_corput_spreads_any_prefix():
    assert [van_der_corput(n) for n in range(8)] == [0, 0.5, 0.25, 0.75, 0.125, 0.625, 0.375, 0.875]
    for size in range(2, 65):  # ids 0..size-1 split [0, 1) into gaps no wider than 2/size
        points = sorted(van_der_corput(n) for n in range(size)) + [1.0]
        assert max(b - a for a, b in zip(points, points[1:], strict=False)) <= 2 / size


@pytest.mark.parametrize("num_actors", [1, 2, 3, 4, 5, 8, 9])
def test_apex_epsilon_distinct_for_any_replica_ids(num_actors):
    """Compose replicas 1..N and StatefulSet ordinals 0..N-1, scaled without touching num_actors."""
    for ids in (range(1, 33), range(0, 32)):
        values = [apex(i, num_actors) for i in ids]
        assert len(set(values)) == len(values)
        assert all(0.4 ** 8 <= v <= 0.4 for v in values)


def test_apex_epsilon_keeps_the_paper_ladder_for_ids_below_num_actors():
    values = [apex(i, 4) for i in range(4)]
    assert values == pytest.approx([0.4 ** (1 + 7 * i / 3) for i in range(4)])
    assert apex(0, 1) == pytest.approx(0.4)


@pytest.mark.parametrize("name, number", [
    ("actor-0", 0), ("actor-12", 12), ("dev-actor-3", 3),                       # StatefulSet pods (kustomize prefix)
    ("dqn-service-actor-4.dqn-service_replay", 4), ("my_proj-actor-2", 2),     # Compose containers (PTR answers)
    ("3f2a9c1b0e12", None), ("actor", None), ("actor-", None), ("-7", None),   # container ids, plain names
])
def test_replica_number(name, number):
    assert replica_number(name) == number


def test_stable_actor_id_from_pod_names_and_plain_hosts(tmp_path):
    assert stable_actor_id("actor-5") == 5
    assert stable_actor_id("workstation") == zlib.crc32(b"workstation") % 1_000_000
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("search example\nnameserver 127.0.0.11\noptions ndots:0\n")
    assert uses_docker_dns(str(resolv))
    resolv.write_text("nameserver 192.0.2.53\n")
    assert not uses_docker_dns(str(resolv))
    assert not uses_docker_dns(str(tmp_path / "missing"))
