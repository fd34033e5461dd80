"""Engine adapters. Every engine runs the same three steps (DESIGN.md, "Layers"):

1. row-wise mechanisms: the same design, sampler and per-batch keying everywhere; Spark
   runs them over Arrow record batches (:mod:`dpframe.engines.arrow`), polars over its
   morsels (:mod:`dpframe.pram`);
2. exact, clipped aggregates computed by the engine;
3. the release -- noise, ledger, checks, Parquet -- once, on the driver.
"""
