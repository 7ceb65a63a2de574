"""Reading `parc lower --emit=ir` dumps in the trace tests."""
import re


def seq_body(ir, name):
    """The instruction lines of sequence `name` of the IR dump ("" when the
    dump has none), up to the next sequence."""
    body = ir.split(f"  {name}:\n", 1)[1] if f"  {name}:\n" in ir else ""
    return re.split(r"\n  (?=\S)", body, maxsplit=1)[0]
