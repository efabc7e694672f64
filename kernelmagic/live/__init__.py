"""Everything that drives torch: the runner, the profiler session and what reads it.

The only package that imports torch's private modules and attributes (``torch._C``,
``torch._dynamo``, ``torch.profiler._memory_profiler``, ...); ``tests/test_layers.py`` fails
when one appears anywhere else.
"""
