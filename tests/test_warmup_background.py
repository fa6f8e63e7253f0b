"""lib.start_warmup_runs: chapter 8's warm-up table started in background processes."""

import pytest
import torch

import lib


def _dates():
    return lib.make_date_split(n_held_out=1500, seed=0).train


def test_background_runs_equal_the_runs_in_turn():
    dates = _dates()
    pending = lib.start_warmup_runs(dates, [0, 1], warmup_steps=2, steps=2, workers=2)
    here = lib.warmup_runs(dates, [0, 1], warmup_steps=2, steps=2, workers=1)
    table = pending.result()
    assert pending.done()
    assert list(table) == ["post-LN, no warm-up", "post-LN, warm-up",
                           "pre-LN, no warm-up", "pre-LN, warm-up"]
    assert table == here  # the same losses, bit for bit, per setting and seed
    assert all(len(runs) == 2 and all(len(r) == 2 for r in runs) for runs in table.values())
    assert table["post-LN, no warm-up"][0] != table["post-LN, no warm-up"][1]  # seeds differ
    assert pending.result() is table  # collected once


def test_background_runs_refuse_bad_input_before_starting():
    dates = _dates()
    with pytest.raises(ValueError, match="seeds"):
        lib.start_warmup_runs(dates, [])
    with pytest.raises(ValueError, match="workers"):
        lib.start_warmup_runs(dates, [0], workers=0)
    with pytest.raises(ValueError, match="warmup_steps"):
        lib.start_warmup_runs(dates, [0], warmup_steps=0)
    with pytest.raises(ValueError, match="dates"):
        lib.start_warmup_runs([], [0])


def test_background_workers_leave_one_cpu_to_this_process(monkeypatch):
    from lib.teach import probes

    for cpus, expected in ((1, 1), (2, 1), (3, 2), (8, 7)):
        monkeypatch.setattr(probes.os, "sched_getaffinity", lambda pid, n=cpus: set(range(n)),
                            raising=False)
        assert lib.background_workers() == expected
    monkeypatch.delattr(probes.os, "sched_getaffinity", raising=False)  # not Linux
    monkeypatch.setattr(probes.os, "cpu_count", lambda: 4)
    assert lib.background_workers() == 3
    monkeypatch.setattr(probes.os, "cpu_count", lambda: None)
    assert lib.background_workers() == 1


def test_the_start_functions_share_one_pool_of_background_workers(monkeypatch):
    """Chapter 8 starts eight warm-up runs and three date models before its main
    training: they must not all run at once beside it (on 2 CPUs the main training
    once took 18 minutes for 1.6 of CPU time)."""
    import multiprocessing
    import time

    from lib.teach import probes

    monkeypatch.setattr(probes, "background_workers", lambda: 1)
    monkeypatch.setattr(probes, "_BACKGROUND", None)  # a fresh pool, of that size
    dates = _dates()
    before = set(multiprocessing.active_children())
    runs = lib.start_warmup_runs(dates, [0, 1], warmup_steps=2, steps=2)
    models = [lib.start_date_model_run(dates, s, steps=2) for s in (1, 2)]
    most = 0
    while not (runs.done() and all(m.done() for m in models)):
        most = max(most, len(set(multiprocessing.active_children()) - before))
        time.sleep(0.01)
    assert most == 1  # one process at a time did all ten runs
    assert runs.result() == lib.warmup_runs(dates, [0, 1], warmup_steps=2, steps=2, workers=1)
    probes._BACKGROUND.shutdown(wait=True)  # a pool shut down is made again on the next start
    again = lib.start_date_model_run(dates, 1, steps=2)
    assert all(torch.equal(a, b) for a, b in zip(again.result().state_dict().values(),
                                                 models[0].result().state_dict().values()))
    probes._BACKGROUND.shutdown(wait=True)


def test_a_result_asked_for_runs_the_queued_jobs_here(monkeypatch):
    """Waiting for a result, this process takes back the jobs no worker has started
    and runs them itself: the same numbers, torch's random state and thread count
    left as they were."""
    from lib.teach import probes

    monkeypatch.setattr(probes, "background_workers", lambda: 1)
    monkeypatch.setattr(probes, "_BACKGROUND", None)
    ran_here = []
    run_here = probes._run_here
    monkeypatch.setattr(probes, "_run_here",
                        lambda fn, job: ran_here.append((fn.__name__, *job[1:-1]))
                        or run_here(fn, job))
    dates = _dates()
    first = lib.start_date_model_run(dates, 1, steps=2)  # the worker starts it
    runs = lib.start_warmup_runs(dates, [0, 1], warmup_steps=2, steps=2)  # 8 jobs queued
    last = lib.start_date_model_run(dates, 3, steps=2)
    threads = torch.get_num_threads()
    model = last.result()
    assert ran_here == [("_date_run", 3)]  # the last one, still queued, trained here
    assert last.done() and not model.training
    torch.set_num_threads(1)  # as the background runs
    try:
        reference = lib.date_model_run(dates, 3, steps=2)
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 reference.values()))
    torch.manual_seed(123)
    state = torch.get_rng_state()
    table = runs.result()  # most of the eight are still queued: run here, latest first
    assert torch.equal(torch.get_rng_state(), state)  # as it was, though each run seeds it
    assert runs.done() and len(ran_here) >= 5  # (a worker holds at most two at a time)
    # (norm_first, warm-up steps, seed) of the eight jobs, the latest first:
    assert ran_here[1:4] == [("_run_one", True, 2, 1), ("_run_one", True, 2, 0),
                             ("_run_one", True, 0, 1)]
    assert table == lib.warmup_runs(dates, [0, 1], warmup_steps=2, steps=2, workers=1)
    assert torch.get_num_threads() == threads
    assert first.result() is first.result()
    probes._BACKGROUND.shutdown(wait=True)
