"""E168 on a real LLM: Metis's distiller, codifier and agent run through SmolLM2-135M-Instruct.

One live configuration on the study's TextWorld worlds (seed 0):

1. the plain explorer plays a few recurring ``w0`` experience tasks (as in the study);
2. :class:`~divelab.selfimprove.metis.distill.ChatDistiller` (the model) distils each episode; we
   count replies that pass the JSON schema and plans whose steps are real commands of the episode;
3. two Metis memories (gate ``k``, validation by replay in the real game), both with
   :class:`~divelab.selfimprove.metis.tools.ChatCodifier` (the model): one over the model's own
   distillations, one over the rule distiller's plans (so the codifier is exercised even when the
   model's distillations hold no plan); we count codifier calls and tools that pass validation;
4. :class:`~divelab.selfimprove.metis.agent.ChatAgent` (the model) plays recurring test tasks with
   no memory and with the (rule-distilled) Metis memory; its fallback on a reply that names no
   admissible command is a *random* admissible command, so the model's own skill is not hidden by
   the heuristic explorer. A random agent and the heuristic explorer play the same tasks as
   references.

Runs from :func:`divelab.selfimprove.metis.reproduce.run` where its plan's ``live_llm`` sizes it (full scale).

>>> from divelab.selfimprove.metis.real_llm import LiveConfig, measure      # doctest: +SKIP
>>> claims, details = measure(LiveConfig(), seed=0)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from divelab import stats, verdicts
from divelab.chat.types import ChatModel, ChatResponse, Message, ToolSpec
from divelab.claims import Claim, Kind, not_checkable
from divelab.comparisons import against_strongest
from divelab.progress import track
from divelab.selfimprove.metis.agent import ChatAgent, ExplorerAgent, NoMemory, play
from divelab.selfimprove.metis.distill import ChatDistiller, Distilled, Episode, RuleDistiller
from divelab.selfimprove.metis.metis import Metis, MetisConfig
from divelab.selfimprove.metis.pattern import fill
from divelab.selfimprove.metis.study import Study, StudyConfig, _rng, sample_tasks
from divelab.selfimprove.metis.tools import ChatCodifier

MODEL_LABEL = "SmolLM2-135M-Instruct"
SRC = "arXiv 2606.24151; week-in-review E168"


@dataclass(frozen=True)
class LiveConfig:
    """The live configuration's sizes (the defaults are the full-size run)."""

    n_experience: int = 8
    """recurring w0 experience tasks the plain explorer plays (2 of each common template)"""
    n_test: int = 4
    """recurring w0 test tasks per agent arm"""
    budget: int = 9
    """steps per test task (the study's)"""
    k: int = 2
    """Metis's gate threshold (each template recurs twice in the experience set)"""
    distill_tokens: int = 128
    """longest distiller reply"""
    codify_tokens: int = 128
    """longest codifier reply"""
    agent_tokens: int = 12
    """longest agent reply (one command)"""


@dataclass
class RecordingChat:
    """Wraps a chat model and keeps every reply text (for the details)."""

    inner: ChatModel
    log: list[str] = field(default_factory=list)

    def complete(self, messages: list[Message], tools: list[ToolSpec] | None = None, *,
                 temperature: float | None = None, max_tokens: int | None = None) -> ChatResponse:
        r = self.inner.complete(messages, tools, temperature=temperature, max_tokens=max_tokens)
        self.log.append(r.message.content)
        return r


