#!/usr/bin/env python3
"""Write the Python client's models (`src/telltale_client/_schema.py`) from the OpenAPI document
the TypeScript client's types come from (`clients/typescript/openapi.json`), so that the two
clients cannot drift from the API, nor from each other.

    python3 clients/python/scripts/generate_models.py [--input OPENAPI_JSON] [--output PY_FILE]

Each schema of `components.schemas` becomes a frozen stdlib dataclass: snake_case fields, the
`required` properties first and in the document's order, the others defaulting to None, and a
`from_json` classmethod that reads the camelCase JSON (date-time strings as `datetime`, arrays
as tuples, `$ref`s as the referenced class, enums as `str`). What the document cannot say is in
three small tables below, each checked against it: the client's names for the schemas it
returns as they are (`PYTHON_NAMES`; the document's name stays as an alias), the `finished`
property of runs and deletions (`UNFINISHED_STATUS`) and the order the client's optional fields
had (`OPTIONAL_ORDER`). Anything in the document this script does not know how to map stops it
with an error rather than being guessed.

Why a script and not a library: datamodel-code-generator (the well-kept choice, tried at 0.89)
writes dataclasses without the camelCase names or any parsing (no `from_json`, no `datetime`
from a string), as `list` fields, with `Enum` classes where the client has `str` (so
`run.status == "running"` would turn false), with fields in alphabetical order (which moves the
positional arguments of `SessionRow`), and targets Python 3.10 at the least where the client
supports 3.9. openapi-python-client writes a whole client on attrs and dateutil, and
dataclasses-json, dataclass-wizard or pydantic would be runtime dependencies beyond httpx. What
the client needs from the document is this small mapping, kept here with the standard library
only.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
DOCUMENT = HERE.parents[1] / "typescript" / "openapi.json"
OUTPUT = HERE.parent / "src" / "telltale_client" / "_schema.py"
COMMAND = "python3 clients/python/scripts/generate_models.py"

# The client's public names for the schemas it returns unchanged (kept from before the models
# were generated); the document's names are written as aliases of them.
PYTHON_NAMES = {
    "LookupRow": "SessionRow",
    "ProvisionResult": "ProvisionedSurvey",
    "ScoringFailureView": "ScoringFailure",
    "ScoringRunView": "ScoringRun",
    "SessionDeletionView": "SessionDeletion",
    "DeskSessionView": "DeskSession",
    "DeskSessionsEnvelope": "SessionsPage",
    "EvidenceLink": "Link",
}

# Schemas whose `status` enum has one value that is not final: they get a `finished` property
# (status is anything but that value). Generation fails if the value leaves the enum.
UNFINISHED_STATUS = {
    "ScoringRunView": "running",
    "SessionDeletionView": "pending",
}

# The order the client's classes had for optional properties (their positional arguments and
# repr), where it is not the document's (which sorts properties by name); properties not named
# follow in the document's order. Generation fails if a name is not an optional property.
OPTIONAL_ORDER = {
    "ScoringRunView": [
        "error", "completedAt", "updatedAt", "cancelRequestedAt", "canceledAt", "canceledBy",
    ],
}

HEADER = f'''"""The integration API's schemas as typed, immutable values (field names in Python style).

Generated from clients/typescript/openapi.json by
`{COMMAND}`; do not edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Optional, Tuple


def _required_time(value: Any, field: str) -> datetime:
    time = _time(value)
    if time is None:
        raise ValueError(f"the response lacks {{field}}")
    return time


def _time(value: Any) -> Optional[datetime]:
    if value is None:
        return None
    # `fromisoformat` accepts a trailing `Z` only from Python 3.11 on.
    text = str(value)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text)
