"""Generate kio-style dataclasses from the Kafka-format JSON in ``schemas/``.

Run ``python -m protocol.codegen`` after changing a schema; the output under ``protocol/generated/``
is committed, and a test fails when regenerating would change it.

The output follows kio's conventions so kio's (native) reader and writer handle our types exactly as
theirs: one module per message and version (``<name>/v<N>/<request|response|data>.py``), frozen
slotted keyword-only dataclasses, ``kafka_type``/``tag`` field metadata, int fields named ``...Ms``
exposed as ``timedelta`` without the suffix, and entity types from ``kio.schema.types``. Two
deliberate differences: error codes are plain ``int16`` (kio's enum does not know the KIP-1279
codes and its reader would reject them), and no ``from __future__ import annotations`` (kio
introspects real annotations).
"""

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schemas"
OUTPUT = ROOT / "protocol" / "generated"

_ENTITY_TYPES = {
    "brokerId": "BrokerId",
    "groupId": "GroupId",
    "producerId": "ProducerId",
    "topicName": "TopicName",
    "transactionalId": "TransactionalId",
}
_INT_HINTS = {
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
}
_PRIMITIVES = {*_INT_HINTS, "float64", "string", "bytes", "records", "uuid", "bool"}
_ENTITY_KIND = {
    "request": "request",
    "response": "response",
    "header": "header",
}


class SchemaError(Exception):
    pass


@dataclass(frozen=True)
class Versions:
    """A Kafka version range: "none", "N", "N+", "N-M"."""

    lo: int
    hi: int  # inclusive; sys.maxsize for open ranges

    @classmethod
    def parse(cls, text: str | None) -> "Versions":
        if text is None or text == "none":
            return cls(1, 0)
        m = re.fullmatch(r"(\d+)(\+|-(\d+))?", text.strip())
        if not m:
            raise SchemaError(f"bad version range {text!r}")
        lo = int(m.group(1))
        if m.group(2) == "+":
            return cls(lo, sys.maxsize)
        if m.group(3) is not None:
            return cls(lo, int(m.group(3)))
        return cls(lo, lo)

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi


def to_snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def module_name(message_name: str) -> str:
    return to_snake(message_name).removesuffix("_request").removesuffix("_response")


@dataclass
class Field:
    name: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any
    entity_type: str | None
    about: str
    fields: list["Field"] = field(default_factory=list)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def inner_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.inner_type not in _PRIMITIVES


def _parse_field(raw: dict[str, Any], where: str) -> Field:
    for key in ("name", "type", "versions"):
        if key not in raw:
            raise SchemaError(f"{where}: field without {key!r}: {raw}")
    f = Field(
        name=raw["name"],
        type=raw["type"],
        versions=Versions.parse(raw["versions"]),
        nullable=Versions.parse(raw.get("nullableVersions")),
        tagged=Versions.parse(raw.get("taggedVersions")),
        tag=raw.get("tag"),
        default=raw.get("default"),
        entity_type=raw.get("entityType"),
        about=raw.get("about", ""),
        fields=[_parse_field(x, f"{where}.{raw['name']}") for x in raw.get("fields", [])],
    )
    if f.tagged.lo <= f.tagged.hi and f.tag is None:
        raise SchemaError(f"{where}.{f.name}: taggedVersions without tag")
    return f


@dataclass
class Schema:
    path: Path
    name: str
    type: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: list[Field]
    common: dict[str, list[Field]]

    @property
    def entity_kind(self) -> str:
        return _ENTITY_KIND.get(self.type, "data")


def load_schema(path: Path) -> Schema:
    raw = json.loads(path.read_text())
    where = path.name
    common = {
        c["name"]: [_parse_field(x, f"{where}.{c['name']}") for x in c.get("fields", [])]
        for c in raw.get("commonStructs", [])
    }
    api_key = raw.get("apiKey")
    return Schema(
        path=path,
        name=raw["name"],
        type=raw["type"],
        api_key=int(api_key) if api_key is not None else None,
        valid=Versions.parse(raw["validVersions"]),
        flexible=Versions.parse(raw.get("flexibleVersions", "none")),
        fields=[_parse_field(x, where) for x in raw["fields"]],
        common=common,
    )


