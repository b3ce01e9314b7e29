"""Training data for a chat model's drafter: the model's own responses to chat prompts.

DSpark (like EAGLE) trains the drafter on the target's responses, so it learns the distribution it
will be verified against. Prompts are request templates × topics; the topics are split, so held-out
prompts (the benchmark's and the learning curve's) use topics no drafter saw. Responses are
generated in batches (half greedy, half sampled at T=1) and cached shard by shard, so a killed build
resumes where it stopped.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from divelab.cache import atomic_dir
from divelab.progress import make_progress

TEMPLATES = ("Explain {t} in two sentences.", "Write a short poem about {t}.", "List three facts about {t}.",
             "What is the history of {t}?", "Give me a tip about {t}.", "Why do people like {t}?",
             "Describe {t} to a child.", "Write a haiku about {t}.", "What are the pros and cons of {t}?",
             "Tell me a fun story about {t}.", "How does {t} work?", "Summarize what you know about {t}.",
             "What should a beginner know about {t}?", "Compare {t} with something similar.",
             "Write a short product description for {t}.", "What are common misconceptions about {t}?",
             "Give three questions a student might ask about {t}.", "Write a limerick about {t}.",
             "How would you teach {t} in five minutes?", "What is the future of {t}?")
TOPICS = ("the ocean", "coffee", "volcanoes", "the moon", "bicycles", "python programming", "bees", "rain",
          "chess", "bread", "mountains", "music", "trains", "photosynthesis", "the internet", "cats",
          "gardening", "winter", "libraries", "electricity", "friendship", "deserts", "soccer", "robots",
          "tea", "rivers", "the sun", "dinosaurs", "painting", "airplanes", "forests", "mathematics",
          "dogs", "cooking pasta", "the stock market", "recycling", "space travel", "vaccines", "poetry",
          "running", "yoga", "chocolate", "earthquakes", "birds", "the roman empire", "solar panels",
          "sleep", "memory", "languages", "maps", "money", "cheese", "rainbows", "the brain", "sharks",
          "castles", "video games", "knitting", "camping", "weather forecasts", "rice", "islands",
          "magnets", "bridges", "newspapers", "photography", "skateboarding", "whales", "mushrooms",
          "the olympics", "batteries", "tigers", "deserts at night", "cities", "farming", "apples",
          "the alphabet", "telescopes", "friendship bracelets", "democracy", "pirates", "spiders", "ice cream",
          "the heart", "kites", "coral reefs", "printing", "swimming", "snow", "fire", "wind turbines",
          "elephants", "music festivals", "board games", "hospitals", "carpentry", "stars", "fossils",
          "the printing press", "vitamins", "traffic", "tomatoes", "baking cookies", "museums", "climbing",
          "email", "wolves", "the calendar", "perfume", "sailing", "ants", "lightning", "radio", "cars",
          "architecture", "ballet", "frogs", "salt", "mirrors", "the post office", "owls", "recycling paper")
TEST_TOPICS = ("penguins", "clocks", "jazz", "glaciers", "honey", "lighthouses", "origami", "thunderstorms",
               "submarines", "tea ceremonies", "hummingbirds", "bicycle repair", "quilts", "caves",
               "fireworks", "sourdough")


def chat_prompts(tokenizer, topics: tuple[str, ...] | list[str], templates: tuple[str, ...] = TEMPLATES
                 ) -> list[list[int]]:
    """Token ids of each template × topic as a one-turn chat with the generation prompt appended."""
    _check_template(tokenizer)
    return [_one_turn(tokenizer, tpl.format(t=t)) for t in topics for tpl in templates]


CODE_REQUEST = "Complete this Python function. Reply with the code only.\n\n```python\n{prompt}```"


def code_prompts(tokenizer, n: int, seed: int) -> list[list[int]]:
    """``n`` HumanEval problems (drawn by ``seed``, in their order) asked as one-turn chat requests: the
    code domain, which no training prompt (templates × topics) is drawn from."""
    from divelab.codetasks.draw import pick_tasks

    _check_template(tokenizer)
    return [_one_turn(tokenizer, CODE_REQUEST.format(prompt=t.prompt)) for t in pick_tasks(n, seed, "code prompts")]


def _check_template(tokenizer) -> None:
    if getattr(tokenizer, "chat_template", None) is None:
        raise ValueError("the tokenizer has no chat template: chat prompts need a chat (instruct) model")


def _one_turn(tokenizer, text: str) -> list[int]:
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return [int(x) for x in ids]


@torch.no_grad()
def batched_generate(target, prompts: list[list[int]], max_new_tokens: int, pad_id: int, eos_id: int | None,
                     sample: bool, seed: int) -> list[list[int]]:
    """Left-padded batched ``generate`` (HF); the new tokens of each prompt, cut after its EOS."""
    torch.manual_seed(seed)
    width = max(len(x) for x in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    att = torch.zeros_like(ids)
    for i, x in enumerate(prompts):
        ids[i, width - len(x):] = torch.tensor(x)
        att[i, width - len(x):] = 1
    kw = {"do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0} if sample else {"do_sample": False}
    gen = target.generate(ids, attention_mask=att, max_new_tokens=max_new_tokens, pad_token_id=pad_id, **kw)
    outs = []
    for row in gen[:, width:].tolist():
        if eos_id is not None and eos_id in row:
            row = row[: row.index(eos_id) + 1]
        outs.append(row)
    return outs


def build_responses(target, tokenizer, prompts: list[list[int]], directory: Path, max_new_tokens: int = 128,
                    batch: int = 32, seed: int = 0, description: str = "target responses",
                    sample: bool | None = None) -> list[list[int]]:
    """Rows of prompt + the target's response for every prompt (``sample`` None: even shards greedy, odd
    shards sampled at T=1; True / False: every shard sampled / greedy), cached per shard under
    ``directory``: a second call, or one after an interrupt, reuses what exists."""
    if batch < 1 or max_new_tokens < 1:
        raise ValueError(f"batch and max_new_tokens must be >= 1, got {batch} and {max_new_tokens}")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos = tokenizer.eos_token_id
    directory.mkdir(parents=True, exist_ok=True)
    shards = [prompts[i: i + batch] for i in range(0, len(prompts), batch)]
    rows: list[list[int]] = []
    t0 = time.perf_counter()
    with make_progress() as prog:
        task = prog.add_task(description, total=len(shards), info="")
        for i, shard in enumerate(shards):
            path = directory / f"shard-{i:05d}"
            if not (path / "rows.json").exists():
                resp = batched_generate(target, shard, max_new_tokens, int(pad), eos,
                                        sample=i % 2 == 1 if sample is None else sample, seed=seed + i)
                with atomic_dir(path) as tmp:
                    (tmp / "rows.json").write_text(json.dumps([p + r for p, r in zip(shard, resp, strict=True)]))
            rows.extend(json.loads((path / "rows.json").read_text()))
            prog.update(task, advance=1, info=f"{sum(len(r) for r in rows)} tokens, {time.perf_counter() - t0:.0f} s")
    return rows


def token_stream(rows: list[list[int]], eos: int) -> np.ndarray:
    """The rows as one stream, each ending in ``eos`` (a row cut by the token budget gets one too)."""
    out: list[int] = []
    for r in rows:
        out.extend(r if r and r[-1] == eos else [*r, eos])
    return np.asarray(out, dtype=np.int64)


def most_frequent(rows: list[list[int]], k: int, always: tuple[int, ...] = ()) -> np.ndarray:
    """The ``k`` most frequent token ids in ``rows`` (ties by id), ``always`` included."""
    counts = np.bincount(np.concatenate([np.asarray(r, dtype=np.int64) for r in rows]))
    order = np.lexsort((np.arange(len(counts)), -counts))
    keep = [int(t) for t in always]
    for t in order:
        if len(keep) >= k:
            break
        if int(t) not in keep:
            keep.append(int(t))
    return np.asarray(keep[:k], dtype=np.int64)


def coverage(rows: list[list[int]], ids: np.ndarray, start: list[int] | None = None) -> float:
    """Share of response tokens (after each row's prompt length in ``start``) that ``ids`` contains."""
    inside = np.zeros(int(max(max(r) for r in rows if r) + 1), dtype=bool)
    inside[ids[ids < len(inside)]] = True
    toks = np.concatenate([np.asarray(r[(start[i] if start else 0):], dtype=np.int64) for i, r in enumerate(rows)])
    return float(inside[toks].mean()) if len(toks) else 0.0


FEATURE_ARRAYS = ("feats", "top_ids", "top_p")


@torch.no_grad()
def build_features(target, rows: list[list[int]], layers: tuple[int, ...], top_k: int, directory: Path,
                   shard_rows: int = 32, batch: int = 8, description: str = "target features",
                   breaks: tuple[int, ...] = ()) -> dict:
    """The target's view of every token of ``rows``, computed once (teacher-forced) and cached per shard:

    * ``feats`` (T, m·d) float16: hidden states of ``layers`` concatenated (the drafter's input),
    * ``top_ids`` (T, k) int32 and ``top_p`` (T, k) float16: the target's k most probable next tokens
      at T=1 and their probabilities (what the drafter is distilled towards; the rest of the mass is
      ``1 − Σ top_p``),
    * ``offsets`` (len(rows) + 1,): where each row starts in the concatenation.

    Training then never runs the target: on a CPU its forward is the cost that bounds how many
    tokens a drafter can learn from.

    ``breaks`` are row indices where a new run of shards starts (each later pass of responses to the
    same prompts): adding a pass never changes an earlier pass's shards. The three arrays come back
    memory-mapped from one file each, stacked once from the shards, so memory stays flat at any data
    size (three layers of SmolLM2 are 3.5 kB a token: 10 GB for 20,000 responses)."""
    directory.mkdir(parents=True, exist_ok=True)
    edges = [0, *sorted(b for b in set(breaks) if 0 < b < len(rows)), len(rows)]
    named: list[tuple[str, list[list[int]]]] = []
    for run, (lo_row, hi_row) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        prefix = "shard" if run == 0 else f"pass-{run}-shard"
        named += [(f"{prefix}-{(i - lo_row) // shard_rows:05d}", rows[i: min(i + shard_rows, hi_row)])
                  for i in range(lo_row, hi_row, shard_rows)]
    with make_progress() as prog:
        task = prog.add_task(description, total=len(named), info="")
        done_tokens = 0
        for name, chunk in named:
            path = directory / name
            if not (path / "feats.npy").exists():
                out: dict[str, list[np.ndarray]] = {"feats": [], "top_ids": [], "top_p": []}
                for lo in range(0, len(chunk), batch):
                    sub = chunk[lo: lo + batch]
                    width = max(len(r) for r in sub)
                    ids = torch.zeros((len(sub), width), dtype=torch.long)
                    att = torch.zeros_like(ids)
                    for j, r in enumerate(sub):  # right padding: positions stay 0..len-1 as in decoding
                        ids[j, : len(r)] = torch.tensor(r)
                        att[j, : len(r)] = 1
                    o = target(ids, attention_mask=att, output_hidden_states=True)
                    h = torch.cat([o.hidden_states[k] for k in layers], dim=-1)
                    probs = torch.softmax(o.logits.float(), -1)
                    tp, ti = probs.topk(top_k, dim=-1)
                    for j, r in enumerate(sub):
                        n = len(r)
                        out["feats"].append(h[j, :n].half().numpy())
                        out["top_ids"].append(ti[j, :n].int().numpy())
                        out["top_p"].append(tp[j, :n].half().numpy())
                with atomic_dir(path) as tmp:
                    for k, v in out.items():
                        np.save(tmp / f"{k}.npy", np.concatenate(v))
            done_tokens += sum(len(r) for r in chunk)
            prog.update(task, advance=1, info=f"{done_tokens} tokens")
    lengths = np.array([len(r) for r in rows])
    return {**stacked(directory, [n for n, _ in named]),
            "tokens": np.concatenate([np.asarray(r, dtype=np.int64) for r in rows]),
            "offsets": np.concatenate([[0], np.cumsum(lengths)])}


def stacked(directory: Path, shards: list[str]) -> dict[str, np.ndarray]:
    """The shards' arrays concatenated in order, one memory-mapped ``.npy`` per array (written once,
    whole, under a key of the shard list; a stack of another shard list is removed)."""
    import shutil

    from divelab.cache import stable_hash

    path = directory / f"stacked-{stable_hash({'shards': shards})}"
    if not (path / "feats.npy").exists():
        with atomic_dir(path) as tmp:
            for k in FEATURE_ARRAYS:
                parts = [np.load(directory / s / f"{k}.npy", mmap_mode="r") for s in shards]
                out = np.lib.format.open_memmap(tmp / f"{k}.npy", mode="w+", dtype=parts[0].dtype,
                                                shape=(sum(len(x) for x in parts), *parts[0].shape[1:]))
                at = 0
                for x in parts:  # shard by shard: never more than one shard in memory
                    out[at: at + len(x)] = x
                    at += len(x)
                out.flush()
                del out
        for old in directory.glob("stacked-*"):
            if old != path and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
    return {k: np.load(path / f"{k}.npy", mmap_mode="r") for k in FEATURE_ARRAYS}
