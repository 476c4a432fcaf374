"""Faults in data-parallel CPU training, with the real binaries on loopback: a rank killed
mid-step, a rank stalled by SIGSTOP, and a whole host (its entrypoint) lost. Each time the
surviving supervisor must exit non-zero within DIST.TIMEOUT_SECONDS + 30 s, never hang,
leave no process behind and name the dead or stalled rank (global and local) or the lost
host in output/failure. The supervisors keep their default 110 s grace period, so a job that
only ended through the grace period's SIGKILL fails the time bound."""
import json
import os
import signal
import socket
import time

import pytest
from engine_test_job import (TINY_MODEL_OPTS, alive, children_of, entrypoint_env, kill_everything, log_path,
                             make_job, make_shapes, rank_of, start_entrypoint)

DIST_TIMEOUT = 10
BOUND = DIST_TIMEOUT + 30

# Long enough never to finish before the fault; no val channel, no periodic checkpoint:
# the faults land in training steps.
OPTS = " ".join(TINY_MODEL_OPTS + [
    "MODEL.MASK_ON False", "SOLVER.IMS_PER_BATCH 2", "SOLVER.MAX_ITER 2000", "SOLVER.WARMUP_ITERS 1",
    "SOLVER.CHECKPOINT_PERIOD 100000", "SOLVER.LOG_PERIOD 1", f"DIST.TIMEOUT_SECONDS {DIST_TIMEOUT}", "SEED 3",
])


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return make_shapes(tmp_path_factory.mktemp("shapes"), train=8, val=1, seed=9)


