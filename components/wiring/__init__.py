"""What the tabs share: the page's parts, value checks, named outputs, run events, errors, the
session's run, links and narrow screens; admission/ holds the pre-run checks, caps and costs, and
budgets."""
