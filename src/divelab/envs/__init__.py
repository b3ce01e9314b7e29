"""divelab.envs: text environments behind one small protocol (see :mod:`divelab.envs.base`)."""

from divelab.envs.base import EnvFactory, InvalidAction, ReplayCache, TextEnv, check_action

__all__ = ["EnvFactory", "InvalidAction", "ReplayCache", "TextEnv", "check_action"]
