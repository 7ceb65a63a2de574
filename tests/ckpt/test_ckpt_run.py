#!/usr/bin/python3
"""test_ckpt_run.py — checkpoints as a run sees them: the plan's `checkpoint`
statement, pruning, bf16 resharding, signals, streamed outputs, `parc run`.

usage: test_ckpt_run.py PARC EXAMPLES_DIR [part ...]
       parts: plan keep bf16 signal2 stream launch (default: all)

plan     a plan with `checkpoint every 2 steps keep 2;`: explain says so; the built
         program, run from a directory with no option, says where it saves and
         leaves step-6 and step-7 of 7 steps in PLAN.ckpt/ (the last step is
         always saved); --checkpoint-dir,
         --checkpoint-every and --checkpoint-keep override the plan's values.
keep     --checkpoint-every 1 --checkpoint-keep 2 over 5 steps leaves exactly
         step-4 and step-5; a save of step 6 killed before its rename leaves both
         (nothing is pruned before the new checkpoint is complete).
bf16     tiny_bf16_3d (8 ranks, bf16 with fp32 master) saved at step 5 resumes on
         1 rank (tiny_bf16) and on tp 2: steps 6..10 equal the uninterrupted
         8-rank run within the bf16 parity tolerance.
signal2  two SIGTERMs to the ranks, the second inside the save the first asked
         for (a test hook makes it take 5 s): the ranks stop at once saying so,
         exit status 128 + 15, and the unfinished save is not `latest`.
stream   a run killed with SIGKILL after step 3 or later: its loss file, --log
         JSONL and --trace hold the steps it finished (the trace without its
         closing `]`, read as Chrome reads it).
launch   `parc run` signalled with SIGTERM, the save taking 3 s (a test hook):
         parc run passes the signal to the ranks, not to mpirun (whose abort
         SIGKILLs them seconds later), so the checkpoint of the step is complete
         and the run exits 128 + 15 with the stop message.
Exits 1 on any failure.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "parity"))
import prt_dump  # noqa: E402
import test_ckpt as base  # noqa: E402
from test_ckpt import check  # noqa: E402

# relative, per step: another layout of a bf16 plan rounds at other places (tests/parity/test_bf16.py's
# BF16_3D_VS_1, which compares the 8-rank and 1-rank bf16 curves)
BF16_LOSS_TOL = 2e-3
BF16_TRAIN = "batch 8; micro_batch 2; precision bf16 master fp32; optimizer adamw lr 1e-3 weight_decay 0.0; " \
             "steps 10; seed 1234;"


def plan_text(examples, train_extra, mesh, layout, gpus, train=None):
    common = os.path.join(examples, "common")
    train = train or f'include "{common}/tiny_train.par"; micro_batch 2; {train_extra}'
    return (f'include "{common}/tiny_gpt.par";\n'
            f'cluster {{ nodes 1; gpus_per_node {gpus}; include "{common}/tiny_cluster.par"; }}\n'
            f'train {{ {train} }}\nmesh {{ {mesh} }}\nlayout {{ {layout} }}\n')


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def steps_in(directory):
    return sorted(n for n in os.listdir(directory) if n.startswith("step-")) if os.path.isdir(directory) else []


def test_plan(plans, work):
    d = os.path.join(work, "plan")
    os.makedirs(d)
    plan = write(os.path.join(d, "tiny_ckpt.par"),
                 plan_text(plans.examples, "checkpoint every 2 steps keep 2;", "tp 2;",
                           "heads -> tp; ffn -> tp; vocab -> tp;", 2))
    ex = subprocess.run([plans.parc, "explain", plan], capture_output=True, text=True)
    check(ex.returncode == 0 and "checkpoints     every 2 steps, the newest 2 kept, into tiny_ckpt.ckpt/ unless "
          "--checkpoint-dir DIR" in ex.stdout, f"plan: explain names the plan's checkpoints ({ex.returncode})")
    exe = os.path.join(d, "tiny_ckpt")
    prt_dump.build(plans.parc, plan, exe)
    mpirun = os.environ.get("PARC_MPIRUN") or shutil.which("mpirun")

    def run(args, cwd):
        r = subprocess.run([mpirun, "-np", "2", "--oversubscribe", exe] + args, capture_output=True, text=True,
                           env=prt_dump.run_env(), cwd=cwd, timeout=300)
        return r.returncode, r.stdout + r.stderr

    rc, out = run(["--steps", "7"], d)
    check(rc == 0 and "parc: checkpoints every 2 steps, the newest 2 kept, into tiny_ckpt.ckpt (the plan's "
          "`checkpoint`" in out, f"plan: the program says where the plan's checkpoints go (exit {rc})")
    got = steps_in(os.path.join(d, "tiny_ckpt.ckpt"))
    check(got == ["step-000000006", "step-000000007"], f"plan: every 2 steps keep 2 over 7 steps, and the last, "
          f"leaves {got}")
    other = os.path.join(d, "other")
    rc, out = run(["--steps", "7", "--checkpoint-dir", other, "--checkpoint-every", "3", "--checkpoint-keep", "5"], d)
    got = steps_in(other)
    check(rc == 0 and got == ["step-000000003", "step-000000006", "step-000000007"] and
          "the plan's `checkpoint`" not in out,
          f"plan: the options override the plan's directory, interval and keep ({got})")
    rc, out = run(["--steps", "8", "--resume", "latest"], d)
    check(rc == 0 and "resumed from tiny_ckpt.ckpt/step-000000007" in out,
          f"plan: --resume latest finds the plan's directory (exit {rc})")


def test_keep(plans, work):
    d = os.path.join(work, "keep")
    os.makedirs(d)
    ck = os.path.join(d, "ck")
    plans.run("tiny_tp", ["--steps", "5", "--checkpoint-dir", ck, "--checkpoint-every", "1", "--checkpoint-keep", "2"])
    got = steps_in(ck)
    check(got == ["step-000000004", "step-000000005"], f"keep: keep 2 of 5 saves leaves the newest two ({got})")
    rc, _ = plans.run("tiny_tp", ["--steps", "8", "--checkpoint-dir", ck, "--checkpoint-every", "1",
                                  "--checkpoint-keep", "2", "--resume", "latest"], {"PRT_TEST_CKPT_DIE": "6"},
                      expect=None)
    got = steps_in(ck)
    check(rc != 0 and got == ["step-000000004", "step-000000005"] and
          open(os.path.join(ck, "latest")).read().strip() == "step-000000005",
          f"keep: a save killed before it is complete prunes nothing ({got}, exit {rc})")


def test_bf16(plans, work):
    d = os.path.join(work, "bf16")
    os.makedirs(d)
    ref_loss = os.path.join(d, "3d.loss")
    plans.run("tiny_bf16_3d", ["--steps", "10"], {"PRT_LOSS_FILE": ref_loss})
    ck = os.path.join(d, "ck")
    plans.run("tiny_bf16_3d", ["--steps", "5", "--checkpoint-dir", ck, "--save-on-exit"])
    ref = prt_dump.read_losses(ref_loss)
    tp2 = write(os.path.join(plans.examples_tmp(), "tiny_bf16_tp2.par"),
                plan_text(plans.examples, "", "tp 2;", "heads -> tp; ffn -> tp; vocab -> tp;", 2, train=BF16_TRAIN))
    for name in ("tiny_bf16", os.path.splitext(os.path.basename(tp2))[0]):
        loss = os.path.join(d, name + ".loss")
        plans.run(name, ["--steps", "10", "--resume", os.path.join(ck, "step-000000005")], {"PRT_LOSS_FILE": loss})
        got = prt_dump.read_losses(loss)
        worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in range(6, 11)) if sorted(got) == list(range(6, 11)) \
            else float("inf")
        check(worst <= BF16_LOSS_TOL, f"bf16: tiny_bf16_3d@5 -> {name}: losses 6..10 within {BF16_LOSS_TOL} of the "
              f"8-rank run (worst {worst:.2e})")


def wait_steps(path, n, proc, limit=120):
    deadline = time.time() + limit
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(path) and len(open(path).read().splitlines()) >= n:
            return True
        time.sleep(0.1)
    return False


def alive(pid):
    """Whether pid runs (a zombie waiting for mpirun to reap it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def ranks_of(proc):
    return [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                           text=True).stdout.split()]


