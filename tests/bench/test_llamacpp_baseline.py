"""bench/bench_llamacpp_baseline.py without llama.cpp (CI never builds it): the table on fake timings, and the RSS
probe against a stand-in server that answers /health as llama-server does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.bench_llamacpp_baseline import Row, server_rss_mb, table

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
ballast = bytearray(64 * 2**20)  # 64 MiB resident
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
'''


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    path = tmp_path / "llama-server"
    path.write_text(STAND_IN.format(python=sys.executable))
    path.chmod(0o755)
    return path


def test_the_rss_is_read_once_health_says_ok_and_the_server_is_stopped(stand_in: Path, tmp_path: Path) -> None:
    rss = server_rss_mb(stand_in, tmp_path / "model.gguf", 2, timeout_s=60)
    assert rss > 64  # the ballast and an interpreter


def test_a_server_that_dies_while_loading_is_reported_with_its_log(stand_in: Path, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="exited \\(3\\):\n.*failed to load model"):
        server_rss_mb(stand_in, Path("--fail"), 2, timeout_s=60)


def test_the_table_gives_each_builds_median_the_ratio_with_its_interval_and_rss_less_the_file(tmp_path: Path) -> None:
    gguf = tmp_path / "m.Q4_K_M.gguf"
    gguf.write_bytes(b"\0" * 2**20)
    timed = Row(gguf, rounds={"native": [10.0, 12.0, 11.0], "avx2": [15.0, 18.0, 16.5]},
                samples={"native": [10.0, 11.0, 12.0], "avx2": [15.0, 16.5, 18.0]}, rss_mb=301.0)
    memory_only = Row(gguf, rss_mb=2.0)
    rows = table([timed, memory_only], ["native", "avx2"])
    assert rows[0] == ("| GGUF | MB | native ms/token (t/s) | avx2 ms/token (t/s) | avx2 / native "
                       "| llama-server RSS MiB (native) | RSS − file MiB |")
    cells = [c.strip() for c in rows[2].strip("|").split("|")]
    assert cells[:4] == ["m.Q4_K_M.gguf", "1", "11.0 (90.9)", "16.5 (60.6)"]
    value, interval = cells[4].split(" [")
    low, high = (float(x.rstrip("x]")) for x in interval.split(", "))
    assert value == "1.50x" and low <= 1.5 <= high  # 49.5 / 33
    assert cells[5:] == ["301", "300"]
    assert rows[3] == "| m.Q4_K_M.gguf | 1 | - | - | - | 2 | 1 |"
