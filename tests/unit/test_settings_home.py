"""Every session key dvlake reads (``spark.dvlake.…``, delta-spark's ``spark.databricks.…``) is defined once, in
``dvlake/config.py``: a key spelled in another module is a second definition that can drift from the first.

Prose may name a key (docstrings, messages, comments): only a string that *is* a key is a definition."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dvlake
from dvlake import config

PACKAGE = Path(dvlake.__file__).resolve().parent
HOME = PACKAGE / "config.py"
KEY = re.compile(r"spark\.(?:dvlake|databricks)\.[A-Za-z0-9_.]*")


def _keys_in(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and KEY.fullmatch(node.value)]


def test_no_module_but_config_spells_a_session_key() -> None:
    spelled = {f"{path.relative_to(PACKAGE.parent)}:{line}: {key}"
               for path in sorted(PACKAGE.rglob("*.py")) if path != HOME for line, key in _keys_in(path)}
    assert spelled == set(), "define the key in dvlake/config.py and import it"


def test_config_defines_each_key_once() -> None:
    keys = [key for _, key in _keys_in(HOME)]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert len(keys) >= 39  # 18 before issue 42; 19 moved in from 14 modules, the debug key and the defaults prefix


def test_the_check_sees_a_spelled_key(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Mentions spark.dvlake.debug in prose."""\nX = "spark.dvlake.debug"\nY = f"{X}=true"\n')
    assert _keys_in(module) == [(2, "spark.dvlake.debug")]
    assert config.DEBUG_CONF == "spark.dvlake.debug"
    assert config.NATIVE_SCAN == "spark.dvlake.scan.native"