def test_signal2(plans, work):
    d = os.path.join(work, "signal2")
    os.makedirs(d)
    loss, ck = os.path.join(d, "run.loss"), os.path.join(d, "ck")
    # the save takes 5 s (a test hook): the second signal comes inside it
    p = plans.run("tiny_tp", ["--steps", "100000", "--checkpoint-dir", ck, "--checkpoint-every", "2"],
                  {"PRT_LOSS_FILE": loss, "PRT_TEST_CKPT_SLOW": "5"}, popen=True)
    wait_steps(loss, 3, p, limit=300)
    ranks = ranks_of(p)
    for pid in ranks:
        os.kill(pid, signal.SIGTERM)
    time.sleep(1)  # a signal sent while the same one is pending would merge with it
    t0 = time.time()
    for pid in ranks:
        os.kill(pid, signal.SIGTERM)
    while time.time() < t0 + 30 and any(alive(pid) for pid in ranks):
        time.sleep(0.02)
    took = time.time() - t0
    try:
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    # mpirun stops passing on output once a rank has died: at least the first rank's words arrive
    said = out.count("second SIGTERM: stopping at once, without saving this step")
    check(len(ranks) == 2 and said >= 1 and took < 1, f"signal2: a second SIGTERM ends the ranks at once, saying "
          f"so ({said} said, {took:.2f} s after it)")
    check(p.returncode == 143, f"signal2: the job ends with SIGTERM's status 128 + 15 (mpirun exit {p.returncode})")
    k = len(open(loss).read().splitlines())
    latest = open(os.path.join(ck, "latest")).read().strip() if os.path.exists(os.path.join(ck, "latest")) else ""
    check("stopped after step" not in out and latest != f"step-{k:09d}" and
          os.path.isdir(os.path.join(ck, f".tmp.step-{k:09d}")),
          f"signal2: the interrupted save of step {k} is left unfinished, latest is still {latest or 'none'}")


