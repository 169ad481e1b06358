"""A page in headless Chromium, driven through the DevTools protocol over pipes (no websocket, no extra package).

Chromium started with ``--remote-debugging-pipe`` reads protocol messages (JSON, each ending in a NUL byte)
on its file descriptor 3 and writes its replies and events on 4. :func:`load_page` opens a file, waits for its
load event, collects what the console and the browser logged, every request the page made, and the state of
its images and its rendered text (``innerText``: what a reader sees), and captures a full-page screenshot.

:func:`chromium` finds the browser: Debian's ``chromium-headless-shell`` (or ``chromium``), installed with
apt-get when it is missing and this process may (root, apt-get present).
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

#: Executables tried, in order: Debian's old headless shell, then the full browser (run headless).
BINARIES = ("chromium-headless-shell", "chromium", "chromium-browser")
#: The Debian package installed when none is found.
PACKAGE = "chromium-headless-shell"
#: The protocol domains enabled on the page: console, browser log, network, page lifecycle.
DOMAINS = ("Runtime.enable", "Log.enable", "Network.enable", "Page.enable")
#: What each image of the page reports once it loaded (complete, decoded size, size on the page).
IMAGES_JS = ("JSON.stringify(Array.from(document.images).map(i => ({src: i.src.slice(0, 40), complete: i.complete,"
             " naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight, shown: i.getBoundingClientRect().width,"
             " visible: getComputedStyle(i).display !== 'none' && getComputedStyle(i).visibility !== 'hidden'})))")


def chromium() -> tuple[str | None, str]:
    """``(path, "")`` of a Chromium executable, or ``(None, why there is none)``.

    A missing browser is installed from the distribution (``apt-get install chromium-headless-shell``) when
    this process runs as root on a system with apt-get; the reason says what failed otherwise.
    """
    found = next((shutil.which(b) for b in BINARIES if shutil.which(b)), None)
    if found:
        return found, ""
    if shutil.which("apt-get") is None:
        return None, f"no Chromium ({', '.join(BINARIES)}) on PATH and no apt-get to install {PACKAGE}"
    if os.geteuid() != 0:
        return None, f"no Chromium on PATH; installing it needs root: apt-get install {PACKAGE}"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                                                   PACKAGE]):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0:
            return None, f"{' '.join(command)} failed: {(done.stderr or done.stdout).strip()[-500:]}"
    found = next((shutil.which(b) for b in BINARIES if shutil.which(b)), None)
    return (found, "") if found else (None, f"apt-get installed {PACKAGE}, but no {BINARIES[0]} is on PATH")


@dataclass
class PageLoad:
    """What loading a page showed: console messages and exceptions, browser log entries, failed and requested
    URLs, the page's images, and the screenshot's path."""

    console: list[dict] = field(default_factory=list)  # {"type": "error" | "warning" | "log" ..., "text": ...}
    exceptions: list[str] = field(default_factory=list)
    log_entries: list[dict] = field(default_factory=list)  # {"level": "error" | "warning" ..., "text", "url"}
    failed: list[str] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)
    images: list[dict] = field(default_factory=list)
    text: str = ""  # the page's rendered text, document.body.innerText
    screenshot: Path | None = None

    def errors(self) -> list[str]:
        """Every error the page caused: console errors, uncaught exceptions, error log entries, failed loads."""
        return ([f"console.{m['type']}: {m['text']}" for m in self.console if m["type"] in ("error", "assert")]
                + [f"exception: {e}" for e in self.exceptions]
                + [f"log {e['level']}: {e['text']} ({e.get('url', '')})" for e in self.log_entries
                   if e["level"] == "error"]
                + [f"failed to load {u}" for u in self.failed])


class _Pipe:
    """The DevTools protocol over Chromium's pipes: commands out, replies and events in."""

    def __init__(self, binary: str, profile: str, width: int):
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds() -> None:  # the child reads commands on fd 3 and writes on fd 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", f"--window-size={width},900", "--hide-scrollbars", "--no-first-run",
             "--disable-extensions", "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send a command and wait for its reply (events read meanwhile are kept in :attr:`events`)."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def receive(self, timeout: float = 60.0) -> dict:
        """The next message; an error when none comes within ``timeout`` seconds or the browser exits."""
        while b"\0" not in self._buffer:
            if not select.select([self._from_browser], [], [], timeout)[0]:
                raise TimeoutError(f"Chromium sent nothing for {timeout} s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def wait_for(self, method: str, timeout: float) -> None:
        """Read events until ``method`` arrives (or was read already)."""
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout} s")
            self.events.append(self.receive())

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


def load_page(binary: str, page: Path, screenshot: Path, *, width: int = 1280, timeout: float = 60.0) -> PageLoad:
    """Open ``page`` (a local file) in headless Chromium, wait for its load event, and report what happened and
    the text it shows; the full page is captured as a PNG at ``screenshot``."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        pipe = _Pipe(binary, profile, width)
        try:
            target = next(t["targetId"] for t in pipe.send("Target.getTargets")["targetInfos"] if t["type"] == "page")
            session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in DOMAINS:
                pipe.send(domain, session=session)
            pipe.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
            pipe.send("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
            pipe.wait_for("Page.loadEventFired", timeout)
            images = pipe.send("Runtime.evaluate", {"expression": IMAGES_JS, "returnByValue": True},
                               session=session)["result"]["value"]
            text = pipe.send("Runtime.evaluate", {"expression": "document.body.innerText", "returnByValue": True},
                             session=session)["result"]["value"]
            size = pipe.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            shot = pipe.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}},
                session=session)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        finally:
            pipe.close()
    return _outcome(pipe.events, json.loads(images), text, screenshot)


def _outcome(events: list[dict], images: list[dict], text: str, screenshot: Path) -> PageLoad:
    load = PageLoad(images=images, text=text, screenshot=screenshot)
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            load.console.append({"type": params.get("type", ""), "text": text})
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            load.exceptions.append(details.get("exception", {}).get("description") or details.get("text", ""))
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            load.log_entries.append({"level": entry.get("level", ""), "text": entry.get("text", ""),
                                     "url": entry.get("url", "")})
        elif method == "Network.requestWillBeSent":
            load.requested.append(params.get("request", {}).get("url", ""))
        elif method == "Network.loadingFailed":
            load.failed.append(f"{params.get('type', '')} {params.get('errorText', '')}")
    return load
