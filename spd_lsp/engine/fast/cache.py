"""A key/value cache in preallocated buffers whose length is a bucket, for a step of fixed shapes.

Each layer keeps keys and values in buffers [rows, heads, capacity, dim] with the capacity a
multiple of `GRANULE` (at least `MIN_CAPACITY`): the compiled step attends over the whole buffer, masked
past `length`; the buffer's length is a dynamic dimension of its one graph, so outgrowing a bucket compiles nothing.
Everything else sees a plain transformers `DynamicLayer` whose `keys`/`values` are the views of
the first `length` positions: crop, deepcopy, reorder, fork and the batch's row copies work
unchanged; an assignment of other tensors (a reorder, a fork's repeat) re-buffers them.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

MIN_CAPACITY = 256
# Positions a buffer keeps free past a prompt when it is (re)allocated: a request's decode steps then stay in
# the prompt's buffer instead of copying it into a larger one mid-request.
HEADROOM = 32


# Buffers grow in steps of this many positions. The compiled step reads the whole buffer (masked past `length`)
# and its length is a dynamic dimension (one graph for all), so a finer step reads fewer unused keys: a
# 512-token prompt's buffer holds 640 positions, not the 1,024 of a power of two (~9 MB less a step here).
GRANULE = 128


def plain_zeros(like: torch.Tensor, *shape: int) -> torch.Tensor:
    """Zeros shaped `shape` of `like`'s dtype and device, a plain tensor even under `inference_mode` (writing into one
    there is allowed). The compiled step's graph guards on its buffers' kind: buffers made in inference mode by one
    path and outside it by another (a cold prompt, a copied cache) compiled the whole step a second time."""
    with torch.inference_mode(False):
        return like.new_zeros(*shape)


def bucket(length: int) -> int:
    """The buffer capacity for `length` positions and `HEADROOM`: a multiple of `GRANULE`, at least `MIN_CAPACITY`."""
    return max(MIN_CAPACITY, -(-(length + HEADROOM) // GRANULE) * GRANULE)


class BucketLayer(DynamicLayer):
    plain = True  # a full key/value layer: the batch may slice it (padding.plain_cache)

    def __init__(self) -> None:
        self.key_buffer: torch.Tensor | None = None
        self.value_buffer: torch.Tensor | None = None
        self.length = 0
        super().__init__()

    # transformers' layer code reads and assigns `keys`/`values`: views of the buffers' first `length` positions.
    @property
    def keys(self) -> torch.Tensor | None:
        return None if self.key_buffer is None else self.key_buffer[:, :, : self.length]

    @keys.setter
    def keys(self, tensor: torch.Tensor | None) -> None:
        self.key_buffer = self._adopt(self.key_buffer, tensor)

    @property
    def values(self) -> torch.Tensor | None:
        return None if self.value_buffer is None else self.value_buffer[:, :, : self.length]

    @values.setter
    def values(self, tensor: torch.Tensor | None) -> None:
        self.value_buffer = self._adopt(self.value_buffer, tensor)
        if tensor is not None:
            self.length = tensor.shape[2]
        elif self.key_buffer is None:
            self.length = 0

    def _adopt(self, buffer: torch.Tensor | None, tensor: torch.Tensor | None) -> torch.Tensor | None:
        """The buffer holding `tensor` in its first positions: the same buffer for a view of it (a crop), else a new one."""
        if tensor is None:
            return None
        if buffer is not None and tensor.shape[:2] == buffer.shape[:2] and tensor.data_ptr() == buffer.data_ptr() \
                and tensor.shape[2] <= buffer.shape[2]:
            return buffer
        return self._grown(tensor, bucket(tensor.shape[2]))

    @staticmethod
    def _grown(tensor: torch.Tensor, capacity: int) -> torch.Tensor:
        rows, heads, length, dim = tensor.shape
        buffer = plain_zeros(tensor, rows, heads, capacity, dim)  # zeros: a masked position is never NaN
        buffer[:, :, :length] = tensor
        return buffer

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        capacity = bucket(key_states.shape[2])
        self.key_buffer = plain_zeros(key_states, *key_states.shape[:2], capacity, key_states.shape[3])
        self.value_buffer = plain_zeros(value_states, *value_states.shape[:2], capacity, value_states.shape[3])
        self.length = 0
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[2]
        if end > self.key_buffer.shape[2]:
            self.reserve(end)
        self.key_buffer[:, :, self.length : end] = key_states
        self.value_buffer[:, :, self.length : end] = value_states
        self.length = end
        return self.keys, self.values

    def reserve(self, length: int) -> None:
        """Room for `length` positions (the next bucket, the live part copied)."""
        if length > self.key_buffer.shape[2]:
            live = self.length
            self.key_buffer = self._grown(self.key_buffer[:, :, :live], bucket(length))
            self.value_buffer = self._grown(self.value_buffer[:, :, :live], bucket(length))

    def __deepcopy__(self, memo: dict[int, Any]) -> "BucketLayer":
        """A copy whose buffers are plain tensors of the same capacity holding the live positions (`plain_zeros`):
        `copy.deepcopy` clones tensors, which under `inference_mode` (the runner's copies and forks) makes inference
        tensors, and the compiled step's guards would compile a second graph for them. The rest as deepcopy does."""
        copied = type(self).__new__(type(self))
        memo[id(self)] = copied
        for name, value in self.__dict__.items():
            if name in ("key_buffer", "value_buffer") and value is not None:
                value = self._grown(value[:, :, : self.length], value.shape[2])
            else:
                value = copy.deepcopy(value, memo)
            setattr(copied, name, value)
        return copied

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:  # as DynamicLayer: only "remove this many"
            raise ValueError(f"crop takes a negative count of tokens to remove, not {tokens_to_remove}")
        self.length = max(0, self.length + tokens_to_remove)

    def reset(self) -> None:
        self.key_buffer = self.value_buffer = None
        self.length = 0
        self.is_initialized = False


def bucket_cache(layers: int) -> DynamicCache:
    """An empty cache of `layers` `BucketLayer`s."""
    cache = DynamicCache()
    cache.layers, cache.layer_class_to_replicate = [BucketLayer() for _ in range(layers)], None
    return cache


def bucketed(cache: Any) -> bool:
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(isinstance(layer, BucketLayer) and layer.is_initialized for layer in layers)
