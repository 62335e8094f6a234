"""Pure functions from records to figures and HTML (and words: the app's fixed wording): no engine call,
no model, no event wiring."""
