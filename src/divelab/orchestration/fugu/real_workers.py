"""Real workers for the router: SmolLM2-135M-Instruct LoRA specialists, the untuned model and a tiny LM.

Each specialist is SmolLM2-135M-Instruct with a LoRA adapter fitted by :func:`divelab.lm.adapt.adapt`
(TRL's SFTTrainer, loss on the answer only) on one task family or a pair; the untuned model answers
with a format instruction in its system message; a divelab zoo tiny LM gets one adapter on every
family (the cheap worker). Adapters are merged into the weights, so a worker is a plain HF model behind
:class:`divelab.chat.hf_local.HFChatModel`: the chat protocol the programmatic workers speak, and the
same checkpoint ``divelab serve`` serves.

Price. A worker's price is its measured wall time per token on this CPU, taken side by side: every
worker in turn (the order rotated each round) reads the same batch of prompts once (prefill seconds per
prompt token, ``price_in``) and generates a fixed number of tokens (decode seconds per generated token,
``price_out``); the median over rounds, in seconds per 1k tokens, so a query's cost is the seconds it
takes. Interleaving makes the prices comparable even while the machine's load changes.

Outcomes. Every worker answers every evaluation query once, greedily, in batches
(``HFChatModel.complete_many``), cached per worker by content (the adapter's key, the queries, the
decoding settings), so a killed run resumes at the worker it stopped on.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from divelab.cache import atomic_write_text, entry_path, stable_hash
from divelab.chat import ChatResponse, Message, ToolSpec, system, user
from divelab.lm.adapt import AdaptConfig, LoraSpec
from divelab.orchestration.fugu.real_data import chat_renderer, sft_rows, train_tasks
from divelab.orchestration.fugu.tasks import FAMILIES, Task, extract_answer, score

MODEL_LABEL = "SmolLM2-135M-Instruct"
BASE = "smollm2-135m-instruct"
CACHE_KIND = "fugu-real-pool"
_VERSION = 1  # bump when recording or pricing code changes what a cache entry holds

FORMAT_INSTRUCTION = "Reply with one line: 'ANSWER: ' followed by the answer only."
"""The untuned model's system message (the tuned workers learned the format from their rows)."""

TINY_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}"
                 "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")
"""A chat template for zoo tokenizers, which have none (role-prefixed lines, the reply closed by EOS)."""


@dataclass(frozen=True)
class WorkerSpec:
    """One worker: its name, the families its adapter is trained on (none: untuned) and its base model."""

    name: str
    """the worker's name in the pool"""
    families: tuple[str, ...] = ()
    """task families its adapter is trained on (none: the untuned base)"""
    base: str = BASE
    """the model it is built on (the real model or a zoo name)"""
    system: str | None = None
    """a system message the worker always sends first (the untuned model's format instruction)"""

    def __post_init__(self) -> None:
        bad = set(self.families) - set(FAMILIES)
        if bad:
            raise ValueError(f"unknown task families {sorted(bad)}; allowed: {', '.join(FAMILIES)}")


SPECS = (
    WorkerSpec("smol-add", ("add",)),
    WorkerSpec("smol-mul", ("mul",)),
    WorkerSpec("smol-lex", ("reverse", "count")),
    WorkerSpec("smol-sort", ("sort",)),
    WorkerSpec("smol-base", (), system=FORMAT_INSTRUCTION),
    WorkerSpec("tiny-all", FAMILIES, base="smoke"),
)
"""The pool: four SmolLM2 specialists, the untuned SmolLM2 and a zoo tiny LM tuned on every family."""


SMOL_TOP_LAYERS = range(18, 30)
"""SmolLM2-135M's top 12 of 30 layers carry the specialists' adapters: the backward pass stops at the lowest
adapted layer, which on a CPU halves a step's time against adapting every layer."""
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""the attention and MLP projections a worker's LoRA adapter sits on"""
SMOL_TARGETS = tuple(f"layers.{i}.{'self_attn' if m.endswith(('q_proj', 'k_proj', 'v_proj', 'o_proj')) else 'mlp'}.{m}"
                     for i in SMOL_TOP_LAYERS for m in PROJECTIONS)
