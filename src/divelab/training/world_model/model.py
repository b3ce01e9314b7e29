"""A language world model: a causal LM that writes the next state given a state and an action.

The text format (word-level tokens; ``[X]`` are special tokens)::

    prompt:  [ROOM] r [INV] i [ACT] a1 , a2 , ... [DO] action [SEP]
    target:  ([WHY] change tags)? [FB] feedback [ROOM] r'|= [INV] i'|= [ACT] + a , - b |= [R] 0|1 [END]

The target is an *edit* of the current state (``=`` = unchanged; commands added/removed), which
keeps targets short and makes "nothing else changes" one token. The prompt is Markov (the current state, not the history): the simulator built on it is a graph
over predicted states, which is what makes it cheap to expand in batches. The optional ``[WHY]``
part is the SFT stage's explicit "what happens next" prediction (which fields change, and whether
the step wins), written before the observation as the paper's ``<predicted_observation>`` follows
its reasoning. Any HF causal LM works, with a word-level tokenizer (:func:`train_tokenizer`, where each
marker is one token) or with its own Hugging Face tokenizer (the markers are then plain text, and the
tokenizer's eos token follows ``[END]`` so generation stops there); the default is a tiny divelab Llama.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

from divelab.lm.fitting import fit
from divelab.lm.models import build_model
from divelab.rl.pg_loss import policy_gradient_loss
from divelab.rl.tokens import as_tokens, is_hf_tokenizer
from divelab.training.world_model.transitions import State, Transition

MARKERS = ["[FB]", "[ROOM]", "[INV]", "[ACT]", "[DO]", "[R]", "[WHY]"]
SPECIALS = ["[PAD]", "[UNK]", "[SEP]", "[EOS]", "[END]", *MARKERS]
# a small Llama (~90k parameters with a ~400-word vocabulary): trains in seconds on 2 CPU cores
WM_LM = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 160,
         "max_position_embeddings": 256}
# longest generated next state in tokens: a word-level token is a word or a marker; a subword tokenizer
# spends several tokens on a marker such as "[ROOM]" and on many words
MAX_NEW_WORDS, MAX_NEW_SUBWORDS = 80, 200


def state_text(s: State, with_feedback: bool) -> str:
    parts = []
    if with_feedback or (not s.room and not s.inventory):  # a one-field env: the feedback is the state
        parts.append(f"[FB] {s.feedback}")
    parts.append(f"[ROOM] {s.room} [INV] {s.inventory} [ACT] {' , '.join(s.actions)}")
    return " ".join(parts)


def prompt_text(state: State, action: str) -> str:
    return f"{state_text(state, with_feedback=False)} [DO] {action} [SEP]"


def why_text(t: Transition) -> str:
    """The SFT stage's short prediction: which fields change, and whether the step wins."""
    tags = [name for name, a, b in (("feedback", t.state.feedback, t.next_state.feedback),
                                    ("room", t.state.room, t.next_state.room),
                                    ("inventory", t.state.inventory, t.next_state.inventory),
                                    ("actions", t.state.actions, t.next_state.actions)) if a != b]
    if t.reward > 0:
        tags.append("win")
    return f"[WHY] {' '.join(tags) or 'nothing'}"


def edit_text(state: State, nxt: State) -> str:
    """The next state written as an edit of the current one: ``=`` for an unchanged room or
    inventory, and the admissible commands as ``+ added , - removed`` (``=`` when unchanged)."""
    room = "=" if nxt.room == state.room else nxt.room
    inv = "=" if nxt.inventory == state.inventory else nxt.inventory
    added = [f"+ {a}" for a in nxt.actions if a not in state.actions]
    removed = [f"- {a}" for a in state.actions if a not in nxt.actions]
    acts = " , ".join(added + removed) or "="
    return f"[FB] {nxt.feedback} [ROOM] {room} [INV] {inv} [ACT] {acts}"


def target_text(t: Transition, reasoning: bool) -> str:
    body = f"{edit_text(t.state, t.next_state)} [R] {int(t.reward > 0)} [END]"
    return f"{why_text(t)} {body}" if reasoning else body


@dataclass(frozen=True)
class Prediction:
    state: State
    reward: float
    well_formed: bool
    text: str


