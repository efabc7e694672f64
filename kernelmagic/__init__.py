"""kernelmagic: ``%%profile`` for PyTorch in IPython and Jupyter.

``%load_ext kernelmagic`` registers the magic. Importing this package is cheap: torch,
matplotlib and ipywidgets are imported on first use, not here.

The plain-Python API works without IPython::

    from kernelmagic import profile
    result = profile(lambda: model(x), iters=10)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Comparison", "ManyRanksResult", "OpRow", "ProfileOptions", "ProfileResult",
           "__version__", "compare", "load", "peaks", "profile", "set_peaks", "variant"]

if TYPE_CHECKING:
    from kernelmagic.api import load, profile, variant
    from kernelmagic.core.options import ProfileOptions
    from kernelmagic.core.rows import OpRow
    from kernelmagic.live.device_peaks import peaks, set_peaks
    from kernelmagic.results.compare import Comparison, compare
    from kernelmagic.results.ranks import ManyRanksResult
    from kernelmagic.results.result import ProfileResult

_LAZY = {
    "profile": "kernelmagic.api",  # the front door: imports torch only when it runs
    "ProfileOptions": "kernelmagic.core.options",
    "ProfileResult": "kernelmagic.results.result",
    "OpRow": "kernelmagic.core.rows",
    "load": "kernelmagic.api",
    "compare": "kernelmagic.results.compare",
    "Comparison": "kernelmagic.results.compare",
    "ManyRanksResult": "kernelmagic.results.ranks",
    "peaks": "kernelmagic.live.device_peaks",
    "set_peaks": "kernelmagic.live.device_peaks",
    "variant": "kernelmagic.api",  # imports no torch: @kernelmagic.variant is cheap
}

# A line magic that had our name before we loaded (restored on unload).
_replaced_line_magic: Any = None


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kernelmagic' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """Called by ``%load_ext kernelmagic``: registers ``%%profile`` and ``%profile``."""
    from kernelmagic.live import quiet_kineto_logs
    from kernelmagic.magic import ProfileMagics

    # Kineto reads its log level at the process's first profile: set it now.
    quiet_kineto_logs()
    global _replaced_line_magic
    existing = ipython.magics_manager.magics["line"].get("profile")
    if existing is not None and not isinstance(getattr(existing, "__self__", None), ProfileMagics):
        _replaced_line_magic = existing
    ipython.register_magics(ProfileMagics)


def unload_ipython_extension(ipython: Any) -> None:
    """Called by ``%unload_ext kernelmagic``: removes the magic, restores IPython's own."""
    global _replaced_line_magic
    magics = ipython.magics_manager.magics
    magics["cell"].pop("profile", None)
    magics["line"].pop("profile", None)
    if _replaced_line_magic is not None:
        magics["line"]["profile"] = _replaced_line_magic
        _replaced_line_magic = None
    ipython.magics_manager.registry.pop("ProfileMagics", None)