"""the module paths of those projections in SmolLM2's top layers"""
# without activation checkpointing the backward pass does not reach below the adapted layers
SPECIALIST_ADAPT = AdaptConfig(method="sft", steps=60, lr=1e-3, batch_size=8, max_length=160, seed=0, save_every=20,
                               lora=LoraSpec(r=16, alpha=32, target_modules=SMOL_TARGETS),
                               activation_checkpointing=False)


@dataclass(frozen=True)
class PoolConfig:
    """Everything that decides the recorded pool (each field enters a cache key where it matters)."""

    per_family: int = 80
    """evaluation queries per family (distinct by content); the routers split these into train and test"""
    train_per_family: int = 240
    """SFT rows per family a worker is tuned on (never sharing content with an evaluation query)"""
    adapt: AdaptConfig = SPECIALIST_ADAPT
    """a SmolLM2 specialist's LoRA SFT run (60 steps of 8 rows at lr 1e-3, rank 16 on the projections of the top
    12 layers); the tiny worker's run is the same on every layer's projections for ``tiny_steps``, and both take
    the pool's seed"""
    tiny_steps: int = 400
    """LoRA optimizer steps of the tiny worker"""
    max_new_tokens: int = 40
    """the token budget of every answer (the untuned model spends all of it)"""
    gen_batch: int = 40
    """queries generated together (one left-padded ``generate`` call; larger batches raise tokens per second
    on a CPU, and half a family's queries keep the padding small)"""
    price_rounds: int = 3
    """timing rounds behind each worker's measured prices"""
    price_batch: int = 8
    """queries timed together in one round"""
    price_tokens: int = 16
    """tokens generated per query when timing the output price"""
    seed: int = 0
    """seed of the pool's queries, training rows and adapters"""
    specs: tuple[WorkerSpec, ...] = SPECS
    """the workers"""


def _load_base(base: str) -> tuple[Any, Any]:
    from divelab.lm import load_model

    model, tok = load_model(base)
    if getattr(tok, "chat_template", None) is None:
        tok.chat_template = TINY_TEMPLATE
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model, tok


def _adapt_config(spec: WorkerSpec, cfg: PoolConfig) -> AdaptConfig:
    # the tiny model is small enough to adapt every layer; SmolLM2 adapts its top layers (module paths)
    if spec.base != BASE:
        return replace(cfg.adapt, steps=cfg.tiny_steps, seed=cfg.seed,
                       lora=replace(cfg.adapt.lora, target_modules=PROJECTIONS))
    return replace(cfg.adapt, seed=cfg.seed)


def training_rows(spec: WorkerSpec, cfg: PoolConfig, held_out: Sequence[Task], tokenizer: Any) -> list[dict]:
    """The worker's SFT rows: ``train_per_family`` queries of each of its families, none held out."""
    tasks = train_tasks(spec.families, cfg.train_per_family, held_out, seed=cfg.seed)
    return sft_rows(tasks, chat_renderer(tokenizer), seed=cfg.seed)


def train_worker(spec: WorkerSpec, cfg: PoolConfig, held_out: Sequence[Task]) -> Any:
    """The worker's cached adapter (trained on first use), or None for an untuned worker."""
    if not spec.families:
        return None
    from divelab.lm.adapt import adapt

    _, tok = _load_base(spec.base)
    rows = training_rows(spec, cfg, held_out, tok)
    return adapt(spec.base, rows, _adapt_config(spec, cfg), name=f"fugu {spec.name}",
                 base_loader=lambda: _load_base(spec.base))


def identity(spec: WorkerSpec, adapter: Any) -> str:
    """What decides a worker's replies: its base, its adapter's key and its system message."""
    return stable_hash([spec.base, None if adapter is None else adapter.key, spec.system])


def load_worker(spec: WorkerSpec, adapter: Any) -> tuple[Any, Any]:
    """``(model, tokenizer)`` in eval mode, the adapter merged into the weights."""
    if adapter is None:
        model, tok = _load_base(spec.base)
        return model.eval(), tok
    return adapter.load(merge=True, base_loader=lambda: _load_base(spec.base))


