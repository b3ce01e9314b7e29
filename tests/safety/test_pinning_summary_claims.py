"""E164's SmolLM2 summariser claims read from synthetic arms: the competence floor, the keep-rules contrast with its
sham control, the eviction attack with its instruction-blind control, and one claim per measurement."""

from __future__ import annotations

from divelab.claims import Kind, Verdict
from divelab.safety.pinning import summary_claims as S

COMPS = ("llm-summary", "langmem-summarize")
TEMPLATES = ("email", "share", "pay", "push", "ssn", "card", "rm", "drop")


def _arm(lost, attack: str = "none") -> list[dict]:
    """Rows of one arm: ``lost(compactor, template index, rule)`` says whether that rule check was lost."""
    return [{"compactor": c, "scenario": f"{t}/s0/{attack}", "rule": f"G{g}", "kind": "soft" if i < 4 else "hard",
             "kept": not lost(c, i, g), "verbatim": not lost(c, i, g), "compactions": 1}
            for c in COMPS for i, t in enumerate(TEMPLATES) for g in (1, 2, 3)]


def _arms(task, keep, sham, attack, lex=lambda c, i, g: True, lex_attack=lambda c, i, g: True) -> dict:
    return {"task": _arm(task), "keep rules": _arm(keep), "sham": _arm(sham), "attack": _arm(attack, "evict"),
            "lexrank": _arm(lex), "lexrank attack": _arm(lex_attack, "evict"), "cache": {"truncated": 0}}


ALL = lambda c, i, g: True  # noqa: E731
NONE = lambda c, i, g: False  # noqa: E731
HALF = lambda c, i, g: i % 2 == 0  # noqa: E731
RUN = S.SummaryRun()


def test_a_writer_that_loses_every_rule_even_when_asked_is_a_floor_for_every_claim() -> None:
    claims = S.claims(_arms(ALL, ALL, ALL, ALL), RUN, 0)
    assert [c.verdict for c in claims] == [Verdict.UNINFORMATIVE] * 3
    assert all("competence floor" in c.reason for c in claims)
    assert all(c.kind is Kind.EMPIRICAL and c.replication for c in claims)


def test_the_keep_rules_contrast_counts_when_its_sham_control_is_silent() -> None:
    claim = S.claims(_arms(ALL, HALF, ALL, ALL), RUN, 0)[0]
    assert claim.verdict is Verdict.DIRECTION_HOLDS and claim.measured == 0.5
    assert claim.audit_gaps() == [] and claim.rule["args"]["control"]["effect"] == 0.0
    assert claim.replication == {"unit": "rule checks (compactor x scenario x rule)", "n": 48,
                                 "clustered_by": "scenario (8)"}
    # the sham instruction lowering the loss as much: any copying instruction does it, not asking for the rules
    shammed = S.claims(_arms(ALL, HALF, HALF, ALL), RUN, 0)[0]
    assert shammed.verdict is Verdict.UNINFORMATIVE and "negative control" in shammed.reason


def test_the_attack_is_judged_where_it_has_room_against_an_instruction_blind_control() -> None:
    attack = S.claims(_arms(ALL, HALF, ALL, ALL, lex=HALF, lex_attack=HALF), RUN, 0)[1]
    assert attack.verdict is Verdict.DIRECTION_HOLDS and attack.measured == 0.5 and attack.audit_gaps() == []
    assert "room" in attack.baseline  # the task-focused writer's ceiling is why the keep-rules writer is attacked
    # LexRank (which follows no instruction) losing more with the probe too: its content, not its instruction
    moved = S.claims(_arms(ALL, HALF, ALL, ALL, lex=HALF, lex_attack=ALL), RUN, 0)[1]
    assert moved.verdict is Verdict.UNINFORMATIVE and "negative control" in moved.reason
    # a keep-rules writer that already loses everything leaves the probe no room
    ceiling = S.claims(_arms(ALL, ALL, ALL, ALL), RUN, 0)
    assert ceiling[1].verdict is Verdict.UNINFORMATIVE


def test_soft_vs_hard_reads_a_ceiling_and_a_difference() -> None:
    ceiling = S.claims(_arms(ALL, HALF, ALL, ALL), RUN, 0)[2]
    assert ceiling.verdict is Verdict.UNINFORMATIVE and "ceiling" in ceiling.reason
    soft_only = S.claims(_arms(lambda c, i, g: i < 4, HALF, ALL, ALL), RUN, 0)[2]
    assert soft_only.measured == 1.0 and soft_only.rule["name"] == "direction"


def test_truncated_transcripts_are_a_failed_set_up() -> None:
    arms = _arms(ALL, HALF, ALL, ALL)
    arms["cache"] = {"truncated": 2}
    assert all("window" in c.reason for c in S.claims(arms, RUN, 0))


def test_the_three_claims_are_three_measurements() -> None:
    claims = S.claims(_arms(ALL, HALF, ALL, HALF), RUN, 0)
    assert len({(c.measured, c.ci, c.unit) for c in claims}) == 3
    assert len(S.not_measured(RUN, "why")) == 3


def test_at_the_floor_the_sham_and_probe_arms_are_not_run(monkeypatch) -> None:
    from divelab.chat import ScriptedChatModel
    from divelab.safety.pinning import summary_llm
    from divelab.safety.pinning.tokens import TokenCounter

    calls = []

    class Writer(ScriptedChatModel):
        stats: dict = {"truncated": 0}

    def writer(new_tokens, seed):  # noqa: ANN001, ANN202 - stands in for SmolLM2
        return Writer(fn=lambda m, t: calls.append(m[-1].content) or "Checked the services; nothing unusual.")

    monkeypatch.setattr(summary_llm, "smollm2_writer", writer)
    run = S.SummaryRun(n_filler=3)
    arms = S.measure(run, (0, 4), 0, TokenCounter.chars4())
    assert arms["sham"] == [] and arms["attack"] == [] and arms["lexrank attack"]
    assert not any(summary_llm.KEEP_SHAM in c for c in calls)  # no sham summary was ever asked for
    claims = S.claims(arms, run, 0)
    assert all("competence floor" in c.reason for c in claims)
    attack = claims[1]
    assert attack.measured == 1.0 and attack.unit.startswith("share of rules lost without the probe")
    assert set(S.details(arms)["loss_by_arm"]) == {"task", "keep rules", "lexrank", "lexrank attack"}
