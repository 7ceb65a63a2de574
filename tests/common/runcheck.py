"""runcheck.py — what the Python tests of built programs share: the command
line (PARC EXAMPLES_DIR, made absolute), a check() that prints `ok` or
`FAIL` and counts the failures, a tiny-GPT plan over dp 2 written with the
train section a test needs, and the exit status the failures give.

    from runcheck import Checks
    t = Checks("diverge")            # reads sys.argv[1:3]
    t.check(cond, "what held")
    plan = t.tiny_plan(tmp, "name", "optimizer sgd lr 10; steps 30;")
    sys.exit(t.done())
"""
import os
import sys


class Checks:
    def __init__(self, name):
        self.name = name
        self.parc, self.examples = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
        self.fails = 0

    def check(self, ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        self.fails += 0 if ok else 1
        return ok

    def tiny_plan(self, directory, name, train, extra=""):
        """The tiny GPT (examples/common) on one node of 2 GPUs as dp 2, batch 8
        in micro-batches of 2, fp32, with `train` (optimizer, steps, ...) added to
        its train section and `extra` (a data section, ...) after it."""
        path = os.path.join(directory, name + ".par")
        with open(path, "w") as f:
            f.write(f'include "{self.examples}/common/tiny_gpt.par";\n'
                    f'cluster {{ nodes 1; gpus_per_node 2; include "{self.examples}/common/tiny_cluster.par"; }}\n'
                    f"train {{ batch 8; micro_batch 2; precision fp32; {train} }}\n"
                    "mesh { dp 2; }\nlayout { batch -> dp; }\n" + extra)
        return path

    def done(self):
        print(f"{self.name}: {self.fails} failures")
        return 1 if self.fails else 0
