"""The batch's key/value rows in preallocated buffers: a member joining or leaving moves its own rows only.

Every layer keeps its keys and values in buffers of [row capacity, heads, column capacity,
dim]; the model sees the first `rows` rows and `width` columns as views, and a step writes
its column in place (no concatenation of the whole cache per step). A column of a row
holds a real key or is a hole, masked out (`valid`): positions come from the position ids
and rotary embeddings are applied before caching, so where in its row a key sits does not
matter. So a joining request's prompt is copied into a free row from column 0 (the rest
of that row up to `width` a hole); a wider prompt widens every row by holes; a leaving
request's rows are refilled by the last request's rows when they have as many (else the
rows after it move up). Only a fork or reorder of rows (the baselines' first step, beam)
re-gathers the whole batch, as the previous cache did every time the membership changed.
Holes cost attention, so once they outnumber the real keys the columns are compacted.

The previous `BatchCache` rebuilt one left-padded cache of every member's rows whenever a
member joined or left, nearly every step under continuous traffic: with 8 rows and churn every
step a step took 52-54 ms against 35-36 ms here (`bench/bench_batch_churn.py --against 582854c`).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

COLUMN_MARGIN = 64  # spare columns allocated past those needed: most steps then write in place
ROW_MARGIN = 4


class SlotLayer(DynamicLayer):
    """One layer: the model reads `keys`/`values` (views of the buffers) and `update` writes in place."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__()
        self.key_buffer, self.value_buffer = keys, values
        self.is_initialized = True
        self.device = keys.device
        self.show(0, 0)

    def show(self, rows: int, width: int) -> None:
        self.rows, self.width = rows, width
        self.keys = self.key_buffer[:rows, :, :width]
        self.values = self.value_buffer[:rows, :, :width]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
               ) -> tuple[torch.Tensor, torch.Tensor]:
        rows, _, tokens, _ = key_states.shape
        assert rows == self.rows and self.width + tokens <= self.key_buffer.shape[2]
        self.key_buffer[:rows, :, self.width : self.width + tokens] = key_states
        self.value_buffer[:rows, :, self.width : self.width + tokens] = value_states
        self.show(rows, self.width + tokens)
        return self.keys, self.values


