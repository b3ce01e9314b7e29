"""The language-model check: a tiny HF causal LM trained by KL-regularised policy gradient on the
key-and-door text game, scored by the progress advantage against its reference.

Pipeline (each stage cached in the divelab cache, keyed by its config):

1. **Reference**: a tiny Llama (``divelab.lm.models``) fine-tuned on episodes of a noisy expert
   (random command with probability ``sft_eps``), standing in for the post-training base model.
2. **Policy**: the reference further trained with REINFORCE on the KL-regularised objective
   ``E[R] - beta KL(pi || pi_ref)`` (group-mean baseline, GRPO-style), whose optimum is
   ``pi_ref exp(A*/beta)``. It is trained briefly, so it is an imperfect policy, as in the paper.
3. **Evaluation**: 8 rollouts per task from the policy, scored with :class:`ProgressAdvantage`
   (the public API, a word-level HF tokenizer), against confidence baselines, exact oracle labels
   (the game's dynamic-programming success probability) and Monte Carlo advantages of the policy.

Every action is three tokens and every observation ten, so a batch of episodes stays in lockstep
and sampling uses one KV cache.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from divelab.cache import atomic_dir, atomic_write_text, entry_path, stable_hash
from divelab.lm.fitting import fit
from divelab.rl.pg_loss import policy_gradient_loss
from divelab.training.progress_advantage.textgame import (
    ACTIONS,
    GameSpec,
    KeyDoorGame,
    State,
    expert_action,
    optimal_success,
    q_success,
    vocabulary,
)

ACTION_TOKENS = 3
REFERENCE_BASELINE = "starting model's mean token log-prob"
"""the reference (the model before RL) as a selector: the trivial 'starting model' baseline"""
LOCALISATION_BASELINES = ("least-confident step", "random step", "first step", "last step")
REFERENCE_STEP_BASELINE = "starting model's log-prob"
SHAM_SEED = 101  # offset of the negative control's permutation stream from the evaluation seed
SPECIALS = ("<pad>", "<bos>", "<unk>")
_VERSION = 1  # bump to invalidate cached models when training code changes


@dataclass(frozen=True)
class LMCheckConfig:
    model: str = "tiny-100k"
    n_rooms: int = 5
    slack: int = 1
    slip: float = 0.0
    beta: float = 0.1
    sft_eps: float = 0.3  # the noisy expert's random-command rate
    sft_episodes: int = 2000
    sft_steps: int = 120
    sft_lr: float = 3e-3
    sft_batch: int = 32
    rl_iters: int = 15
    rl_tasks: int = 8  # tasks per iteration
    rl_group: int = 8  # rollouts per task
    rl_lr: float = 1e-3
    seed: int = 0

    @property
    def spec(self) -> GameSpec:
        return GameSpec(n_rooms=self.n_rooms, slip=self.slip, slack=self.slack)


def make_tokenizer(spec: GameSpec) -> Any:
    """A word-level HF tokenizer (``PreTrainedTokenizerFast``) over the game's words."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate([*SPECIALS, *vocabulary(spec)])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", pad_token="<pad>", unk_token="<unk>")


def _enc(tok: Any, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False))


def all_tasks(spec: GameSpec) -> list[tuple[int, int]]:
    return [(s, k) for s in range(spec.n_rooms) for k in range(spec.n_rooms - 1)]


@dataclass
class Episode:
    ids: list[int]
    spans: list[tuple[int, int]]
    observations: list[str]  # observation before each action
    actions: list[str]
    states: list[State]  # state before each action
    won: bool
    task: tuple[int, int]

    def to_trajectory(self) -> Any:
        from divelab.training.progress_advantage.scorer import Step, Trajectory

        return Trajectory(steps=[Step(o, a) for o, a in zip(self.observations, self.actions, strict=True)],
                          success=self.won, meta={"task": list(self.task)})


def game_at(spec: GameSpec, state: State, rng: np.random.Generator) -> KeyDoorGame:
    g = KeyDoorGame(spec, state.room, state.key_room, rng)
    g.state = state
    return g


