"""Everything that makes the shipped drafts: data, prompt sets and training. Never imported at run time."""
