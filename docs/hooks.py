"""MkDocs hooks: the reference parts of the docs, generated from the code so they cannot drift.

A page asks for a generated part with a marker on a line of its own:

- `<!-- icemv:config-reference -->`: every configuration key (any nested model of
  `icemv.config.model.Config`) with its type, default and `Field(description=...)`;
- `<!-- icemv:metrics-reference -->`: every metric the daemon registers
  (`icemv.service.metrics.Metrics`), with its type, labels and help text;
- `<!-- icemv:code-map -->`: every module under `daemon/icemv/`, with the first paragraph
  of its docstring;
- `<!-- icemv:portability-gate -->`: where DuckDB and Spark differ and what the gate does,
  the list in `sql/portable/__init__.py`'s docstring;
- `<!-- icemv:functions -->`: the functions the embedded engine computes and those it
  refuses, with why, from the tables in `sql/functions/table.py`.

`deploy/OPERATIONS.md` (the operators' runbook, kept beside the chart and its alerts) is
published as `operations.md`: MkDocs reads pages only under `docs/`, so the hook adds it as
a generated file instead of keeping a copy.

The functions that build each part are pure and used by tests/unit/test_docs_reference.py,
which fails when a configuration key or a metric has no description.
"""

from __future__ import annotations

import ast
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "daemon" / "icemv"
OPERATIONS = ROOT / "deploy" / "OPERATIONS.md"
OPERATIONS_PAGE = "operations.md"

CONFIG_MARKER = "<!-- icemv:config-reference -->"
METRICS_MARKER = "<!-- icemv:metrics-reference -->"
CODE_MAP_MARKER = "<!-- icemv:code-map -->"
GATE_MARKER = "<!-- icemv:portability-gate -->"
FUNCTIONS_MARKER = "<!-- icemv:functions -->"


# ---- configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key: its dotted path, type, default and description."""

    path: str
    type: str
    default: str
    description: str
    section: str  # the top-level key it belongs to ("" for top-level scalars)


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (directly or as a list's items), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item
    return None


def _type_name(annotation: Any) -> str:
    if annotation is type(None):
        return "null"
    if annotation is SecretStr:
        return "secret"
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[1])}"
    return str(annotation)


def _default(field: FieldInfo) -> str:
    factory = field.default_factory
    if getattr(factory, "__name__", "") == "available_cores":
        return "the cores the process may use"
    if field.is_required():
        return "required"
    value: Any = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return ""
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | dict) and not value:
        return "`[]`" if isinstance(value, list) else "`{}`"
    return f"`{value}`"


