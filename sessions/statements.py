"""Statements the prompt path runs for every prompt, compiled by the ORM once and sent again
with new values (issue 21).

Under load a prompt's set-up queues on the one database thread, and most of its time there
was Django building SQL, not the database running it: a primary-key read costs about 0.35 ms
through a QuerySet and 0.03 ms as the same SQL on a cursor (`bench/prompt_queries.py`). A
`Statement` keeps the queryset readable where it is defined and pays for its compilation
once per database connection.

It is built with a stand-in value for each named parameter (an int, a str or an aware
datetime, of a value no real row has), compiled, and each stand-in is found among the SQL's
parameters; a run puts the real values in their places, adapted as the ORM adapts them for
this database. What comes back is converted by the same compiler (datetimes, JSON, booleans),
so rows and model instances are what the queryset itself would have given.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar, cast

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Model, QuerySet, signals
from django.db.models.sql import InsertQuery, Query, UpdateQuery
from django.db.models.sql.compiler import SQLCompiler

M = TypeVar("M", bound=Model)
T = TypeVar("T")
Rows = list[tuple[Any, ...]]  # a values_list queryset's rows

STAND_INS: dict[type, Callable[[int], Any]] = {
    int: lambda n: -2_000_000_000 - n,  # no row's id or count
    str: lambda n: f"\x1fstatement parameter {n}\x1f",
    datetime: lambda n: datetime(1901, 2, 3, 4, 5, n, tzinfo=UTC),
}


class Compiled:
    """One statement on one connection: its SQL, where each parameter goes, and the compiler
    that converts its rows."""

    def __init__(
        self,
        compiler: SQLCompiler,
        names: dict[str, type],
        sql: tuple[str, tuple[Any, ...]] | None = None,
    ) -> None:
        """`sql`: the statement's own SQL and parameters, when they are not `compiler`'s (it
        then only converts the rows)."""
        connection = compiler.connection
        self.sql, params = sql or compiler.as_sql()
        self.compiler = compiler
        stand_ins = {
            _adapted(connection, kind, STAND_INS[kind](n)): name
            for n, (name, kind) in enumerate(names.items())
        }
        self.slots: list[tuple[str | None, Any]] = [
            (stand_ins.get(param) if _hashable(param) else None, param) for param in params
        ]
        missing = set(names) - {name for name, _ in self.slots if name}
        if missing:  # the ORM changed the value (a pattern, a cast): it cannot be swapped
            raise ValueError(f"these parameters are not in the statement's SQL: {missing}")
        self.kinds = names
        self._converters: dict[int, Any] | None = None  # the compiler's, made at the first rows

    def convert(self, fetched: list[Any]) -> list[Any]:
        """Fetched rows as the queryset would give them (`results_iter`), with the converters
        found once: the compiler would look each column's up again at every call."""
        compiler = self.compiler
        if self._converters is None:
            fields = [column[0] for column in compiler.select[: compiler.col_count]]
            if compiler.has_composite_fields(fields):  # never in the prompt path's statements
                return list(compiler.results_iter([fetched]))
            self._converters = compiler.get_converters(fields)
        if not self._converters:
            return fetched
        return list(compiler.apply_converters(fetched, self._converters))

    def params(self, values: dict[str, Any]) -> list[Any]:
        connection = self.compiler.connection
        adapted = {
            name: _adapted(connection, self.kinds[name], value) for name, value in values.items()
        }
        return [adapted[name] if name else constant for name, constant in self.slots]