def parse_prediction(text: str, state: State) -> Prediction:
    """Parse a generated target (an edit of ``state``); a malformed one gives an empty state and
    ``well_formed=False``."""
    toks = text.replace("[END]", " [END] ").split()
    if "[END]" in toks:
        toks = toks[:toks.index("[END]")]
    order = ["[FB]", "[ROOM]", "[INV]", "[ACT]", "[R]"]
    pos = [toks.index(m) if m in toks else -1 for m in order]
    ok = all(p >= 0 for p in pos) and pos == sorted(pos) and len(toks) == pos[-1] + 2 and toks[-1] in ("0", "1")
    if not ok:
        return Prediction(State("", "", "", ()), 0.0, False, text)
    fb, room, inv, act = (" ".join(toks[pos[i] + 1:pos[i + 1]]) for i in range(4))
    room = state.room if room == "=" else room
    inv = state.inventory if inv == "=" else inv
    actions = set(state.actions)
    if act != "=":
        for item in act.split(" , "):
            sign, _, name = item.strip().partition(" ")
            if sign == "+" and name:
                actions.add(name)
            elif sign == "-" and name:
                actions.discard(name)
            else:
                return Prediction(State("", "", "", ()), 0.0, False, text)
    return Prediction(State(fb, room, inv, tuple(sorted(actions))), float(toks[-1] == "1"), True, text)


def train_tokenizer(transitions: Iterable[Transition]) -> Tokenizer:
    """A word-level tokenizer over the transitions' text with the format's special tokens."""
    texts = []
    for t in transitions:
        texts.append(prompt_text(t.state, t.action))
        texts.append(target_text(t, reasoning=True))
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(vocab_size=5000, special_tokens=SPECIALS,
                                                              min_frequency=1))
    return tok


def _tokens(tokenizer: Tokenizer | Any) -> Any:
    """The world model's view of a tokenizer: word-level, its ``[END]`` ends a generation; a Hugging Face
    tokenizer's eos does (see :mod:`divelab.rl.tokens`)."""
    return as_tokens(tokenizer, word_specials=("[PAD]", "[SEP]", "[END]"),
                     hint="divelab.training.world_model.train_tokenizer()")


