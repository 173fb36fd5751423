"""agentweb uses other packages through their public interfaces only (issue 52): its code takes
no private name of another package (one that begins with one underscore), overrides none, and
assigns nothing into another package's module or class. A private name can change in any patch
release; an operator must be able to take a library's security release the day it ships.

What counts, read from the code (its syntax, and its classes as Python builds them):

* `from pkg import _x`, or `import pkg._mod`;
* `obj._x`, `getattr(obj, "_x")` or `hasattr(obj, "_x")` where `_x` is no name of agentweb's own;
* a method or attribute `_x` of a class of agentweb's that a base class of another package has;
* `pkg.name = …`, `Class.name = …` or `setattr(pkg, …)` on a module or class imported from
  another package.

Django's `Model._meta` (its Model _meta API) and a model instance's `_state` are documented, as
are a named tuple's `_replace`, `_asdict` and `_fields`: those are public despite their
underscore.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = ("sessions", "agentweb", "foundation", "tests", "bench")
DOCUMENTED = {"_meta", "_state", "_replace", "_asdict", "_fields", "_make"}


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def foreign(module: str) -> bool:
    return bool(module) and module.split(".")[0] not in OURS


@dataclass(frozen=True)
class Source:
    name: str  # dotted module name
    text: str


@cache
def app_sources() -> tuple[Source, ...]:
    found = []
    for top in ("sessions", "agentweb", "foundation"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found.append(Source(name, path.read_text()))
    return tuple(found)


def own_names(sources: tuple[Source, ...]) -> set[str]:
    """The private names agentweb's own code defines: functions, classes, module and class
    attributes, and attributes it sets on its own objects (`self._x = …`)."""
    names: set[str] = set()
    for source in sources:
        for node in ast.walk(ast.parse(source.text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return {name for name in names if private(name)}


def syntax_uses(source: Source, own: set[str]) -> list[str]:
    """The private uses of other packages `source`'s syntax shows."""
    tree = ast.parse(source.text)
    imported: dict[str, str] = {}  # a local name → the foreign module it comes from
    found: list[str] = []

    def at(node: ast.AST, what: str) -> None:
        found.append(f"{source.name}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if foreign(alias.name):
                    imported[(alias.asname or alias.name).split(".")[0]] = alias.name
                    if any(private(part) for part in alias.name.split(".")):
                        at(node, f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level and foreign(node.module or ""):
            module = node.module or ""
            if any(private(part) for part in module.split(".")):
                at(node, f"from {module} import …")
            for alias in node.names:
                imported[alias.asname or alias.name] = module
                if private(alias.name):
                    at(node, f"from {module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            if node.attr not in own and node.attr not in DOCUMENTED:
                at(node, f"._{node.attr.lstrip('_')} read")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            for what in called(node, node.func.id, own, imported):
                at(node, what)
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            for into in assigned_into(node, imported):
                at(node, f"assignment into {into}")
    return found


def called(node: ast.Call, func: str, own: set[str], imported: dict[str, str]) -> list[str]:
    """`getattr`/`hasattr` of a private name not agentweb's; `setattr` on another package."""
    args = node.args
    name = args[1].value if len(args) >= 2 and isinstance(args[1], ast.Constant) else None
    if func in ("getattr", "hasattr") and isinstance(name, str) and private(name):
        return [] if name in own else [f"{func}(…, {name!r})"]
    target = args[0].id if func == "setattr" and args and isinstance(args[0], ast.Name) else ""
    return [f"setattr({target}, …) into {imported[target]}"] if target in imported else []


def assigned_into(
    node: ast.Assign | ast.AugAssign | ast.AnnAssign, imported: dict[str, str]
) -> list[str]:
    """The other packages' modules and classes an assignment writes an attribute of."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    found = []
    for target in targets:
        base = target
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(target, ast.Attribute) and isinstance(base, ast.Name) and base.id in imported:
            found.append(f"{imported[base.id]} ({base.id}.…)")
    return found


def overrides(source: Source) -> list[str]:
    """Private names a class of `source` defines in its body that a base class of another
    package has: an override of that package's private method (or attribute)."""
    module = importlib.import_module(source.name)
    found = []
    for node in ast.walk(ast.parse(source.text)):
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(module, node.name, None)
        if not inspect.isclass(cls):
            continue
        for name in sorted(defined_in(node)):
            if name in DOCUMENTED:
                continue
            for base in cls.__mro__[1:]:
                if foreign(base.__module__) and name in vars(base):
                    found.append(f"{source.name}.{node.name}.{name} overrides {base.__module__}")
                    break
    return found


def defined_in(node: ast.ClassDef) -> set[str]:
    """The private names a class statement's own body defines."""
    names = set()
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(item.name)
        elif isinstance(item, ast.Assign):
            names |= {t.id for t in item.targets if isinstance(t, ast.Name)}
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
    return {name for name in names if private(name)}


def private_uses() -> list[str]:
    sources = app_sources()
    own = own_names(sources)
    found = [use for source in sources for use in syntax_uses(source, own)]
    for source in sources:
        found += overrides(source)
    return sorted(found)


def test_agentweb_uses_no_private_name_of_another_package():
    assert private_uses() == []


def test_the_check_finds_each_kind_of_private_use():
    """The check above can fail: each kind of use, written the way code writes it, is found."""
    text = """
import asyncio
from channels_redis.utils import _consistent_hash
from anthropic._base_client import get_platform
from twisted.internet import tcp

loop = asyncio._get_running_loop()
raw = getattr(response, "_stream", None)
tcp.Connection.write = lambda self, data: None
setattr(asyncio, "x", 1)
"""
    found = syntax_uses(Source("example", text), own=set())
    kinds = sorted(use.split(": ", 1)[1] for use in found)
    assert kinds == sorted(
        [
            "from channels_redis.utils import _consistent_hash",
            "from anthropic._base_client import …",
            "assignment into twisted.internet (tcp.…)",
            "._get_running_loop read",
            "getattr(…, '_stream')",
            "setattr(asyncio, …) into asyncio",
        ]
    )