'''


class Unsupported(Exception):
    pass


def snake(name: str) -> str:
    """`collectorApiUrl` -> `collector_api_url`, `human-like` -> `human_like`; a Python keyword
    gets a trailing underscore."""
    out = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    out = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", out).lower().replace("-", "_")
    if not out.isidentifier():
        raise Unsupported(f"property {name!r} makes no Python name")
    return out + "_" if keyword.iskeyword(out) else out


def q(text: str) -> str:
    """A Python string literal in double quotes (JSON's escapes are Python's too)."""
    return json.dumps(text)


def class_name(schema: str) -> str:
    return PYTHON_NAMES.get(schema, schema)


def ref_name(ref: str) -> str:
    prefix = "#/components/schemas/"
    if not ref.startswith(prefix):
        raise Unsupported(f"$ref {ref!r} is not a component schema")
    return class_name(ref[len(prefix):])


class Field:
    """One property: its Python annotation and the expression that reads it from `data`."""

    SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}

    def __init__(self, schema: str, prop: str, spec: Dict[str, Any], required: bool):
        self.prop = prop
        self.name = snake(prop)
        self.required = required
        self.where = f"{schema}.{prop}"
        # utoipa writes an optional object as `oneOf: [null, $ref]`: a nullable `$ref`.
        options = spec.get("oneOf")
        forced_null = False
        if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
            other = next(option for option in options if option != {"type": "null"})
            if "$ref" in other:
                spec = {"$ref": other["$ref"], "description": other.get("description", spec.get("description"))}
                forced_null = True
        for unknown in ("oneOf", "anyOf", "allOf", "not"):
            if unknown in spec:
                raise Unsupported(f"{self.where}: {unknown}")
        nullable, kind = self._kind(spec, self.where)
        nullable = nullable or forced_null
        self.enum = [v for v in spec.get("enum", []) if v is not None]
        self.description = spec.get("description")
        # Only a required, non-null property is read strictly (`data[...]`, no None).
        strict = required and not nullable
        value = f"data.get({q(prop)})"
        if kind == "ref":
            cls = ref_name(spec["$ref"])
            self.type, self.read = cls, f"{cls}.from_json(data[{q(prop)}])"
            if not strict:
                self.type, self.read = f"Optional[{cls}]", f"_optional({cls}.from_json, {value})"
        elif kind == "string" and spec.get("format") == "date-time":
            self.type, self.read = "datetime", f"_required_time({value}, {q(prop)})"
            if not strict:
                self.type, self.read = "Optional[datetime]", f"_time({value})"
        elif kind == "array":
            item, convert = self._item(spec.get("items", {}))
            to_tuple = (
                "tuple" if convert == "item" else f"lambda items: tuple({convert} for item in items)"
            )
            self.type = f"Tuple[{item}, ...]"
            self.read = (
                f"tuple(data[{q(prop)}])" if convert == "item"
                else f"tuple({convert} for item in data[{q(prop)}])"
            )
            if not strict:
                self.type = f"Optional[{self.type}]"
                self.read = f"_optional({to_tuple}, {value})"
        elif kind == "any":
            self.type, self.read = "Any", (f"data[{q(prop)}]" if required else value)
        elif kind in self.SCALARS:
            python = self.SCALARS[kind]
            # Strings are taken as sent; numbers and booleans are converted, as JSON may not.
            convert = None if kind == "string" else python
            if strict:
                self.type = python
                self.read = f"{convert}(data[{q(prop)}])" if convert else f"data[{q(prop)}]"
            else:
                self.type = f"Optional[{python}]"
                self.read = f"_optional({convert}, {value})" if convert else value
        else:
            raise Unsupported(f"{self.where}: type {kind!r}")

    @staticmethod
    def _kind(spec: Dict[str, Any], where: str) -> Tuple[bool, str]:
        """Whether null is allowed, and the one other type: a JSON type, `ref` or `any`."""
        if "$ref" in spec:
            return False, "ref"
        kinds = spec.get("type")
        if isinstance(kinds, str):
            kinds = [kinds]
        if not kinds:
            if not set(spec) - {"description"}:
                return True, "any"
            raise Unsupported(f"{where}: no type ({sorted(spec)})")
        rest = [k for k in kinds if k != "null"]
        if len(rest) != 1:
            raise Unsupported(f"{where}: type {kinds}")
        return "null" in kinds, rest[0]

    def _item(self, items: Dict[str, Any]) -> Tuple[str, str]:
        """An array's item: its annotation and the expression that converts `item`."""
        nullable, kind = self._kind(items, self.where + "[]")
        if kind == "ref":
            cls = ref_name(items["$ref"])
            return cls, f"{cls}.from_json(item)"
        if kind == "any":
            return "Any", "item"
        if kind == "array" and not nullable:
            # An array of arrays of scalars (a path's `[t, x, y]` points): tuples of tuples.
            inner_nullable, inner = self._kind(items.get("items", {}), self.where + "[][]")
            if inner_nullable or inner not in self.SCALARS:
                raise Unsupported(f"{self.where}: array of {items}")
            python = self.SCALARS[inner]
            convert = "value" if inner == "string" else f"{python}(value)"
            return f"Tuple[{python}, ...]", f"tuple({convert} for value in item)"
        if nullable or kind not in self.SCALARS or items.get("format") == "date-time":
            raise Unsupported(f"{self.where}: array of {items}")
        python = self.SCALARS[kind]
        return python, "item" if kind == "string" else f"{python}(item)"


def render_class(schema: str, spec: Dict[str, Any]) -> str:
    if spec.get("type") != "object" or "properties" not in spec:
        raise Unsupported(f"{schema}: not an object with properties")
    props: Dict[str, Any] = spec["properties"]
    required: List[str] = spec.get("required", [])
    missing = [p for p in required if p not in props]
    if missing:
        raise Unsupported(f"{schema}: required {missing} not among its properties")
    optional = [p for p in props if p not in required]
    first = OPTIONAL_ORDER.get(schema, [])
    stray = [p for p in first if p not in optional]
    if stray:
        raise Unsupported(f"OPTIONAL_ORDER: not optional properties of {schema}: {stray}")
    order = required + first + [p for p in optional if p not in first]
    fields = [Field(schema, p, props[p], p in required) for p in order]
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise Unsupported(f"{schema}: two properties make the same Python name ({names})")

    reserved = {"from_json", "finished"} & set(names)
    if reserved:
        raise Unsupported(f"{schema}: a property's Python name is a method's: {sorted(reserved)}")
    name = class_name(schema)
    lines = ["", "", "@dataclass(frozen=True)", f"class {name}:"]
    doc = spec.get("description") or f"The document's `{schema}`."
    if name != schema:
        doc = doc.rstrip() + f" (`{schema}` in the document.)"
    lines += [f'    """{line}' if i == 0 else f"    {line}" for i, line in enumerate(_doc(doc))]
    lines[-1] += '"""'
    lines.append("")
    for f in fields:
        # An enum's values, else the description, as a comment above the field.
        note = ("One of " + ", ".join(q(v) for v in f.enum) + ".") if f.enum else f.description
        lines += [f"    # {line}" if line else "    #" for line in (_doc(note) if note else [])]
        default = "" if f.required else " = None"
        lines.append(f"    {f.name}: {f.type}{default}")

    if schema in UNFINISHED_STATUS:
        status = next((f for f in fields if f.prop == "status"), None)
        value = UNFINISHED_STATUS[schema]
        if status is None or value not in status.enum:
            enum = status.enum if status else None
            raise Unsupported(f"{schema}: no status {value!r} for `finished` (enum {enum})")
        lines += [
            "",
            "    @property",
            "    def finished(self) -> bool:",
            f'        """Whether `status` is final (anything but `{value}`)."""',
            f"        return self.status != {q(value)}",
        ]

    lines += [
        "",
        "    @classmethod",
        f"    def from_json(cls, data: Mapping[str, Any]) -> {name}:",
        "        return cls(",
    ]
    lines += [f"            {f.name}={f.read}," for f in fields]
    lines.append("        )")
    return "\n".join(lines)


def _doc(text: str) -> List[str]:
    """A description as docstring lines of at most 96 characters."""
    out: List[str] = []
    for paragraph in text.strip().split("\n\n"):
        words, line = paragraph.split(), ""
        if out:
            out.append("")
        for word in words:
            if line and len(line) + 1 + len(word) > 92:
                out.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        out.append(line)
    return out


OPTIONAL_HELPER = '''