class WorldModel:
    """A causal LM + tokenizer in the format above; ``predict`` is memoised (greedy is deterministic).

    ``tokenizer``: a word-level ``tokenizers.Tokenizer`` from :func:`train_tokenizer` (every marker one
    token; ``[END]`` ends a generation), or any Hugging Face tokenizer with an eos token (the markers are
    text; targets are followed by its eos, which ends a generation). ``max_new_tokens`` defaults to
    80 with a word-level tokenizer and 200 with a subword one."""

    def __init__(self, model: torch.nn.Module, tokenizer: Tokenizer | Any, max_new_tokens: int | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.subword = is_hf_tokenizer(tokenizer)
        if not self.subword and isinstance(tokenizer, Tokenizer):
            missing = [t for t in SPECIALS if tokenizer.token_to_id(t) is None]
            if missing:
                raise ValueError(f"tokenizer lacks the world-model special tokens {missing}; use train_tokenizer(), "
                                 "or pass a Hugging Face tokenizer (transformers.AutoTokenizer) instead")
        # word-level: [END] is the format's own end token; a subword tokenizer ends a target with its eos
        self.tokens = _tokens(tokenizer)
        self.pad_id, self.end_id = self.tokens.pad_id, self.tokens.eos_id
        self.max_new_tokens = max_new_tokens or (MAX_NEW_SUBWORDS if self.subword else MAX_NEW_WORDS)
        self._cache: dict[str, Prediction] = {}
        self.generated = 0  # predictions actually generated (the rest came from the memo)

    @classmethod
    def new(cls, tokenizer: Tokenizer | Any, seed: int = 0, **overrides: object) -> WorldModel:
        """A fresh tiny divelab Llama sized to ``tokenizer``'s vocabulary."""
        return cls(build_model("tiny-100k", _tokens(tokenizer).vocab_size, seed=seed, **{**WM_LM, **overrides}),
                   tokenizer)

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder)
        if self.subword:
            self.tokenizer.save_pretrained(folder)  # tokenizer_config.json marks a Hugging Face tokenizer
        else:
            self.tokenizer.save(str(folder / "tokenizer.json"))

    @classmethod
    def load(cls, folder: str | Path) -> WorldModel:
        from transformers import AutoModelForCausalLM

        folder = Path(folder)
        hf_tok, word_tok = (folder / "tokenizer_config.json").exists(), (folder / "tokenizer.json").exists()
        if not (folder / "config.json").exists() or not (hf_tok or word_tok):
            raise FileNotFoundError(f"no world model at {folder} (expected config.json, weights and a tokenizer: "
                                    "tokenizer.json or a Hugging Face tokenizer_config.json)")
        model = AutoModelForCausalLM.from_pretrained(folder).eval()
        if hf_tok:
            from transformers import AutoTokenizer

            return cls(model, AutoTokenizer.from_pretrained(folder, local_files_only=True))
        return cls(model, Tokenizer.from_file(str(folder / "tokenizer.json")))

    def invalidate(self) -> None:
        self._cache.clear()

    def encode(self, text: str) -> list[int]:
        return self.tokens.encode(text)

    def encode_target(self, text: str) -> list[int]:
        """A target's ids, ending with the id that stops generation (word-level: its own ``[END]``)."""
        ids = self.encode(text)
        return ids + [self.end_id] if self.subword else ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokens.decode([i for i in ids if i != self.pad_id])

    # -- generation ------------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompts: Sequence[str], sample: bool = False, num_return: int = 1,
                 batch_size: int = 256) -> list[list[int]]:
        """Generated token ids (up to and including ``[END]``) for each prompt x ``num_return``."""
        out: list[list[int]] = []
        self.model.eval()
        for i in range(0, len(prompts), batch_size):
            enc = [self.encode(p) for p in prompts[i:i + batch_size]]
            width = max(len(e) for e in enc)
            ids = torch.full((len(enc), width), self.pad_id, dtype=torch.long)
            attn = torch.zeros_like(ids)
            for r, e in enumerate(enc):  # left padding
                ids[r, width - len(e):] = torch.tensor(e)
                attn[r, width - len(e):] = 1
            gen = self.model.generate(input_ids=ids, attention_mask=attn, max_new_tokens=self.max_new_tokens,
                                      do_sample=sample, top_k=0 if sample else None, temperature=1.0,
                                      num_return_sequences=num_return, eos_token_id=self.end_id,
                                      pad_token_id=self.pad_id)
            for row in gen[:, width:].tolist():
                cut = row.index(self.end_id) + 1 if self.end_id in row else len(row)
                # (a subword tokenizer may pad with its eos: the end id stays, it is part of the completion)
                out.append([t for t in row[:cut] if t != self.pad_id or t == self.end_id])
        return out

    def predict(self, queries: Sequence[tuple[State, str]]) -> list[Prediction]:
        """Greedy next-state predictions for (state, action) pairs (new ones in one batched pass)."""
        prompts = [prompt_text(s, a) for s, a in queries]
        todo = list(dict.fromkeys(p for p in prompts if p not in self._cache))
        if todo:
            state_of = dict(zip(prompts, (s for s, _ in queries), strict=True))
            for p, ids in zip(todo, self.generate(todo), strict=True):
                self._cache[p] = parse_prediction(self.decode(ids), state_of[p])
            self.generated += len(todo)
        return [self._cache[p] for p in prompts]

    # -- training --------------------------------------------------------------------------------
    def sequence_logprobs(self, prompts: Sequence[list[int]], completions: Sequence[list[int]]) -> torch.Tensor:
        """Summed log-prob of each completion after its prompt (differentiable)."""
        rows = [p + c for p, c in zip(prompts, completions, strict=True)]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        mask = torch.zeros((len(rows), width), dtype=torch.bool)
        for r, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            ids[r, :len(p) + len(c)] = torch.tensor(p + c)
            attn[r, :len(p) + len(c)] = 1
            mask[r, len(p):len(p) + len(c)] = True
        logits = self.model(input_ids=ids, attention_mask=attn).logits[:, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        return (lp * mask[:, 1:]).sum(1)


def lm_train(wm: WorldModel, transitions: Sequence[Transition], stage: str, steps: int, lr: float = 3e-3,
             batch_size: int = 32, seed: int = 0, win_weight: float = 1.0) -> list[float]:
    """Stage ``"cpt"`` (continued pre-training: LM loss on every token of prompt + plain target) or
    ``"sft"`` (loss on the target only, which starts with the ``[WHY]`` prediction). ``win_weight``
    oversamples rewarded transitions (rare in random-play logs, yet a simulator that never predicts a
    win gives an RL agent no signal). Returns losses."""
    if stage not in ("cpt", "sft"):
        raise ValueError(f"stage must be 'cpt' or 'sft', got {stage!r}")
    if not transitions:
        raise ValueError("no transitions to train on")
    data = []
    for t in transitions:
        p = wm.encode(prompt_text(t.state, t.action))
        c = wm.encode_target(target_text(t, reasoning=stage == "sft"))
        data.append((p, c))
    weights = np.array([win_weight if t.reward > 0 else 1.0 for t in transitions])
    probs = weights / weights.sum()
    rng = np.random.default_rng(seed)

    def loss_of_step(step: int) -> torch.Tensor:
        idx = rng.choice(len(data), size=min(batch_size, len(data)), replace=False,
                         p=None if win_weight == 1.0 else probs)
        width = max(len(data[i][0]) + len(data[i][1]) for i in idx)
        ids = torch.full((len(idx), width), wm.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        mask = torch.zeros((len(idx), width), dtype=torch.bool)
        for r, i in enumerate(idx):
            p, c = data[i]
            ids[r, :len(p) + len(c)] = torch.tensor(p + c)
            attn[r, :len(p) + len(c)] = 1
            mask[r, (1 if stage == "cpt" else len(p)):len(p) + len(c)] = True
        logits = wm.model(input_ids=ids, attention_mask=attn).logits[:, :-1]
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                               reduction="none").view(len(idx), -1)
        m = mask[:, 1:].float()
        return (ce * m).sum() / m.sum()

    # linear warmup over 20 steps, then linear decay to 10% of lr
    result = fit(wm.model, loss_of_step, steps, lr=lr, optimizer="adamw", grad_clip=1.0, seed=seed,
                 schedule=lambda i: min(1.0, (i + 1) / 20) * max(0.1, 1 - i / steps),
                 description=f"world model: {stage}")
    wm.invalidate()
    return [float(x) for x in result.losses]


def rl_train(wm: WorldModel, transitions: Sequence[Transition], steps: int, group: int = 4, prompts: int = 8,
             lr: float = 5e-4, seed: int = 0, flattery_penalty: float = 0.5) -> list[float]:
    """The RL stage: sample ``group`` predictions per prompt, reward each with the rule-based
    :func:`~divelab.training.world_model.fidelity.fidelity_reward`, and take a policy-gradient step
    on the group-centred rewards (GRPO without the std division). Returns the mean reward per step."""
    from divelab.training.world_model.fidelity import fidelity_reward

    if not transitions:
        raise ValueError("no transitions to train on")
    rng = np.random.default_rng(seed)
    means = []

    def loss_of_step(step: int) -> torch.Tensor | None:
        wm.model.eval()
        idx = rng.choice(len(transitions), size=min(prompts, len(transitions)), replace=False)
        batch = [transitions[i] for i in idx]
        texts = [prompt_text(t.state, t.action) for t in batch]
        gens = wm.generate(texts, sample=True, num_return=group)  # prompt-major: each prompt's group in a row
        rewards = np.array([fidelity_reward(parse_prediction(wm.decode(g), batch[j // group].state),
                                            batch[j // group], flattery_penalty)
                            for j, g in enumerate(gens)])
        adv = (rewards.reshape(-1, group) - rewards.reshape(-1, group).mean(1, keepdims=True)).reshape(-1)
        means.append(float(rewards.mean()))
        if np.all(adv == 0):
            return None  # no signal: skip the update
        wm.model.train()
        lp = wm.sequence_logprobs([wm.encode(texts[j // group]) for j in range(len(gens))], gens)
        return policy_gradient_loss(lp, torch.tensor(adv, dtype=torch.float32))

    fit(wm.model, loss_of_step, steps, lr=lr, optimizer="adamw", grad_clip=1.0, seed=seed,
        description="world model: RL (fidelity reward)", info=lambda done, loss: f"reward {means[-1]:.3f}")
    wm.invalidate()
    return means
