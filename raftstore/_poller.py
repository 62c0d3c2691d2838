"""The raft sockets' poller: PySyncObj's Poller interface over one epoll descriptor.

PySyncObj's own poller (select.poll) can only be waited on by the thread that polls it. An
epoll descriptor is itself readable while any of its sockets has an event, so whoever drives
the node can wait for it from outside without dispatching anything: the trio loop with
`trio.lowlevel.wait_readable(poller.fileno())`, the node's thread with `wait()`. Dispatching
(`poll`) runs the transport's callbacks, under the node's tick lock.
"""

from __future__ import annotations

import select
from collections.abc import Callable

from pysyncobj.poller import POLL_EVENT_TYPE

EventCallback = Callable[[int, int], None]

_ERROR = select.EPOLLERR | select.EPOLLHUP


def epoll_mask(event_mask: int) -> int:
    """PySyncObj's READ/WRITE/ERROR bits as epoll's."""
    mask = select.EPOLLIN if event_mask & POLL_EVENT_TYPE.READ else 0
    mask |= select.EPOLLOUT if event_mask & POLL_EVENT_TYPE.WRITE else 0
    return mask | (select.EPOLLERR if event_mask & POLL_EVENT_TYPE.ERROR else 0)


def event_type(epoll_events: int) -> int:
    """epoll's event bits as PySyncObj's (a hang-up is an error, as PySyncObj's poll poller has it)."""
    event = POLL_EVENT_TYPE.READ if epoll_events & select.EPOLLIN else 0
    event |= POLL_EVENT_TYPE.WRITE if epoll_events & select.EPOLLOUT else 0
    return event | (POLL_EVENT_TYPE.ERROR if epoll_events & _ERROR else 0)


class EpollPoller:
    """subscribe/unsubscribe/poll as PySyncObj's pollers, plus `fileno()` and `wait()`."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._callbacks: dict[int, EventCallback] = {}
        self._readiness = select.poll()  # for wait(): the epoll descriptor's own readiness
        self._readiness.register(self._epoll.fileno(), select.POLLIN)

    def fileno(self) -> int:
        return self._epoll.fileno()

    def subscribe(self, descr: int, callback: EventCallback, event_mask: int) -> None:
        if descr in self._callbacks:
            self._epoll.modify(descr, epoll_mask(event_mask))
        else:
            self._epoll.register(descr, epoll_mask(event_mask))
        self._callbacks[descr] = callback

    def unsubscribe(self, descr: int) -> None:
        if self._callbacks.pop(descr, None) is not None:
            try:
                self._epoll.unregister(descr)
            except OSError:  # already closed: the kernel dropped it from the set
                pass

    def poll(self, timeout: float) -> None:
        """Run the callback of every descriptor with an event, waiting up to `timeout` s for one."""
        for descr, events in self._epoll.poll(timeout):
            callback = self._callbacks.get(descr)  # an earlier callback of this batch may have closed it
            if callback is not None:
                callback(descr, event_type(events))

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s until some descriptor has an event; dispatch nothing."""
        return bool(self._readiness.poll(timeout * 1000))

    def close(self) -> None:
        self._callbacks.clear()
        self._epoll.close()