class BatchCache:
    """The rows of the batch's requests (`Member`s: `rows`, `length`, `prompt_rows`, `state.parents()`).

    `forward(members, inputs)` runs one step of `members` (inputs [rows, 1, H] in their order)
    and returns their logits in that order. `rows_copied` counts rows written other than by a
    step (joins, moves, gathers): a measure of what membership changes cost.
    """

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.cache: DynamicCache | None = None
        self.layers: list[SlotLayer] = []
        self.valid = torch.zeros(0, 0, dtype=torch.bool)  # [row capacity, column capacity]
        self.order: list[Any] = []  # members in row order
        self.width = 0
        self.rows_copied = 0

    @property
    def rows(self) -> int:
        return sum(m.rows for m in self.order)

    def forward(self, members: list[Any], inputs: torch.Tensor) -> torch.Tensor:
        self._leave([m for m in self.order if all(m is not x for x in members)])
        if self.order and self.width > 2 * max(m.length for m in self.order) + COLUMN_MARGIN:
            self._compact()
        self._join([m for m in members if all(m is not x for x in self.order)])
        self._follow_parents(members)
        self._reserve(self.rows, self.width + 1)
        rows = self.rows
        starts = self._starts()
        physical = [starts[id(m)] + i for m in members for i in range(m.rows)]  # each input's row
        ordered = physical == list(range(rows))
        self.valid[:rows, self.width] = True
        mask = self.valid[:rows, : self.width + 1].long()
        for layer in self.layers:
            layer.show(rows, self.width)
        steps = inputs if ordered else inputs[torch.tensor(physical).argsort().to(inputs.device)]
        logits = self.runner.forward(self.cache, embeds=steps, attention_mask=mask,
                                     position_ids=self._lengths()[:, None])
        self.width += 1
        for member in members:
            member.length += 1
        return logits if ordered else logits[torch.tensor(physical, device=logits.device)]

    def _starts(self) -> dict[int, int]:
        """Each member's first row, by id."""
        starts, start = {}, 0
        for member in self.order:
            starts[id(member)], start = start, start + member.rows
        return starts

    def _lengths(self) -> torch.Tensor:
        """Every row's real positions (its member's length)."""
        return torch.tensor([m.length for m in self.order for _ in range(m.rows)])

    # -- membership ------------------------------------------------------------------
    def _leave(self, leaving: list[Any]) -> None:
        """Drop `leaving`'s rows: the last member fills a gap of its size, else the rows after the gap move up."""
        for member in leaving:
            index, start = self.order.index(member), self._starts()[id(member)]
            last = self.order[-1]
            if last is not member and last.rows == member.rows:
                self._move(list(range(self.rows - last.rows, self.rows)), list(range(start, start + member.rows)))
                self.order[index] = last
                self.order.pop()
            else:
                after = list(range(start + member.rows, self.rows))
                self._move(after, list(range(start, start + len(after))))
                self.order.pop(index)
        if not self.order:
            self.width = 0  # an empty batch starts again at column 0 (its buffers stay until `release`)

    def nbytes(self) -> int:
        """The bytes its key/value buffers hold (allocated, used or not)."""
        return sum(buffer.untyped_storage().nbytes() for layer in self.layers
                   for buffer in (layer.key_buffer, layer.value_buffer))

    def release(self) -> None:
        """Free the buffers (the scheduler, once idle with no member left)."""
        self.order, self.width = [], 0
        self.cache, self.layers, self.valid = None, [], torch.zeros(0, 0, dtype=torch.bool)

    def _join(self, joining: list[Any]) -> None:
        """Copy each joiner's prompt into new rows at the end, from column 0; a longer prompt widens the batch."""
        if not joining:
            return
        widest = max(m.length for m in joining)
        self._reserve(self.rows + sum(m.rows for m in joining), max(self.width, widest) + 1,
                      like=joining[0].prompt_rows)
        if widest > self.width:  # the columns in between are holes in every row
            self.valid[:, self.width : widest] = False
            self.width = widest
        for member in joining:
            row = self.rows
            for layer, (keys, values) in zip(self.layers, member.prompt_rows):
                layer.key_buffer[row : row + member.rows, :, : member.length] = keys
                layer.value_buffer[row : row + member.rows, :, : member.length] = values
            self.valid[row : row + member.rows] = False
            self.valid[row : row + member.rows, : member.length] = True
            self.order.append(member)
            self.rows_copied += member.rows

    def _follow_parents(self, members: list[Any]) -> None:
        """Where a request forks (its first baseline step) or reorders its rows (beam): gather every row,
        in `members`' order."""
        parents = [m.state.parents() for m in members]
        if all(p == list(range(m.rows)) for p, m in zip(parents, members)):
            return
        starts = self._starts()
        index = [starts[id(m)] + p for m, ps in zip(members, parents) for p in ps]
        self._reserve(len(index), self.width + 1)
        self._move(index, list(range(len(index))))
        for member, ps in zip(members, parents):
            member.rows = len(ps)
        self.order = list(members)

    def _move(self, sources: list[int], targets: list[int]) -> None:
        if not sources or sources == targets:
            return
        source = torch.tensor(sources, device=self.runner.device)
        target = torch.tensor(targets, device=self.runner.device)
        for layer in self.layers:
            for buffer in (layer.key_buffer, layer.value_buffer):
                buffer[target, :, : self.width] = buffer[source, :, : self.width]  # the read copies first
        self.valid[targets] = self.valid[sources]
        self.rows_copied += len(sources)

    # -- capacity --------------------------------------------------------------------
    def _reserve(self, rows: int, columns: int, *, like: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> None:
        """Buffers of at least `rows` x `columns`, grown with a margin and the live part copied."""
        have_rows, have_columns = self.valid.shape
        if rows <= have_rows and columns <= have_columns and self.layers:
            return
        new_rows = max(rows + ROW_MARGIN, have_rows)
        new_columns = max(columns + COLUMN_MARGIN, have_columns)
        shapes = like or [(layer.key_buffer, layer.value_buffer) for layer in self.layers]
        layers = []
        live = self.rows
        for index, (keys, values) in enumerate(shapes):
            heads, dim = keys.shape[1], keys.shape[3]
            key_buffer = keys.new_zeros(new_rows, heads, new_columns, dim)  # zeros: a hole is never NaN
            value_buffer = values.new_zeros(new_rows, heads, new_columns, values.shape[3])
            if self.layers:
                old = self.layers[index]
                key_buffer[:live, :, : self.width] = old.key_buffer[:live, :, : self.width]
                value_buffer[:live, :, : self.width] = old.value_buffer[:live, :, : self.width]
            layers.append(SlotLayer(key_buffer, value_buffer))
        valid = torch.zeros(new_rows, new_columns, dtype=torch.bool)
        valid[:have_rows, :have_columns] = self.valid
        self.layers, self.valid = layers, valid
        self.cache = DynamicCache()
        self.cache.layers, self.cache.layer_class_to_replicate = list(layers), None

    def _compact(self) -> None:
        """Every row's real keys to its first columns, in order; the width becomes the longest row."""
        live = self.rows
        width = max(m.length for m in self.order)
        columns = torch.argsort((~self.valid[:live, : self.width]).to(torch.int8), dim=1, stable=True)[:, :width]
        index = columns.to(self.runner.device)
        for layer in self.layers:
            for buffer in (layer.key_buffer, layer.value_buffer):
                heads, dim = buffer.shape[1], buffer.shape[3]
                gathered = torch.gather(buffer[:live, :, : self.width], 2,
                                        index[:, None, :, None].expand(live, heads, width, dim))
                buffer[:live, :, :width] = gathered
        self.valid[:live] = False
        self.valid[:live, :width] = torch.arange(width)[None, :] < self._lengths()[:, None]
        self.width = width
        self.rows_copied += live