class CachedDistiller:
    """Distils each episode once (the memories built from it reuse the same records)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.memo = inner, {}

    def __call__(self, episode: Episode) -> Distilled:
        if episode.id not in self.memo:
            self.memo[episode.id] = self.inner(episode)
        return self.memo[episode.id]


def grounded(d: Distilled, episode: Episode) -> bool:
    """A non-empty plan every step of which (slots filled in) is a command the episode issued."""
    done = {s.action for s in episode.steps}
    steps = [fill(s, episode.slots) for s in d.plan]
    return bool(steps) and all(s is not None and s in done for s in steps)


def run_live(chat: ChatModel, cfg: LiveConfig, seed: int = 0) -> dict[str, Any]:
    """Everything of the live configuration (see the module docstring); returns the raw details."""
    study = Study(StudyConfig(seeds=1, n_experience=cfg.n_experience, n_test=cfg.n_test, budget=cfg.budget,
                              k=cfg.k))
    exp, recurring, _novel = sample_tasks(seed, study.cfg)
    exp = [t for t in exp if t.world == "w0" and t.template in ("fetch", "unlock", "stash", "eat")]
    rec = RecordingChat(chat)
    episodes: list[Episode] = []
    for i, task in enumerate(exp):
        out = play(study.env(task, study.cfg.exp_budget), NoMemory(), ExplorerAgent(), _rng("exp", seed, i),
                   episode_id=f"s{seed}-exp{i}")
        assert out.episode is not None
        episodes.append(out.episode)

    # 1. the distiller
    t0 = time.perf_counter()
    chat_d = ChatDistiller(rec, max_tokens=cfg.distill_tokens)
    llm_dist = CachedDistiller(chat_d)
    rows = []
    for ep in track(episodes, f"E168 distiller ({MODEL_LABEL})"):
        n0, r0 = len(rec.log), chat_d.rejected
        d = llm_dist(ep)
        rows.append({"episode": ep.id, "task": ep.task, "won": ep.won, "valid": chat_d.rejected == r0,
                     "plan": d.plan, "facts": d.facts[:3], "pitfalls": d.pitfalls[:2],
                     "grounded": grounded(d, ep), "reply": rec.log[n0][:300] if len(rec.log) > n0 else ""})
    distill_s = time.perf_counter() - t0

    # 2. the codifier, over the model's own records and over the rule distiller's plans
    t0 = time.perf_counter()
    memories: dict[str, Metis] = {}
    codifiers: dict[str, ChatCodifier] = {}
    sources: dict[str, list[dict[str, Any]]] = {}
    for name, distiller in (("llm-records", llm_dist), ("rule-records", CachedDistiller(RuleDistiller()))):
        n0 = len(rec.log)
        codifiers[name] = ChatCodifier(rec, max_tokens=cfg.codify_tokens)
        mem = Metis(distiller=distiller, codifier=codifiers[name], check=study.replay_check,
                    config=MetisConfig(k=cfg.k))
        for ep in episodes:
            mem.observe(ep)
        memories[name] = mem
        sources[name] = [{"pattern": e.pattern, "outcome": e.outcome, "reason": e.reason, "reply": r[:400]}
                         for e, r in zip(mem.events, rec.log[n0:], strict=False)]
    codify_s = time.perf_counter() - t0

    # 3. the agent
    t0 = time.perf_counter()
    agents: dict[str, Any] = {}
    outcomes: dict[str, list[Any]] = {}
    arms = {"chat/none": (NoMemory, "chat"), "chat/metis": (lambda: memories["rule-records"], "chat"),
            "random/none": (NoMemory, "random"), "explorer/none": (NoMemory, "explorer")}
    for arm, (make_mem, kind) in arms.items():
        if kind == "chat":
            agent: Any = ChatAgent(rec, fallback=ExplorerAgent(epsilon=1.0), max_tokens=cfg.agent_tokens)
        else:
            agent = ExplorerAgent(epsilon=1.0) if kind == "random" else ExplorerAgent()
        agents[arm] = agent
        mem = make_mem()
        tasks = track(recurring, f"E168 agent {arm}") if kind == "chat" else recurring
        outcomes[arm] = [play(study.env(t, cfg.budget), mem, agent, _rng("live", seed, i), episode_id=f"live{i}")
                         for i, t in enumerate(tasks)]
    agent_s = time.perf_counter() - t0

    def summ(arm: str) -> dict[str, Any]:
        outs = outcomes[arm]
        a = agents[arm]
        return {"success": float(np.mean([o.won for o in outs])), "won": [bool(o.won) for o in outs],
                "steps": float(np.mean([o.steps for o in outs])),
                "tool_calls": sum(bool(o.tool) for o in outs), "tool_ok": sum(bool(o.tool_ok) for o in outs),
                "model_decisions": getattr(a, "calls", 0), "invalid_replies": getattr(a, "invalid", 0)}

    obs_text = [s.observation for ep in episodes for s in ep.steps if len(s.observation) > 20]
    return {
        "model": MODEL_LABEL, "config": cfg.__dict__, "seed": seed,
        "experience": [{"task": ep.task, "won": ep.won, "steps": len(ep.steps)} for ep in episodes],
        "distiller": {"episodes": len(episodes), "calls": chat_d.calls, "rejected": chat_d.rejected,
                      "valid": sum(r["valid"] for r in rows), "with_plan": sum(bool(r["plan"]) for r in rows),
                      "grounded_plans": sum(r["grounded"] for r in rows),
                      "won_episodes": sum(ep.won for ep in episodes), "rows": rows, "seconds": round(distill_s, 1)},
        "codifier": {name: {"calls": codifiers[name].calls,
                            "registered": sum(e.outcome == "registered" for e in mem.events),
                            "rejected": sum(e.outcome == "rejected" for e in mem.events),
                            "unvalidated_active": sum(not t.validated for t in mem.registry.active()),
                            "inputs_with_trajectory_text": sum(any(o in r.render() for o in obs_text)
                                                               for r in mem.codifier_inputs),
                            "events": sources[name]}
                     for name, mem in memories.items()} | {"seconds": round(codify_s, 1)},
        "agent": {arm: summ(arm) for arm in outcomes} | {"seconds": round(agent_s, 1)},
    }


def claims_from(d: dict[str, Any], seed: int = 0) -> list[Claim]:
    """The SmolLM2 claims, from :func:`run_live`'s details (labelled with the model)."""
    out: list[Claim] = []
    dist = d["distiller"]
    n = dist["episodes"]
    stmt = f"{MODEL_LABEL} as Metis's distiller: schema-valid record with a plan grounded in the episode"
    paper = "the distiller writes typed plans/facts/pitfalls (frontier LLMs; no rate given)"
    k, won = dist["grounded_plans"], dist["won_episodes"]
    out.append(Claim(
        stmt, paper, k / max(1, won), unit="share of won episodes", ci=stats.proportion_ci(k, max(1, won)),
        kind=Kind.EMPIRICAL, source=SRC, ruling=verdicts.found(k, max(1, won)),
        note=f"{dist['valid']}/{n} replies passed the JSON schema ({dist['rejected']} dropped), {dist['with_plan']} "
             f"held a plan, {k} of the {won} won episodes got a plan whose every step is a command the episode "
             f"issued; greedy decoding, ≤{d['config']['distill_tokens']} new tokens per reply."))
    for name, what in (("rule-records", "the rule distiller's plans"), ("llm-records", "its own distilled records")):
        c = d["codifier"][name]
        stmt = f"{MODEL_LABEL} as Metis's codifier ({what}): generated tools that pass validation"
        if c["calls"] == 0:
            out.append(not_checkable(stmt, "tools validated before exposure (no pass rate given)",
                                     f"the gate never called the codifier: no pattern reached k={d['config']['k']} "
                                     "with a plan in memory.", source=SRC))
            continue
        out.append(Claim(
            stmt, "tools validated before exposure (no pass rate given)", c["registered"] / c["calls"],
            unit="share of codifier calls", ci=stats.proportion_ci(c["registered"], c["calls"]),
            kind=Kind.EMPIRICAL, source=SRC, ruling=verdicts.found(c["registered"], c["calls"]),
            note=f"{c['registered']} of {c['calls']} generated tools passed validation by replay in the real game "
                 f"(gate k={d['config']['k']}); {c['rejected']} rejected and kept as pitfalls."))
    exposed = sum(d["codifier"][n]["unvalidated_active"] for n in ("rule-records", "llm-records"))
    out.append(Claim(f"{MODEL_LABEL} run: tools exposed without passing validation", "none", float(exposed),
                     kind=Kind.CHECK, source=SRC, ruling=verdicts.bound(exposed, 0, exact=True)))
    leaks = sum(d["codifier"][n]["inputs_with_trajectory_text"] for n in ("rule-records", "llm-records"))
    out.append(Claim(f"{MODEL_LABEL} run: codifier inputs containing trajectory text", "never", float(leaks),
                     kind=Kind.CHECK, source=SRC, ruling=verdicts.bound(leaks, 0, exact=True)))
    ag = d["agent"]
    none, metis, rand = ag["chat/none"], ag["chat/metis"], ag["random/none"]
    valid_note = (f"Replies naming an admissible command: {none['model_decisions'] - none['invalid_replies']}"
                  f"/{none['model_decisions']} with no memory; the others fall back to a random admissible "
                  f"command. Budget {d['config']['budget']} steps; heuristic explorer on the same tasks: "
                  f"{ag['explorer/none']['success']:.2f}.")
    # Both reference agents played the same tasks: the model is judged against the stronger of them.
    a = np.array(none["won"], dtype=float)
    cmp = against_strongest(a, {"random agent": rand["won"], "heuristic explorer": ag["explorer/none"]["won"]},
                            better="higher", seed=seed)
    out.append(Claim(
        f"{MODEL_LABEL} as the agent (no memory) vs the stronger reference agent ({cmp.strongest}), recurring "
        "tasks (success difference)",
        "an LLM agent solves tasks (ReAct baseline of the paper; no 135M number)", cmp.effect, unit="success",
        ci=cmp.ci, kind=Kind.EMPIRICAL, source=SRC,
        baseline=f"random agent: {np.mean(rand['won']):.2f}, heuristic explorer: {ag['explorer/none']['success']:.2f}",
        ruling=verdicts.direction(cmp.effect, cmp.ci, expected_sign=1, why="the paper has no number for this model"),
        note=f"{len(a)} paired tasks. {valid_note}", **cmp.claim_fields()))
    a = np.array(metis["won"], dtype=float)
    b = np.array(none["won"], dtype=float)
    eff, lo, hi = stats.paired_diff_ci(a, b, seed=seed)
    out.append(Claim(
        f"{MODEL_LABEL} as the agent, recurring tasks: Metis memory (rule-distilled) vs no memory "
        "(success difference)",
        "up to +20.6% accuracy vs ReAct (AppWorld)", eff, unit="success", ci=(lo, hi), kind=Kind.PLANTED,
        source=SRC, baseline=f"{MODEL_LABEL} with no memory: {b.mean():.2f}",
        ruling=verdicts.direction(eff, (lo, hi), expected_sign=1, paper=0.206, tol=0.1, tol_kind="abs"),
        note=f"{len(a)} paired tasks. With Metis the harness follows admissible plan steps itself and the model "
             f"decided {metis['model_decisions']} times ({metis['invalid_replies']} invalid), tools called "
             f"{metis['tool_calls']} times: the gain is the memory's (rule-distilled plans the harness plays), "
             "not the model's, so the harness plants it. "
             f"{valid_note}"))
    return out


