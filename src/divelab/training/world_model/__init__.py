"""Qwen-AgentWorld: a language world model of text environments (arXiv 2606.24597, E167).

A language model is trained to predict what an environment says back to an agent's action —
continued pre-training on state transitions, SFT that writes a short "what happens next" before the
observation, then RL with a fidelity reward. Used *decoupled*, it is a simulator agents are RL-trained
in (a deliberately stingy, steered simulator reportedly trains a better search agent than the live
engine, 50.3% vs 45.6%); used *unified*, next-state prediction is a warm-up that makes agents better.

Here: transitions logged from any :class:`~divelab.envs.base.TextEnv` (:mod:`.transitions`), a
world model on any HF causal LM with CPT/SFT/RL stages (:mod:`.model`), rule-based fidelity metrics
(:mod:`.fidelity`), the same world model as SmolLM2 + LoRA adapters (:mod:`.llm_model`), copy and lookup baselines (:mod:`.baselines`), class-balanced reward and terminal
heads that decide when a simulated step wins or ends the episode (:mod:`.outcome`),
:class:`SimulatedEnv` and :class:`Steered` (:mod:`.simulator`), error compounding (:mod:`.rollout`)
and the warm-up study (:mod:`.warmup`).
"""

from divelab.training.world_model.baselines import CopyWorldModel, LookupWorldModel
from divelab.training.world_model.fidelity import evaluate as evaluate_fidelity
from divelab.training.world_model.fidelity import fidelity_reward, field_scores, outcome_confusion
from divelab.training.world_model.llm_model import LLMPlan, LLMWorldModel, train_stages
from divelab.training.world_model.model import (
    Prediction,
    WorldModel,
    lm_train,
    parse_prediction,
    rl_train,
    train_tokenizer,
)
from divelab.training.world_model.outcome import OutcomeModel, game_goals
from divelab.training.world_model.rollout import compounding
from divelab.training.world_model.simulator import SimulatedEnv, Steered, simulated_env_factory
from divelab.training.world_model.transitions import (
    State,
    Transition,
    collect_transitions,
    split_by_game,
    unique_transitions,
)

__all__ = [
    "CopyWorldModel", "LLMPlan", "LLMWorldModel", "LookupWorldModel", "OutcomeModel", "Prediction", "SimulatedEnv", "State", "Steered",
    "Transition", "WorldModel", "collect_transitions", "compounding", "evaluate_fidelity", "field_scores",
    "fidelity_reward", "game_goals", "lm_train", "outcome_confusion", "parse_prediction", "rl_train",
    "simulated_env_factory", "split_by_game", "train_stages", "train_tokenizer", "unique_transitions",
]
