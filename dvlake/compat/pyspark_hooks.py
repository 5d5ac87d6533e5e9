"""The one place dvlake replaces PySpark methods: a registry of patches that can be checked and undone.

``dvlake.configure_spark`` gives ``format("delta")``, catalog names and ``spark.sql`` their Delta meaning by
wrapping a few methods of PySpark's classes (``faces.py`` says why a Python data source cannot). Patching a
library's classes is fragile in three ways, and this module answers each:

* **PySpark changes a signature.** A wrapper re-declares the parameters of the method it replaces so it can
  forward them; if a new PySpark adds, renames or reorders one, a silent wrapper would drop or shift the
  user's argument. :func:`patch` compares the wrapper's declared parameters with the installed method's at
  install time and refuses, naming the method and both signatures, before anything is replaced.
* **Nobody can take the patches back.** Every original is recorded; :func:`uninstall` restores them all.
* **dvlake calls the methods it wrapped.** While dvlake itself runs (:func:`inside_dvlake`), the wrappers
  hand calls straight to PySpark, so a ``spark.sql`` issued by dvlake never loops back into ``dvlake.sql``.
  :func:`original` gives the un-patched method when dvlake needs it explicitly.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from dvlake.errors import UnsupportedEnvironmentError

_ABSENT = object()  # the class did not define the name itself (it inherited it)


class PySparkIncompatibleError(UnsupportedEnvironmentError):
    """The installed PySpark's method no longer has the parameters dvlake's wrapper forwards."""

    error_class = "DVLAKE_PYSPARK_INCOMPATIBLE"


@dataclass(frozen=True)
class Patch:
    """One replaced method: where, what was there (``_ABSENT`` when inherited) and what ran before."""

    owner: type
    name: str
    own_attribute: Any
    original: Callable[..., Any]


_patches: list[Patch] = []
_originals: dict[tuple[type, str], Callable[..., Any]] = {}
_local = threading.local()


def patch(owner: type, name: str, wrapper: Callable[..., Any]) -> None:
    """Replace ``owner.name`` by ``wrapper`` after checking that the wrapper forwards the method's parameters.

    A wrapper that takes ``(self, *args, **kwargs)`` forwards anything and is not checked.

    Raises:
        PySparkIncompatibleError: the installed method's parameters differ from the ones the wrapper declares.
    """
    current = getattr(owner, name)
    check_forwarding(owner, name, current, wrapper)
    wrapper.__dvlake_original__ = current  # type: ignore[attr-defined]
    _patches.append(Patch(owner, name, owner.__dict__.get(name, _ABSENT), current))
    _originals.setdefault((owner, name), current)
    setattr(owner, name, wrapper)


def remember(owner: type, name: str, original: Callable[..., Any]) -> None:
    """Record ``original`` as ``owner.name``'s un-patched method (for patches made outside this module)."""
    _originals.setdefault((owner, name), original)


def original(owner: type, name: str) -> Callable[..., Any]:
    """``owner.name`` as PySpark defines it: the first recorded original along the MRO, else the current one."""
    for cls in owner.__mro__:
        found = _originals.get((cls, name))
        if found is not None:
            return found
    return getattr(owner, name)


def installed() -> bool:
    """Whether any patch is in place."""
    return bool(_patches)


def uninstall() -> int:
    """Restore every patched method (last patch first); returns how many were restored."""
    count = len(_patches)
    while _patches:
        p = _patches.pop()
        if p.own_attribute is _ABSENT:
            delattr(p.owner, p.name)
        else:
            setattr(p.owner, p.name, p.own_attribute)
        if _originals.get((p.owner, p.name)) is p.original:
            del _originals[(p.owner, p.name)]
    return count


@contextlib.contextmanager
def inside_dvlake() -> Iterator[None]:
    """Mark this thread as running dvlake's own code: the wrappers pass its calls to PySpark unchanged."""
    previous = getattr(_local, "inside", False)
    _local.inside = True
    try:
        yield
    finally:
        _local.inside = previous


_call_sites_lock = threading.Lock()


@dataclass
class _CallSitesOff:
    """How many commands run without call-site capture now, and PySpark's flag from before the first of them."""

    depth: int = 0
    saved: Any = None


_call_sites_off = _CallSitesOff()


@contextlib.contextmanager
def without_call_sites() -> Iterator[None]:
    """Build dvlake's own expressions without PySpark's call-site capture.

    With ``spark.python.sql.dataFrameDebugging.enabled`` (on by default) every PySpark Column and DataFrame
    function records the Python line that called it in the JVM: five more driver round trips per call on a
    classic session. A MERGE builds a few hundred Columns; two thirds of its ~5,900 round trips were this capture
    (over a second on the benchmark machine), and the line it records is inside dvlake, never the user's (the
    user's own Columns carry theirs already). PySpark reads the setting once into a module flag; this turns the
    flag off while commands run — counted, so overlapping commands on other threads restore it only when the
    last one ends — and puts PySpark's value back. Meanwhile other threads' Columns skip the capture too (their
    error messages lose the call-site line, nothing else). A PySpark without that flag is left alone."""
    import pyspark.errors.utils as origin

    if not hasattr(origin, "_enable_debugging_cache"):
        yield
        return
    with _call_sites_lock:
        if _call_sites_off.depth == 0:
            _call_sites_off.saved = origin._enable_debugging_cache
        _call_sites_off.depth += 1
        setattr(origin, "_enable_debugging_cache", False)  # noqa: B010 - a private module flag; mypy knows it as None
    try:
        yield
    finally:
        with _call_sites_lock:
            _call_sites_off.depth -= 1
            if _call_sites_off.depth == 0:
                setattr(origin, "_enable_debugging_cache", _call_sites_off.saved)  # noqa: B010


def is_inside_dvlake() -> bool:
    """Whether this thread is inside :func:`inside_dvlake` (the one re-entry guard of every hook)."""
    return bool(getattr(_local, "inside", False))


def check_forwarding(owner: type, name: str, current: Callable[..., Any], wrapper: Callable[..., Any]) -> None:
    """Refuse a wrapper whose named parameters are not exactly the installed method's, in order.

    Raises:
        PySparkIncompatibleError: names, order, or a ``**kwargs`` the wrapper forwards, differ.
    """
    declared = _parameters(inspect.signature(wrapper, follow_wrapped=False))
    if declared is None:
        return
    try:
        found = _parameters(inspect.signature(current)) or ([], False)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to compare against
        return
    if declared != found:
        import pyspark

        raise PySparkIncompatibleError(
            f"dvlake cannot hook {owner.__module__}.{owner.__qualname__}.{name} in PySpark {pyspark.__version__}: "
            f"dvlake forwards the parameters {_show(declared)}, the installed method takes {_show(found)}. "
            "Use the PySpark version dvlake supports (pyproject.toml), or call dvlake's functions directly "
            "(dvlake.read, dvlake.write, dvlake.sql, dvlake.session(spark)) without configure_spark.")


def _parameters(sig: inspect.Signature) -> tuple[list[str], bool] | None:
    """(named parameters after ``self``, whether ``**kwargs`` is taken); None for a pass-through wrapper."""
    params = list(sig.parameters.values())[1:]
    kinds = {p.kind for p in params}
    if inspect.Parameter.VAR_POSITIONAL in kinds and inspect.Parameter.VAR_KEYWORD in kinds:
        return None
    named = [p.name for p in params if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    return named, inspect.Parameter.VAR_KEYWORD in kinds


def _show(params: tuple[list[str], bool]) -> str:
    named, var_kw = params
    return "(" + ", ".join(named + (["**kwargs"] if var_kw else [])) + ")"
