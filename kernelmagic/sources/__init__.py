"""Where events come from: a live torch session or a trace file (see kernelmagic/core/events.py)."""
