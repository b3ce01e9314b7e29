"""divelab.sandbox: run untrusted or generated Python with limits, and say how it ended.

Every divelab system that executes model-written code goes through :func:`run_python`::

    from divelab.sandbox import Limits, run_python
    r = run_python("print(sum(range(10)))", limits=Limits(wall_s=5, memory_mb=256))
    r.status, r.stdout        # (Status.PASSED, '45\\n')

See :mod:`divelab.sandbox.runner` for what is enforced and :func:`enforcement` for this host.
"""

from divelab.sandbox.runner import Limits, SandboxResult, Status, enforcement, minimal_env, run_python

__all__ = ["Limits", "SandboxResult", "Status", "enforcement", "minimal_env", "run_python"]
