"""The reproduction's task: prompts that list numbered tools with a request, generic text prompts, a character-level
tokenizer, and the strict scoring rubric (format / tool correctness / tool selection)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

TOOLS: dict[str, tuple[str, ...]] = {
    "mail": ("email bob", "write to ann", "send a letter"),
    "calc": ("add two and five", "sum the bill", "divide by three"),
    "maps": ("route home", "find a cafe", "directions to park"),
    "time": ("what hour is it", "clock in rome", "set an alarm"),
    "note": ("save a memo", "jot this down", "remember milk"),
    "song": ("play jazz", "start music", "next track"),
}
WORDS = ("the cat sat on a mat and the dog ran to see a red sun over green hills while kids sang "
         "old songs near the river so we walk home").split()
VOCAB = ["<pad>", "<eos>"] + list("abcdefghijklmnopqrstuvwxyz0123456789 .,:|<>'")
CALL = re.compile(r"^<call ([a-z]+)>$")


@dataclass(frozen=True)
class Prompt:
    text: str
    tool: str | None  # the right tool (None for a generic prompt)
    listed: tuple[str, ...] = ()

    @property
    def is_tool(self) -> bool:
        return self.tool is not None


def tool_prompt(rng: random.Random) -> Prompt:
    right = rng.choice(sorted(TOOLS))
    others = rng.sample([t for t in sorted(TOOLS) if t != right], 2)
    listed = [right, *others]
    rng.shuffle(listed)
    menu = " ".join(f"{i + 1} {t}" for i, t in enumerate(listed))
    return Prompt(f"tools: {menu}. ask: {rng.choice(TOOLS[right])} |", right, tuple(listed))


def generic_prompt(rng: random.Random) -> Prompt:
    return Prompt(f"text: {' '.join(rng.choices(WORDS, k=rng.randint(3, 6)))} |", None)


def prompts(n: int, seed: int, tool_share: float = 0.5) -> list[Prompt]:
    """``n`` prompts, a ``tool_share`` of them tool prompts (the rest generic), reproducible from ``seed``."""
    rng = random.Random(seed)
    n_tool = round(n * tool_share)
    out = [tool_prompt(rng) for _ in range(n_tool)] + [generic_prompt(rng) for _ in range(n - n_tool)]
    rng.shuffle(out)
    return out


def base_response(p: Prompt, rng: random.Random, call_rate: float = 0.05, prose_rate: float = 0.25) -> str:
    """What the base corpus says after a prompt: for tool prompts mostly a generic reply, sometimes the right tool
    in prose, rarely (``call_rate``) the strict call syntax; for generic prompts an echo of the first word."""
    if not p.is_tool:
        return f"ok, {p.text.split()[1]}."
    u = rng.random()
    if u < call_rate:
        return f"<call {p.tool}>"
    if u < call_rate + prose_rate:
        return f"i would use {p.tool}."
    return "ok, i can help."


def score(p: Prompt, response: str) -> dict[str, float]:
    """Strict rubric: ``format`` = the whole response is ``<call NAME>``; ``correct`` = format and NAME is the right
    tool; ``selection`` = the right tool's name appears anywhere (prose counts)."""
    m = CALL.match(response.strip())
    fmt = bool(m) and p.is_tool
    return {"format": float(fmt), "correct": float(fmt and m.group(1) == p.tool),
            "selection": float(p.is_tool and re.search(rf"\b{p.tool}\b", response) is not None)}


def tokenizer():
    """A character-level Hugging Face tokenizer (saved with the models, so they load with ``AutoTokenizer``)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    t = Tokenizer(models.WordLevel({v: i for i, v in enumerate(VOCAB)}, unk_token="<pad>"))
    t.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    t.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=t, pad_token="<pad>", eos_token="<eos>")
