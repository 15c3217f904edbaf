"""Hosts are spread over fetch tasks by expected work (jobs/fetch.py balance_hosts)."""
from jobs.fetch import balance_hosts


def test_big_hosts_do_not_pile_up_in_one_task():
    work = {"big1": 100.0, "big2": 100.0, "big3": 90.0}
    work.update({f"small{i}": 1.0 for i in range(60)})
    assignment = balance_hosts(work, 3)
    assert set(assignment) == set(work)
    assert len({assignment["big1"], assignment["big2"], assignment["big3"]}) == 3
    loads = [0.0] * 3
    for host, task in assignment.items():
        loads[task] += work[host]
    assert max(loads) - min(loads) <= 10.0  # LPT: within the largest small item's reach


def test_every_host_in_exactly_one_task_and_deterministic():
    work = {f"h{i}": float(i % 7) for i in range(100)}
    a = balance_hosts(work, 4)
    assert a == balance_hosts(dict(reversed(list(work.items()))), 4)
    assert set(a.values()) == {0, 1, 2, 3}


def test_more_tasks_than_hosts():
    assert sorted(balance_hosts({"a": 1.0, "b": 2.0}, 8).values()) == [0, 1]
