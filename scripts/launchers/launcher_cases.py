"""Real launchers driving `entrypoint train`: torchrun (static and c10d rendezvous, elastic
restart, root-cause error file), Open MPI's mpirun, and Slurm's srun, sbatch and scancel.
Every case is a real 2-process CPU training job on a tiny shapes dataset, checked for its
exit code, the model written and rank agreement (bit-identical weights on both ranks).
Run by scripts/test-launchers.sh, which installs and starts Open MPI and a local Slurm.

Each case prints `[launchers] <case>: ok|FAILED (<seconds> s)`; the exit status is the
number of failed cases (0: all passed). Nothing listens beyond loopback."""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid

REPO = pathlib.Path(__file__).resolve().parents[2]

# The narrow model of the engine's integration tests (test/trainer/engine/engine_test_job.py):
# 64 px images, a few iterations, a checkpoint every 4.
MAX_ITER = 12
TINY_OPTS = [
    "MODEL.FPN.OUT_CHANNELS 32", "MODEL.ROI_BOX_HEAD.FC_DIM 64", "MODEL.ROI_MASK_HEAD.CONV_DIM 32",
    "MODEL.RPN.POST_NMS_TOPK_TRAIN 50", "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE 32",
    "INPUT.MIN_SIZE_TRAIN [64] INPUT.MAX_SIZE_TRAIN 64 INPUT.MIN_SIZE_TEST 64 INPUT.MAX_SIZE_TEST 64",
    "DATALOADER.NUM_WORKERS 1", "DATALOADER.ASPECT_RATIO_GROUPING False",
    "SOLVER.IMS_PER_BATCH 4", "SOLVER.WARMUP_ITERS 1", "SOLVER.LOG_PERIOD 1",
    "SOLVER.CHECKPOINT_PERIOD 4", "TEST.EVAL_PERIOD 0", "DIST.TIMEOUT_SECONDS 60", "SEED 11",
]
LAUNCHER_PREFIXES = ("SM_", "MASTER_", "RANK", "WORLD_", "LOCAL_", "GROUP_", "ROLE_", "TORCHELASTIC_",
                     "OMPI_", "PMIX_", "SLURM_", "PET_", "SAGEMAKER_")


class CaseFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise CaseFailed(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return {name: raw[8 + n + info["data_offsets"][0]:8 + n + info["data_offsets"][1]]
            for name, info in header.items() if name != "__metadata__"}


class Launchers:
    def __init__(self, args):
        self.build = pathlib.Path(args.build).resolve()
        self.venv = pathlib.Path(args.venv).resolve()
        self.work = pathlib.Path(args.work).resolve()
        self.entrypoint = self.build / "bin" / "entrypoint"
        self.trainer = self.build / "bin" / "trainer"
        self.timeout = args.timeout
        self.shapes = self.work / "shapes"
        self.reference = None  # the uninterrupted run's final weights (torchrun single node)

    # --- jobs -------------------------------------------------------------------------
    def make_shapes(self):
        if not (self.shapes / "train").exists():
            subprocess.run([str(self.trainer), "make-shapes", "--output", str(self.shapes), "--train", "8",
                            "--val", "2", "--size", "64", "--seed", "5"], check=True, capture_output=True)

    def job(self, name, max_iter=MAX_ITER, extra_opts=(), resource_hosts=None):
        root = self.work / name
        shutil.rmtree(root, ignore_errors=True)
        (root / "input" / "config").mkdir(parents=True)
        (root / "input" / "data").mkdir(parents=True)
        for channel in ("train", "val"):
            (root / "input" / "data" / channel).symlink_to(self.shapes)
        self.write_opts(root, max_iter, extra_opts)
        if resource_hosts:
            (root / "input" / "config" / "resourceconfig.json").write_text(json.dumps(
                {"current_host": resource_hosts[0], "hosts": resource_hosts, "network_interface_name": "lo"}))
            (root / "input" / "config" / "inputdataconfig.json").write_text(json.dumps(
                {c: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated"} for c in ("train", "val")}))
        return root

    @staticmethod
    def write_opts(root, max_iter, extra_opts=()):
        opts = " ".join(TINY_OPTS + [f"SOLVER.MAX_ITER {max_iter}"] + list(extra_opts))
        (root / "input" / "config" / "hyperparameters.json").write_text(
            json.dumps({"config-file": "mask_rcnn_R_50_FPN_shapes_cpu.yaml", "opts": opts}))

    def env(self, root, tag):
        # The launchers' own per-job variables must not leak in; SLURM_CONF says where the
        # local Slurm is.
        env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES) or k == "SLURM_CONF"}
        env.update(MRCNN_TRAINER=str(self.trainer), MRCNN_DIST_ADDR="127.0.0.1", MASTER_ADDR="127.0.0.1",
                   MRCNN_DUMP_WEIGHTS_DIR=str(root / "dump"), SAGEMAKER_BASE_DIR=str(root),
                   MRCNN_LAUNCHER_CASE=tag, PATH=f"{self.venv / 'bin'}:{env.get('PATH', '')}",
                   OMP_NUM_THREADS="1")
        return env

    def torchrun(self, *flags):
        return [str(self.venv / "bin" / "torchrun"), *flags, "--no-python", str(self.entrypoint), "train"]

    def run(self, name, argv, env, cwd=None, timeout=None):
        """Runs `argv` in a session of its own with output in <work>/<name>.log; kills the whole
        session on timeout. Returns (exit code, output)."""
        log = self.work / f"{name}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, cwd=cwd or self.work, start_new_session=True)
            try:
                code = proc.wait(timeout=timeout or self.timeout)
            except subprocess.TimeoutExpired:
                self.kill_session(proc)
                raise CaseFailed(f"did not finish within {timeout or self.timeout} s; log {log}")
            finally:
                self.kill_session(proc)
        return code, log.read_text(errors="replace")

    @staticmethod
    def kill_session(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if proc.poll() is None:
            proc.wait(timeout=10)

    @staticmethod
    def trainers_of(tag):
        """{RANK: pid} of the trainer processes started for the case tagged `tag`."""
        found = {}
        for proc in pathlib.Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().split(b"\0")
                environ = (proc / "environ").read_bytes().split(b"\0")
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
            if not cmdline or not cmdline[0].endswith(b"/trainer"):
                continue
            if f"MRCNN_LAUNCHER_CASE={tag}".encode() not in environ:
                continue
            rank = next((e.split(b"=", 1)[1] for e in environ if e.startswith(b"RANK=")), None)
            if rank is not None:
                found[int(rank)] = int(proc.name)
        return found

    @staticmethod
    def kill_tagged(tag):
        """SIGKILLs every process still carrying the case's tag (a launcher's orphans)."""
        for proc in pathlib.Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                if f"MRCNN_LAUNCHER_CASE={tag}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                    os.kill(int(proc.name), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue

    # --- checks -----------------------------------------------------------------------
    def check_trained(self, root, code, out, expect_reference=True):
        check(code == 0, f"exit code {code}:\n{out[-3000:]}")
        check((root / "model" / "model.safetensors").exists(), "no model/model.safetensors written")
        r0 = read_safetensors(root / "dump" / "final_rank0.safetensors")
        r1 = read_safetensors(root / "dump" / "final_rank1.safetensors")
        init = read_safetensors(root / "dump" / "initial_rank0.safetensors")
        check(r0.keys() == r1.keys(), "the ranks hold different tensors")
        differ = [k for k in r0 if r0[k] != r1[k]]
        check(not differ, f"ranks 0 and 1 disagree on {len(differ)} tensors, e.g. {differ[:3]}")
        check(any(r0[k] != init[k] for k in r0), "training did not change the weights")
        if expect_reference and self.reference is not None:
            differ = [k for k in r0 if r0[k] != self.reference[k]]
            check(not differ, f"final weights differ from the uninterrupted torchrun run in {len(differ)} "
                              f"tensors, e.g. {differ[:3]}")
        return r0

    @staticmethod
    def iterations_logged(out):
        return [int(m) for m in re.findall(r"\[train\] iter: (\d+)/", out)]

    # --- cases ------------------------------------------------------------------------
    def case_torchrun_single_node(self):
        root = self.job("torchrun-single")
        tag = uuid.uuid4().hex
        argv = self.torchrun("--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                             "--master-port", str(free_port()))
        code, out = self.run("torchrun-single", argv + ["--base-dir", str(root)], self.env(root, tag))
        self.kill_tagged(tag)
        check("torchrun: node 0 of 1, starting 1 process(es)" in out, "the entrypoint did not see torchrun")
        self.reference = self.check_trained(root, code, out, expect_reference=False)

    def case_torchrun_two_nodes_c10d(self):
        root = self.job("torchrun-c10d")
        tag = uuid.uuid4().hex
        port = free_port()
        argv = self.torchrun("--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                             "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"launchers-{tag[:8]}",
                             "--max-restarts", "0")
        env = self.env(root, tag)
        logs = [self.work / "torchrun-c10d.node0.log", self.work / "torchrun-c10d.node1.log"]
        procs = []
        try:
            for log in logs:
                with open(log, "w") as out:
                    procs.append(subprocess.Popen(argv + ["--base-dir", str(root)], stdout=out,
                                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                                  cwd=self.work, start_new_session=True))
            codes = [p.wait(timeout=self.timeout) for p in procs]
        except subprocess.TimeoutExpired:
            raise CaseFailed(f"did not finish within {self.timeout} s; logs {logs}")
        finally:
            for p in procs:
                self.kill_session(p)
            self.kill_tagged(tag)
        out = "\n".join(log.read_text(errors="replace") for log in logs)
        check(codes == [0, 0], f"exit codes {codes}:\n{out[-3000:]}")
        check(out.count("torchrun: node ") == 2 and "of 2, starting 1 process(es)" in out,
              "the entrypoints did not see a 2-node torchrun job")
        self.check_trained(root, 0, out)

    def case_torchrun_elastic_restart(self):
        root = self.job("torchrun-restart")
        tag = uuid.uuid4().hex
        argv = self.torchrun("--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                             "--master-port", str(free_port()), "--max-restarts", "1")
        log = self.work / "torchrun-restart.log"
        killed = None
        with open(log, "w") as out:
            proc = subprocess.Popen(argv + ["--base-dir", str(root)], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self.env(root, tag), cwd=self.work,
                                    start_new_session=True)
            try:
                deadline = time.time() + self.timeout
                while killed is None:
                    check(time.time() < deadline, "no checkpoint within the time limit")
                    check(proc.poll() is None, "torchrun ended before a checkpoint:\n" + log.read_text()[-3000:])
                    if list((root / "checkpoints").glob("checkpoint_*.safetensors")):
                        trainers = self.trainers_of(tag)
                        if 1 in trainers:
                            os.kill(trainers[1], signal.SIGKILL)
                            killed = trainers[1]
                    time.sleep(0.1)
                code = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                raise CaseFailed(f"did not finish within {self.timeout} s; log {log}")
            finally:
                self.kill_session(proc)
                self.kill_tagged(tag)
        out = log.read_text(errors="replace")
        resumed = re.findall(r"\[checkpoint\] resumed from \S+ at iteration (\d+)", out)
        check(resumed, "the second attempt did not resume from a checkpoint:\n" + out[-3000:])
        print(f"[launchers]   killed rank 1's trainer (pid {killed}); attempt 1 resumed at iteration "
              f"{resumed[-1]}", flush=True)
        check(not (root / "output" / "failure").exists(),
              "the restarted attempt succeeded but output/failure holds attempt 0's failure")
        self.check_trained(root, code, out)

    def case_torchrun_root_cause(self):
        root = self.job("torchrun-root-cause", extra_opts=["SOLVER.MAX_ITERZ 3"])
        tag = uuid.uuid4().hex
        argv = self.torchrun("--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                             "--master-port", str(free_port()))
        code, out = self.run("torchrun-root-cause", argv + ["--base-dir", str(root)], self.env(root, tag))
        self.kill_tagged(tag)
        check(code != 0, "a misspelt config key did not fail the job")
        check("Root Cause" in out, "torchrun printed no Root Cause section:\n" + out[-3000:])
        root_cause = out[out.index("Root Cause"):]
        check("SOLVER.MAX_ITERZ" in root_cause,
              "torchrun's Root Cause does not name the misspelt key:\n" + root_cause[-3000:])
        check("error_file: <N/A>" not in root_cause, "the root cause has no error file:\n" + root_cause[-3000:])

    def case_torchrun_precedence(self):
        """resourceconfig.json names two SageMaker hosts, torchrun says one node of 2 processes:
        the launcher's variables win (docs/contract.md, section 3), so nothing waits for algo-2."""
        root = self.job("torchrun-precedence", max_iter=4, resource_hosts=["algo-1", "algo-2"])
        tag = uuid.uuid4().hex
        argv = self.torchrun("--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                             "--master-port", str(free_port()))
        code, out = self.run("torchrun-precedence", argv + ["--base-dir", str(root)], self.env(root, tag))
        self.kill_tagged(tag)
        check("torchrun: node 0 of 1" in out, "resourceconfig.json won over torchrun:\n" + out[-3000:])
        check("waiting for the other nodes" not in out, "the entrypoint waited for SageMaker peers")
        self.check_trained(root, code, out, expect_reference=False)

    def case_mpirun(self):
        root = self.job("mpirun")
        tag = uuid.uuid4().hex
        env = self.env(root, tag)
        env["MASTER_PORT"] = str(free_port())
        exported = ["SAGEMAKER_BASE_DIR", "MASTER_ADDR", "MASTER_PORT", "MRCNN_TRAINER", "MRCNN_DIST_ADDR",
                    "MRCNN_DUMP_WEIGHTS_DIR", "MRCNN_LAUNCHER_CASE", "OMP_NUM_THREADS"]
        argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "btl_tcp_if_include",
                "lo", "--mca", "oob_tcp_if_include", "lo"]
        for name in exported:
            argv += ["-x", name]
        code, out = self.run("mpirun", argv + [str(self.entrypoint), "train"], env)
        self.kill_tagged(tag)
        check("openmpi: node 0 of 1" in out.lower() or "open mpi: node 0 of 1" in out.lower(),
              "the entrypoint did not see Open MPI:\n" + out[-2000:])
        self.check_trained(root, code, out)

    def case_srun(self):
        root = self.job("srun")
        tag = uuid.uuid4().hex
        env = self.env(root, tag)
        env["MASTER_PORT"] = str(free_port())
        code, out = self.run("srun", ["srun", "-N1", "-n2", "--export=ALL", "--kill-on-bad-exit=1",
                                      str(self.entrypoint), "train"], env)
        self.kill_tagged(tag)
        check("slurm: node 0 of 1" in out.lower(), "the entrypoint did not see Slurm:\n" + out[-2000:])
        self.check_trained(root, code, out)

    def case_srun_one_task_per_node(self):
        """One Slurm task per node whose entrypoint starts the node's processes itself."""
        root = self.job("srun-per-node")
        tag = uuid.uuid4().hex
        env = self.env(root, tag)
        env["MASTER_PORT"] = str(free_port())
        code, out = self.run("srun-per-node", ["srun", "-N1", "-n1", "--export=ALL", str(self.entrypoint), "train",
                                               "--nproc-per-node", "2"], env)
        self.kill_tagged(tag)
        check("slurm: node 0 of 1, starting 2 process(es)" in out.lower(),
              "the entrypoint did not start both processes under one Slurm task:\n" + out[-2000:])
        self.check_trained(root, code, out)

    def sbatch_script(self, root, name):
        script = self.work / f"{name}.sbatch"
        (self.work / f"{name}.log").unlink(missing_ok=True)  # an earlier run's
        script.write_text("#!/bin/bash\n"
                          "#SBATCH --ntasks=2\n"
                          f"#SBATCH --output={self.work / (name + '.log')}\n"
                          f"#SBATCH --chdir={self.work}\n"
                          f"srun --export=ALL --kill-on-bad-exit=1 {self.entrypoint} train\n")
        return script

    def case_sbatch(self):
        root = self.job("sbatch")
        tag = uuid.uuid4().hex
        env = self.env(root, tag)
        env["MASTER_PORT"] = str(free_port())
        script = self.sbatch_script(root, "sbatch")
        job_id = subprocess.run(["sbatch", "--parsable", str(script)], env=env, capture_output=True, text=True,
                                check=True, timeout=30).stdout.strip().split(";")[0]
        try:
            # `sbatch --wait` polls at up to 32 s intervals; scontrol keeps an ended job (and its
            # exit code) for MinJobAge (300 s), long enough to read it here.
            deadline = time.time() + self.timeout
            while True:
                state, code = self.job_state(job_id)
                if state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
                    break
                check(time.time() < deadline, f"job {job_id} did not end within {self.timeout} s")
                time.sleep(0.2)
        finally:
            subprocess.run(["scancel", job_id], capture_output=True)
            self.kill_tagged(tag)
        out = (self.work / "sbatch.log").read_text(errors="replace")
        check(state == "COMPLETED", f"job {job_id} ended {state}:\n{out[-3000:]}")
        self.check_trained(root, code, out)

    @staticmethod
    def job_state(job_id):
        """(JobState, exit code of the batch script) from `scontrol show job`."""
        text = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True,
                              timeout=30).stdout
        state = re.search(r"JobState=(\S+)", text)
        code = re.search(r"\bExitCode=(\d+):(\d+)", text)
        check(state and code, f"scontrol does not know job {job_id}: {text!r}")
        return state.group(1), int(code.group(1)) or (128 + int(code.group(2)) if int(code.group(2)) else 0)

    def case_scancel_checkpoint_resume(self):
        root = self.job("scancel", max_iter=400)
        tag = uuid.uuid4().hex
        env = self.env(root, tag)
        env["MASTER_PORT"] = str(free_port())
        script = self.sbatch_script(root, "scancel")
        log = self.work / "scancel.log"
        job_id = subprocess.run(["sbatch", "--parsable", str(script)], env=env, capture_output=True, text=True,
                                check=True, timeout=30).stdout.strip().split(";")[0]
        try:
            deadline = time.time() + self.timeout
            while len(self.iterations_logged(log.read_text(errors="replace") if log.exists() else "")) < 3:
                check(time.time() < deadline, "the job logged no 3 iterations in time")
                state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True,
                                       text=True).stdout.strip()
                check(state in ("PENDING", "RUNNING", "CONFIGURING", ""), f"job {job_id} is {state}")
                time.sleep(0.2)
            cancelled_at = time.time()
            subprocess.run(["scancel", job_id], check=True, timeout=30)
            while subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True).stdout.strip():
                check(time.time() - cancelled_at < 60, "the cancelled job did not end within 60 s")
                time.sleep(0.2)
            took = time.time() - cancelled_at
        finally:
            subprocess.run(["scancel", job_id], capture_output=True)
            self.kill_tagged(tag)
        out = log.read_text(errors="replace")
        stops = re.findall(r"\[train\] stop requested: saved iteration (\d+)", out)
        check(stops, "scancel did not make the trainer checkpoint:\n" + out[-3000:])
        saved = int(stops[0])
        saved_files = [f.name for f in (root / "checkpoints").glob("checkpoint_*.safetensors")
                       if int(f.stem.split("_")[1]) == saved]
        check(saved_files, f"no checkpoint of iteration {saved} in {root / 'checkpoints'}")
        check(took < 30, f"the job took {took:.1f} s to end after scancel, beyond KillWait (30 s)")
        print(f"[launchers]   scancel: checkpoint at iteration {saved}, job ended {took:.1f} s after scancel",
              flush=True)
        # A later job on the same tree resumes there and runs on to a new end.
        self.write_opts(root, saved + 2)
        code, out2 = self.run("scancel-resume", ["srun", "-N1", "-n2", "--export=ALL", "--kill-on-bad-exit=1",
                                                 str(self.entrypoint), "train"], env)
        self.kill_tagged(tag)
        check(f"at iteration {saved}" in out2 and "[checkpoint] resumed from" in out2,
              "the later run did not resume from the scancel checkpoint:\n" + out2[-3000:])
        self.check_trained(root, code, out2, expect_reference=False)


CASES = {
    "torchrun-single-node": Launchers.case_torchrun_single_node,
    "torchrun-two-nodes-c10d": Launchers.case_torchrun_two_nodes_c10d,
    "torchrun-elastic-restart": Launchers.case_torchrun_elastic_restart,
    "torchrun-root-cause": Launchers.case_torchrun_root_cause,
    "torchrun-precedence": Launchers.case_torchrun_precedence,
    "mpirun": Launchers.case_mpirun,
    "srun": Launchers.case_srun,
    "srun-one-task-per-node": Launchers.case_srun_one_task_per_node,
    "sbatch": Launchers.case_sbatch,
    "scancel-checkpoint-resume": Launchers.case_scancel_checkpoint_resume,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--venv", default=str(REPO / ".venv"))
    parser.add_argument("--work", required=True, help="scratch directory (job trees, logs)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per launcher command")
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    launchers = Launchers(args)
    launchers.work.mkdir(parents=True, exist_ok=True)
    launchers.make_shapes()
    names = [n for n in args.only.split(",") if n] or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {', '.join(CASES)}")
    if any(n in names for n in ("torchrun-two-nodes-c10d", "torchrun-elastic-restart", "mpirun", "srun",
                                "srun-one-task-per-node", "sbatch")) and "torchrun-single-node" not in names:
        names.insert(0, "torchrun-single-node")  # the uninterrupted reference run
    failed = 0
    for name in names:
        start = time.time()
        try:
            CASES[name](launchers)
            print(f"[launchers] {name}: ok ({time.time() - start:.1f} s)", flush=True)
        except Exception as error:  # every case runs; each failure is reported
            failed += 1
            print(f"[launchers] {name}: FAILED ({time.time() - start:.1f} s): {error}", flush=True)
    print(f"[launchers] {len(names) - failed} of {len(names)} cases passed", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
