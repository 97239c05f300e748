"""The forecasting worker's request handler called in the test process (shared by the live-output
tests and the README test): no subprocess, so tests/conftest.py's mocked sampler applies."""

from __future__ import annotations

from typing import ClassVar


class InProcessWorker:
    """The forecasting worker's request handler, called in this process (no subprocess, mocked sampling)."""

    instances: ClassVar[list] = []

    def __init__(self, *a, **k):
        self.busy = False
        self.requests, self._out = [], []
        InProcessWorker.instances.append(self)

    def submit(self, req):
        from bayesgrpo.integrations._serve import _handle

        self.requests.append(req)
        rid = len(self.requests)
        try:
            res = _handle(dict(req))
            res["ok"] = True
        except Exception as e:  # noqa: BLE001 - what the real worker answers
            res = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        res.update(id=rid, kind=req.get("kind", "forecast"), seconds=0.01)
        self._out.append(res)
        return rid

    def poll(self):
        out, self._out = self._out, []
        return out

    def wait_for(self, rid, *, timeout):
        return self.poll()

    def close(self):
        pass
