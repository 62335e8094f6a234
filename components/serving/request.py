"""A run's inputs by name: one `RunRequest`, built once from a handler's positional arguments.

Gradio (and the public API) call each run handler with positional values: the pair, the prompt,
the method(s), the sidebar's settings, then the tab's own controls. Their order is declared
here once: the sidebar's settings are RunRequest's fields marked `setting` (in the order of the
dataclass, which is the order of `components.wiring.page.Page.settings_inputs`), and each
handler's parameters are an `Inputs` of field names (GENERATE, COMPARE, SWEEP, FIDELITY, GRID).
Admission (`components.serving.visitors.served`), the GPU duration (`components.serving.gpu`)
and the handlers themselves read the RunRequest, never an index into the arguments.

The values are as they arrived, unchecked: `components.wiring.settings` checks them, with
messages naming each setting. This module lives in serving, beside the two that read it first,
so serving imports nothing from wiring.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields


def _setting():
    """A sidebar setting that every model run reads (K, L, T, max new tokens, seed)."""
    return field(default=None, metadata={"setting": True})


@dataclass(frozen=True)
class RunRequest:
    pair_key: object = None
    prompt: object = None
    method: object = None  # Generate, Fidelity
    methods: object = None  # Compare, Sweep
    num_drafts: object = _setting()
    draft_length: object = _setting()
    temperature: object = _setting()
    max_new_tokens: object = _setting()
    seed: object = _setting()
    coupled: object = None  # Compare
    repeats: object = 1  # Compare, Sweep (seeds per run)
    axis: object = None  # Sweep
    values: object = None  # Sweep
    num_runs: object = None  # Fidelity's N
    num_tokens: object = None  # Fidelity's tokens compared
    grid_drafts: object = None  # Grid: the K values (rows)
    grid_lengths: object = None  # Grid: the L values (columns)
    num_prompts: object = None  # Grid: prompts of the frontier's prompt set
    grid_tokens: object = None  # Grid: new tokens per prompt
    cell_value: object = None  # Grid: what a cell shows (the best rule's E[tau], or a gain)
    rule: object = None  # Grid: the rule of a gain ("best": the best exact rule)
    baseline: object = None  # Grid: the rule a gain is over; Compare over a set: the rule the paired differences are against
    prompt_set: object = None  # Compare, Sweep: a prompt set's name (None: the prompt alone)

    @classmethod
    def from_args(cls, inputs: "Inputs", *args, **kwargs) -> "RunRequest":
        """The request a handler with parameters `inputs` was called with (`Inputs.request`)."""
        return inputs.request(args, kwargs)

    def settings_values(self) -> tuple:
        """K, L, T, max new tokens and seed, in SETTINGS order (for components.wiring.settings.settings)."""
        return tuple(getattr(self, name) for name in SETTINGS)


FIELDS = tuple(f.name for f in fields(RunRequest))
# The sidebar's settings, in the order the handlers take them and Page.settings_inputs lists them.
SETTINGS = tuple(f.name for f in fields(RunRequest) if f.metadata.get("setting"))


@dataclass(frozen=True)
class Inputs:
    """A handler's positional parameters, as RunRequest field names; the last `optional` may be left out."""

    names: tuple[str, ...]
    optional: int = 0

    def __post_init__(self):
        unknown = [name for name in self.names if name not in FIELDS]
        if unknown:
            raise ValueError(f"not RunRequest fields: {unknown}")

    def request(self, args: tuple, kwargs: dict | None = None, partial: bool = False) -> RunRequest:
        """The RunRequest of a call with `args` and `kwargs`: positional values in `names` order, or by name.

        Values past `names` (Gradio's progress, the request) and other keywords are not the run's
        and are left out. A required value missing (or given twice) raises TypeError, as the call
        itself would, unless `partial` (admission, which reads the pair only: what is there, and
        the handler then refuses the call)."""
        kwargs = kwargs or {}
        values = dict(zip(self.names, args))
        for name in self.names:
            if name in kwargs:
                if name in values and not partial:
                    raise TypeError(f"got multiple values for {name!r}")
                values.setdefault(name, kwargs[name])
        missing = [name for name in self.names[:len(self.names) - self.optional] if name not in values]
        if missing and not partial:
            raise TypeError(f"missing {', '.join(missing)}")
        return RunRequest(**values)


# Each run handler's positional parameters (its signature starts with these names, in this order;
# tests/test_run_request.py checks it, and that the public API's endpoints keep them).
GENERATE = Inputs(("pair_key", "prompt", "method", *SETTINGS))
RACE = GENERATE  # the race takes Generate's inputs: one method against plain decoding
COMPARE = Inputs(("pair_key", "prompt", "methods", *SETTINGS, "coupled", "repeats", "prompt_set", "baseline"),
                 optional=3)
SWEEP = Inputs(("pair_key", "prompt", "methods", "axis", "values", *SETTINGS, "repeats", "prompt_set"), optional=2)
FIDELITY = Inputs(("pair_key", "prompt", "method", "num_drafts", "draft_length", "temperature", "num_runs",
                   "num_tokens"))
GRID = Inputs(("pair_key", "methods", "grid_drafts", "grid_lengths", "temperature", "num_prompts", "grid_tokens",
               "cell_value", "rule", "baseline"))
