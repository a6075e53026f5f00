"""Headless Chromium for the tests, driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` gives the protocol on file descriptors 3 (commands in) and 4
(replies and events out), as NUL-terminated JSON: no port, no websocket library, no
browser download. The browser is Debian's (`.ci/setup-chromium` installs it); mermaid is
the npm package `.ci/setup-mermaid` installs, loaded from its local file.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from todoflow.runtime.views.card import HEADLESS

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
MERMAID = ROOT / "tests" / "browser" / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
CHECKS = ROOT / "tests" / "browser" / "checks.js"
TIMEOUT = 60.0


class BrowserError(Exception):
    """The browser did not answer, or answered with a protocol error."""


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is not installed (`.ci/setup-chromium` installs Debian's chromium as root)"
    return None


class Browser:
    """One Chromium process with a new empty profile; `page()` opens a tab."""

    def __init__(self) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="todoflow-chromium-"))
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        self._log = (self.profile / "chromium.log").open("wb")
        # the child's 3 and 4, from copies above them (a pipe may itself be 3 or 4 here)
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (commands_read, replies_write)]
        log = self._log.fileno()
        actions = [(os.POSIX_SPAWN_DUP2, log, 1), (os.POSIX_SPAWN_DUP2, log, 2)]
        actions += [(os.POSIX_SPAWN_DUP2, ends[0], 3), (os.POSIX_SPAWN_DUP2, ends[1], 4)]
        argv = [str(CHROMIUM), *HEADLESS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe"]
        self.pid = os.posix_spawn(str(CHROMIUM), argv, os.environ, file_actions=actions)
        for fd in (commands_read, replies_write, *ends):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})  # type: ignore[no-any-return]
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        for index, event in enumerate(self.events):
            if event.get("method") == method and event.get("sessionId") == session:
                return self.events.pop(index)
        while True:
            event = self._read()
            if event.get("method") == method and event.get("sessionId") == session:
                return event
            self.events.append(event)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._replies], [], [], max(left, 0))
            if not ready:
                raise BrowserError(f"no answer from Chromium in {TIMEOUT:.0f} s")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium exited ({self.log()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)  # type: ignore[no-any-return]

    def log(self) -> str:
        self._log.flush()
        return (self.profile / "chromium.log").read_text(errors="replace")[-2000:]

    def page(self, width: int = 1400, height: int = 900) -> Page:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        return Page(self, target, session, width, height)

    def close(self) -> None:
        with contextlib.suppress(BrowserError):
            self.call("Browser.close")
        deadline = time.monotonic() + 10
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.05)
        os.close(self._commands)
        os.close(self._replies)
        self._log.close()
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One tab: open a file, evaluate JavaScript, take a screenshot, list its requests."""

    def __init__(self, browser: Browser, target: str, session: str, width: int, height: int) -> None:
        self.browser, self.target, self.session = browser, target, session
        for domain in ("Page", "Runtime", "Network"):
            self.call(f"{domain}.enable")
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", **metrics)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.call(method, self.session, **params)

    def close(self) -> None:
        self.browser.call("Target.closeTarget", targetId=self.target)
        self.browser.events = [e for e in self.browser.events if e.get("sessionId") != self.session]

    def open(self, path: Path) -> None:
        """Load a local file and wait for its load event."""
        self.browser.events = [e for e in self.browser.events if e.get("sessionId") != self.session]
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.browser.wait_for("Page.loadEventFired", self.session)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited if it is a promise)."""
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(details.get("exception", {}).get("description") or details.get("text"))
        return result["result"].get("value")

    def load_script(self, path: Path) -> None:
        self.evaluate(path.read_text(encoding="utf-8") + "\n;undefined")

    def requests(self) -> list[str]:
        """The URL of every request the page made since it was opened."""
        return [
            e["params"]["request"]["url"]
            for e in self.browser.events
            if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == self.session
        ]

    def screenshot(self, path: Path, selector: str = "body") -> None:
        """A PNG of the element's box (the whole of it: the window grows to hold it)."""
        right, bottom = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [Math.ceil(r.right + scrollX), Math.ceil(r.bottom + scrollY)]; })()"
        )
        metrics = {"width": right + 24, "height": bottom + 24, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", **metrics)
        box = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
            " return [r.x + scrollX, r.y + scrollY, Math.ceil(r.width), Math.ceil(r.height)]; })()"
        )
        x, y, width, height = box
        clip = {"x": x, "y": y, "width": width, "height": height, "scale": 1}
        shot = self.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
