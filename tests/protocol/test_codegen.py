"""The generated types: committed output is current, round trips, and parity with kio's types."""

import importlib
import io
import json
import re
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.index import schema_name_map
from kio.serial import entity_writer
from kio.static.constants import EntityType

from protocol import codegen, lenient
from protocol.generated.index import TYPES
from protocol.registry import _resolve, decode_body

from .strategies import entities

GENERATED = codegen.OUTPUT
ALL_TYPES = sorted(
    (name, version, kind, path)
    for name, versions in TYPES.items()
    for version, kinds in versions.items()
    for kind, path in kinds.items()
)


def _write(body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


def test_committed_output_is_what_the_generator_writes() -> None:
    want = codegen.render_all()
    have = {
        p.relative_to(GENERATED): p.read_text()
        for p in GENERATED.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    stale = sorted(str(p) for p in set(have) - set(want))
    missing = sorted(str(p) for p in set(want) - set(have))
    changed = sorted(str(p) for p in set(want) & set(have) if want[p] != have[p])
    assert not (stale or missing or changed), (
        f"protocol/generated is out of date; run `python -m protocol.codegen`. "
        f"stale={stale[:5]} missing={missing[:5]} changed={changed[:5]}"
    )


def _versions(text: str | None) -> range:
    """A schema version range ("none", "N", "N+", "N-M"), read here without the generator;
    open ranges end at 99, above any version of these schemas."""
    if text is None or text == "none":
        return range(0)
    lo, _, hi = text.partition("-")
    if lo.endswith("+"):
        return range(int(lo[:-1]), 100)
    return range(int(lo), int(hi or lo) + 1)


def _attribute(raw: dict[str, Any]) -> str:
    """kio's attribute for a schema field: snake case; int ``...Ms`` fields become timedeltas
    named without the suffix."""
    words = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", raw["name"])  # "HTTPServer": "HTTP_Server"
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", words).lower()
    return name.removesuffix("_ms") if _is_timedelta(raw) else name


def _is_timedelta(raw: dict[str, Any]) -> bool:
    return (
        raw["name"].endswith("Ms") and raw["type"] in ("int32", "int64") and "entityType" not in raw
    )


def _check_class(
    cls: type, raw_fields: list[dict[str, Any]], version: int, schema: dict[str, Any], module: Any
) -> None:
    """The dataclass has exactly the schema's fields of ``version``, in order, with their Kafka
    types and tags; struct fields recursively."""
    common = {c["name"]: c["fields"] for c in schema.get("commonStructs", [])}
    present = [f for f in raw_fields if version in _versions(f["versions"])]
    got = fields(cls)  # type: ignore[arg-type]
    where = f"{schema['name']} v{version} {cls.__name__}"
    assert [f.name for f in got] == [_attribute(f) for f in present], where
    for f, raw in zip(got, present, strict=True):
        inner = raw["type"].removeprefix("[]")
        tag = raw.get("tag") if version in _versions(raw.get("taggedVersions")) else None
        assert f.metadata.get("tag") == tag, f"{where}.{f.name}"
        if "fields" in raw or inner in common:
            _check_class(
                getattr(module, inner), raw.get("fields") or common[inner], version, schema, module
            )
        else:
            kind = inner
            if _is_timedelta(raw):
                kind = "timedelta_i32" if inner == "int32" else "timedelta_i64"
            assert f.metadata["kafka_type"] == kind, f"{where}.{f.name}"


def test_every_schema_file_generates(tmp_path: Path) -> None:
    """Each schema generated on its own into tmp_path gives the committed files, and each
    committed module's classes carry the schema's fields (read from the JSON here)."""
    schemas = sorted(Path(codegen.SCHEMAS).glob("*.json"))
    assert schemas, "schemas/ is empty"
    for path in schemas:
        raw = json.loads(path.read_text())
        rendered = dict(codegen.render_schema(codegen.load_schema(path)))
        versions = {int(rel.parent.name.removeprefix("v")) for rel in rendered}
        assert versions == set(_versions(raw["validVersions"])), path.name
        for rel, text in rendered.items():
            out = tmp_path / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
            committed = GENERATED / rel
            assert committed.exists(), f"{path.name}: {committed} is missing"
            assert committed.read_bytes() == out.read_bytes(), f"{path.name}: {rel} differs"
            version = int(rel.parent.name.removeprefix("v"))
            module = importlib.import_module(
                ".".join(["protocol.generated", *rel.with_suffix("").parts])
            )
            cls = getattr(module, raw["name"])
            assert cls.__version__ == version, rel
            _check_class(cls, raw["fields"], version, raw, module)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), which=st.sampled_from(ALL_TYPES))
def test_every_generated_type_round_trips(
    data: st.DataObject, which: tuple[str, int, str, str]
) -> None:
    cls = _resolve(which[3])
    body = data.draw(entities(cls))
    raw = _write(body)
    assert decode_body(cls, raw, 0) == body
    assert lenient.decode(cls, raw) == (body, len(raw))


def _dataclass_in(tp: Any) -> type:
    """The entity class inside an annotation such as ``tuple[X, ...] | None``."""
    if is_dataclass(tp):
        return tp  # type: ignore[return-value]
    for arg in getattr(tp, "__args__", ()):
        if arg is not Ellipsis and (is_dataclass(arg) or getattr(arg, "__args__", None)):
            return _dataclass_in(arg)
    raise AssertionError(f"no entity class in {tp}")


def _convert(value: Any, target: type) -> Any:
    """Rebuild a kio entity as the same-named generated type (recursively)."""
    kwargs = {}
    target_fields = {f.name: f for f in fields(target)}
    assert set(target_fields) == {f.name for f in fields(type(value))}, (
        f"{target.__name__}: fields differ from kio's {type(value).__name__}"
    )
    for name, f in target_fields.items():
        v = getattr(value, name)
        if isinstance(v, tuple) and v and is_dataclass(v[0]):
            elem = _dataclass_in(f.type)
            v = tuple(_convert(x, elem) for x in v)
        elif is_dataclass(v):
            v = _convert(v, _dataclass_in(f.type))
        kwargs[name] = v
    return target(**kwargs)


def _parity_cases() -> list[tuple[str, int, str]]:
    cases = []
    for name, versions in TYPES.items():
        for version, kinds in versions.items():
            for kind in kinds:
                et = EntityType.request if kind == "request" else EntityType.response
                if kind in ("request", "response") and et in schema_name_map.get(name, {}).get(
                    version, {}
                ):
                    cases.append((name, version, kind))
    return cases


PARITY = _parity_cases()


@pytest.mark.skipif(not PARITY, reason="no generated type overlaps kio")
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), which=st.sampled_from(PARITY or [("", 0, "")]))
def test_generated_types_write_the_same_bytes_as_kio(
    data: st.DataObject, which: tuple[str, int, str]
) -> None:
    """Where kio has the same message version, our generator must agree with it byte for byte."""
    name, version, kind = which
    et = EntityType.request if kind == "request" else EntityType.response
    kio_cls = _resolve(schema_name_map[name][version][et])
    ours_cls = _resolve(TYPES[name][version][kind])
    theirs = data.draw(entities(kio_cls))
    ours = _convert(theirs, ours_cls)
    assert _write(ours) == _write(theirs)
