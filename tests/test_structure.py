"""The house keeps its shape: rooms small enough to read, layers without loops, and HTML only
where pages are made (docs/ARCHITECTURE.md). Read from the code's own imports and definitions."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# Where HTML and URLs may be made: the edges and the rendering layer.
RENDERING = {"views", "consumers", "partials", "rendering", "templatetags", "forms", "admin"}
RENDERING |= {"urls", "routing"}
HTML_MAKING = {"partials", "rendering", "templatetags"}  # the modules that return HTML
# What makes HTML or a URL: the module, and the names taken from it.
MAKERS = {
    "django.template.loader": {"render_to_string", "get_template"},
    "django.utils.html": {"format_html", "format_html_join"},
    "django.utils.safestring": {"mark_safe", "SafeString"},
    "django.urls": {"reverse", "reverse_lazy"},
    "django.shortcuts": {"render", "resolve_url"},
}


@cache
def modules() -> dict[str, Path]:
    """Every module of the app and the project, by dotted name (migrations aside)."""
    found = {}
    for top in ("sessions", "agentweb", "foundation"):
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


@cache
def tree(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text())


def imported(name: str) -> set[str]:
    """The project modules `name` imports, anywhere in it (deferred and type-checking too)."""
    package = name if modules()[name].name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in modules() else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {module for module in found if module in modules() and module != name}


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Modules that import one another in a loop (strongly connected, Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    return found


def makes_html_or_urls(name: str) -> list[str]:
    """What module `name` takes to make HTML or URLs, and the rendering modules it imports."""
    taken = []
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.ImportFrom) and node.module in MAKERS:
            taken += [
                f"{node.module}.{a.name}" for a in node.names if a.name in MAKERS[node.module]
            ]
        if isinstance(node, ast.ImportFrom) and node.module == "django":
            taken += [f"django.{a.name}" for a in node.names if a.name == "urls"]
    taken += [module for module in imported(name) if set(module.split(".")) & HTML_MAKING]
    return taken


def test_no_module_is_longer_than_four_hundred_lines():
    long = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_longer_than_sixty_lines():
    long = [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for name in modules()
        for node in ast.walk(tree(name))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


def test_no_modules_import_one_another_in_a_loop():
    assert loops({name: imported(name) for name in modules()}) == []


def test_the_loop_check_finds_a_loop():
    """The check above can fail: modules that import one another, however far round, are one."""
    assert loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_html_and_urls_are_made_only_where_pages_are_made():
    outside = {
        name: taken
        for name in modules()
        if not set(name.split(".")) & RENDERING
        and (taken := makes_html_or_urls(name))
        # a model's get_absolute_url (and url_at) is Django's idiom
        and not (
            name.startswith("sessions.models") and all(t.startswith("django.urls") for t in taken)
        )
    }
    assert outside == {}


def test_the_engine_publishes_events_and_the_rendering_layer_makes_them_html():
    assert "sessions.partials" in imported("sessions.partials.events")
    assert "sessions.generation.events" in imported("sessions.partials.events")
    engine = [name for name in modules() if name.startswith("sessions.generation")]
    assert [name for name in engine if makes_html_or_urls(name)] == []


def test_the_providers_import_nothing_above_their_protocol():
    beneath = {"sessions.tokens", "sessions.content"}
    providers = [name for name in modules() if name.startswith("sessions.providers")]
    above = {
        name: sorted(
            other for other in imported(name) if not other.startswith("sessions.providers")
        )
        for name in providers
    }
    assert {name: others for name, others in above.items() if set(others) - beneath} == {}


def test_the_foundation_imports_neither_the_app_nor_the_project_and_the_app_not_the_project():
    """Layers: the project (`agentweb`: settings, urls, asgi) stands on the app (`sessions`),
    which stands on the foundation (`foundation`: database access, channel layers, security
    helpers); no import runs back up."""
    up = {
        name: sorted(other for other in imported(name) if other.split(".")[0] in above)
        for name in modules()
        for above in [
            {"foundation": {"sessions", "agentweb"}, "sessions": {"agentweb"}}.get(
                name.split(".")[0], set()
            )
        ]
    }
    assert {name: others for name, others in up.items() if others} == {}