# -- behaviour of the noisy expert (no model) --------------------------------------------------
def expert_episodes(spec: GameSpec, tok: Any, n: int, eps: float, rng: np.random.Generator) -> list[Episode]:
    tasks = all_tasks(spec)
    bos = tok.bos_token_id
    out = []
    for _ in range(n):
        start, key = tasks[rng.integers(len(tasks))]
        g = KeyDoorGame(spec, start, key, np.random.default_rng(rng.integers(2**31)))
        obs = g.first_observation()
        ids, spans, obs_l, acts, states = [bos, *_enc(tok, obs)], [], [], [], []
        while not g.done:
            a = ACTIONS[rng.integers(len(ACTIONS))] if rng.random() < eps else expert_action(spec, g.state)
            obs_l.append(obs)
            acts.append(a)
            states.append(g.state)
            spans.append((len(ids), len(ids) + ACTION_TOKENS))
            ids += _enc(tok, a)
            obs = g.step(a)
            if not g.done:
                ids += _enc(tok, obs)
        out.append(Episode(ids, spans, obs_l, acts, states, g.won, (start, key)))
    return out


# -- sampling from a model, all episodes in lockstep ------------------------------------------------
@torch.no_grad()
def sample_from(model: torch.nn.Module, tok: Any, games: list[KeyDoorGame], prefixes: list[list[int]],
                gen: torch.Generator, temperature: float = 1.0) -> list[Episode]:
    """Continue every game from its token prefix (all prefixes the same length, each ending with an
    observation) by sampling the model, three tokens per action."""
    if len({len(p) for p in prefixes}) != 1:
        raise ValueError("all prefixes of one sampling batch must have the same length")
    B = len(games)
    banned = torch.tensor([tok.convert_tokens_to_ids(s) for s in SPECIALS])
    pad = tok.pad_token_id
    eps = [Episode(list(p), [], [], [], [], False, (g.state.room, g.state.key_room)) for p, g in zip(prefixes, games,
                                                                                                   strict=True)]
    last_obs = [tok.decode(p[-10:]) for p in prefixes]
    out = model(input_ids=torch.tensor(prefixes), use_cache=True)
    cache, logits = out.cache, out.logits[:, -1]
    while not all(g.done for g in games):
        step_tokens = []
        for k in range(ACTION_TOKENS):
            z = logits.float() / temperature
            z[:, banned] = -float("inf")
            t = torch.multinomial(torch.softmax(z, -1), 1, generator=gen)[:, 0]
            step_tokens.append(t)
            if k < ACTION_TOKENS - 1:
                out = model(input_ids=t[:, None], cache=cache, use_cache=True)
                cache, logits = out.cache, out.logits[:, -1]
        acts = torch.stack(step_tokens, 1).tolist()
        feed = []
        for i, g in enumerate(games):
            obs_ids = [pad] * 10
            if not g.done:
                e = eps[i]
                text = tok.decode(acts[i])
                e.observations.append(last_obs[i])
                e.actions.append(text)
                e.states.append(g.state)
                e.spans.append((len(e.ids), len(e.ids) + ACTION_TOKENS))
                e.ids += acts[i]
                obs = g.step(text)
                if g.done:
                    e.won = g.won
                else:
                    obs_ids = _enc(tok, obs)
                    e.ids += obs_ids
                    last_obs[i] = obs
            feed.append([acts[i][-1], *obs_ids])
        if all(g.done for g in games):
            break
        out = model(input_ids=torch.tensor(feed), cache=cache, use_cache=True)
        cache, logits = out.cache, out.logits[:, -1]
    assert len(eps) == B
    return eps


