"""The G2PO + SmolLM2 LoRA example's running time on docs/systems/g2po.md comes from its saved record.

The sentence sits in a ``<!-- timing:g2po-smollm2-lora -->`` block (which the prose scan of
test_docs_prose_numbers.py leaves to generated text) and must read exactly what
``benchmarks/g2po_smollm2_lora.py`` renders from ``benchmarks/g2po_smollm2_lora.json``; the record must
also hold the example the page shows now, so an edited example without a new run fails here.
"""

import json
import re
from pathlib import Path

from script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "systems" / "g2po.md"
RECORD = ROOT / "benchmarks" / "g2po_smollm2_lora.json"
TAG = "timing:g2po-smollm2-lora"


bench = load_script("benchmarks/g2po_smollm2_lora.py", "g2po_smollm2_lora_bench")
prose_scan = load_script("tests/core/test_docs_prose_numbers.py", "docs_prose_numbers_scan")


def blocks(text: str) -> list[str]:
    return [m.group(0) for m in prose_scan.GENERATED.finditer(text) if m.group("tag") == TAG]


def test_the_page_states_the_saved_running_time_and_shows_the_timed_example() -> None:
    record = json.loads(RECORD.read_text())
    text = PAGE.read_text()
    found = blocks(text)
    assert len(found) == 1, f"docs/systems/g2po.md needs exactly one <!-- {TAG} --> block, found {len(found)}"
    assert found[0] == f"<!-- {TAG} -->{bench.timing_sentence(record)}<!-- /{TAG} -->", (
        "the page's running time differs from benchmarks/g2po_smollm2_lora.json")
    assert bench.example(text) == record["example"], (
        "the example on the page changed since it was timed; run "
        "`flock /tmp/divelab-heavy.lock .venv/bin/python benchmarks/g2po_smollm2_lora.py`")
    assert record["iterations"] == len(record["success_per_iteration"]) >= 1
    assert re.search(r"iterations=(\d+)", record["example"]).group(1) == str(record["iterations"])
    assert record["machine"]["nproc"] >= 1 and record["machine"]["cpu_model"] and record["versions"]["torch"]


def test_the_sentence_is_rendered_from_the_record_and_hidden_from_the_prose_scan() -> None:
    record = {"seconds": 170.0, "machine": {"nproc": 2}}
    sentence = bench.timing_sentence(record)
    assert sentence == "It took about 3 minutes on a 2-core CPU"
    assert bench.timing_sentence({"seconds": 20.0, "machine": {"nproc": 2}}).startswith("It took about 1 minute ")
    assert prose_scan.hand_typed_numbers(sentence) != []  # typed into prose, the scan would refuse it
    assert prose_scan.hand_typed_numbers(f"Fast. <!-- {TAG} -->{sentence}<!-- /{TAG} --> Done.") == []
