"""Model forensics: investigating whether concerning behaviour reflects misalignment (arXiv 2606.26071, E174).

Catching an agent in a bad act is not evidence of misalignment; the motive has to be investigated.
The protocol reads transcripts for hypotheses, then rewinds the agent and edits one variable at a time
(who did the earlier act, how many errors are seeded, what the instructions say), comparing rates
with proper statistics. Positive controls (a planted motive must be detected) are required before a
"no evidence" verdict.
"""

from divelab.oversight.forensics.agents import MISALIGNED, MOTIVES, PlantedAgent, random_agent
from divelab.oversight.forensics.envs import ENVS, ForensicEnv, Transcript, get_env, rewind, rollout
from divelab.oversight.forensics.hypotheses import Hypothesis, mine
from divelab.oversight.forensics.learned import LearnedAgent, train_learned
from divelab.oversight.forensics.protocol import (
    INTERVENTIONS,
    Intervention,
    Investigation,
    investigate,
    positive_control,
)
from divelab.oversight.forensics.statistics import dose_response, fisher_power, rollouts_for_power, two_arm

__all__ = ["ENVS", "INTERVENTIONS", "MISALIGNED", "MOTIVES", "ForensicEnv", "Hypothesis", "Intervention",
           "Investigation", "LearnedAgent", "PlantedAgent", "Transcript", "dose_response", "fisher_power", "get_env",
           "investigate", "mine", "positive_control", "random_agent", "rewind", "rollout", "rollouts_for_power",
           "train_learned", "two_arm"]