def sample_tasks(model: torch.nn.Module, tok: Any, spec: GameSpec, tasks: list[tuple[int, int]], n: int,
                 seed: int, batch: int = 64) -> list[Episode]:
    """``n`` rollouts for each task (grouped: ``out[i*n:(i+1)*n]`` are task ``i``'s)."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    games = [KeyDoorGame(spec, s, k, np.random.default_rng(rng.integers(2**31))) for s, k in tasks for _ in range(n)]
    out: list[Episode] = []
    for i in range(0, len(games), batch):
        chunk = games[i:i + batch]
        prefixes = [[tok.bos_token_id, *_enc(tok, g.first_observation())] for g in chunk]
        out += sample_from(model, tok, chunk, prefixes, gen)
    return out


# -- log-probs for training -------------------------------------------------------------------------
def action_logprob_sums(model: torch.nn.Module, episodes: list[Episode]) -> torch.Tensor:
    """Sum of action-token log-probs of each episode (one right-padded forward pass)."""
    L = max(len(e.ids) for e in episodes)
    ids = torch.zeros(len(episodes), L, dtype=torch.long)
    mask = torch.zeros(len(episodes), L)
    for i, e in enumerate(episodes):
        ids[i, :len(e.ids)] = torch.tensor(e.ids)
        for s, t in e.spans:
            mask[i, s:t] = 1
    logp = torch.log_softmax(model(input_ids=ids).logits[:, :-1].float(), -1)
    tok_lp = logp.gather(-1, ids[:, 1:, None])[..., 0]
    return (tok_lp * mask[:, 1:]).sum(1)


def train_reference(cfg: LMCheckConfig, tok: Any) -> tuple[torch.nn.Module, list[float]]:
    from divelab.lm.models import build_model

    spec = cfg.spec
    rng = np.random.default_rng(cfg.seed)
    data = expert_episodes(replace(spec, slip=0.0), tok, cfg.sft_episodes, cfg.sft_eps, rng)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, vocab_size=len(tok), seed=cfg.seed)

    def loss_of_step(step: int) -> torch.Tensor:
        batch = [data[i] for i in rng.integers(len(data), size=cfg.sft_batch)]
        n_tok = sum(len(e.spans) for e in batch) * ACTION_TOKENS
        return -action_logprob_sums(model, batch).sum() / n_tok

    losses = fit(model, loss_of_step, cfg.sft_steps, lr=cfg.sft_lr, optimizer="adamw",
                 description="progress-advantage: reference (SFT)").losses
    return model, [float(x) for x in losses]


def train_policy(cfg: LMCheckConfig, tok: Any, reference: torch.nn.Module) -> tuple[torch.nn.Module, list[float]]:
    """REINFORCE on ``R - beta * log pi/pi_ref`` (sequence level), group-mean baseline."""
    import copy

    spec = cfg.spec
    policy = copy.deepcopy(reference)
    rng = np.random.default_rng(cfg.seed + 1)
    tasks = all_tasks(spec)
    curve = []

    def loss_of_step(step: int) -> torch.Tensor:
        chosen = [tasks[j] for j in rng.integers(len(tasks), size=cfg.rl_tasks)]
        policy.eval()
        eps = sample_tasks(policy, tok, spec, chosen, cfg.rl_group, seed=int(rng.integers(2**31)))
        policy.train()
        lp = action_logprob_sums(policy, eps)
        with torch.no_grad():
            lr_ = action_logprob_sums(reference, eps)
        R = torch.tensor([float(e.won) for e in eps])
        reward = (R - cfg.beta * (lp.detach() - lr_)).view(cfg.rl_tasks, cfg.rl_group)
        G = cfg.rl_group
        baseline = (reward.sum(1, keepdim=True) - reward) / (G - 1)  # leave-one-out group mean
        curve.append(float(R.mean()))
        return policy_gradient_loss(lp, (reward - baseline).view(-1))

    fit(policy, loss_of_step, cfg.rl_iters, lr=cfg.rl_lr, optimizer="adam", grad_clip=1.0,
        description="progress-advantage: policy (KL-regularised PG)",
        info=lambda done, loss: f"success {np.mean(curve[-10:]):.2f}")
    return policy, curve


def _load_or_train(kind: str, key_obj: dict[str, Any], train: Any) -> tuple[torch.nn.Module, list[float]]:
    from transformers import LlamaForCausalLM

    path = entry_path(kind, stable_hash(key_obj))
    if (path / "model" / "config.json").exists():
        model = LlamaForCausalLM.from_pretrained(path / "model")
        model.eval()
        return model, json.loads((path / "curve.json").read_text())
    model, curve = train()
    with atomic_dir(path) as tmp:
        model.save_pretrained(tmp / "model")
        atomic_write_text(tmp / "curve.json", json.dumps(curve))
        atomic_write_text(tmp / "config.json", json.dumps(key_obj, sort_keys=True))
    return model, curve


def model_pair(cfg: LMCheckConfig) -> tuple[torch.nn.Module, torch.nn.Module, Any, dict[str, list[float]]]:
    """``(policy, reference, tokenizer, curves)``, trained once and cached."""
    tok = make_tokenizer(cfg.spec)
    d = asdict(cfg)
    ref_key = {k: d[k] for k in ("model", "n_rooms", "slack", "sft_eps", "sft_episodes", "sft_steps", "sft_lr", "sft_batch",
                                "seed")}
    ref_key["version"] = _VERSION
    reference, sft_curve = _load_or_train("progress-advantage-ref", ref_key, lambda: train_reference(cfg, tok))
    pol_key = {**d, "version": _VERSION}
    policy, rl_curve = _load_or_train("progress-advantage-policy", pol_key,
                                      lambda: train_policy(cfg, tok, reference))
    return policy, reference, tok, {"sft_loss": sft_curve, "rl_success": rl_curve}


def save_pair(policy: torch.nn.Module, reference: torch.nn.Module, tok: Any, out: Path) -> None:
    """Write the pair as two ordinary HF model directories (usable by ``divelab score-trajectories``)."""
    for name, m in (("policy", policy), ("reference", reference)):
        m.save_pretrained(out / name)
        tok.save_pretrained(out / name)


# -- evaluation -----------------------------------------------------------------------------------
def oracle_labels(spec: GameSpec, ep: Episode) -> tuple[np.ndarray, int | None]:
    """Per-step optimal advantage in success probability, and the first wrong step (the first action
    whose best achievable success probability is below the best available), if any."""
    adv = np.array([q_success(spec, s, a) - optimal_success(spec, s) for s, a in zip(ep.states, ep.actions,
                                                                                       strict=True)])
    wrong = np.flatnonzero(adv < -1e-9)
    return adv, (int(wrong[0]) if wrong.size else None)


def mc_advantages(model: torch.nn.Module, tok: Any, spec: GameSpec, picks: list[tuple[Episode, int]],
                  m: int, seed: int) -> np.ndarray:
    """Monte Carlo ``P(win | h_t, a_t) - P(win | h_t)`` under ``model`` for each (episode, step),
    from ``m`` continuations each (the game copied at the step's state, fresh randomness)."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    jobs: dict[int, list[tuple[int, str, KeyDoorGame, list[int]]]] = {}  # prefix length -> jobs
    wins = {(i, kind): [] for i in range(len(picks)) for kind in ("q", "v")}
    for i, (ep, t) in enumerate(picks):
        s0, e0 = ep.spans[t]
        for _ in range(m):
            g = game_at(spec, ep.states[t], np.random.default_rng(rng.integers(2**31)))
            jobs.setdefault(s0, []).append((i, "v", g, ep.ids[:s0]))
            g = game_at(spec, ep.states[t], np.random.default_rng(rng.integers(2**31)))
            obs = g.step(ep.actions[t])
            if g.done:
                wins[(i, "q")].append(float(g.won))
            else:
                pre = ep.ids[:e0] + _enc(tok, obs)
                jobs.setdefault(len(pre), []).append((i, "q", g, pre))
    for _, js in sorted(jobs.items()):
        for b in range(0, len(js), 64):
            chunk = js[b:b + 64]
            eps = sample_from(model, tok, [j[2] for j in chunk], [j[3] for j in chunk], gen)
            for (i, kind, _, _), e in zip(chunk, eps, strict=True):
                wins[(i, kind)].append(float(e.won))
    return np.array([np.mean(wins[(i, "q")]) - np.mean(wins[(i, "v")]) for i in range(len(picks))])


def best_of_n_per_task(scores: np.ndarray, success: np.ndarray, n: int) -> np.ndarray:
    """1.0/0.0 per task: did the highest-scoring of its ``n`` rollouts succeed (ties: the first)."""
    s = np.asarray(scores).reshape(-1, n)
    y = np.asarray(success).reshape(-1, n)
    return y[np.arange(len(s)), s.argmax(1)].astype(float)


def best_of_n_success(scores: np.ndarray, success: np.ndarray, n: int) -> float:
    """Success rate of the highest-scoring rollout of each group of ``n`` (ties: the first)."""
    return float(best_of_n_per_task(scores, success, n).mean())


def evaluate_scored(scored: list[Any], success: np.ndarray, n: int,
                    labels: list[tuple[np.ndarray, int | None] | None]) -> dict[str, Any]:
    """Every selection / prediction / localisation number for grouped, scored rollouts (``n`` per
    group, in order): all token x step aggregations, the confidence baselines, and failure
    localisation against ``labels`` (per trajectory: oracle step advantages and the first wrong
    step, or None where unknown)."""
    from divelab.training.progress_advantage.aggregate import (
        STEP_AGGREGATIONS,
        TOKEN_AGGREGATIONS,
        auroc,
        failure_step,
    )

    success = np.asarray(success, dtype=bool)
    res: dict[str, Any] = {"n_rollouts": len(scored), "n_tasks": len(scored) // n, "n": n,
                           "mean_success": float(success.mean()),
                           "oracle_best_of_n": float(success.reshape(-1, n).any(1).mean())}
    two_classes = 0 < success.sum() < len(success)
    table, raw, per_task = {}, {}, {}
    for ta in TOKEN_AGGREGATIONS:
        for sa in STEP_AGGREGATIONS:
            sc = np.array([x.score(ta, sa) for x in scored])
            k = f"{ta}/{sa}"
            raw[k] = sc
            per_task[k] = best_of_n_per_task(sc, success, n)
            table[k] = {"best_of_n": float(per_task[k].mean()),
                        "auroc": auroc(sc, success) if two_classes else None}
    res["progress"] = table
    res["_raw"], res["_per_task"] = raw, per_task
    # the confidence baselines, and the starting model's own confidence (the trivial "reference" selector)
    base = {"mean token log-prob": np.array([x.mean_logprob() for x in scored]),
            "negative entropy": np.array([x.neg_entropy() for x in scored]),
            "self-certainty": np.array([x.self_certainty() for x in scored]),
            REFERENCE_BASELINE: np.array([float(np.concatenate(x.reference_logprobs).mean()) for x in scored])}
    res["baselines"] = {k: {"best_of_n": best_of_n_success(v, success, n),
                            "auroc": auroc(v, success) if two_classes else None} for k, v in base.items()}
    # failure localisation on failed episodes that have a known wrong step
    loc: dict[str, list[float]] = {f"progress ({ta})": [] for ta in TOKEN_AGGREGATIONS}
    for k in LOCALISATION_BASELINES:
        loc[k] = []
    oracle_step_adv, prog_step_adv, step_lp = [], [], []
    for x, won, lab in zip(scored, success, labels, strict=True):
        if lab is None:
            continue
        oadv, wrong = lab
        oracle_step_adv += list(oadv)
        prog_step_adv += list(x.step_advantages("sum"))
        step_lp += list(x.step_logprobs("sum"))
        if won or wrong is None:
            continue
        for ta in TOKEN_AGGREGATIONS:
            loc[f"progress ({ta})"].append(float(failure_step(x.step_advantages(ta)) == wrong))
        loc["least-confident step"].append(float(int(np.argmin(x.step_logprobs("sum"))) == wrong))
        loc["random step"].append(1.0 / x.n_steps)  # the expected hit rate of a uniform pick, exactly
        loc["first step"].append(float(wrong == 0))
        loc["last step"].append(float(wrong == x.n_steps - 1))
    res["localisation"] = {k: (float(np.mean(v)) if v else None) for k, v in loc.items()}
    res["n_localised"] = len(loc["random step"])
    res["_loc"] = loc  # per failed rollout, for paired comparisons
    res["step_corr_oracle"] = {"progress": _spearman(prog_step_adv, oracle_step_adv),
                               "policy log-prob": _spearman(step_lp, oracle_step_adv)}
    res["_scores"] = {"progress sum/sum": [x.score("sum", "sum") for x in scored],
                      **{k: v.tolist() for k, v in base.items()}, "success": success.tolist()}
    return res


def permuted_steps(scored: Sequence[Any], rng: np.random.Generator) -> list[Any]:
    """The negative control's scores: every step's (policy, reference) token log-probs moved to a random other
    step of the same pool, so each trajectory keeps its number of steps (and its confidence numbers) while its
    log-ratios carry nothing about its own actions. What survives this (a length effect of an aggregation, say)
    comes from the set-up, not from the log-ratio."""
    from divelab.training.progress_advantage.scorer import TrajectoryScores

    pool = [(p, r) for x in scored for p, r in zip(x.policy_logprobs, x.reference_logprobs, strict=True)]
    order = rng.permutation(len(pool))
    out, i = [], 0
    for x in scored:
        picked = [pool[j] for j in order[i:i + x.n_steps]]
        i += x.n_steps
        out.append(TrajectoryScores([p for p, _ in picked], [r for _, r in picked], x.policy_entropy,
                                    x.policy_self_certainty, x.beta))
    return out


def evaluate_rollouts(policy: torch.nn.Module, reference: torch.nn.Module, tok: Any, spec: GameSpec,
                      beta: float, episodes: list[Episode], n: int, mc_model: torch.nn.Module | None = None,
                      mc_steps: int = 0, mc_rollouts: int = 8, seed: int = 0) -> dict[str, Any]:
    """Every number of the key-and-door LM check for one set of grouped rollouts (``n`` per task)."""
    from divelab.training.progress_advantage.scorer import ProgressAdvantage

    pa = ProgressAdvantage(policy, reference, tok, beta=beta, batch_size=32)
    scored = pa.score_trajectories([e.to_trajectory() for e in episodes])
    success = np.array([e.won for e in episodes], dtype=bool)
    labels = [oracle_labels(spec, e) for e in episodes]
    res = evaluate_scored(scored, success, n, labels)
    sham = permuted_steps(scored, np.random.default_rng(seed + SHAM_SEED))
    res["_sham"] = evaluate_scored(sham, success, n, labels)
    if mc_model is not None and mc_steps > 0:
        rng = np.random.default_rng(seed)
        all_steps = [(e, t) for e in episodes for t in range(len(e.actions))]
        picks = [all_steps[i] for i in rng.choice(len(all_steps), size=min(mc_steps, len(all_steps)),
                                                 replace=False)]
        mc = mc_advantages(mc_model, tok, spec, picks, mc_rollouts, seed)
        idx = {id(e): j for j, e in enumerate(episodes)}
        prog = [scored[idx[id(e)]].step_advantages("sum")[t] for e, t in picks]
        lp = [scored[idx[id(e)]].step_logprobs("sum")[t] for e, t in picks]
        res["_mc"] = mc_pairs(scored, sham, [(idx[id(e)], t) for e, t in picks], mc)
        res["step_corr_mc"] = {"progress": _spearman(prog, mc),
                               "policy log-prob": _spearman(lp, mc), "n_steps": len(picks),
                               "rollouts_per_estimate": mc_rollouts}
    return res


def mc_pairs(scored: Sequence[Any], sham: Sequence[Any], picks: Sequence[tuple[int, int]],
             mc: Sequence[float]) -> dict[str, list[float]]:
    """Per Monte Carlo step (trajectory index, step): its progress score, the policy's and the starting model's
    summed log-prob of the action, the negative control's progress score, and the Monte Carlo advantage."""
    return {"progress": [float(scored[i].step_advantages("sum")[t]) for i, t in picks],
            "policy log-prob": [float(scored[i].step_logprobs("sum")[t]) for i, t in picks],
            REFERENCE_STEP_BASELINE: [float(scored[i].reference_logprobs[t].sum()) for i, t in picks],
            "sham": [float(sham[i].step_advantages("sum")[t]) for i, t in picks],
            "mc": [float(v) for v in mc]}


def _spearman(a: Any, b: Any) -> float | None:
    """Spearman rho, or None when one side is constant (too few or uniform steps)."""
    import warnings

    from scipy.stats import spearmanr

    if len(set(np.round(a, 12))) < 2 or len(set(np.round(b, 12))) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _f(spearmanr(a, b).statistic)


def _f(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)