def test_stream(plans, work):
    d = os.path.join(work, "stream")
    os.makedirs(d)
    loss, log, trace = (os.path.join(d, x) for x in ("run.loss", "run.jsonl", "trace.json"))
    p = plans.run("tiny_tp", ["--steps", "100000", "--log", log, "--trace", trace], {"PRT_LOSS_FILE": loss},
                  popen=True)
    wait_steps(loss, 3, p)
    for pid in ranks_of(p):
        os.kill(pid, signal.SIGKILL)
    p.kill()
    p.communicate()
    k = len(open(loss).read().splitlines())
    lines = [json.loads(x) for x in open(log).read().splitlines()]
    check(k >= 3 and [x["step"] for x in lines] in (list(range(1, k + 1)), list(range(1, k))),
          f"stream: the --log file holds the {len(lines)} steps done ({k} in the loss file)")
    raw = open(trace).read()
    events = prt_dump.read_trace(trace)
    steps = {pid: len([e for e in events if e.get("pid") == pid and e.get("name") == "step"]) for pid in (0, 1)}
    check(raw.startswith("[") and not raw.rstrip().endswith("]") and
          all(v in (k - 1, k) and v >= 2 for v in steps.values()),
          f"stream: the killed run's trace holds every rank's finished steps ({steps}, {k} in the loss file)")
    names = {e.get("name") for e in events if e.get("pid") == 1}
    check({"allreduce", "step"} <= names, f"stream: rank 1's ops are in the trace ({len(events)} events)")


def test_launch(plans, work):
    d = os.path.join(work, "launch")
    os.makedirs(d)
    ck, loss = os.path.join(d, "ck"), os.path.join(d, "run.loss")
    env = prt_dump.run_env({"PRT_LOSS_FILE": loss, "PRT_TEST_CKPT_SLOW": "3"})
    p = subprocess.Popen([plans.parc, "run", os.path.join(plans.examples, "tiny_tp.par"), "--", "--quiet",
                          "--steps", "100000", "--checkpoint-dir", ck], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=env)
    wait_steps(loss, 3, p, limit=300)
    t0 = time.time()
    p.send_signal(signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    took = time.time() - t0
    k = len(open(loss).read().splitlines())
    latest = os.path.join(ck, "latest")
    saved = open(latest).read().strip() if os.path.exists(latest) else None
    check(p.returncode == 143 and f"SIGTERM: stopped after step {k}" in out,
          f"launch: parc run stops with 128 + 15 after the step (exit {p.returncode}, {took:.1f} s)")
    check(saved == f"step-{k:09d}" and os.path.exists(os.path.join(ck, saved, "manifest.json")) and took >= 3,
          f"launch: the 3 s save of step {k} completed under mpirun ({saved})")


class RunPlans(base.Plans):
    """Plans of EXAMPLES_DIR, and of a scratch directory for generated ones."""

    def examples_tmp(self):
        path = os.path.join(self.work, "plans")
        os.makedirs(path, exist_ok=True)
        return path

    def exe(self, name):
        generated = os.path.join(self.work, "plans", name + ".par")
        if os.path.exists(generated) and name not in self.info:
            exe = os.path.join(self.work, name)
            self.info[name] = prt_dump.world_size(prt_dump.explain(self.parc, generated))
            prt_dump.build(self.parc, generated, exe)
        return super().exe(name)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    parc, examples = sys.argv[1], os.path.abspath(sys.argv[2])
    parts = sys.argv[3:] or ["plan", "keep", "bf16", "signal2", "stream", "launch"]
    work = tempfile.mkdtemp(prefix="parc_ckpt_run_")
    plans = RunPlans(parc, examples, work)
    for part in parts:
        globals()["test_" + part](plans, work)
    if base.failures:
        print(f"test_ckpt_run: {len(base.failures)} failures (work in {work})")
        return 1
    shutil.rmtree(work)
    print("test_ckpt_run: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
