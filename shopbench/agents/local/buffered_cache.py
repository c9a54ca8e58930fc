"""A key-value cache that writes each generated token into room set aside, not a new copy.

transformers' dynamic cache concatenates every layer's keys and values with the new token's
at each step, so a batch decoding ``n`` tokens over a context of ``c`` copies ``n × c`` rows
per layer: on a CPU evaluating sixteen episodes of a few thousand tokens, most of the time
(a profile: 39%) goes to that copying. :class:`BufferedLayer` keeps the same tensors in a
buffer sized for the whole call (prompt and reply), writes each new token in place, and
hands attention a view of the filled part: the same numbers in the same order, so the
tokens generated are the same (``bench hf-engines`` compares them episode by episode).
"""

from __future__ import annotations

from typing import Any

from transformers.cache_utils import DynamicCache, DynamicLayer


class BufferedLayer(DynamicLayer):  # type: ignore[no-untyped-call]
    """A dynamic cache layer over a buffer of `capacity` positions (grown when exceeded)."""

    def __init__(self, capacity: int) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.capacity = capacity
        self._buffers: tuple[Any, Any] | None = None
        self._views: tuple[Any, Any] = (None, None)
        self._filled = 0

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> Any:
        """Append the new positions' keys and values; the filled part of the buffer."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if self._buffers is not None and self.keys is not self._views[0]:
            self._buffers = None  # replaced from outside (cropped, reordered): start anew
        held: tuple[Any, Any] | None = None
        if self._buffers is None:
            keys, values = self.keys, self.values
            held = (keys, values) if keys is not None and keys.numel() else None
            self._filled = held[0].shape[-2] if held is not None else 0
        end = self._filled + key_states.shape[-2]
        if self._buffers is None or end > self._buffers[0].shape[-2]:
            if held is None and self._buffers is not None:
                held = (self._buffers[0][..., : self._filled, :],
                        self._buffers[1][..., : self._filled, :])  # fmt: skip
            room = max(end, self.capacity, 2 * self._filled)
            keys = key_states.new_empty((*key_states.shape[:-2], room, key_states.shape[-1]))
            values = value_states.new_empty(
                (*value_states.shape[:-2], room, value_states.shape[-1])
            )
            if held is not None:
                keys[..., : self._filled, :] = held[0]
                values[..., : self._filled, :] = held[1]
            self._buffers = (keys, values)
        keys, values = self._buffers
        keys[..., self._filled : end, :] = key_states
        values[..., self._filled : end, :] = value_states
        self._filled = end
        self.keys, self.values = keys[..., :end, :], values[..., :end, :]
        self._views = (self.keys, self.values)
        return self.keys, self.values

    def reset(self) -> None:
        """Drop the buffer with the tensors."""
        super().reset()
        self._buffers = None
        self._filled = 0


def buffered_cache(config: Any, capacity: int) -> DynamicCache:
    """An empty dynamic cache for `config`'s model whose layers are :class:`BufferedLayer`
    of `capacity` positions (a call's widest prompt and its longest reply)."""
    cache = DynamicCache(config=config)
    cache.layers = [BufferedLayer(capacity) for _ in cache.layers]
    return cache
