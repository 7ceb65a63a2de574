"""moe_plan.py — a tiny_moe plan with its model fragment edited, for the tests
that vary one `mlp moe` setting (the model lives in examples/common/tiny_moe.par,
which the tiny_moe*.par plans include)."""
import os


def edited(examples, work, plan_name, old, new, tag):
    """Writes work/<tag>.par: examples/<plan_name>.par including a copy of
    common/tiny_moe.par in which the one `old` is `new` (the other includes
    made absolute); returns its path.  ValueError when the plan no longer
    includes the fragment once or the fragment has no single `old`."""
    with open(os.path.join(examples, "common", "tiny_moe.par")) as f:
        model = f.read()
    with open(os.path.join(examples, plan_name + ".par")) as f:
        text = f.read()
    if model.count(old) != 1 or text.count('include "common/tiny_moe.par"') != 1:
        raise ValueError(f"{plan_name}.par no longer includes common/tiny_moe.par with `{old}` once")
    fragment = os.path.join(work, f"{tag}.model.par")
    with open(fragment, "w") as f:
        f.write(model.replace(old, new))
    plan = os.path.join(work, f"{tag}.par")
    common = os.path.join(os.path.abspath(examples), "common") + "/"
    with open(plan, "w") as f:
        f.write(text.replace('include "common/tiny_moe.par"', f'include "{fragment}"')
                .replace('include "common/', 'include "' + common))
    return plan