def _optional(convert: Any, value: Any) -> Any:
    return None if value is None else convert(value)
'''


def render(document: Dict[str, Any]) -> str:
    schemas: Dict[str, Any] = document.get("components", {}).get("schemas", {})
    if not schemas:
        raise Unsupported("the document has no components.schemas")
    unknown = sorted(set(PYTHON_NAMES) - set(schemas))
    if unknown:
        raise Unsupported(f"PYTHON_NAMES names schemas the document lacks: {unknown}")
    clash = set(PYTHON_NAMES.values()) & (set(schemas) - set(PYTHON_NAMES))
    if clash:
        raise Unsupported(f"a Python name is also a schema's: {sorted(clash)}")
    body = [HEADER.rstrip("\n"), OPTIONAL_HELPER.rstrip("\n")]
    body += [render_class(schema, spec) for schema, spec in schemas.items()]
    aliases = [f"{schema} = {python}" for schema, python in PYTHON_NAMES.items()]
    body.append(
        "\n\n# The document's names of the classes above that the client names otherwise.\n"
        + "\n".join(aliases)
    )
    return "\n".join(body) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, default=DOCUMENT, help="the OpenAPI document")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the Python file to write")
    args = parser.parse_args(argv)
    try:
        text = render(json.loads(args.input.read_text(encoding="utf-8")))
    except Unsupported as error:
        print(f"generate_models: {error}", file=sys.stderr)
        return 1
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