def _timedelta_kind(f: Field) -> str | None:
    if f.name.endswith("Ms") and f.type in ("int32", "int64") and not f.entity_type:
        return "timedelta_i32" if f.type == "int32" else "timedelta_i64"
    return None


def attr_name(f: Field) -> str:
    name = to_snake(f.name)
    if _timedelta_kind(f):
        name = name.removesuffix("_ms")
    return name


def _int_literal(text: Any) -> int:
    if isinstance(text, bool):
        raise SchemaError(f"bad integer default {text!r}")
    if isinstance(text, int):
        return text
    return int(str(text), 0)


class _Module:
    """Collects the classes of one (message, version) module, innermost first."""

    def __init__(self, schema: Schema, version: int) -> None:
        self.schema = schema
        self.version = version
        self.flexible = version in schema.flexible
        self.classes: list[str] = []
        self.seen: set[str] = set()
        self.imports: set[str] = {
            "from dataclasses import dataclass",
            "from typing import ClassVar",
            "from kio.static.constants import EntityType",
            "from kio.static.primitive import i16",
        }

    def primitive_hint(self, f: Field, kind: str) -> str:
        if f.entity_type in _ENTITY_TYPES and f.inner_type in ("int32", "int64", "string"):
            name = _ENTITY_TYPES[f.entity_type]
            self.imports.add(f"from kio.schema.types import {name}")
            return name
        if kind in _INT_HINTS:
            hint = _INT_HINTS[kind]
            self.imports.add(f"from kio.static.primitive import {hint}")
            return hint
        if kind == "timedelta_i32":
            self.imports.add("from kio.static.primitive import i32Timedelta")
            return "i32Timedelta"
        if kind == "timedelta_i64":
            self.imports.add("from kio.static.primitive import i64Timedelta")
            return "i64Timedelta"
        if kind == "float64":
            self.imports.add("from kio.static.primitive import f64")
            return "f64"
        if kind == "uuid":
            self.imports.add("import uuid")
            return "uuid.UUID"
        return {"string": "str", "bytes": "bytes", "records": "bytes", "bool": "bool"}[kind]

    def default_expr(
        self, f: Field, kind: str, hint: str, nullable: bool, tagged: bool
    ) -> str | None:
        d = f.default
        if f.is_array:
            if d == "null" and nullable:
                return "None"
            # kio gives primitive arrays an empty default; struct arrays only when tagged.
            return "()" if tagged or not f.is_struct else None
        if f.is_struct:
            if tagged:
                return "None" if nullable else f"{f.inner_type}()"
            return None
        if d is None:
            if not tagged:
                return None
            # Tagged fields are optional on the wire: absent means the type's zero value.
            if nullable or kind == "uuid":
                return "None"
            d = {"bool": "false", "string": "", "bytes": None, "records": None}.get(kind, "0")
            if d is None:
                return 'b""'
        if d == "null":
            if not nullable and kind != "uuid":
                raise SchemaError(
                    f"{self.schema.name}.{f.name}: null default on a non-nullable field"
                )
            return "None"
        if kind == "uuid":
            return "None"
        if kind == "bool":
            value = str(d).lower()
            if value not in ("true", "false"):
                raise SchemaError(f"{self.schema.name}.{f.name}: bad bool default {d!r}")
            return "True" if value == "true" else "False"
        if kind in ("string",):
            return f"{hint}({str(d)!r})" if hint != "str" else repr(str(d))
        if kind.startswith("timedelta"):
            self.imports.add("import datetime")
            return f"{hint}.parse(datetime.timedelta(milliseconds={_int_literal(d)}))"
        if kind == "float64":
            return f"f64({float(d)!r})"
        if kind in _INT_HINTS:
            return f"{hint}({_int_literal(d)})"
        raise SchemaError(f"{self.schema.name}.{f.name}: cannot express default {d!r} for {kind}")

    def struct_fields(self, f: Field) -> list[Field]:
        if f.fields:
            return f.fields
        if f.inner_type in self.schema.common:
            return self.schema.common[f.inner_type]
        raise SchemaError(f"{self.schema.name}.{f.name}: unknown struct type {f.inner_type!r}")

    def emit_class(self, name: str, fields: list[Field], kind: str) -> None:
        if name in self.seen:
            return
        self.seen.add(name)
        v = self.version
        lines: list[str] = []
        tags: set[int] = set()
        for f in fields:
            if v not in f.versions:
                continue
            tagged = v in f.tagged
            if tagged:
                if not self.flexible:
                    raise SchemaError(
                        f"{self.schema.name} v{v}: tagged field {f.name} in a non-flexible version"
                    )
                assert f.tag is not None
                if f.tag in tags:
                    raise SchemaError(f"{self.schema.name}.{name} v{v}: duplicate tag {f.tag}")
                tags.add(f.tag)
            nullable = v in f.nullable
            meta: list[str] = []
            if f.is_struct:
                self.emit_class(f.inner_type, self.struct_fields(f), "nested")
                hint = f"tuple[{f.inner_type}, ...]" if f.is_array else f.inner_type
                kafka_kind = None
            else:
                # ErrorCode stays int16 (kio would say "error_code"): see the module docstring.
                kafka_kind = _timedelta_kind(f) or f.inner_type
                inner = self.primitive_hint(f, kafka_kind)
                hint = f"tuple[{inner}, ...]" if f.is_array else inner
                meta.append(f'"kafka_type": "{kafka_kind}"')
            if nullable or (not f.is_array and not f.is_struct and f.inner_type == "uuid"):
                hint = f"{hint} | None"
            if tagged:
                meta.append(f'"tag": {f.tag}')
            default = self.default_expr(
                f, kafka_kind or "", hint.removesuffix(" | None"), nullable, tagged
            )
            args = []
            if meta:
                args.append("metadata={" + ", ".join(meta) + "}")
            if default is not None:
                args.append(f"default={default}")
            rhs = f" = field({', '.join(args)})" if args else ""
            if args:
                self.imports.add("from dataclasses import field")
            lines.append(f"    {attr_name(f)}: {hint}{rhs}")
            if f.about:
                about = f.about.replace("\\", "\\\\").replace('"""', "'''")
                lines.append(f'    """{about}"""')
        header = [
            "@dataclass(frozen=True, slots=True, kw_only=True)",
            f"class {name}:",
            f"    __type__: ClassVar = EntityType.{kind}",
            f"    __version__: ClassVar[i16] = i16({v})",
            f"    __flexible__: ClassVar[bool] = {self.flexible}",
        ]
        if self.schema.api_key is not None and self.schema.entity_kind in ("request", "response"):
            header.append(f"    __api_key__: ClassVar[i16] = i16({self.schema.api_key})")
            hv = (
                ("v2" if self.flexible else "v1")
                if self.schema.entity_kind == "request"
                else ("v1" if self.flexible else "v0")
            )
            htype = "RequestHeader" if self.schema.entity_kind == "request" else "ResponseHeader"
            hmod = "request_header" if self.schema.entity_kind == "request" else "response_header"
            self.imports.add(f"from kio.schema.{hmod}.{hv}.header import {htype}")
            header.append(f"    __header_schema__: ClassVar[type[{htype}]] = {htype}")
        self.classes.append("\n".join(header + lines))

    def render(self) -> str:
        self.emit_class(self.schema.name, self.schema.fields, self.schema.entity_kind)
        stdlib = sorted(i for i in self.imports if i.startswith("import "))
        dataclasses_ = sorted(i for i in self.imports if i.startswith("from dataclasses"))
        typing_ = sorted(i for i in self.imports if i.startswith("from typing"))
        kio = sorted(i for i in self.imports if i.startswith("from kio"))
        rel = self.schema.path.relative_to(ROOT).as_posix()
        parts = [
            f'"""\nGenerated from ``{rel}`` by ``python -m protocol.codegen``; do not edit.\n"""',
            "\n".join([*stdlib, "", *dataclasses_, *typing_, "", *kio]).strip("\n"),
            *self.classes,
        ]
        return "\n\n\n".join(parts) + "\n"


