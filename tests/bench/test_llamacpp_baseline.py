"""bench/bench_llamacpp_baseline.py without llama.cpp (CI never builds it): the table on fake timings, and the RSS
probe against a stand-in server that answers /health as llama-server does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.bench_llamacpp_baseline import Memory, Row, server_memory, table

STAND_IN = '''#!{python}
import http.server, json, sys, time
port = int(sys.argv[sys.argv.index("--port") + 1])
if "--fail" in sys.argv:
    print("error: failed to load model", flush=True)
    sys.exit(3)
ready = time.monotonic() + 0.5  # 503 while "loading", as llama-server answers
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = time.monotonic() > ready
        self.send_response(200 if ok else 503)
        self.end_headers()
        self.wfile.write(json.dumps({{"status": "ok" if ok else "loading model"}}).encode())
    def log_message(self, *args):
        pass
ballast = b"\x01" * (64 * 2**20)  # 64 MiB written, so resident
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
'''


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    path = tmp_path / "llama-server"
    path.write_text(STAND_IN.format(python=sys.executable))
    path.chmod(0o755)
    return path


def test_the_rss_is_read_once_health_says_ok_and_the_server_is_stopped(stand_in: Path, tmp_path: Path) -> None:
    memory = server_memory(stand_in, tmp_path / "model.gguf", 2, timeout_s=60)
    assert memory.anon > 64  # the ballast, after "loading"
    assert memory.rss == pytest.approx(memory.anon + memory.file, abs=1)


def test_a_server_that_dies_while_loading_is_reported_with_its_log(stand_in: Path, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="exited \\(3\\):\n.*failed to load model"):
        server_memory(stand_in, Path("--fail"), 2, timeout_s=60)


def test_the_table_gives_each_builds_median_the_ratio_with_its_interval_and_the_memory(tmp_path: Path) -> None:
    gguf = tmp_path / "m.Q4_K_M.gguf"
    gguf.write_bytes(b"\0" * 2**20)
    timed = Row(gguf, rounds={"native": [10.0, 12.0, 11.0, 50.0, 11.0], "avx2": [15.0, 18.0, 16.5, 16.0, 17.0]},
                samples={"native": [10.0, 11.0, 12.0], "avx2": [15.0, 16.5, 18.0]},
                memory=Memory(301.0, 200.0, 101.0), loads=[1.5, 2.25, 1.0])
    memory_only = Row(gguf, memory=Memory(2.0, 1.0, 1.0))
    rows = table([timed, memory_only], ["native", "avx2"])
    assert rows[0] == ("| GGUF | MB | native ms/token (t/s) | avx2 ms/token (t/s) | avx2 / native "
                       "| llama-server RSS MiB (native) | anon MiB | file MiB | load |")
    cells = [c.strip() for c in rows[2].strip("|").split("|")]
    assert cells[:4] == ["m.Q4_K_M.gguf", "1", "11.0 (90.9)", "16.5 (60.6)"]
    value, interval = cells[4].split(" [")
    low, high = (float(x.rstrip("x]")) for x in interval.split(", "))
    assert value == "1.50x" and low <= 1.5 <= high  # the rounds' medians, 16.5 / 11 (totals: 0.88x)
    assert cells[5:] == ["301", "200", "101", "1.0–2.2"]
    assert rows[3] == "| m.Q4_K_M.gguf | 1 | - | - | - | 2 | 1 | 1 | - |"
