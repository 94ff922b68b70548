"""Measuring: what a workload costs when it really runs — peak memory, latency, per-layer latency.

Each measurement owns its workload's repeats and never reuses the recording pass's hooks
(:mod:`.memory`, :mod:`.latency` over :mod:`.timing`, :mod:`.layer_latency` over
:mod:`.call_capture`, comparisons in :mod:`.benchmarks`).
"""
