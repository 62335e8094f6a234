"""Handler outputs by name: a handler returns a `NamedOutputs` dataclass, and its tab wires the
names to components, so Gradio gets a dict keyed by component and no position has to line up.

A field left at SKIP is left out of the dict: Gradio keeps that component as it is. A JSON
component's floats are rounded to JSON_DIGITS significant digits (no 3.9999999999999996). Tests and
the API read the same objects (iterating gives the fields in order).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Callable, Mapping

import gradio as gr

SKIP = gr.skip()


def skip():
    """A field default: leave that component as it is."""
    return dataclasses.field(default_factory=gr.skip)


def _is_skip(value) -> bool:
    return isinstance(value, dict) and value == SKIP


class NamedOutputs:
    """Base of the per-handler output dataclasses."""

    def __iter__(self):
        return (getattr(self, f.name) for f in dataclasses.fields(self))

    def __getitem__(self, index):
        return list(self)[index]

    def __len__(self) -> int:
        return len(dataclasses.fields(self))

    def keyed(self, components: Mapping[str, gr.components.Component]) -> dict:
        return {components[f.name]: rounded(value) if isinstance(components[f.name], gr.JSON) else value
                for f in dataclasses.fields(self) if not _is_skip(value := getattr(self, f.name))}


JSON_DIGITS = 10  # significant digits a JSON output shows: 3.9999999999999996 is 4.0, and no measured digit is lost
# Kept whole: a view's `table`, the rows its downloads offer, equal to what its command line prints
# (components.wiring.downloads).
UNROUNDED = ("table",)


def rounded(value):
    """`value` with every float to JSON_DIGITS significant digits (dicts, lists and tuples walked; NaN kept;
    a dict's UNROUNDED keys left as they are)."""
    if isinstance(value, float):
        return float(f"{value:.{JSON_DIGITS}g}") if value == value else value
    if isinstance(value, dict):
        return {key: item if key in UNROUNDED else rounded(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(item) for item in value]
    return value


def each_result(fn: Callable, convert: Callable) -> Callable:
    """`fn` (a function or a generator) with `convert` applied to every result it returns or yields."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def stream(*args, **kwargs):
            for item in fn(*args, **kwargs):
                yield convert(item)
        return stream

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return convert(fn(*args, **kwargs))
    return call


def keyed(fn: Callable, components: Mapping[str, gr.components.Component]) -> Callable:
    """`fn` (a function or a generator of NamedOutputs) with its results keyed by component."""
    return each_result(fn, lambda result: result.keyed(components) if isinstance(result, NamedOutputs) else result)


def wire(listener, fn: Callable, inputs, outputs: Mapping[str, gr.components.Component], **kwargs):
    """`listener(fn, inputs, outputs)` with fn's NamedOutputs keyed by the named components."""
    return listener(keyed(fn, outputs), inputs, list(outputs.values()), **kwargs)
