"""divelab.envs: text environments behind one small protocol (see :mod:`divelab.envs.base`)."""

from divelab.envs.base import (
    EnvFactory,
    EnvWrapper,
    InvalidAction,
    ReplayCache,
    ReplayRestore,
    TextEnv,
    check_action,
)

__all__ = ["EnvFactory", "EnvWrapper", "InvalidAction", "ReplayCache", "ReplayRestore", "TextEnv", "check_action"]
