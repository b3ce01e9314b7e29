"""Do Thinking Tokens Help with Safety? (arXiv 2606.25013) — the first-token safety probe.

In open-weight reasoning models, whether the model will refuse or comply is already linearly readable
from the hidden state at the first thinking token (AUROC 0.84–0.95), before any visible reasoning
exists. Continuing the trace mostly completes a prefix: freezing the first 20% almost never changes the
outcome, and 71–92% of visible stance flips are performative (cut-replay shows no significant change).
Published safety defences move models along an ASR↔over-refusal line rather than improving both.

Examples:
    >>> from divelab.lm import load_model                                   # doctest: +SKIP
    >>> from divelab.oversight.first_token import run_probe, ProbeSettings, ThinkFormat, default_refusal_vote
    >>> model, tok = load_model("path/to/checkpoint")                       # doctest: +SKIP
    >>> res = run_probe(model, tok, prompts, default_refusal_vote(),        # doctest: +SKIP
    ...                 ProbeSettings(fmt=ThinkFormat(template="{prompt}<think>", chat=True), replay_k=32))
    >>> res["probe"]["auroc"], res["valley"]["J"], res["flip_table"]       # doctest: +SKIP
"""

from divelab.oversight.first_token.continuation import (
    CVResult,
    Flip,
    HFContinuer,
    ReplayRow,
    continuation_variance,
    cut_replay,
    find_flips,
)
from divelab.oversight.first_token.harvest import Activations, harvest
from divelab.oversight.first_token.labels import (
    RegexLabeler,
    VoteLabeler,
    answer_word_labeler,
    default_refusal_vote,
    stance_judge,
)
from divelab.oversight.first_token.pipeline import ProbeSettings, run_probe
from divelab.oversight.first_token.probe import (
    FirstTokenProbe,
    ProbeResult,
    fisher_curve,
    text_control,
    valley_test,
)
from divelab.oversight.first_token.rollout import Rollout, ThinkFormat, sample_rollouts

__all__ = [
    "Activations", "CVResult", "FirstTokenProbe", "Flip", "HFContinuer", "ProbeResult", "ProbeSettings",
    "RegexLabeler", "ReplayRow", "Rollout", "ThinkFormat", "VoteLabeler", "answer_word_labeler",
    "continuation_variance", "cut_replay", "default_refusal_vote", "find_flips", "fisher_curve", "harvest",
    "run_probe", "sample_rollouts", "stance_judge", "text_control", "valley_test",
]
