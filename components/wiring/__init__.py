"""What the tabs share: the page's parts, value checks, pre-run checks, caps and costs, budgets, named
outputs, run events, errors, the session's run, links and narrow screens."""
