"""Keep pandas out of the log-only commands: it is about half of their start-up, and they never use it.

pyarrow asks whether pandas is installed the first time it converts a Python value (``pa.array``,
``pa.scalar``, and every compute call given a Python scalar: its ``_is_array_like`` check), and
asking means importing it, about a second on a busy 2-core machine. ``history``, ``detail``,
``files``, ``dv`` and ``vacuum`` build everything with Arrow, numpy and plain Python, so for them
pandas is made unimportable while the command runs: pyarrow then records that pandas is absent
and converts as it would without it (the same results for lists, numpy arrays and scalars).

Only when nothing has imported pandas yet (a process that already has it loses nothing by keeping
it), and undone afterwards: a later ``import pandas`` in the same process works, and pyarrow imports
it on the first call that needs pandas itself (``to_pandas``, ``from_pandas``). pyarrow keeps its
answer for its quick check, though: a pandas Series later given to ``pa.array`` is converted as a
plain sequence until one of those calls ran. So the CLI blocks pandas only in a process of its own
(the ``dvlake`` console script, ``python -m dvlake.cli``), never when a program calls ``main(args)``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

BLOCKED = ("pandas",)


class _Refuse(MetaPathFinder):
    """An import finder that answers ``ModuleNotFoundError`` for the blocked packages.

    (A ``None`` in ``sys.modules`` is not enough: Cython's import, which pyarrow uses, returns that
    None as the module instead of raising ImportError.)
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname.split(".", 1)[0] in self.names:
            raise ModuleNotFoundError(f"{fullname} is not imported by dvlake's log-only commands", name=fullname)
        return None


@contextmanager
def without_pandas() -> Iterator[None]:
    """Make ``import pandas`` fail inside the block, unless pandas is loaded already."""
    blocked = [name for name in BLOCKED if name not in sys.modules]
    if not blocked:
        yield
        return
    finder = _Refuse(blocked)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