@dataclass
class SystemPrompted:
    """A chat model that always sends ``system_text`` first (a worker's fixed instruction)."""

    model: Any
    system_text: str

    def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None, *,
                 temperature: float | None = None, max_tokens: int | None = None) -> ChatResponse:
        return self.model.complete(self._with(messages), tools, temperature=temperature, max_tokens=max_tokens)

    def complete_many(self, conversations: list[list[Message]], tools: list[ToolSpec] | None = None, *,
                      temperature: float | None = None, max_tokens: int | None = None) -> list[ChatResponse]:
        return _many(self.model, [self._with(m) for m in conversations], tools, temperature, max_tokens)

    def _with(self, messages: list[Message]) -> list[Message]:
        return messages if messages and messages[0].role == "system" else [system(self.system_text), *messages]


def _many(chat: Any, conversations: list[list[Message]], tools: Any, temperature: float | None,
          max_tokens: int | None) -> list[ChatResponse]:
    if hasattr(chat, "complete_many"):
        return chat.complete_many(conversations, tools, temperature=temperature, max_tokens=max_tokens)
    return [chat.complete(m, tools, temperature=temperature, max_tokens=max_tokens) for m in conversations]


def chat_model(spec: WorkerSpec, model: Any, tok: Any, cfg: PoolConfig) -> Any:
    """The worker as a ``divelab.chat`` model (greedy, ``max_new_tokens`` per answer)."""
    from divelab.chat.hf_local import HFChatModel

    chat = HFChatModel(model, tok, max_new_tokens=cfg.max_new_tokens)
    return chat if spec.system is None else SystemPrompted(chat, spec.system)


# -- price -----------------------------------------------------------------------------------------

def _encode_batch(chat: Any, questions: Sequence[str]) -> tuple[Any, Any, int]:
    import torch

    inner = getattr(chat, "model", chat)
    hf = inner if hasattr(inner, "prompt_ids") else chat
    msgs = [[user(q)] for q in questions]
    if isinstance(chat, SystemPrompted):
        msgs = [chat._with(m) for m in msgs]
    prompts = [hf.prompt_ids(m) for m in msgs]
    pad = hf.tokenizer.pad_token_id if hf.tokenizer.pad_token_id is not None else 0
    width = max(len(p) for p in prompts)
    x = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    return x, mask, sum(len(p) for p in prompts)


def time_worker(chat: Any, questions: Sequence[str], new_tokens: int) -> dict[str, float]:
    """Seconds per prompt token (one prefill of the batch) and per generated token (a fixed-length greedy
    generation of ``new_tokens`` for every row, prefill subtracted)."""
    import torch

    hf = getattr(chat, "model", chat) if isinstance(chat, SystemPrompted) else chat
    x, mask, n_prompt = _encode_batch(chat, questions)
    with torch.no_grad():
        t0 = time.perf_counter()
        hf.model(input_ids=x, attention_mask=mask)
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        hf.model.generate(x, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                          do_sample=False, temperature=None, top_p=None, top_k=None,
                          pad_token_id=hf.tokenizer.pad_token_id)
        gen = time.perf_counter() - t0
    return {"in": prefill / n_prompt, "out": max(gen - prefill, 1e-9) / (len(questions) * new_tokens)}


def price_path(cache_key: object, questions: Sequence[str], cfg: PoolConfig) -> Any:
    """Where the prices measured for ``cache_key`` (the workers' identities) on ``questions`` are cached."""
    key = stable_hash([_VERSION, "price", cache_key, list(questions), cfg.price_rounds, cfg.price_tokens])
    return entry_path(CACHE_KIND, f"price-{key}.json")


def measure_prices(chats: dict[str, Any], questions: Sequence[str], cfg: PoolConfig, *,
                   cache_key: object = None) -> dict[str, dict[str, Any]]:
    """Every worker's price in seconds per 1k prompt / generated tokens, timed side by side (see the module
    docstring): ``{name: {"price_in", "price_out", "rounds": [...]}}``; cached when ``cache_key`` is given."""
    path = None if cache_key is None else price_path(cache_key, questions, cfg)
    if path is not None:
        if path.exists():
            return json.loads(path.read_text())
    names = list(chats)
    rounds: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for r in range(cfg.price_rounds):
        for n in names[r % len(names):] + names[: r % len(names)]:  # rotate who goes first
            rounds[n].append(time_worker(chats[n], questions, cfg.price_tokens))
    out = {n: {"price_in": 1000 * statistics.median(x["in"] for x in rounds[n]),
               "price_out": 1000 * statistics.median(x["out"] for x in rounds[n]), "rounds": rounds[n]}
           for n in names}
    if path is not None:
        atomic_write_text(path, json.dumps(out, indent=1))
    return out


