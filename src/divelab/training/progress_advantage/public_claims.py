"""The claims and set-up text of the public section (:mod:`~divelab.training.progress_advantage.public_check`).

The comparisons are those of the TextWorld test beds, judged by the same functions
(:func:`~divelab.training.progress_advantage.lm_claims.variant_claims`: strongest baseline with the random pick
included, Student-t interval over training runs, the permuted-steps sham as negative control). What is added here
is when the section cannot speak: no plan at this scale or no simulator installed (not checkable), an oracle that
is not exact (every claim uninformative, with the reason, and nothing measured), and a floor or a ceiling (every
rollout of every run won, or every one lost: nothing to select, rank or localise).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from divelab import verdicts
from divelab.claims import Claim, Kind, not_checkable
from divelab.training.progress_advantage.lm_claims import PAPER, SOURCE, statements, variant_claims
from divelab.training.progress_advantage.public_check import LABEL

TRAINED = "trained by the RL engine's GRPO on games of TextWorldExpress's train split"
NOT_RUN = (f"the language-model check on public games: best-of-n, AUROC, failure localisation and step "
           f"correlation ({LABEL})")
NOT_PLANNED = ("measured at the full scale only: it trains its own pairs of tiny LMs on a Java simulator's games "
               "(about a quarter of an hour of CPU)")


def public_claims(section: dict[str, Any], seed: int) -> list[Claim]:
    """The section's claims from :func:`~divelab.training.progress_advantage.public_check.public_check`'s record."""
    status = section["status"]
    paper = f"{PAPER['best-of-n']}; {PAPER['auroc']}"
    if status == "not planned":
        return [not_checkable(NOT_RUN, paper, NOT_PLANNED, source=SOURCE)]
    if status == "unavailable":
        return [not_checkable(NOT_RUN, paper, f"the public simulator is not installed here: {section['why']}",
                              source=SOURCE)]
    if status == "inexact":
        return [Claim(statement=text, paper_value=PAPER[key], measured=None, kind=Kind.EMPIRICAL, source=SOURCE,
                      ruling=verdicts.uninformative(section["why"]),
                      note=f"Not measured: {section['why']}. The merge check's record per game is in details.")
                for key, text in statements(LABEL, section["n"]).items()]
    if status != "ran":
        raise ValueError(f"unknown public-section status {status!r}")
    runs = section["runs"]
    claims = variant_claims(LABEL, runs, TRAINED, seed)
    won = np.concatenate([np.asarray(r["policy"]["_scores"]["success"], dtype=bool) for r in runs])
    if won.all() or not won.any():
        why = (f"{'a ceiling' if won.all() else 'a floor'}: every rollout of every training run "
               f"{'won' if won.all() else 'lost'}, so there is nothing to select, rank or localise")
        claims = [_uninformative(c, why) for c in claims]
    return claims


def _uninformative(c: Claim, why: str) -> Claim:
    """``c`` with its measured values kept and its verdict replaced by *uninformative* for ``why``."""
    import dataclasses

    return dataclasses.replace(c, verdict=None, ruling=verdicts.uninformative(why))


def public_setup(section: dict[str, Any]) -> str:
    """The section's sentence of the reproduction's set-up text ("" when it did not run)."""
    if section["status"] != "ran":
        return ""
    cfg = section["runs"][0]["config"]
    tb, ev = cfg["testbed"], cfg["eval"]
    games = section["games"]
    states = sorted(r["states"] for r in games.values())
    return (
        f" Public games (headline, full scale only): TextWorldExpress's coin collector ({tb['params']}), public "
        "games that the simulator's jar generates from their seeds (nothing fetched, none written or selected here): "
        f"the reference is warm-started on the first {tb['train_episodes']} games of its train split and trained "
        f"there by the same GRPO with kl_coef = beta = {cfg['beta']} for {cfg['iterations']} iterations; rollouts "
        f"({ev['n']} per group, {ev['reps']} groups per game) are scored on {tb['eval_episodes']} games of its dev "
        f"split, step cap {tb['max_steps']}, over {len(section['runs'])} training runs, with the same baselines, "
        "negative control and Monte Carlo advantages. The exact oracle comes from each game's whole state graph "
        f"({states[0]}-{states[-1]} states), states merged by room description and inventory; every merged state was "
        "re-entered by every other path into it and behaved as on its first path (same commands, observations, "
        "rewards and next states), which the run records per game. Deterministic games only."
    )
