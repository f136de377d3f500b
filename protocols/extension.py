"""The native extension ``amcast_native``, used only where it matches this package.

The package and the extension are built apart (``make rust`` builds the extension into
the virtual environment; the ``amcast-native`` wheel installs it on its own), so one may
be older than the other: a package that relies on a surface or a behaviour the
extension does not have would run it all the same and misbehave in ways no error names
(a build older than the view records it decodes refuses them as malformed). So the
extension says which interface it implements (``amcast_native.INTERFACE``, an integer
the crate bumps with every change the package relies on) and this package uses it only
where that is ``INTERFACE``. A mismatched build counts as absent: ``AMCAST_CORE=auto``
(or unset) runs the pure-Python core, and ``stale`` says why and how to fix it (what
``amcastd`` logs when it starts: this layer does no I/O); ``AMCAST_CORE=native``
refuses to start with that reason (``ImportError``).

Every selection of a native part (``wire.native``, ``ordering.native``) loads the
extension through ``load``.
"""

from __future__ import annotations

from functools import cache
from types import ModuleType

INTERFACE = 6
"""The interface of ``amcast_native`` this package needs (``native/src/lib.rs``'s
``INTERFACE``)."""


@cache
def _probe() -> tuple[ModuleType | None, str | None, bool]:
    try:
        import amcast_native
    except ImportError as exc:
        return None, f"the extension amcast_native is not built (make rust): {exc}", False
    found = getattr(amcast_native, "INTERFACE", 0)
    if found != INTERFACE:
        problem = (f"the extension amcast_native implements interface {found}, this amcast "
                   f"needs {INTERFACE}: it is {'older' if found < INTERFACE else 'newer'} "
                   "than the package (rebuild it with make rust, or install the "
                   "amcast-native wheel of this release)")
        return None, problem, True
    return amcast_native, None, True


def load() -> ModuleType | None:
    """The extension module where it is built and implements ``INTERFACE``, else None."""
    return _probe()[0]


def problem() -> str | None:
    """Why ``load`` gives no extension (not built, or another interface); None where it
    gives one."""
    return _probe()[1]


def stale() -> str | None:
    """Why a built extension is not used (another interface), None where none is built
    or the built one is used: what ``amcastd`` warns of when it starts."""
    module, why, built = _probe()
    return why if built and module is None else None
