"""Scale-out: reproductions over several seeds, in process or as Ray tasks on a cluster.

>>> from divelab.scaleout import parse_seeds, run_tasks, Task          # doctest: +SKIP
>>> outcomes = run_tasks([Task("divelab.training.backtrack", "backtrack", "smoke", s)
...                       for s in parse_seeds("0-2")], backend="ray")  # doctest: +SKIP

The in-process path is the default and gives the same numbers: a reproduction is a pure function
of (system, scale, seed) and the shared cache. Ray (``pip install 'divelab[ray]'``) is optional;
RL rollouts fan out over Ray actors with :class:`divelab.rl.ray_rollout.ShardedSampler`.
"""

from divelab.scaleout.seeds import aggregate_seeds, parse_seeds
from divelab.scaleout.tasks import Outcome, Task, check_ray_address, connect_ray, run_reproduction, run_tasks

__all__ = ["Outcome", "Task", "aggregate_seeds", "check_ray_address", "connect_ray", "parse_seeds", "run_reproduction",
           "run_tasks"]
