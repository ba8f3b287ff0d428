"""A GGUF file's header (metadata and tensor table) read in one pass, its tensors as views of one memory map.

gguf-py's `GGUFReader` makes a numpy view for every item of every field: on the bundled model's tokenizer (49,152
tokens, 48,900 merges) that took 3-5 s a start. Here arrays of numbers are read with one `numpy.frombuffer` each, and
arrays of strings (a vocabulary, its merges) are only measured: their items are decoded when asked for (`Strings`),
which a start that finds its tokenizer kept never does (a read of Gemma-3-270M's header, 262,144 tokens: 0.15 s
decoded, 0.04 s measured; of the bundled model's 0.05 s and 0.01 s). The block sizes of the weight types are gguf-py's (`GGML_QUANT_SIZES`).

Format (gguf's specification): magic "GGUF", version (3), tensor count, key/value count; each key/value: a string key,
a value type, the value (arrays: element type, count, elements); each tensor: name, dimensions (fastest first), type,
offset; then the data, aligned to `general.alignment` (32 by default).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np

MAGIC = b"GGUF"
ALIGNMENT = 32
# gguf's value types: numbers by their numpy dtype, then STRING (8), ARRAY (9), BOOL (7)
_NUMBERS = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32, 6: np.float32,
            7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}
STRING, ARRAY = 8, 9


class GGUFError(ValueError):
    """The file is not a GGUF this reader understands (the message says what was found)."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # as torch sees it: the slowest dimension first ([N, K] for a weight)
    type: int  # gguf's GGMLQuantizationType value
    offset: int  # from the start of the data

    @property
    def type_name(self) -> str:
        from gguf import GGMLQuantizationType

        try:
            return GGMLQuantizationType(self.type).name
        except ValueError:
            return f"type {self.type}"


class GGUFFile:
    """`path`'s metadata (`fields`: key -> Python value) and tensors (`tensors`: name -> `TensorInfo`); `raw(name)` maps
    a tensor's bytes as [rows, bytes a row]."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._map = np.memmap(self.path, mode="r")
        self.fields: dict[str, Any] = {}
        self.tensors: dict[str, TensorInfo] = {}
        try:
            self._parse()
        except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
            if isinstance(exc, GGUFError):
                raise
            raise GGUFError(f"{self.path}: not a readable GGUF file ({type(exc).__name__}: {exc})") from exc

    def _parse(self) -> None:
        buffer = memoryview(self._map)
        if bytes(buffer[:4]) != MAGIC:
            raise GGUFError(f"{self.path}: not a GGUF file (it starts {bytes(buffer[:4])!r})")
        version, tensor_count, kv_count = struct.unpack_from("<IQQ", buffer, 4)
        if version not in (2, 3):
            raise GGUFError(f"{self.path}: GGUF version {version} (this reader knows 2 and 3)")
        at = 24
        for _ in range(kv_count):
            key, at = _string(buffer, at)
            (kind,), at = struct.unpack_from("<I", buffer, at), at + 4
            self.fields[key], at = _value(buffer, at, kind)
        infos = []
        for _ in range(tensor_count):
            name, at = _string(buffer, at)
            (dims,), at = struct.unpack_from("<I", buffer, at), at + 4
            shape = struct.unpack_from(f"<{dims}Q", buffer, at)
            at += 8 * dims
            kind, offset = struct.unpack_from("<IQ", buffer, at)
            at += 12
            infos.append(TensorInfo(name, tuple(int(d) for d in reversed(shape)), kind, offset))
        alignment = int(self.fields.get("general.alignment", ALIGNMENT))
        self.data_offset = -(-at // alignment) * alignment
        self.tensors = {info.name: info for info in infos}

    def field(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    @property
    def architecture(self) -> str:
        return str(self.fields.get("general.architecture", ""))

    def raw(self, name: str) -> np.ndarray:
        """Tensor `name`'s bytes as they are in the file, [rows, bytes a row] (rows: every dimension but the
        fastest), a read-only view of the map."""
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

        info = self.tensors[name]
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(info.type)]
        width = info.shape[-1]
        if width % block:
            raise GGUFError(f"{self.path}: {name} has {width} columns, not whole blocks of {block}")
        rows = int(np.prod(info.shape[:-1])) if len(info.shape) > 1 else 1
        start = self.data_offset + info.offset
        row_bytes = width // block * size
        return self._map[start : start + rows * row_bytes].reshape(rows, row_bytes)

    def close(self) -> None:
        """Drop the map (the views `raw` gave keep it alive until they go)."""
        self._map = None  # type: ignore[assignment]


class Strings(Sequence[str]):
    """An array of strings of the file, each decoded when it is asked for (a list's reading: index, slice,
    iteration, length, equality with a list)."""

    def __init__(self, buffer: memoryview, starts: list[int]) -> None:
        self._buffer, self._starts = buffer, starts  # each item's length field; the end: one past the last item

    def __len__(self) -> int:
        return len(self._starts) - 1

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return _string(self._buffer, self._starts[index])[0]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Strings, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, which are not hashable

    def __repr__(self) -> str:
        return f"Strings({len(self)} items)"


def _strings(buffer: memoryview, at: int, count: int) -> tuple[Strings, int]:
    """`count` strings from `at`, measured (each one's length read), not decoded."""
    starts = [0] * (count + 1)
    unpack = struct.Struct("<Q").unpack_from
    for index in range(count):
        starts[index] = at
        at += 8 + unpack(buffer, at)[0]
    starts[count] = at
    if at > len(buffer):
        raise GGUFError(f"an array of strings runs past the end of the file ({at} > {len(buffer)} bytes)")
    return Strings(buffer, starts), at


def _string(buffer: memoryview, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<Q", buffer, at)
    start = at + 8
    return bytes(buffer[start : start + length]).decode("utf-8", errors="replace"), start + length


def _value(buffer: memoryview, at: int, kind: int) -> tuple[Any, int]:
    if kind == STRING:
        return _string(buffer, at)
    if kind == ARRAY:
        element, count = struct.unpack_from("<IQ", buffer, at)
        at += 12
        if element in _NUMBERS:
            dtype = np.dtype(_NUMBERS[element])
            values = np.frombuffer(buffer, dtype=dtype, count=count, offset=at).tolist()
            return values, at + count * dtype.itemsize
        if element == STRING:
            return _strings(buffer, at, count)
        items = []
        for _ in range(count):
            item, at = _value(buffer, at, element)
            items.append(item)
        return items, at
    if kind in _NUMBERS:
        dtype = np.dtype(_NUMBERS[kind])
        value = np.frombuffer(buffer, dtype=dtype, count=1, offset=at)[0].item()
        return value, at + dtype.itemsize
    raise GGUFError(f"unknown GGUF value type {kind}")
