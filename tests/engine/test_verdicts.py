"""Verification's per-token figures (spd_lsp/engine/decoding/verdicts.py): the C++ kernel (engine/kernels/verdict.cpp,
built for real) gives the tensor ops' figures, from bf16 and fp32 logits, with banned tokens, ties and a banned draft
token, and the module falls back to them; bad input is refused with its reason."""

from __future__ import annotations

import pytest
import torch

from spd_lsp.engine.decoding import verdicts
from spd_lsp.engine.kernels import build as kernels
from spd_lsp.engine.kernels import verdict


@pytest.fixture(scope="module")
def built() -> None:
    assert kernels.build(), kernels.reason()
    assert verdict.available()


def _tensor_ops(logits: torch.Tensor, tokens: torch.Tensor, banned: torch.Tensor):
    """The figures as verification computed them before the kernel (log_softmax, gather, max, a count)."""
    logp = torch.log_softmax(logits.float().index_fill(-1, banned, float("-inf")), dim=-1)
    token_logp = logp.gather(1, tokens[:, None]).squeeze(1)
    best, choice = logp.max(dim=-1)
    return token_logp, best, choice, (logp > token_logp[:, None]).sum(dim=-1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_kernel_gives_the_tensor_ops_figures(built, dtype) -> None:
    generator = torch.Generator().manual_seed(0)
    vocab = 49_152 + 7  # a tail past the vector width
    logits = (torch.randn(12, vocab, generator=generator) * 4).to(dtype)
    logits[3, 100] = logits[3, 200] = logits[3].max() + 1  # tied maxima: the first is the choice
    banned = torch.cat([torch.tensor([5]), torch.randint(0, vocab, (40,), generator=generator)]).unique()
    logits[4, 5] = 1e4  # a banned token's huge logit changes nothing
    tokens = torch.randint(0, vocab, (12,), generator=generator)
    tokens[7] = 5  # a banned draft token: -inf, every allowed token above it
    got = torch.ops.spd.token_verdicts(logits, tokens, banned)
    want = _tensor_ops(logits, tokens, banned)
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=2e-6)  # log p: summed in another order
    torch.testing.assert_close(got[1], want[1], rtol=0, atol=2e-6)
    assert torch.equal(got[2], want[2]) and got[2][3] == 100
    assert torch.equal(got[3], want[3]) and got[0][7] == float("-inf") and got[3][7] == vocab - len(banned)
    assert torch.equal(verdicts.token_verdicts(logits, tokens, banned)[3], want[3])


def test_bad_input_is_refused_with_its_reason(built) -> None:
    banned = torch.tensor([0, 3])
    with pytest.raises(RuntimeError, match=r"token 10 not in 0..9"):
        torch.ops.spd.token_verdicts(torch.zeros(1, 10), torch.tensor([10]), banned)
    with pytest.raises(RuntimeError, match=r"banned token 12 not in 0..9"):
        torch.ops.spd.token_verdicts(torch.zeros(1, 10), torch.tensor([1]), torch.tensor([12]))
    with pytest.raises(RuntimeError, match="bf16 or fp32"):
        torch.ops.spd.token_verdicts(torch.zeros(1, 10, dtype=torch.float64), torch.tensor([1]), banned)


def test_without_the_kernel_the_tensor_ops_give_them(monkeypatch) -> None:
    monkeypatch.setattr(verdict, "available", lambda: False)
    logits = torch.randn(4, 300, generator=torch.Generator().manual_seed(1)).bfloat16()
    tokens, banned = torch.tensor([1, 2, 3, 0]), torch.tensor([0, 7])
    for got, want in zip(verdicts.token_verdicts(logits, tokens, banned), _tensor_ops(logits, tokens, banned)):
        assert torch.equal(got, want)