class Statement(Generic[M]):
    """A SELECT built by `build(**stand_ins)`, compiled once per connection; `names` are its
    parameters and their types."""

    def __init__(self, build: Callable[..., QuerySet[M, Any]], **names: type) -> None:
        self.build, self.names = build, names
        self._compiled: weakref.WeakKeyDictionary[Any, Compiled] = weakref.WeakKeyDictionary()

    def _run(self, values: dict[str, Any]) -> tuple[Compiled, Any]:
        compiled = self._here(values)
        cursor = connections[DEFAULT_DB_ALIAS].cursor()
        cursor.execute(compiled.sql, compiled.params(values))
        return compiled, cursor

    def _here(self, values: dict[str, Any]) -> Compiled:
        """The statement as compiled for this thread's connection (each thread has its own)."""
        if set(values) != set(self.names):
            raise TypeError(f"a statement of {sorted(self.names)} was given {sorted(values)}")
        connection = connections[DEFAULT_DB_ALIAS]
        compiled = self._compiled.get(connection)
        if compiled is None:  # the first run on this connection
            compiled = self._compiled[connection] = self._compile()
        return compiled

    def sql(self, **values: Any) -> tuple[str, list[Any]]:
        """Its SQL and parameters for `values`, not run: a part of a larger statement."""
        compiled = self._here(values)
        return compiled.sql, compiled.params(values)

    def _compile(self) -> Compiled:
        stand_ins = {name: STAND_INS[kind](n) for n, (name, kind) in enumerate(self.names.items())}
        query = self._query(stand_ins)
        return Compiled(query.get_compiler(using=DEFAULT_DB_ALIAS), self.names)

    def _query(self, stand_ins: dict[str, Any]) -> Query:
        return self.build(**stand_ins).query

    def rows(self, **values: Any) -> Rows:
        """A values_list queryset's rows, as it would give them."""
        return self._rows_of(*self._run(values))

    def send(self, **values: Any) -> Callable[[], Rows]:
        """The statement sent (within `sent_together`, with the others), and what reads its
        rows (after it)."""
        compiled, cursor = self._run(values)
        return _read_after(lambda: self._rows_of(compiled, cursor))

    @staticmethod
    def _rows_of(compiled: Compiled, cursor: Any) -> Rows:
        with cursor:
            fetched = cursor.fetchall()
        return [tuple(row) for row in compiled.convert(fetched)]

    def first(self, **values: Any) -> tuple[Any, ...] | None:
        found = self.rows(**values)
        return found[0] if found else None

    def objects(self, **values: Any) -> list[M]:
        """A model queryset's instances (no select_related), its annotations set on each."""
        return self._objects_of(*self._run(values))

    def sending_objects(self, **values: Any) -> Callable[[], list[M]]:
        """`objects`, sent (within `sent_together`, with the others), and what reads them
        (after it)."""
        compiled, cursor = self._run(values)
        return _read_after(lambda: self._objects_of(compiled, cursor))

    def _objects_of(self, compiled: Compiled, cursor: Any) -> list[M]:
        with cursor:
            fetched = cursor.fetchall()
        compiler = compiled.compiler
        info = compiler.klass_info
        assert info is not None and not info.get("related_klass_infos"), "one model, no joins"
        start, end = info["select_fields"][0], info["select_fields"][-1] + 1
        names = [column[0].target.attname for column in compiler.select[start:end]]
        db = compiler.using
        made = []
        for row in compiled.convert(fetched):
            instance = info["model"].from_db(db, names, row[start:end])
            for name, position in compiler.annotation_col_map.items():
                setattr(instance, name, row[position])
            made.append(instance)
        return made

    def one(self, **values: Any) -> M:
        """The one instance, as `get` gives it (the model's DoesNotExist when there is none)."""
        found = self.objects(**values)
        if not found:
            model: Any = self._compiled[connections[DEFAULT_DB_ALIAS]].compiler.query.model
            raise model.DoesNotExist(f"{model.__name__} matching {values} does not exist.")
        return found[0]


@contextlib.contextmanager
def sent_together() -> Iterator[None]:
    """What the block sends, in one transaction: the statements a prompt's set-up sends
    together (a claim and the prompt it stores; a write and the reads after it) commit or fail
    together. Each is sent, and its answer read, as it comes."""
    with transaction.atomic(savepoint=False):
        yield


def _read_after(read: Callable[[], T]) -> Callable[[], T]:
    """A statement's answer, read now (a statement left unread is still running: SQLite cannot
    commit under an UPDATE … RETURNING whose rows are not read), and given to whoever asks."""
    done = read()
    return lambda: done


class Update(Statement[M]):
    """An UPDATE: `build(**stand_ins)` gives the queryset of the rows to change and the
    values to set (expressions too), as `queryset.update(**values)` would take them."""

    def __init__(
        self, build: Callable[..., tuple[QuerySet[M, Any], dict[str, Any]]], **names: type
    ) -> None:
        super().__init__(lambda **values: build(**values)[0], **names)
        self.build_update = build

    def _query(self, stand_ins: dict[str, Any]) -> Query:
        queryset, values = self.build_update(**stand_ins)
        query = queryset.query.chain(UpdateQuery)
        assert isinstance(query, UpdateQuery)
        query.add_update_values(values)
        return query

    def execute(self, **values: Any) -> int:
        """The count of rows changed."""
        _, cursor = self._run(values)
        with cursor:
            return int(cursor.rowcount)

    def sending_count(self, **values: Any) -> Callable[[], int]:
        """The update sent (within `sent_together`, with the others), and what reads the count
        of rows it changed (after it)."""
        _, cursor = self._run(values)

        def count() -> int:
            with cursor:
                return int(cursor.rowcount)

        return _read_after(count)

    def sent(self, **values: Any) -> None:
        """The update sent, its count unread (within `sent_together`, with the others)."""
        _, cursor = self._run(values)
        cursor.close()


