"""The generated parts of the docs: every configuration key and every metric is described.

The configuration reference and the metrics list are generated from the code by
docs/hooks.py, so they cannot drift; these tests make sure there is something to generate:
a key without `Field(description=...)` or a metric without help text fails here.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from icemv.config.model import Config, MaterializedViewSpec, RefreshConfig
from icemv.service.metrics import METRIC_NAMES
from tests.unit.docs_hooks import DOCS, load_hooks

hooks = load_hooks()


def _models(model: type[BaseModel]) -> set[type[BaseModel]]:
    found = {model}
    for field in model.model_fields.values():
        nested = hooks.model_in(field.annotation)
        if nested is not None:
            found |= _models(nested)
    return found


def test_every_config_key_has_a_description() -> None:
    missing = [key.path for key in hooks.config_keys() if not key.description]
    assert not missing, f"config keys without Field(description=...): {missing}"


def test_the_reference_walks_every_nested_model() -> None:
    paths = {key.path for key in hooks.config_keys()}
    models = _models(Config)
    assert RefreshConfig in models and MaterializedViewSpec in models
    expected = sum(len(model.model_fields) for model in models)
    assert len(paths) == expected
    assert {"refresh.embedded_max_rows", "maintenance.verify_interval_seconds"} <= paths
    assert "materialized_views[].sql" in paths


def test_a_key_without_a_description_is_caught() -> None:
    class Section(BaseModel):
        described: int = Field(default=1, description="something")
        bare: int = 2

    class Root(BaseModel):
        section: Section = Field(default_factory=Section, description="a section")

    missing = [key.path for key in hooks.config_keys(Root) if not key.description]
    assert missing == ["section.bare"]


def test_defaults_are_shown_as_configured() -> None:
    keys = {key.path: key for key in hooks.config_keys()}
    assert keys["refresh.embedded_max_rows"].default == "`100000`"
    assert keys["refresh.max_concurrent"].default == "the cores the process may use"
    assert keys["refresh.processes"].default == "the cores the process may use"
    assert keys["catalog.uri"].default == "`embedded`"
    assert keys["materialized_views[].sql"].default == "required"


def test_every_metric_is_described_and_listed() -> None:
    docs = hooks.metric_docs()
    assert [doc.name for doc in docs if not doc.help] == []
    assert sorted(doc.name for doc in docs) == sorted(METRIC_NAMES)


def test_every_module_has_a_summary_for_the_code_map() -> None:
    rows = hooks.module_summaries()
    assert [path for path, summary in rows if not summary] == []
    assert any(path == "refresh/embedded/route.py" for path, _ in rows)


def test_every_generated_part_is_published_on_a_page() -> None:
    pages = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    for marker, build in hooks.GENERATED.items():
        assert marker in pages, marker
        assert build().strip()


def test_every_config_key_is_in_the_rendered_reference() -> None:
    reference = hooks.config_reference()
    shown = [key.path for key in hooks.config_keys() if f"`{key.path}`" not in reference]
    assert shown == [], f"keys missing from the rendered reference: {shown}"