# -- outcomes --------------------------------------------------------------------------------------

def record_path(cache_key: object, tasks: Sequence[Task], cfg: PoolConfig) -> Any:
    """Where one worker's replies to ``tasks`` are cached (``cache_key``: the worker's identity)."""
    key = stable_hash([_VERSION, "record", cache_key, [t.prompt for t in tasks], cfg.max_new_tokens, cfg.gen_batch])
    return entry_path(CACHE_KIND, f"record-{key}.json")


def _merge(parts: list[tuple[list[int], dict[str, Any]]], n: int) -> dict[str, Any]:
    """Per-family records put back in the pool's order."""
    out: dict[str, Any] = {"replies": [""] * n, "prompt_tokens": [0] * n, "completion_tokens": [0] * n, "seconds": 0.0}
    for idx, rec in parts:
        for j, i in enumerate(idx):
            for k in ("replies", "prompt_tokens", "completion_tokens"):
                out[k][i] = rec[k][j]
        out["seconds"] += rec["seconds"]
    return out


def record_worker(chat: Any, tasks: Sequence[Task], cfg: PoolConfig, *, cache_key: object = None,
                  progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Greedy replies of one worker to every task, in batches of ``gen_batch`` grouped by family and prompt
    length: ``{"replies", "prompt_tokens", "completion_tokens", "seconds"}``; cached when ``cache_key`` is given."""
    path = None if cache_key is None else record_path(cache_key, tasks, cfg)
    if path is not None and path.exists():
        return json.loads(path.read_text())
    n = len(tasks)
    replies, p_tok, c_tok = [""] * n, [0] * n, [0] * n
    order = sorted(range(n), key=lambda i: (tasks[i].family, len(tasks[i].prompt)))
    t0 = time.perf_counter()
    for s in range(0, n, cfg.gen_batch):
        idx = order[s:s + cfg.gen_batch]
        resps = _many(chat, [[user(tasks[i].prompt)] for i in idx], None, 0.0, cfg.max_new_tokens)
        for i, r in zip(idx, resps, strict=True):
            replies[i], p_tok[i], c_tok[i] = r.message.content, r.prompt_tokens or 0, r.completion_tokens or 0
        if progress is not None:
            progress(len(idx))
    out = {"replies": replies, "prompt_tokens": p_tok, "completion_tokens": c_tok,
           "seconds": time.perf_counter() - t0}
    if path is not None:
        atomic_write_text(path, json.dumps(out))
    return out


@dataclass
class RealPool:
    """The recorded pool: per (query, worker) the 0/1 reward, the cost in seconds and the answer."""

    tasks: list[Task]
    names: list[str]
    reward: np.ndarray  # (N, L)
    cost: np.ndarray    # (N, L): price_in * prompt tokens + price_out * completion tokens, in seconds
    answers: np.ndarray  # (N, L) str
    prices: dict[str, dict[str, Any]]
    info: dict[str, Any] = field(default_factory=dict)

    def accuracy(self) -> dict[str, dict[str, float]]:
        """Every worker's accuracy per family on the whole pool."""
        fam = np.array([t.family for t in self.tasks])
        return {n: {f: float(self.reward[fam == f, i].mean()) for f in FAMILIES if (fam == f).any()}
                for i, n in enumerate(self.names)}


def assemble(tasks: Sequence[Task], names: Sequence[str], records: dict[str, dict[str, Any]],
             prices: dict[str, dict[str, Any]], info: dict[str, Any] | None = None) -> RealPool:
    """Score every recorded reply and price it with its worker's measured prices."""
    n, k = len(tasks), len(names)
    reward, cost = np.zeros((n, k)), np.zeros((n, k))
    answers = np.empty((n, k), dtype=object)
    for j, name in enumerate(names):
        rec, pr = records[name], prices[name]
        for q, t in enumerate(tasks):
            reward[q, j] = score(t, rec["replies"][q])
            answers[q, j] = extract_answer(rec["replies"][q])
            cost[q, j] = (pr["price_in"] * rec["prompt_tokens"][q] + pr["price_out"] * rec["completion_tokens"][q]) / 1000
    return RealPool(list(tasks), list(names), reward, cost, answers.astype(str), prices, dict(info or {}))


def build(cfg: PoolConfig, *, deadline_s: float | None = None, log: Callable[[str], None] = print) -> RealPool | None:
    """Train (cached), price (cached) and record (cached per worker) the whole pool; returns None when
    ``deadline_s`` seconds ran out first (call again to resume where it stopped)."""
    from divelab.orchestration.fugu.real_data import eval_pool
    from divelab.progress import track
    from divelab.threads import torch_threads

    t_start = time.perf_counter()

    def late() -> bool:
        return deadline_s is not None and time.perf_counter() - t_start > deadline_s

    tasks = eval_pool(cfg.per_family, cfg.seed)
    info: dict[str, Any] = {"config": asdict(cfg), "adapters": {}, "record_seconds": {}}
    adapters: dict[str, Any] = {}
    with torch_threads(1):
        for spec in cfg.specs:
            if late():
                return None
            t0 = time.perf_counter()
            ad = adapters[spec.name] = train_worker(spec, cfg, tasks)
            if ad is not None:
                losses = [h["loss"] for h in ad.record["log"] if "loss" in h]
                info["adapters"][spec.name] = {"key": ad.key, "families": list(spec.families), "base": spec.base,
                                               "steps": ad.record["config"]["steps"], "rows": ad.record["n_rows"],
                                               "train_s": ad.record["train_s"], "loss_first": losses[0],
                                               "loss_last": float(np.mean(losses[-10:]))}
            log(f"{spec.name}: adapter ready ({time.perf_counter() - t0:.0f} s)")
        records: dict[str, dict[str, Any]] = {}
        ids = {s.name: identity(s, adapters[s.name]) for s in cfg.specs}
        for spec in cfg.specs:
            chat, parts = None, []
            for fam in FAMILIES:  # one cache entry per family, so a killed run loses at most one family
                idx = [i for i, t in enumerate(tasks) if t.family == fam]
                if late():
                    return None
                if chat is None and not record_path([ids[spec.name], fam], [tasks[i] for i in idx], cfg).exists():
                    chat = chat_model(spec, *load_worker(spec, adapters[spec.name]), cfg)
                parts.append((idx, record_worker(chat, [tasks[i] for i in idx], cfg, cache_key=[ids[spec.name], fam])))
            records[spec.name] = rec = _merge(parts, len(tasks))
            info["record_seconds"][spec.name] = rec["seconds"]
            log(f"{spec.name}: recorded {len(tasks)} answers ({rec['seconds']:.0f} s of generation)")
            del chat
        if late():
            return None
        # side by side: every worker loaded at once, timed in rotation on the same training-stream questions
        price_q = [t.prompt for t in train_tasks(FAMILIES, max(1, cfg.price_batch // len(FAMILIES) + 1), tasks,
                                                 seed=cfg.seed + 1)][: cfg.price_batch]
        key = [ids[s.name] for s in cfg.specs]
        path = price_path(key, price_q, cfg)
        if path.exists():
            prices = json.loads(path.read_text())
        else:
            chats = {}
            for spec in track(cfg.specs, "fugu: loading workers to price them"):
                chats[spec.name] = chat_model(spec, *load_worker(spec, adapters[spec.name]), cfg)
            prices = measure_prices(chats, price_q, cfg, cache_key=key)
            del chats
    log("prices (s per 1k tokens in/out): " + ", ".join(f"{n} {p['price_in']:.2f}/{p['price_out']:.2f}"
                                                        for n, p in prices.items()))
    return assemble(tasks, [s.name for s in cfg.specs], records, prices, info)


def save_checkpoint_dir(spec: WorkerSpec, adapter: Any, out: str) -> str:
    """Write the merged worker as an HF checkpoint directory (what ``divelab serve --model DIR`` serves)."""
    model, tok = load_worker(spec, adapter)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out

