"""Delta JSON types and fields spelled as Spark's SQL (``dvlake.log.type_sql``): what SHOW CREATE TABLE and ALTER
COLUMN's messages print, checked without Spark against the spellings Spark 4 prints."""

from __future__ import annotations

from dvlake.log.type_sql import field_ddl, sql_type


def test_primitive_decimal_and_char_types() -> None:
    assert [sql_type(t) for t in ("integer", "long", "byte", "short", "timestamp_ntz", "decimal(10, 2)")] == \
        ["INT", "BIGINT", "TINYINT", "SMALLINT", "TIMESTAMP_NTZ", "DECIMAL(10,2)"]
    assert sql_type("string", {"__CHAR_VARCHAR_TYPE_STRING": "varchar(5)"}) == "VARCHAR(5)"


def test_nested_types_and_field_clauses() -> None:
    struct = {"type": "struct", "fields": [
        {"name": "x", "type": "integer", "nullable": False, "metadata": {}},
        {"name": "a b", "type": {"type": "array", "elementType": "string", "containsNull": True}, "nullable": True,
         "metadata": {"comment": "it's"}}]}
    assert sql_type(struct) == "STRUCT<x: INT NOT NULL, `a b`: ARRAY<STRING> COMMENT 'it\\'s'>"
    assert sql_type({"type": "map", "keyType": "string", "valueType": "double", "valueContainsNull": True}) == \
        "MAP<STRING, DOUBLE>"
    field = {"name": "status", "type": "string", "nullable": False,
             "metadata": {"CURRENT_DEFAULT": "'new'", "comment": "state", "delta.columnMapping.id": 3}}
    assert field_ddl(field) == "status STRING NOT NULL DEFAULT 'new' COMMENT 'state'"
