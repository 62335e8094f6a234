"""One RunRequest (components/serving/request.py): a run's inputs by name, their order declared once.

The sidebar's settings are RunRequest's `setting` fields, in order, and Page.settings_inputs lists
the components of those names; each public run endpoint's inputs are its handler's `Inputs`, name
for name; a RunRequest round-trips from positional arguments; and the GPU duration read from a
RunRequest is the one the positional call (what ZeroGPU calls) gives, on the page's defaults.
"""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

import app
from components.serving import gpu
from components.serving.request import COMPARE, FIDELITY, FIELDS, GENERATE, GRID, SETTINGS, SWEEP, Inputs, RunRequest
from components.tabs import compare, fidelity, generate, grid_view, sweep
from components.wiring.page import Page, Sidebar

pytestmark = pytest.mark.unit

HANDLERS = {"generate": (generate.generate_stream, GENERATE), "compare": (compare.compare, COMPARE),
            "sweep": (sweep.run_sweep, SWEEP), "fidelity": (fidelity.run_fidelity, FIDELITY),
            "grid": (grid_view.run_grid, GRID)}


@pytest.fixture(scope="module")
def built():
    """(the demo, its Page), as app.build_demo makes them."""
    pages = []

    def keep(*args, **kwargs):
        pages.append(Page(*args, **kwargs))
        return pages[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(app, "Page", keep)
        demo = app.build_demo()
    return demo, pages[0]


def component_names(page: Page) -> dict[int, str]:
    """Each run input component, by the RunRequest field it fills."""
    s, tabs = page.sidebar, page.tab_handles
    named = {"pair_key": s.pair, "prompt": page.prompt, "method": s.method, "methods": s.methods,
             **{name: getattr(s, name) for name in SETTINGS}, "coupled": tabs.compare.coupled,
             "axis": tabs.sweep.axis, "values": tabs.sweep.values, "num_runs": tabs.fidelity.num_runs,
             "num_tokens": tabs.fidelity.num_tokens, **tabs.grid.inputs}
    names = {id(component): name for name, component in named.items()}
    names[id(tabs.compare.repeats)] = names[id(tabs.sweep.repeats)] = "repeats"
    names[id(tabs.compare.prompt_set)] = names[id(tabs.sweep.prompt_set)] = "prompt_set"
    names[id(tabs.compare.baseline)] = "baseline"  # Compare's and the Grid's own dropdowns fill one field
    return names


def test_the_settings_are_runrequest_fields_in_the_order_of_settings_inputs(built):
    _, page = built
    assert SETTINGS == ("num_drafts", "draft_length", "temperature", "max_new_tokens", "seed")
    assert [name for name in FIELDS if name in SETTINGS] == list(SETTINGS)
    assert set(SETTINGS) <= {f.name for f in fields(Sidebar)}
    inputs = page.settings_inputs
    assert inputs == [getattr(page.sidebar, name) for name in SETTINGS]
    assert [component.label for component in inputs] == ["K (drafts)", "L (draft length)", "T (temperature)",
                                                         "Max new tokens", "Seed"]


@pytest.mark.parametrize("api_name", list(HANDLERS))
def test_every_run_endpoint_takes_its_inputs_in_its_handlers_order(built, api_name):
    demo, page = built
    handler, inputs = HANDLERS[api_name]
    names = component_names(page)
    (event,) = [fn for fn in demo.fns.values() if fn.api_name == api_name]
    assert [names[id(component)] for component in event.inputs] == list(inputs.names)
    parameters = list(inspect.signature(handler).parameters)  # through the decorators (functools.wraps)
    assert parameters[:len(inputs.names)] == list(inputs.names)
    assert gpu.__dict__[f"{api_name}_cost"].inputs is inputs


@pytest.mark.parametrize("inputs", [GENERATE, COMPARE, SWEEP, FIDELITY, GRID])
def test_a_runrequest_round_trips_from_the_positional_arguments(inputs):
    args = tuple(f"value of {name}" for name in inputs.names)
    run = RunRequest.from_args(inputs, *args, "progress", "request")  # Gradio's extras are not the run's
    assert tuple(getattr(run, name) for name in inputs.names) == args
    assert run == inputs.request(args[:2], dict(zip(inputs.names[2:], args[2:]), progress="p"))  # by name too
    assert all(getattr(run, name) == getattr(RunRequest(), name) for name in FIELDS if name not in inputs.names)
    if SETTINGS[0] in inputs.names and SETTINGS[-1] in inputs.names:
        assert run.settings_values() == tuple(f"value of {name}" for name in SETTINGS)
    required = len(inputs.names) - inputs.optional
    with pytest.raises(TypeError, match="missing"):
        inputs.request(args[:required - 1])
    with pytest.raises(TypeError, match="multiple values"):
        inputs.request(args, {"pair_key": "again"})
    assert inputs.request(args[:1], partial=True).pair_key == args[0]  # admission reads the pair alone
    if inputs.optional:
        assert inputs.request(args[:required]).repeats == 1  # the handlers' default
    with pytest.raises(ValueError, match="not RunRequest fields"):
        Inputs(("pair_key", "speed"))


@pytest.mark.parametrize("pair_key", ["default", "smollm2-360m", "some/target, some/draft", "toy"])
def test_the_duration_from_a_runrequest_is_the_positional_calls_on_the_page_defaults(built, pair_key):
    demo, _ = built
    for api_name, (_, inputs) in HANDLERS.items():
        (event,) = [fn for fn in demo.fns.values() if fn.api_name == api_name]
        args = (pair_key, *(component.value for component in event.inputs[1:]))  # what the page sends first
        positional = gpu.__dict__[f"{api_name}_cost"]
        runs = positional.runs(RunRequest(**dict(zip(inputs.names, args))))
        assert runs == positional(*args)
        asked = gpu.request_seconds(positional, args, {})  # what ZeroGPU's duration asks
        assert asked == (None if runs is None else gpu.seconds(runs))
        assert (runs is None) == (pair_key == "toy")
        if api_name == "generate" and pair_key == "default":
            assert asked == 16  # the page's first Generate, as the old positional formula asked for it
