"""A DSpark drafter for a chat model, built once by one call and cached: the default drafter of ``divelab serve``.

:func:`build_chat_drafter` runs the whole recipe: the target's own responses to chat prompts
(:mod:`divelab.serving.dspark.chat_data`, cached shard by shard), a draft vocabulary of the most
frequent response tokens, training with the DSpark loss in :func:`divelab.lm.fit` (checkpointed, so
a killed build resumes), a learning curve (expected accepted tokens per verification, τ, on
held-out topics against training tokens, so the budget is chosen by measurement), and STS
calibration of the confidence head. The result lives in the divelab cache under a key of the
recipe; :func:`default_drafter_dir` finds it for the server.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from divelab.cache import entry_path, lock, stable_hash
from divelab.serving.dspark import chat_data
from divelab.serving.dspark.drafter import Drafter, DrafterConfig
from divelab.serving.dspark.training import DrafterTrainConfig, combine_dspark_terms, position_weights

TOP_K = 32  # target probabilities kept per token (the rest of the mass is one number)


@dataclass(frozen=True)
class ChatDrafterRecipe:
    """Everything that decides the drafter (its cache key)."""

    target: str = "smollm2-135m-instruct"
    """the target: a zoo name or a local HF checkpoint directory of a chat model."""
    n_prompts: int = 2000
    """training prompts (request templates × training topics) the target answers."""
    samples_per_prompt: int = 1
    """responses per training prompt: the first pass half greedy, half sampled at T=1 (by shard); each
    further pass sampled at T=1 with its own seed (more on-policy data than there are prompts)."""
    max_new_tokens: int = 128
    """the longest response generated per prompt."""
    gen_batch: int = 64
    """prompts generated together (one cached shard each)."""
    kind: str = "markov"
    """drafter kind: parallel | markov (DSpark) | rnn | ar (EAGLE-style)."""
    gamma: int = 6
    """draft block length γ."""
    n_layers: int = 1
    """drafter transformer layers."""
    window: int = 16
    """committed positions of target features the drafter attends to."""
    rank: int = 64
    """rank of the sequential (Markov) head."""
    draft_vocab: int = 8192
    """tokens the draft head scores (the most frequent in the responses); 0 = the whole vocabulary."""
    steps: int = 3000
    """optimisation steps."""
    blocks_per_step: int = 128
    """draft blocks (random response positions) per optimisation step."""
    lr: float = 3e-3
    """peak learning rate (warmup, then cosine decay to a tenth)."""
    warmup: int = 100
    """warmup steps."""
    decay: float = 4.0
    """position-weight decay of the loss (the released DSpark configs use 4)."""
    eval_every: int = 250
    """steps between learning-curve points."""
    eval_prompts: int = 32
    """held-out prompts (topics no training prompt uses) for the learning curve and calibration."""
    code_eval_prompts: int = 32
    """held-out HumanEval problems asked as chat requests (0 = none): τ on code beside τ on chat."""
    seed: int = 0
    """seed of prompt order, sampling, initialisation and batches."""

    def __post_init__(self) -> None:
        for name in ("n_prompts", "samples_per_prompt", "max_new_tokens", "gen_batch", "gamma", "steps",
                     "blocks_per_step", "eval_every", "eval_prompts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.code_eval_prompts < 0:
            raise ValueError(f"code_eval_prompts must be >= 0, got {self.code_eval_prompts}")

    def key(self) -> str:
        return stable_hash({"recipe": asdict(self), "version": 1})

    def data_key(self) -> str:
        return stable_hash({k: getattr(self, k) for k in ("target", "n_prompts", "max_new_tokens", "gen_batch",
                                                          "seed")})


def _latest_pointer(model: str) -> Path:
    return entry_path("dspark-drafter", f"latest-{stable_hash({'target': model})}.json")


def default_drafter_dir(model: str, recipe: ChatDrafterRecipe | None = None) -> Path | None:
    """The cached drafter for ``model``: the one built with ``recipe`` if given, else the most recently
    built one (whatever its recipe); None when there is none."""
    if recipe is not None:
        if recipe.target != model:
            recipe = ChatDrafterRecipe(**{**asdict(recipe), "target": model})
        path = entry_path("dspark-drafter", recipe.key())
    else:
        pointer = _latest_pointer(model)
        if not pointer.exists():
            return None
        path = Path(json.loads(pointer.read_text())["path"])
    return path if (path / "drafter_config.json").exists() else None


def recipe_prompts(tok, recipe: ChatDrafterRecipe) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """(training prompts, held-out prompts of the learning curve, the other held-out prompts): the two
    held-out sets use topics no training prompt uses, and do not overlap (benchmarks use the third)."""
    prompts = chat_data.chat_prompts(tok, chat_data.TOPICS)
    if recipe.n_prompts > len(prompts):
        raise ValueError(f"n_prompts {recipe.n_prompts} exceeds the {len(prompts)} training prompts "
                         f"({len(chat_data.TEMPLATES)} templates × {len(chat_data.TOPICS)} topics)")
    order = np.random.default_rng(recipe.seed).permutation(len(prompts))
    test = chat_data.chat_prompts(tok, chat_data.TEST_TOPICS)
    held = np.random.default_rng(recipe.seed + 1).permutation(len(test))
    return ([prompts[i] for i in order[: recipe.n_prompts]], [test[i] for i in held[: recipe.eval_prompts]],
            [test[i] for i in held[recipe.eval_prompts:]])


def training_rows(target, tok, recipe: ChatDrafterRecipe) -> tuple[list[list[int]], list[int]]:
    """The recipe's training rows (prompt + the target's response; cached), pass after pass of responses
    to the same prompts, and each row's prompt length. The first pass is the one-sample recipe's (same
    cache), so a larger recipe extends a smaller one's data instead of regenerating it."""
    train_prompts, _, _ = recipe_prompts(tok, recipe)
    data_dir = entry_path("dspark-responses", recipe.data_key())
    rows = chat_data.build_responses(target, tok, train_prompts, data_dir / "train", recipe.max_new_tokens,
                                     recipe.gen_batch, recipe.seed)
    for j in range(1, recipe.samples_per_prompt):
        rows += chat_data.build_responses(target, tok, train_prompts, data_dir / f"train-pass-{j}",
                                          recipe.max_new_tokens, recipe.gen_batch, recipe.seed + 100_000 * j,
                                          f"target responses, pass {j + 1}/{recipe.samples_per_prompt}",
                                          sample=True)
    return rows, [len(p) for p in train_prompts] * recipe.samples_per_prompt


