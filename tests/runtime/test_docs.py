"""README's generated sections match the registries the server uses."""

from __future__ import annotations

from coordinator.docs import README, render


def test_readme_tables_are_generated_from_the_registries() -> None:
    text = README.read_text()
    assert render(text) == text, "README.md is stale: run python -m coordinator.docs"
    assert "| ApiVersions | 18 | 0–4 |" in text
