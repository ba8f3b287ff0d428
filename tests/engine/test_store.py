"""What the fast path keeps beside the model (spd_lsp/engine/fast/store.py): ATen's packed int4 weights are keyed by
the layout they hold (torch version, the CPU capability ATen runs) and checked against the GGUF's own numbers when a
later start reads them, so a cache packed on another CPU (a home directory shared between machines, a new CPU, an
AVX2 laptop after an AVX-512 server) is packed again instead of serving garbage drafts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from spd_lsp.engine.fast import q4
from spd_lsp.engine.fast.store import gguf_int4, packed_file, witness
from spd_lsp.engine.model import bundled_gguf, load_model

pytestmark = pytest.mark.integration
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def bundled() -> tuple[Path, object, list]:
    config = load_model(None, "cpu", fast=False).model.config
    return bundled_gguf(), config, q4.q4_1_layers(bundled_gguf(), config)


def _right_numbers(packed: list, groups: list) -> bool:
    """Layer 0's and the last layer's fused projections give their blocks' numbers (x = a few unit vectors)."""
    for index in (0, len(groups) - 1):
        for name, joined in q4.fused(groups[index]).items():
            weight = packed[index][name]
            x = torch.eye(weight.in_features, dtype=torch.bfloat16)[:8]
            got, want = weight.mm(x).T.float(), joined.dequantised()[:, :8]
            if not bool((got - want).abs().max() <= 2 ** -6 * want.abs().max()):  # bf16 scales: 0.4 % at most
                return False
    return True


def test_the_packed_file_is_named_by_the_layout_it_holds(tmp_path) -> None:
    name = packed_file(tmp_path, torch.bfloat16, CPU).name
    assert torch.__version__ in name and torch.backends.cpu.get_cpu_capability().lower() in name


def test_a_packed_copy_that_does_not_give_the_gguf_s_numbers_is_packed_again(bundled, tmp_path, caplog) -> None:
    gguf, config, groups = bundled
    made = gguf_int4(gguf, config, dtype=torch.bfloat16, device=CPU, directory=tmp_path)
    assert _right_numbers(made, groups)
    path = packed_file(tmp_path, torch.bfloat16, CPU)
    from safetensors.torch import load_file, save_file

    state = load_file(path)
    assert torch.equal(state["witness"], witness(groups))
    state["0.qkv.weight"] = state["0.qkv.weight"].flip(0).contiguous()  # another layout of the same bytes
    save_file(state, path)
    again = gguf_int4(gguf, config, dtype=torch.bfloat16, device=CPU, directory=tmp_path)
    assert "does not give the GGUF's own numbers" in caplog.text
    assert _right_numbers(again, groups)
    assert torch.equal(load_file(path)["0.qkv.weight"], made[0]["qkv"].weight)  # the cache made again


def test_a_cache_packed_under_another_cpu_capability_is_packed_again(bundled, tmp_path, caplog) -> None:
    """Packed in a process running ATen's AVX2 code (as on an AVX2 laptop), read here: before the layout named the
    file and a witness checked it, an AVX-512 machine served that copy (the demo's drafts: 'aven unsus entangwargs
    tradem ...')."""
    gguf, config, groups = bundled
    other = tmp_path / "avx2"
    code = ("import sys, torch; from pathlib import Path; from spd_lsp.engine.fast.store import gguf_int4; "
            "from spd_lsp.engine.model import bundled_gguf, load_model; "
            "config = load_model(None, 'cpu', fast=False).model.config; "
            "gguf_int4(bundled_gguf(), config, dtype=torch.bfloat16, device=torch.device('cpu'), directory=Path(sys.argv[1]))")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    other.mkdir()
    subprocess.run([sys.executable, "-c", code, str(other)], env=env, check=True, timeout=600)
    (packed,) = other.glob("int4-*.safetensors")
    assert "-avx2-" in packed.name
    here = tmp_path / "here"
    here.mkdir()
    # the same file where this machine looks for its own (as a cache keyed by torch version alone was shared)
    shutil.copy(packed, packed_file(here, torch.bfloat16, CPU))
    served = gguf_int4(gguf, config, dtype=torch.bfloat16, device=CPU, directory=here)
    assert _right_numbers(served, groups)
    if torch.backends.cpu.get_cpu_capability() != "AVX2":  # the layouts differ here: the copy was refused
        assert "does not give the GGUF's own numbers" in caplog.text


def test_the_head_s_halves_packed_for_another_layout_are_read_again(tmp_path, caplog) -> None:
    """The Q8_0 head as two ATen int4 halves (CPUs without AVX-512 BF16): kept under the same layout name, checked
    against the blocks' own numbers, made again where they do not give them."""
    from safetensors.torch import load_file, save_file

    from spd_lsp.engine.fast.q8 import gguf_head_blocks
    from spd_lsp.engine.fast.store import gguf_q8_head, q8_file

    codes, scales = gguf_head_blocks(bundled_gguf())
    want = (codes[:, :8].float() * scales[:, :1])
    made = gguf_q8_head(bundled_gguf(), dtype=torch.bfloat16, directory=tmp_path)
    path = q8_file(tmp_path, torch.bfloat16)
    assert torch.backends.cpu.get_cpu_capability().lower() in path.name

    def gives_blocks(head: object) -> bool:
        got = head.mm(torch.eye(codes.shape[1], dtype=torch.bfloat16)[:8]).T.float()
        return bool((got - want).abs().max() <= 2 ** -6 * want.abs().max())

    assert gives_blocks(made)
    state = load_file(path)
    state["low.weight"] = state["low.weight"].flip(0).contiguous()
    save_file(state, path)
    again = gguf_q8_head(bundled_gguf(), dtype=torch.bfloat16, directory=tmp_path)
    assert "does not give the GGUF's own numbers" in caplog.text and gives_blocks(again)
