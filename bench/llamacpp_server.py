"""llama.cpp's own server (`llama-server`, built by scripts/install-llamacpp-tools.sh) as the anchor of
bench/bench_vs_llamacpp.py: the same interface as its `Anchor` (llama-cpp-python), over HTTP on loopback, one slot, the
prompt given as token ids; its own timer for decode tokens; its resident memory from /proc."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.bench_llamacpp_baseline import DEFAULT_LLAMACPP, Memory, _free_port, memory_mib


def server_binary(build: str = "native-flags", root: Path = DEFAULT_LLAMACPP) -> Path | None:
    binary = root / build / "bin" / "llama-server"
    return binary if binary.is_file() else None


class ServerAnchor:
    """llama-server on `gguf` with `threads` threads and a context of `context` tokens (one slot)."""

    def __init__(self, gguf: Path, threads: int, context: int, *, binary: Path, timeout_s: float = 600.0) -> None:
        self.port = _free_port()
        self.log = tempfile.TemporaryFile()
        command = [str(binary), "-m", str(gguf), "-t", str(threads), "-tb", str(threads), "-np", "1", "-c", str(context),
                   "--host", "127.0.0.1", "--port", str(self.port), "--no-webui"]
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)
        self.system = f"llama-server ({binary.parent.parent.name} build), -t {threads} -np 1 -c {context}"
        self._cold = False
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"llama-server exited ({self.process.returncode}):\n"
                                   f"{self.log.read()[-2000:].decode(errors='replace')}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as answer:
                    if json.load(answer).get("status") == "ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"llama-server on {gguf.name} not ready after {timeout_s:.0f} s")
            time.sleep(0.2)

    def _completion(self, ids: list[int], *, tokens: int, line: bool, greedy: bool, seed: int) -> dict:
        body = {"prompt": ids, "n_predict": tokens, "stop": ["\n"] if line else [], "cache_prompt": not self._cold,
                "seed": seed, "id_slot": 0, **({"temperature": 0.0, "top_k": 1} if greedy else {"temperature": 0.8})}
        self._cold = False
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/completion", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as answer:
            return json.load(answer)

    def complete(self, ids: list[int], *, tokens: int, line: bool, greedy: bool, seed: int = 0) -> int:
        """Tokens it decoded for a completion of at most `tokens` after `ids`."""
        return int(self._completion(ids, tokens=tokens, line=line, greedy=greedy, seed=seed)["tokens_predicted"])

    def decode_ms_per_token(self, ids: list[int], tokens: int) -> float:
        """Greedy tokens after `ids` (cached by a first request): llama.cpp's own time a predicted token."""
        self.complete(ids, tokens=1, line=False, greedy=True)
        timings = self._completion(ids, tokens=tokens, line=False, greedy=True, seed=0)["timings"]
        return float(timings["predicted_per_token_ms"])

    def cold(self) -> None:
        self._cold = True  # the next request evaluates all of its prompt

    def memory(self) -> Memory:
        return memory_mib(self.process.pid)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()
