"""The polars API: thin adapters from polars objects to the release core.

* :mod:`~dpframe.polars.namespace` -- ``.dp`` / ``.dpf``, a forwarding veneer;
* :mod:`~dpframe.polars.release` -- the release object every frame-level release shares;
* :mod:`~dpframe.polars.column` -- ``.dp.laplace``, ``.dp.truncated_laplace``;
* :mod:`~dpframe.polars.grouped` -- ``dpframe.group_by(...).agg(...)``;
* :mod:`~dpframe.polars.frame` -- covariance matrices, proportion vectors;
* :mod:`~dpframe.polars.pram` -- ``.dp.pram``, microdata releases, DP priors, estimation
  (``dpframe.pram``);
* :mod:`~dpframe.polars.runner` -- ``dpframe.collect``: queries holding ``.dp``
  expressions;
* :mod:`~dpframe.polars.io` -- Parquet with provenance;
* :mod:`~dpframe.polars.summary` -- ``dpframe.summarize``.

No maths here: the kernels are :mod:`dpframe.mechanisms`, the rules :mod:`dpframe.core`.
"""