def config_keys(model: type[BaseModel] | None = None, prefix: str = "") -> list[ConfigKey]:
    """Every key of the configuration, depth first in declaration order."""
    if model is None:
        from icemv.config.model import Config

        model = Config
    keys: list[ConfigKey] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = model_in(field.annotation)
        section = path.split(".", 1)[0].removesuffix("[]") if "." in path or nested else ""
        keys.append(
            ConfigKey(
                path=path,
                type="section" if nested and not prefix else _type_name(field.annotation),
                default=_default(field),
                description=(field.description or "").strip(),
                section=section,
            )
        )
        if nested is not None:
            item = "[]" if typing.get_origin(field.annotation) is list else ""
            keys.extend(config_keys(nested, f"{path}{item}."))
    return keys


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def config_reference() -> str:
    """The configuration reference as Markdown: one table per section."""
    from icemv.config.model import Config

    lines: list[str] = []
    top = [k for k in config_keys() if k.type != "section" and not k.section]
    if top:
        lines += ["### Top level", "", "| key | type | default | description |"]
        lines += ["|---|---|---|---|"]
        lines += [_row(k) for k in top]
        lines.append("")
    for name, field in Config.model_fields.items():
        nested = model_in(field.annotation)
        if nested is None:
            continue
        lines += [f"### `{name}`", ""]
        doc = (nested.__doc__ or "").strip()
        if not doc or doc.startswith(nested.__name__ + "("):  # pydantic's stand-in docstring
            doc = field.description or ""
        lines += [" ".join(doc.split("\n\n")[0].split()), ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        lines += [_row(k) for k in config_keys() if k.section == name and k.path != name]
        lines.append("")
    return "\n".join(lines)


def _row(key: ConfigKey) -> str:
    return f"| `{key.path}` | {_cell(key.type)} | {_cell(key.default)} | {_cell(key.description)} |"


# ---- metrics ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricDoc:
    """One registered metric family, named as PromQL sees it."""

    name: str
    type: str
    labels: tuple[str, ...]
    help: str


def metric_docs() -> list[MetricDoc]:
    """Every metric `Metrics` registers, in registration order."""
    from prometheus_client.metrics import MetricWrapperBase

    from icemv.service.metrics import Metrics

    docs: list[MetricDoc] = []
    for metric in vars(Metrics(version="docs")).values():
        if not isinstance(metric, MetricWrapperBase):
            continue
        (family,) = metric.describe()
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = tuple(vars(metric)["_labelnames"])
        docs.append(MetricDoc(name, family.type, labels, family.documentation.strip()))
    return docs


def metrics_reference() -> str:
    """The metrics reference as Markdown."""
    lines = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for doc in metric_docs():
        labels = ", ".join(f"`{label}`" for label in doc.labels) or "none"
        lines.append(f"| `{doc.name}` | {doc.type} | {labels} | {_cell(doc.help)} |")
    return "\n".join(lines) + "\n"


# ---- code map -----------------------------------------------------------------------------


def module_summaries(package: Path = PACKAGE) -> list[tuple[str, str]]:
    """(path under daemon/icemv/, first paragraph of its docstring) for every module."""
    rows: list[tuple[str, str]] = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if not doc and path.name == "__init__.py":
            continue  # a package without a docstring: its modules speak for it
        rows.append((relative, " ".join(doc.split("\n\n")[0].split())))
    return rows


def code_map() -> str:
    """Every module as a table row, grouped by package."""
    lines: list[str] = []
    current = None
    for relative, summary in module_summaries():
        package = relative.rsplit("/", 1)[0] if "/" in relative else "(top level)"
        if package != current:
            current = package
            title = package if package == "(top level)" else f"`{package}/`"
            lines += ["", f"### {title}", "", "| module | what it is |", "|---|---|"]
        lines.append(f"| `{relative}` | {_cell(summary)} |")
    return "\n".join(lines).lstrip("\n") + "\n"


def portability_gate() -> str:
    """The list of engine differences from sql/portable/__init__.py's docstring, as Markdown."""
    doc = ast.get_docstring(
        ast.parse((PACKAGE / "sql" / "portable" / "__init__.py").read_text("utf-8"))
    )
    lines = (doc or "").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Where the engines"))
    items = [line for line in lines[start + 1 :] if line.startswith(("- ", "  "))]
    return "\n".join(items) + "\n"


def functions() -> str:
    """The embedded engine's function tables (sql/functions/table.py), as Markdown."""
    from icemv.sql.functions import function_table

    return function_table() + "\n"


# ---- MkDocs events ------------------------------------------------------------------------

GENERATED = {
    CONFIG_MARKER: config_reference,
    METRICS_MARKER: metrics_reference,
    CODE_MAP_MARKER: code_map,
    GATE_MARKER: portability_gate,
    FUNCTIONS_MARKER: functions,
}


def on_files(files: Files, *, config: MkDocsConfig) -> Files:
    """Publish deploy/OPERATIONS.md as operations.md (one source of truth, outside docs/)."""
    files.append(
        File.generated(config, OPERATIONS_PAGE, content=OPERATIONS.read_text(encoding="utf-8"))
    )
    return files


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace each marker line with the part it names."""
    for marker, build in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, build())
    return markdown