def anchor_index(offsets: np.ndarray, starts: list[int], gamma: int) -> np.ndarray:
    """Global positions that can anchor a full draft block inside a response: from the last prompt
    token (drafting the response's first tokens) to γ + 1 before the row's end."""
    out = []
    for r, s in enumerate(starts):
        lo, hi = int(offsets[r]) + max(s - 1, 1), int(offsets[r + 1]) - gamma - 1
        if hi > lo:
            out.append(np.arange(lo, hi))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def gather_blocks(data: dict, anchors: np.ndarray, gamma: int, window: int) -> dict[str, torch.Tensor]:
    """Context features, anchor, targets and the target's top-k at the block positions of global
    ``anchors`` (context positions before a row's start are masked)."""
    a = torch.from_numpy(anchors.astype(np.int64))
    row_start = torch.from_numpy(data["offsets"][np.searchsorted(data["offsets"], anchors, side="right") - 1])
    cidx = a[:, None] - window + torch.arange(window)[None, :]
    mask = cidx >= row_start[:, None]
    feats = torch.from_numpy(data["feats"][cidx.clamp(min=0).numpy()]).float()
    bidx = a[:, None] + torch.arange(gamma)[None, :]
    tokens = torch.from_numpy(data["tokens"])
    return {"ctx": feats, "mask": mask, "anchor": tokens[a], "targets": tokens[bidx + 1],
            "top_ids": torch.from_numpy(data["top_ids"][bidx.numpy()]).long(),
            "top_p": torch.from_numpy(data["top_p"][bidx.numpy()]).float()}


