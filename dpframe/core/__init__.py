"""The privacy core: every privacy rule of dpframe, each in exactly one place.

No polars here (numpy only where a rule needs it, imported on first use), so both
engines and every entry point share the same rules:

* :mod:`~dpframe.core.constraints` -- every parameter's constraint, declared once;
* :mod:`~dpframe.core.budget` -- exact decimal arithmetic of budgets, splitting an
  epsilon, rounding a charge up;
* :mod:`~dpframe.core.grid` -- the power-of-two output grid;
* :mod:`~dpframe.core.neighbours` -- the neighbour relations and what each permits;
* :mod:`~dpframe.core.sensitivity` -- sensitivities from public bounds, both relations;
* :mod:`~dpframe.core.values` -- which data values can be released (no null, NaN, inf);
* :mod:`~dpframe.core.randomness` -- the secure random source and seeds;
* :mod:`~dpframe.core.accountant` -- budgets, charges and the ledger;
* :mod:`~dpframe.core.executor` -- the one path: check, charge, draw, record;
* :mod:`~dpframe.core.files` -- atomic file writes.

``docs/architecture.md`` says where each rule lives and how to add a mechanism.
"""
