from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.contivd_nodes import ContivdProcess, running_cluster


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContivdProcess]:
    """One contivd (single-node cluster), shared by a module's tests: they use distinct names."""
    with running_cluster(tmp_path_factory.mktemp("status"), 1) as cluster:
        yield cluster.nodes[0]


class EventStream:
    """Reads a server-sent event stream on a thread; events arrive in `events` as (type, data)."""

    def __init__(self, url: str, **kwargs: Any):
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.client = httpx.Client(timeout=httpx.Timeout(10, read=None))
        self.response = self.client.send(self.client.build_request("GET", url, **kwargs), stream=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        kind, data = "message", ""
        try:
            for line in self.response.iter_lines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    data += line[5:].strip()
                elif not line and data:
                    self.events.put((kind, json.loads(data)))
                    kind, data = "message", ""
        except (httpx.HTTPError, OSError, ValueError):
            pass  # closed by the test

    def next(self, kind: str, timeout: float = 10) -> Any:
        """The next event of `kind` (others are dropped); AssertionError after `timeout` seconds."""
        while True:
            try:
                got, data = self.events.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {kind!r} event within {timeout}s") from None
            if got == kind:
                return data

    def drain(self) -> list[tuple[str, Any]]:
        out = []
        while not self.events.empty():
            out.append(self.events.get_nowait())
        return out

    def close(self) -> None:
        self.response.close()
        self.client.close()