def sparse_dspark_loss(drafter: Drafter, draft_logits: torch.Tensor, conf_logits: torch.Tensor, top_ids: torch.Tensor,
                       top_p: torch.Tensor, tokens: torch.Tensor, weights: torch.Tensor,
                       cfg: DrafterTrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The DSpark loss (0.1·CE + 0.9·L1 + 1.0·BCE on the confidence) against the target's top-k.

    Only the target's k most probable tokens are known (cached); the L1 distance uses its tight
    lower bound Σ_top |p_d − p_t| + |P_d(rest) − P_t(rest)|, exact when the draft spreads the rest
    of its mass as the target does. Returns (loss, per-position mean 1 − ½·L1)."""
    logp_d = torch.log_softmax(draft_logits.float(), dim=-1)
    p_d = logp_d.exp()
    idx, inside = drafter.to_draft_index(top_ids)
    pd_top = p_d.gather(-1, idx) * inside  # the draft's mass on the target's top-k (0 outside the draft vocab)
    l1 = (pd_top - top_p).abs().sum(-1) + ((1 - pd_top.sum(-1)) - (1 - top_p.sum(-1))).abs()
    tok_idx, tok_in = drafter.to_draft_index(tokens)
    ce = -logp_d.gather(-1, tok_idx[..., None]).squeeze(-1) * tok_in
    return combine_dspark_terms(ce, l1, conf_logits, weights, cfg)


@torch.no_grad()
def expected_tau(drafter: Drafter, data: dict, anchors: np.ndarray, batch: int = 512) -> dict:
    """τ (tokens per verification, bonus included) that greedy decoding with fixed γ gets at ``anchors``.

    Teacher-forced on the target's greedy responses: a block's drafts are accepted up to the first
    that differs from the target's argmax (its top-1, cached), and on that prefix the teacher-forced
    previous tokens are the drafted ones, so nothing is approximated."""
    g, w = drafter.config.gamma, drafter.config.window
    acc = []
    for lo in range(0, len(anchors), batch):
        b = gather_blocks(data, anchors[lo: lo + batch], g, w)
        d_logits, _ = drafter.forward_train(drafter.fuse_concat(b["ctx"]), b["mask"], b["anchor"], b["targets"])
        ok = drafter.to_target_ids(d_logits.argmax(-1)) == b["top_ids"][..., 0]
        acc.append(ok.long().cumprod(1).sum(1).numpy())
    a = np.concatenate(acc) if acc else np.zeros(0)
    return {"tau": float(1 + a.mean()) if len(a) else 1.0,
            "survive": [float((a > k).mean()) if len(a) else 0.0 for k in range(g)], "anchors": int(len(a))}


def build_chat_drafter(recipe: ChatDrafterRecipe | None = None, log=print) -> Path:
    """Build (or find) the drafter of ``recipe``; returns its directory (load it with ``load_drafter``)."""
    from divelab.lm import load_model
    from divelab.lm.fitting import fit, warmup_cosine
    from divelab.serving.dspark.api import calibrate, save_drafter
    from divelab.serving.dspark.drafter import default_target_layers

    recipe = recipe or ChatDrafterRecipe()
    path = entry_path("dspark-drafter", recipe.key())
    if (path / "drafter_config.json").exists():
        _write_pointer(recipe.target, path)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with lock(path):
        if (path / "drafter_config.json").exists():
            _write_pointer(recipe.target, path)
            return path
        t0 = time.perf_counter()
        target, tok = load_model(recipe.target)
        target.eval()
        for p in target.parameters():
            p.requires_grad_(False)
        eos = int(tok.eos_token_id)
        train_prompts, held_prompts, _ = recipe_prompts(tok, recipe)
        layers = default_target_layers(int(target.config.num_hidden_layers))
        data_dir = entry_path("dspark-responses", recipe.data_key())
        log(f"[drafter] {recipe.target}'s responses to {len(train_prompts)} training and {len(held_prompts)} "
            f"held-out chat prompts (cached per shard in {data_dir}) ...")
        rows, starts = training_rows(target, tok, recipe)
        # held-out: greedy only (one shard per batch, even shards are greedy), so τ is exact
        held_rows = chat_data.build_responses(target, tok, held_prompts, data_dir / "held", recipe.max_new_tokens,
                                              len(held_prompts), recipe.seed + 10_000, "held-out responses")
        code = None
        if recipe.code_eval_prompts:  # the code domain: held-out HumanEval requests, greedy like held_rows
            code_prompts = chat_data.code_prompts(tok, recipe.code_eval_prompts, recipe.seed)
            code_rows = chat_data.build_responses(target, tok, code_prompts, data_dir / "code",
                                                  recipe.max_new_tokens, len(code_prompts), recipe.seed + 20_000,
                                                  "held-out code responses", sample=False)
            code = chat_data.build_features(target, code_rows, layers, TOP_K, data_dir / "code-features",
                                            description="held-out code features")
            code_starts = [len(p) for p in code_prompts]
            code_anchors = anchor_index(code["offsets"], code_starts, recipe.gamma)
        gen_s = time.perf_counter() - t0
        n_first = len(rows) // recipe.samples_per_prompt
        train = chat_data.build_features(target, rows, layers, TOP_K, data_dir / "train-features",
                                         breaks=tuple(n_first * j for j in range(1, recipe.samples_per_prompt)))
        held = chat_data.build_features(target, held_rows, layers, TOP_K, data_dir / "held-features",
                                        description="held-out features")
        data_s = time.perf_counter() - t0
        held_starts = [len(p) for p in held_prompts]
        n_resp = int(sum(len(r) - s for r, s in zip(rows, starts, strict=True)))
        log(f"[drafter] {n_resp} response tokens ({len(train['tokens'])} with prompts) in {data_s:.0f} s; "
            "training ...")

        torch.manual_seed(recipe.seed)
        dc = DrafterConfig(kind=recipe.kind, gamma=recipe.gamma, n_layers=recipe.n_layers, window=recipe.window,
                           rank=recipe.rank, n_heads=int(target.config.num_attention_heads),
                           target_layers=layers, draft_vocab=recipe.draft_vocab, target_name=recipe.target)
        drafter = Drafter.for_target(target, dc)
        cover = cover_code = None
        if drafter.reduced:
            resp = [r[s:] for r, s in zip(rows, starts, strict=True)]
            drafter.set_draft_vocab(torch.from_numpy(chat_data.most_frequent(resp, recipe.draft_vocab, (eos,))))
            cover = chat_data.coverage(held_rows, drafter.vocab_ids.numpy(), held_starts)
            if code is not None:
                cover_code = chat_data.coverage(code_rows, drafter.vocab_ids.numpy(), code_starts)
            log(f"[drafter] a draft vocabulary of {recipe.draft_vocab} tokens covers {cover:.1%} of held-out "
                "response tokens")
        train_anchors = anchor_index(train["offsets"], starts, recipe.gamma)
        held_anchors = anchor_index(held["offsets"], held_starts, recipe.gamma)
        cfg = DrafterTrainConfig(ce_weight=0.1, l1_weight=0.9, conf_weight=1.0, decay=recipe.decay)
        weights = position_weights(recipe.gamma, recipe.decay)
        rng = np.random.default_rng(recipe.seed)
        curve: list[dict] = []
        per_step = recipe.blocks_per_step

        def loss_of_step(step: int) -> torch.Tensor:
            b = gather_blocks(train, rng.choice(train_anchors, per_step), recipe.gamma, recipe.window)
            d_logits, c_logits = drafter.forward_train(drafter.fuse_concat(b["ctx"]), b["mask"], b["anchor"],
                                                       b["targets"])
            return sparse_dspark_loss(drafter, d_logits, c_logits, b["top_ids"], b["top_p"], b["targets"], weights,
                                      cfg)[0]

        def point(step: int) -> None:
            drafter.eval()
            est = expected_tau(drafter, held, held_anchors)
            pt = {"step": step, "blocks_seen": step * per_step, "drafted_tokens_seen": step * per_step * recipe.gamma,
                  "tau_greedy": est["tau"], "survive_greedy": est["survive"]}
            line = f"[drafter] step {step}: expected τ at γ={recipe.gamma} (greedy) held-out chat {est['tau']:.2f}"
            if code is not None:
                est_code = expected_tau(drafter, code, code_anchors)
                pt |= {"tau_greedy_code": est_code["tau"], "survive_greedy_code": est_code["survive"]}
                line += f", held-out code {est_code['tau']:.2f}"
            curve.append(pt)
            log(line)
            drafter.train()

        def after_step(step: int, loss: float | None) -> None:
            if step % recipe.eval_every == 0 and step < recipe.steps:
                point(step)

        point(0)
        ckpt = path.with_name(path.name + ".ckpt")
        res = fit(drafter, loss_of_step, recipe.steps, lr=recipe.lr, optimizer="adamw",
                  schedule=warmup_cosine(recipe.steps, recipe.warmup, 0.1), grad_clip=1.0, seed=None, np_rng=rng,
                  description=f"train the {recipe.kind} drafter of {recipe.target}", after_step=after_step,
                  ckpt_dir=ckpt, ckpt_every=recipe.eval_every, ckpt_key=asdict(recipe),
                  ckpt_state=lambda: {"curve": list(curve)},
                  on_resume=lambda st: (curve.clear(), curve.extend(st["curve"])))
        point(recipe.steps)
        log("[drafter] calibrating the confidence head (STS) on held-out prompts ...")
        cal = calibrate(target, drafter, held_prompts[: min(8, len(held_prompts))], max_new_tokens=48,
                        seed=recipe.seed)
        meta = {"recipe": asdict(recipe), "responses": len(rows), "response_tokens": n_resp,
                "tokens_with_prompts": int(len(train["tokens"])),
                "held_out_prompts": len(held_prompts), "target_layers": list(layers), "top_k": TOP_K,
                "data_s": data_s, "generation_s": gen_s, "train_s": res.wall_time_s,
                "build_s": time.perf_counter() - t0, "final_loss": res.losses[-1], "draft_vocab_coverage": cover,
                "draft_vocab_coverage_code": cover_code,
                "learning_curve": curve, "resumed_from": res.resumed_from}
        save_drafter(drafter, path, cal, meta=meta)
        shutil.rmtree(ckpt, ignore_errors=True)
        _write_pointer(recipe.target, path)
        return path


def _write_pointer(model: str, path: Path) -> None:
    """Remember ``path`` as ``model``'s drafter for ``divelab serve`` (written whole, then renamed)."""
    pointer = _latest_pointer(model)
    tmp = pointer.with_suffix(".tmp")
    tmp.write_text(json.dumps({"path": str(path)}))
    tmp.replace(pointer)
