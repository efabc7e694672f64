"""Every view of a profile, each a pure function of an ``EventTable`` (numpy only).

The flow: sources (``kernelmagic/sources/``: a live session, a trace file) -> events
(``kernelmagic/core/events.py``: one ``EventTable``) -> views (this package) -> result
(``ProfileResult``, assembled by ``kernelmagic/results/builder.py: build_result``) ->
renderers. No view imports torch, nor anything above this layer.
"""