def render_schema(schema: Schema) -> Iterator[tuple[Path, str]]:
    mod = module_name(schema.name)
    for v in range(schema.valid.lo, schema.valid.hi + 1):
        yield Path(mod) / f"v{v}" / f"{schema.entity_kind}.py", _Module(schema, v).render()


def render_index(schemas: list[Schema]) -> str:
    api_keys: dict[int, str] = {}
    record_keys: dict[str, dict[int, str]] = {}
    names: dict[str, dict[int, dict[str, str]]] = {}
    for s in schemas:
        mod = module_name(s.name)
        if s.api_key is not None and s.entity_kind in ("request", "response"):
            api_keys[s.api_key] = mod
        elif s.api_key is not None:
            record_keys.setdefault(s.type, {})[s.api_key] = s.name
        key = mod if s.entity_kind in ("request", "response") else s.name
        for v in range(s.valid.lo, s.valid.hi + 1):
            path = f"protocol.generated.{mod}.v{v}.{s.entity_kind}:{s.name}"
            names.setdefault(key, {}).setdefault(v, {})[s.entity_kind] = path
    lines = [
        '"""Index of the generated types; generated by ``python -m protocol.codegen``, do not edit."""',
        "",
        "# api key -> module name of the request/response pair",
        "API_KEYS: dict[int, str] = {",
        *(f"    {k}: {api_keys[k]!r}," for k in sorted(api_keys)),
        "}",
        "",
        "# schema type (metadata, coordinator-key, ...) -> record api key -> message name",
        "RECORD_KEYS: dict[str, dict[int, str]] = {",
        *(
            f"    {t!r}: {{{', '.join(f'{k}: {record_keys[t][k]!r}' for k in sorted(record_keys[t]))}}},"
            for t in sorted(record_keys)
        ),
        "}",
        "",
        '# module name (requests/responses) or message name (data) -> version -> kind -> "module:Class"',
        "TYPES: dict[str, dict[int, dict[str, str]]] = {",
    ]
    for key in sorted(names):
        lines.append(f"    {key!r}: {{")
        for v in sorted(names[key]):
            kinds = ", ".join(f"{k!r}: {p!r}" for k, p in sorted(names[key][v].items()))
            lines.append(f"        {v}: {{{kinds}}},")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_all(schema_dir: Path = SCHEMAS) -> dict[Path, str]:
    """Every generated file, relative to ``protocol/generated``, with its content."""
    schemas = [load_schema(p) for p in sorted(schema_dir.glob("*.json"))]
    out: dict[Path, str] = {
        Path("__init__.py"): '"""Generated kio-style types (see protocol.codegen)."""\n'
    }
    for s in schemas:
        for rel, text in render_schema(s):
            out[rel] = text
            for parent in rel.parents:
                if parent != Path("."):
                    out.setdefault(parent / "__init__.py", "")
    out[Path("index.py")] = render_index(schemas)
    return out


def write_all(target: Path = OUTPUT) -> int:
    import shutil

    files = render_all()
    if target.exists():
        shutil.rmtree(target)
    for rel, text in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return len(files)


if __name__ == "__main__":
    print(f"wrote {write_all()} files under {OUTPUT.relative_to(ROOT)}")