class Returning(Update[M]):
    """An UPDATE that gives back the rows it changed as `read(**stand_ins)` would read them
    after it: `UPDATE … RETURNING`, one statement where an UPDATE and a SELECT were two (both
    PostgreSQL and SQLite 3.35 have it). `read` is a queryset of the same model whose columns
    are the table's own and annotations of correlated subqueries (no join: RETURNING names
    only the updated table). Its rows come back through `objects` and `one`, converted by
    `read`'s compiler."""

    def __init__(
        self,
        build: Callable[..., tuple[QuerySet[M, Any], dict[str, Any]]],
        read: Callable[..., QuerySet[M, Any]],
        **names: type,
    ) -> None:
        super().__init__(build, **names)
        self.read = read

    def _compile(self) -> Compiled:
        stand_ins = {name: STAND_INS[kind](n) for n, (name, kind) in enumerate(self.names.items())}
        update_sql, update_params = self._query(stand_ins).get_compiler(DEFAULT_DB_ALIAS).as_sql()
        reading = self.read(**stand_ins).query.get_compiler(using=DEFAULT_DB_ALIAS)
        reading.as_sql()  # its columns, the instances' layout and the annotations' places
        query = reading.query
        if any(count for alias, count in query.alias_refcount.items() if alias != query.base_table):
            raise ValueError("a RETURNING clause names only the updated table: no joins")
        columns = [compiled for _, compiled, _ in reading.select]
        sql = f"{update_sql} RETURNING {', '.join(column for column, _ in columns)}"
        params = (*update_params, *(param for _, more in columns for param in more))
        return Compiled(reading, self.names, (sql, params))


class Insert(Generic[M]):
    """A new row of `model`, every column but its generated key: `save(instance)` does what
    the ORM's `save(force_insert=True)` does (each field's pre_save and database preparation,
    the pre_save and post_save signals) with an INSERT compiled once per connection, and sets
    the key the database gave. For a model whose columns all take a plain placeholder and
    whose relations are given as ids (the prompt path's entries)."""

    def __init__(self, model: type[M]) -> None:
        meta = model._meta
        self.model = model
        self.fields = [
            field for field in meta.local_concrete_fields if field is not meta.auto_field
        ]
        plain = not any(getattr(field, "get_placeholder", None) for field in self.fields)
        if not plain or meta.db_returning_fields != [meta.pk]:
            raise ValueError(f"{model.__name__}'s INSERT cannot be compiled once")
        self._compiled: weakref.WeakKeyDictionary[Any, tuple[str, Any]] = (
            weakref.WeakKeyDictionary()
        )

    def save(self, instance: M) -> M:
        connection = connections[DEFAULT_DB_ALIAS]
        compiled = self._compiled.get(connection)
        if compiled is None:
            compiled = self._compiled[connection] = self._compile(instance)
        sql, returning = compiled
        values = self.prepared(instance)
        meta, ops = self.model._meta, cast(Any, connection.ops)  # each backend's own methods
        with connection.cursor() as cursor:
            cursor.execute(sql, values)
            if connection.features.can_return_columns_from_insert:
                (key,) = ops.fetch_returned_insert_columns(cursor, returning)
            else:
                key = ops.last_insert_id(cursor, meta.db_table, meta.pk.column)
        return self.saved(instance, key)

    def prepared(self, instance: M) -> list[Any]:
        """The pre_save signal sent, and each field's value as the database takes it (in the
        order of `fields`): what an INSERT of another shape sends too."""
        signals.pre_save.send(**self._saving(instance), using=DEFAULT_DB_ALIAS)
        connection = connections[DEFAULT_DB_ALIAS]
        return [
            field.get_db_prep_save(field.pre_save(instance, True), connection)
            for field in self.fields
        ]

    def saved(self, instance: M, key: Any) -> M:
        """The instance as the row `key` written for it, and the post_save signal sent."""
        instance.pk = key
        instance._state.adding, instance._state.db = False, DEFAULT_DB_ALIAS
        signals.post_save.send(**self._saving(instance), created=True, using=DEFAULT_DB_ALIAS)
        return instance

    def _saving(self, instance: M) -> dict[str, Any]:
        return {"sender": self.model, "instance": instance, "raw": False, "update_fields": None}

    def _compile(self, instance: M) -> tuple[str, Any]:
        query = InsertQuery(self.model)
        query.insert_values(self.fields, [instance])
        compiler = query.get_compiler(using=DEFAULT_DB_ALIAS)
        compiler.returning_fields = [self.model._meta.pk]
        ((sql, _),) = compiler.as_sql()
        return sql, compiler.returning_params


def _adapted(connection: Any, kind: type, value: Any) -> Any:
    """A value as the ORM sends it to this database (SQLite: a datetime as text)."""
    if kind is datetime and value is not None:
        return connection.ops.adapt_datetimefield_value(value)
    return value


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
