"""Hold Ctrl-C back while a temporary is created, committed or removed.

A ``KeyboardInterrupt`` can be raised between any two bytecodes of the main thread, including the
ones between creating a temporary file and entering the block that would remove it. :class:`Guard`
closes those windows: while it *holds*, a SIGINT is recorded instead of raised; while it is *armed*
(the caller's own work runs), the first SIGINT is raised as usual and the guard holds from that
moment on, so the cleanup that follows cannot itself be interrupted. When the guard is closed the
previous handler comes back, and an interrupt that was held is delivered then (unless one was raised
already). Only the main thread receives ``KeyboardInterrupt``; elsewhere a guard does nothing.

    guard = Guard()          # holds from here
    try:
        tmp = make_temporary()
        guard.arm()          # the caller's work may be interrupted
        work(tmp)
        guard.hold()
        commit(tmp)
    except BaseException:
        remove(tmp)          # never interrupted: the guard holds (the interrupt that got here set it)
        raise
    finally:
        guard.close()        # a held interrupt is raised here
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any


class Guard:
    def __init__(self) -> None:
        self._holding = True
        self._raised = False
        self._pending: tuple[int, FrameType | None] | None = None
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):  # SIG_IGN / SIG_DFL / a C handler: nothing raises, nothing to hold
                self._previous = previous
                signal.signal(signal.SIGINT, self._handler)

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self._holding or frame is not None and frame.f_code in _EXIT_CODES:
            self._pending = self._pending or (signum, frame)
            return
        self._raise(signum, frame)

    def _raise(self, signum: int, frame: FrameType | None) -> None:
        # The first interrupt reaches the caller; from now on cleanup runs undisturbed.
        self._holding = self._raised = True
        self._previous(signum, frame)

    def arm(self) -> None:
        """Let an interrupt through (and raise one that was held)."""
        self._holding = False
        if self._pending is not None and self._previous is not None:
            pending, self._pending = self._pending, None
            self._raise(*pending)

    def hold(self) -> None:
        self._holding = True

    def close(self) -> None:
        """Give the previous handler back; raise an interrupt that was held, unless one was raised."""
        self._holding = True
        previous, self._previous = self._previous, None
        if previous is None:
            return
        if signal.getsignal(signal.SIGINT) == self._handler:
            signal.signal(signal.SIGINT, previous)
        pending, self._pending = self._pending, None
        if pending is not None and not self._raised:
            previous(*pending)

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# An interrupt that lands on the first instruction of an ``__exit__`` guarded by a Guard (before
# it can call ``hold()``), or of ``hold()`` itself, is held too: callers register their exit code here.
_EXIT_CODES: set[Any] = {Guard.hold.__code__}


def guards_exit(method: Any) -> Any:
    """Decorator for a context manager's ``__exit__`` that starts with ``guard.hold()``."""
    _EXIT_CODES.add(method.__code__)
    return method
