"""A first-token safety probe as a live guard: the probe file, its model check, and scoring.

A linear probe on one hidden layer, read at the last prompt token or at the first generated token,
says whether a model is about to refuse (a high score) or comply. Saved once by
``divelab first-token-probe probe-first-token --save-guard PROBE``, it is loaded by
``divelab serve --guard PROBE``, which reads the same layer from the forward it already runs and
scores every request before its answer is written. This package holds what both sides share: the
file format (:mod:`.probe_file`), the served model's identity check (:mod:`.identity`), the hook that
reads one layer (:mod:`.tap`), offline scoring (:mod:`.offline`) and the policies (:mod:`.policy`).

Examples:
    >>> from divelab.guard import load_guard, score_prompts            # doctest: +SKIP
    >>> probe = load_guard("probe.json", model)                         # doctest: +SKIP
    >>> score_prompts(model, probe, [tokenizer.encode(text)])[0].score  # doctest: +SKIP
"""

from divelab.guard.identity import check_identity, model_identity
from divelab.guard.offline import score_prompts
from divelab.guard.policy import POLICIES, GuardVerdict, check_policy
from divelab.guard.probe_file import POSITIONS, GuardProbe, from_sklearn, load_guard
from divelab.guard.tap import LayerTap

__all__ = ["POLICIES", "POSITIONS", "GuardProbe", "GuardVerdict", "LayerTap", "check_identity", "check_policy",
           "from_sklearn", "load_guard", "model_identity", "score_prompts"]