def free_port_pair():
    """A port P with P + 1 free too (trainer rendezvous and the supervisors' check-in)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port >= 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    pytest.fail("no free pair of ports on loopback")


def iterations(root):
    path = root / "output" / "data" / "metrics.jsonl"
    if not path.exists():
        return 0
    done = 0
    for line in path.read_text().splitlines():
        try:
            done = max(done, json.loads(line).get("iteration", 0))
        except json.JSONDecodeError:  # a line being written
            pass
    return done


def wait_for_iterations(root, procs, n, timeout=120):
    deadline = time.time() + timeout
    while iterations(root) < n:
        for proc in procs:
            if proc.poll() is not None:
                pytest.fail(f"training ended (code {proc.returncode}) before the fault:\n" +
                            log_path(root).read_text()[-3000:])
        if time.time() > deadline:
            pytest.fail(f"no {n} iterations within {timeout} s:\n" + log_path(root).read_text()[-3000:])
        time.sleep(0.05)


def wait_bounded(proc, root, started):
    """Waits for the surviving supervisor; fails the test when it outlives BOUND seconds."""
    try:
        proc.wait(timeout=max(1.0, BOUND - (time.time() - started)))
    except Exception:
        pytest.fail(f"the supervisor did not exit within {BOUND} s of the fault:\n" + log_path(root).read_text()[-3000:])
    return time.time() - started


def trainers_by_rank(proc):
    deadline = time.time() + 10
    while True:
        pids = children_of(proc.pid)
        if len(pids) >= 1:
            return {rank_of(pid): pid for pid in pids}
        assert time.time() < deadline, "the supervisor has no trainer child"
        time.sleep(0.05)


def start_two_ranks(root):
    env = entrypoint_env(MASTER_ADDR="127.0.0.1", MRCNN_DIST_ADDR="127.0.0.1")
    return start_entrypoint(root, "--nproc-per-node", "2", "--master-port", str(free_port_pair()), env=env)


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
def test_a_dead_or_stalled_rank_fails_the_job_naming_it(shapes, tmp_path, fault):
    root = make_job(tmp_path / "job", shapes, OPTS, channels=("train",))
    proc = start_two_ranks(root)
    pids = {}
    try:
        wait_for_iterations(root, [proc], 3)
        pids = trainers_by_rank(proc)
        assert sorted(pids) == [0, 1]
        started = time.time()
        # Rank 1 writes no outputs: the survivor, rank 0, is the one that must notice.
        os.kill(pids[1], getattr(signal, fault))
        elapsed = wait_bounded(proc, root, started)
        log = log_path(root).read_text()
        print(f"\n{fault} of rank 1: the supervisor exited {proc.returncode} after {elapsed:.1f} s")
        assert proc.returncode != 0, log[-3000:]
        failure = (root / "output" / "failure").read_text()
        print(failure)
        if fault == "SIGKILL":
            # The killed rank is the root cause.
            assert failure.startswith("rank 1 (local rank 1) on algo-1 was killed by signal SIGKILL (9)"), failure
        else:
            # Rank 0 gave up on its silent peer after DIST.TIMEOUT_SECONDS, naming it; the
            # supervisor then killed the stopped process instead of waiting out the grace period.
            first = failure.splitlines()[0]
            assert first.startswith("rank 0 (local rank 0) on algo-1 exited with code 1: "), failure
            assert "rank 1 (local rank 1 on algo-1)" in first and f"{DIST_TIMEOUT}.0 s" in first, failure
            assert "rank 1 (local rank 1) on algo-1 was stopped by signal SIGSTOP (19)" in failure, failure
            assert elapsed >= DIST_TIMEOUT - 1, "the stall was reported before the timeout could have run out"
        for rank, pid in pids.items():
            assert not alive(pid), f"rank {rank} (pid {pid}) outlived its supervisor"
    finally:
        kill_everything(proc, pids.values())


def make_host(root, shapes, hosts, current):
    make_job(root, shapes, OPTS, channels=("train",))
    config = root / "input" / "config"
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": current, "hosts": hosts}))
    (config / "inputdataconfig.json").write_text(json.dumps({"train": {"TrainingInputMode": "File"}}))
    return root


@pytest.mark.parametrize("lost", ["worker", "master"])
def test_a_lost_host_fails_the_other_naming_it(shapes, tmp_path, lost):
    """Two supervisors as two hosts (127.0.0.1, 127.0.0.2), one trainer each. SIGKILL of one
    host's entrypoint takes its trainer with it (as a container's PID 1 would); the other
    host's supervisor must fail naming the lost host."""
    hosts = ["127.0.0.1", "127.0.0.2"]
    port = str(free_port_pair())
    flags = ("--nproc-per-node", "1", "--master-port", port, "--peer-timeout", "60")
    roots, procs = {}, {}
    pids = []
    try:
        for name, host in (("master", hosts[0]), ("worker", hosts[1])):
            roots[name] = make_host(tmp_path / name, shapes, hosts, host)
            procs[name] = start_entrypoint(roots[name], *flags, env=entrypoint_env(MRCNN_DIST_ADDR=host))
        wait_for_iterations(roots["master"], procs.values(), 3)
        survivor = "master" if lost == "worker" else "worker"
        pids = [pid for proc in procs.values() for pid in children_of(proc.pid)]
        lost_trainers = children_of(procs[lost].pid)
        assert len(lost_trainers) == 1
        started = time.time()
        procs[lost].send_signal(signal.SIGKILL)
        elapsed = wait_bounded(procs[survivor], roots[survivor], started)
        log = log_path(roots[survivor]).read_text()
        print(f"\n{lost} host lost: the {survivor}'s supervisor exited {procs[survivor].returncode} after {elapsed:.1f} s")
        assert procs[survivor].returncode != 0, log[-3000:]
        failure = (roots[survivor] / "output" / "failure").read_text()
        print(failure)
        lost_rank, lost_host = (1, hosts[1]) if lost == "worker" else (0, hosts[0])
        assert f"rank {lost_rank} (local rank 0 on {lost_host})" in failure.splitlines()[0], failure
        deadline = time.time() + 10
        while any(alive(pid) for pid in lost_trainers) and time.time() < deadline:
            time.sleep(0.05)
        assert not any(alive(pid) for pid in lost_trainers), "the lost host's trainer outlived its entrypoint"
    finally:
        for proc in procs.values():
            kill_everything(proc, pids)