def measure(cfg: LiveConfig | None = None, seed: int = 0, chat: ChatModel | None = None
            ) -> tuple[list[Claim], dict[str, Any]]:
    """Run the live configuration on SmolLM2 (or ``chat``) and return ``(claims, details)``."""
    from divelab.lm.real import live_chat

    cfg = cfg or LiveConfig()
    t0 = time.perf_counter()
    with live_chat(chat, seed=seed) as (model, _):
        details = run_live(model, cfg, seed=seed)
    details["chat_stats"] = dict(getattr(model, "stats", {}))
    details["runtime_s"] = round(time.perf_counter() - t0, 1)
    return claims_from(details, seed=seed), details


def add_to(rep: Any, cfg: LiveConfig, seed: int = 0, weight: float = 1.0) -> None:
    """Add the SmolLM2 claims of the run ``cfg`` sizes (see :func:`divelab.lm.real.add_claims_at_full`), as one
    stage of the run (:mod:`divelab.stages`) of the given weight."""
    from divelab.lm import real
    from divelab.stages import stage

    real.add_claims_at_full(rep, True, lambda: stage(f"{MODEL_LABEL} live run", lambda: measure(cfg, seed),
                                                     weight=weight),
                            statement=f"{MODEL_LABEL}: Metis distiller, codifier and agent, live",
                            paper_value="the paper's LLM-driven Metis", source=SRC)
