"""One module per tab, each building its tab and wiring its events (generate, explorer, compare, sweep,
fidelity, lesson, playground, about, sidebar), and what runs the engine for a tab (compare_run, lesson_try)."""
