"""Run the G2PO + SmolLM2 LoRA example of docs/systems/g2po.md as written, time it, save the record.

    flock /tmp/divelab-heavy.lock .venv/bin/python benchmarks/g2po_smollm2_lora.py   # -> benchmarks/g2po_smollm2_lora.json

The example is read from the page (the Python block after "A real Hugging Face model, LoRA-wrapped"), so
what is timed is what a reader pastes. SmolLM2 is converted from its GGUF before the clock starts (a
one-off of tens of seconds, timed apart). The record keeps the machine (cores, CPU model), the library
versions, the seconds, each iteration's success rate and the example's text; the page's sentence
"It took about N minutes on a K-core CPU" is rendered from it (:func:`timing_sentence`), and
tests/core/test_g2po_smollm2_timing.py checks that the page says exactly that and still shows the example
that was timed.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "systems" / "g2po.md"
OUT = ROOT / "benchmarks" / "g2po_smollm2_lora.json"
ANCHOR = "A real Hugging Face model, LoRA-wrapped"
COMMAND = "python benchmarks/g2po_smollm2_lora.py"


def example(page_text: str) -> str:
    """The Python block that follows the anchor sentence on the page."""
    after = page_text.split(ANCHOR, 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


def timing_sentence(record: dict) -> str:
    """What the page says about the run: whole minutes (at least one) and the machine's core count."""
    minutes = max(1, round(record["seconds"] / 60))
    return f"It took about {minutes} minute{'s' if minutes != 1 else ''} on a {record['machine']['nproc']}-core CPU"


def cpu_model() -> str:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return m.group(1).strip() if m else platform.processor()


def main() -> int:
    import peft
    import torch
    import transformers

    from divelab.lm import real

    t0 = time.perf_counter()
    real.ensure_converted()
    convert_s = time.perf_counter() - t0
    code = example(PAGE.read_text())
    scope: dict = {"__name__": "__example__"}
    t0 = time.perf_counter()
    exec(compile(code, str(PAGE), "exec"), scope)
    seconds = time.perf_counter() - t0
    logs = scope["trainer"].logs
    record = {
        "command": COMMAND,
        "what": "the G2PO + SmolLM2-135M-Instruct LoRA example of docs/systems/g2po.md, run as written",
        "machine": {"nproc": os.cpu_count(), "cpu_model": cpu_model(), "torch_threads": torch.get_num_threads()},
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "peft": peft.__version__},
        "seconds": round(seconds, 1),
        "convert_seconds_before_the_clock": round(convert_s, 1),
        "iterations": len(logs),
        "success_per_iteration": [round(float(g.success), 4) for g in logs],
        "kl_per_iteration": [round(float(g.kl), 6) for g in logs],
        "example": code,
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{timing_sentence(record)}; success per iteration {record['success_per_iteration']} -> "
          f"{OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
