"""The base layer: events, rows, names, units, errors and options (no torch, no numpy-free promise).

Everything above imports from here; nothing here imports from another kernelmagic package.
"""
