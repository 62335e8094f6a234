"""Admission: whether a run may start, and what it may ask for. The estimates of what a run costs
(`cost`), the largest value each control may take (`caps`), the refusal before any model call of a
run whose estimate does not fit (`pre_start`) with its one-click fixes on the page (`fix_buttons`),
a K x L grid's sizing (`grid_size`), and what a budget stop answers with (`budget_stops`)."""
