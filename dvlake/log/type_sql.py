"""Delta's JSON types and fields as Spark prints them in SQL (``DataType.sql``, ``StructField.toDDL``).

Messages that quote a type (``from INT to BIGINT``) and SHOW CREATE TABLE's column list both need Spark's spelling
of a schema the log stores as JSON; this is the one place that spelling is written, and it needs no Spark.
"""

from __future__ import annotations

from typing import Any

from dvlake.log.sql_dialect import quote_identifier

_SQL_NAMES = {"byte": "TINYINT", "short": "SMALLINT", "integer": "INT", "long": "BIGINT", "float": "FLOAT",
              "double": "DOUBLE", "string": "STRING", "binary": "BINARY", "boolean": "BOOLEAN", "date": "DATE",
              "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ", "variant": "VARIANT", "void": "VOID"}
#: the field metadata key under which Spark keeps a CHAR(n)/VARCHAR(n) column's declared type (stored as STRING)
CHAR_VARCHAR_KEY = "__CHAR_VARCHAR_TYPE_STRING"
#: the field metadata key of a column's default expression (``allowColumnDefaults``)
DEFAULT_KEY = "CURRENT_DEFAULT"


def escaped(text: str) -> str:
    """Text for a single-quoted SQL literal (Spark's ``escapeSingleQuotedString``)."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def sql_type(data_type: Any, metadata: dict[str, Any] | None = None) -> str:
    """A Delta JSON type as SQL: ``integer`` → ``INT``, ``decimal(10,2)`` → ``DECIMAL(10,2)``, structs with their
    fields (``STRUCT<a: INT NOT NULL>``); a CHAR/VARCHAR column (``metadata``) as declared."""
    if metadata and CHAR_VARCHAR_KEY in metadata:
        return str(metadata[CHAR_VARCHAR_KEY]).upper()
    if isinstance(data_type, str):
        if data_type.startswith("decimal"):
            return data_type.upper().replace(" ", "")
        return _SQL_NAMES.get(data_type, data_type.upper())
    kind = data_type.get("type")
    if kind == "struct":
        return "STRUCT<" + ", ".join(field_ddl(f, separator=": ") for f in data_type["fields"]) + ">"
    if kind == "array":
        return f"ARRAY<{sql_type(data_type['elementType'])}>"
    if kind == "map":
        return f"MAP<{sql_type(data_type['keyType'])}, {sql_type(data_type['valueType'])}>"
    return str(kind).upper()


def field_ddl(field: dict[str, Any], separator: str = " ") -> str:
    """One field as DDL: name, type, NOT NULL, DEFAULT, COMMENT (column mapping's metadata is not DDL)."""
    metadata = field.get("metadata") or {}
    text = f"{quote_identifier(field['name'])}{separator}{sql_type(field['type'], metadata)}"
    if not field.get("nullable", True):
        text += " NOT NULL"
    if DEFAULT_KEY in metadata:
        text += f" DEFAULT {metadata[DEFAULT_KEY]}"
    if "comment" in metadata:
        text += f" COMMENT '{escaped(str(metadata['comment']))}'"
    return text
