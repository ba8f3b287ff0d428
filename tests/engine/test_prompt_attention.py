"""A prompt's causal attention on our CPU kernel (spd_lsp/engine/kernels/prompt.cpp, prompt.causal_attention): built
for real with the machine's compiler, checked against fp32 attention over the columns each query may see, bad input
refused clearly, and a bf16 model's prefill on it answering as on SDPA, in one forward and in chunks on a cache."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from spd_lsp.engine import fast
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.fast.masks import Causal
from spd_lsp.engine.kernels import build as kernels
from spd_lsp.engine.kernels import prompt as attention
from tests.tiny_models import bf16_fast_llama

pytestmark = pytest.mark.skipif(not kernels.bf16_dot(), reason="no AVX-512 BF16 on this CPU")


@pytest.fixture(scope="module")
def built() -> None:
    assert kernels.build() and "bf16-dot" in kernels.features(), kernels.reason()


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offset: int,
               visible: torch.Tensor | None = None) -> torch.Tensor:
    """fp32 attention of query t over columns 0..offset + t (those `visible` marks), as [B, T, heads * D]; a query
    that sees nothing: zeros."""
    tokens = q.shape[2]
    seen = (torch.arange(k.shape[2])[None, :] <= offset + torch.arange(tokens)[:, None])[None, None]
    if visible is not None:
        seen = seen & visible[..., : k.shape[2]]
    out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=seen, enable_gqa=True)
    out = torch.where(seen.any(-1, keepdim=True), out, 0.0)
    return out.transpose(1, 2).reshape(q.shape[0], tokens, -1)


@pytest.mark.parametrize("rows, kv_heads, group, tokens, length, offset, dim", [
    (1, 3, 3, 512, 512, 0, 64),  # the bundled model's first chunk: 3 key/value heads, 3 query heads each
    (1, 3, 3, 37, 600, 500, 64),  # a chunk after 500 cached columns, in a longer buffer (the rest never read)
    (2, 2, 2, 5, 21, 13, 128),  # two rows, head size 128, a block of 16 keys only partly live
    (1, 1, 1, 1, 10, 9, 64),  # one query, one head
    (1, 3, 1, 100, 100, 0, 64),  # no grouping
])
def test_the_kernel_equals_attention_over_the_columns_each_query_sees(built, rows, kv_heads, group, tokens, length,
                                                                     offset, dim) -> None:
    torch.manual_seed(0)
    q = torch.randn(rows, kv_heads * group, tokens, dim, dtype=torch.bfloat16)
    k, v = (torch.randn(rows, kv_heads, length, dim, dtype=torch.bfloat16) for _ in range(2))
    k[:, :, offset + tokens:], v[:, :, offset + tokens:] = float("nan"), float("nan")  # past the last query: never read
    got = attention.causal_attention(q, k, v, offset, dim ** -0.5)
    assert got.dtype == torch.bfloat16 and got.shape == (rows, tokens, kv_heads * group * dim)
    want = _reference(q, k.nan_to_num(), v.nan_to_num(), offset)
    # bf16 rounding of the probabilities and of the output, as SDPA's bf16 kernel rounds them
    torch.testing.assert_close(got.float(), want, atol=1e-2, rtol=1e-2)
    sdpa_error = (_reference(q, k.nan_to_num(), v.nan_to_num(), offset).bfloat16().float() - want).abs().max()
    assert (got.float() - want).abs().max() <= 4 * sdpa_error + 1e-3


def test_the_kernel_reads_a_cache_buffer_and_a_projection_s_queries_through_their_strides(built) -> None:
    torch.manual_seed(1)
    keys, values = (torch.randn(1, 3, 300, 64, dtype=torch.bfloat16) for _ in range(2))  # a cache's buffers
    k, v = keys[:, :, :200], values[:, :, :200]  # its live columns: a view, not contiguous
    q = torch.randn(1, 40, 9, 64, dtype=torch.bfloat16).transpose(1, 2)  # [1, 9, 40, 64] as the projection leaves it
    assert not (k.is_contiguous() or q.is_contiguous())
    got = attention.causal_attention(q, k, v, 160, 0.125)
    assert torch.equal(got, attention.causal_attention(q.contiguous(), k.contiguous(), v.contiguous(), 160, 0.125))
    torch.testing.assert_close(got.float(), _reference(q, k, v, 160), atol=1e-2, rtol=1e-2)


def _tree_mask(prompt: int, parents: list[int], width: int) -> torch.Tensor:
    """[1, 1, width, prompt + width]: node i sees the prompt, its ancestors and itself; padding nodes the prompt."""
    visible = torch.zeros(1, 1, width, prompt + width, dtype=torch.bool)
    visible[..., :prompt] = True
    for i, parent in enumerate(parents):
        if parent >= 0:
            visible[0, 0, i] = visible[0, 0, parent]
        visible[0, 0, i, prompt + i] = True
    return visible


@pytest.mark.parametrize("rows, prompt, parents, width", [
    (1, 506, [-1, 0, 1, 2, 1, 4, -1, 6, 7], 9),  # a verification tree of three drafts (the bundled model's prompt)
    (1, 40, [-1, 0, 1, 2], 7),  # padded: 3 padding nodes see the prompt only
    (2, 17, [-1, -1, 0, 1, 2], 5),  # two rows, one mask for both
])
def test_the_kernel_attends_where_a_tree_mask_says(built, rows, prompt, parents, width) -> None:
    torch.manual_seed(2)
    visible = _tree_mask(prompt, parents, width)
    q = torch.randn(rows, 9, width, 64, dtype=torch.bfloat16)
    k, v = (torch.randn(rows, 3, prompt + width, 64, dtype=torch.bfloat16) for _ in range(2))
    got = attention.causal_attention(q, k, v, prompt, 0.125, visible)
    torch.testing.assert_close(got.float(), _reference(q, k, v, prompt, visible), atol=1e-2, rtol=1e-2)
    unmasked = attention.causal_attention(q, k, v, prompt, 0.125)
    assert not torch.allclose(got[:, 1:], unmasked[:, 1:], atol=1e-2)  # the mask is read


def test_a_query_that_sees_nothing_gets_zeros_and_rows_have_masks_of_their_own(built) -> None:
    torch.manual_seed(3)
    q = torch.randn(2, 6, 4, 64, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 3, 40, 64, dtype=torch.bfloat16) for _ in range(2))
    visible = torch.rand(2, 1, 4, 40) > 0.5
    visible[0, 0, 2] = False  # row 0's third query sees nothing
    visible[1, 0, :, 20:] = False  # row 1 sees no key past 19 (blocks of 16 keys only partly visible)
    got = attention.causal_attention(q, k, v, 36, 0.125, visible)
    assert torch.equal(got[0, 2], torch.zeros_like(got[0, 2]))
    torch.testing.assert_close(got.float(), _reference(q, k, v, 36, visible), atol=1e-2, rtol=1e-2)


def test_the_kernel_says_what_is_wrong_with_its_inputs(built) -> None:
    q, k = torch.randn(1, 6, 8, 64, dtype=torch.bfloat16), torch.randn(1, 3, 16, 64, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="queries at 9..16 outside the 16 keys"):
        attention.causal_attention(q, k, k, 9, 0.125)
    with pytest.raises(RuntimeError, match="bf16 q, k and v"):
        attention.causal_attention(q.float(), k.float(), k.float(), 0, 0.125)
    with pytest.raises(RuntimeError, match="disagree"):
        attention.causal_attention(q, k[:, :, :, :32], k[:, :, :, :32], 0, 0.125)
    with pytest.raises(RuntimeError, match="visible .B or 1, 1, T, >= offset . T. bool"):
        attention.causal_attention(q, k, k, 0, 0.125, torch.ones(1, 1, 8, 16))  # float, not bool
    with pytest.raises(RuntimeError, match="visible"):
        attention.causal_attention(q, k, k, 8, 0.125, torch.ones(1, 1, 8, 12, dtype=torch.bool))  # too few columns
    with pytest.raises(RuntimeError, match="head size 64 or 128, not 96"):
        attention.causal_attention(q[..., :96].new_zeros(1, 6, 8, 96), k.new_zeros(1, 3, 16, 96),
                                   k.new_zeros(1, 3, 16, 96), 0, 0.1)


def _bf16_runner(*, kernel: bool) -> ModelRunner:
    """`bf16_fast_llama`'s model, its prompts' attention on the kernel or on SDPA."""
    model, backend = bf16_fast_llama(prompt_kernel=kernel)
    assert backend.info["fastPlan"]["attention"]["prompt"].startswith("ours")
    return ModelRunner(model, torch.device("cpu"))


def test_a_bf16_prefill_on_the_kernel_answers_as_on_sdpa_whole_and_in_chunks(built) -> None:
    prompt = [(7 * i) % 50 + 3 for i in range(300)]
    ours, sdpa = _bf16_runner(kernel=True), _bf16_runner(kernel=False)
    got, want = (runner.prefill(prompt)[0].float() for runner in (ours, sdpa))
    assert (got - want).abs().max() <= 0.02 * want.abs().max()
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    ours.parked = []
    ours.rewind(0)
    ours.prefill(prompt[:200])  # the rest as a chunk on the cache: `Causal(200)` on the kernel
    chunked, _ = ours.prefill(prompt)
    assert (chunked.float() - got).abs().max() <= 0.02 * got.abs().max()
    assert torch.equal(chunked.float().argmax(-1), got.argmax(-1))


def test_a_chunk_on_a_cache_takes_plain_causality_as_its_offset() -> None:
    lm = fast.build(_plain_llama(), compile=False).lm
    assert lm.mask(None, 0, 5, torch.device("cpu")) is None
    assert lm.mask(None, 200, 5, torch.device("cpu")) == Causal(200)
    assert lm.mask(None, 200, 1, torch.device("cpu")).shape == (1, 1, 1, 201)  # one token: the step's own masks
    padded = lm.mask(torch.ones(1, 205, dtype=torch.long), 200, 5, torch.device("cpu"))
    assert padded.shape == (1, 1, 5, 205)  # padding given: a tensor, as before


def _plain_llama() -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2)
    return LlamaForCausalLM(config).eval()


def test_the_prompt_kernel_can_be_left_out(built) -> None:
    backend = fast.build(_plain_llama().to(torch.bfloat16), compile=False, left_out=("prompt-attention",))
    backend.prepare()
    assert backend.kernel and backend.info["fastPlan"]["attention"]["prompt"] == "sdpa" and backend.lm.prompt_kernel is None


def test_a_verification_tree_on_the_kernel_scores_its_nodes_as_on_sdpa(built) -> None:
    from spd_lsp.engine.decoding.verify import packed_logits

    prompt, rows = [(5 * i) % 40 + 3 for i in range(120)], [(11, 12, 13, 14), (11, 12, 15), (16, 17)]
    scored = []
    for kernel in (True, False):
        runner = _bf16_runner(kernel=kernel)
        runner.prefill(prompt)
        logits, paths = packed_logits(runner, runner.cache, [rows], [len(prompt)])[0]  # eager: a 4-node tree
        assert runner.cache.get_seq_length() == len(prompt) + 4  # each row but its last token, shared heads once
        scored.append(torch.cat(logits).float())
    got, want = scored
    assert (got - want).abs().max() <= 0.02 * want.abs().max()
    assert torch.equal(got.argmax(-1), want.argmax(-1))
