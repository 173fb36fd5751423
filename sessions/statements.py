"""Statements the prompt path runs for every prompt, built by the ORM once and sent again with
new values (issue 21), through Django's documented interfaces only (issue 52).

Under load a prompt's set-up queues on the one database thread, and most of its time there
was Django building SQL, not the database running it: a primary-key read costs about 0.35 ms
through a QuerySet and 0.03 ms as the same SQL on a cursor (`bench/prompt_queries.py`). A
`Statement` keeps the queryset readable where it is defined and builds its SQL once per
process and database: the ORM runs it with a stand-in value for each named parameter under
an execute wrapper (Django's database instrumentation) that takes the SQL and stops it. A run
puts the real values in the stand-ins' places and sends the SQL on a cursor; its rows are
converted by the fields' documented methods (`from_db_value`, `to_python`): a model's columns
by their fields, the others by the fields a statement names for them (`columns=`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import BooleanField, DateTimeField, Field, Model, QuerySet
from django.utils import timezone

M = TypeVar("M", bound=Model)
T = TypeVar("T")
Rows = list[tuple[Any, ...]]  # a values_list queryset's rows
Convert = Callable[[Any], Any]

STAND_INS: dict[type, Callable[[int], Any]] = {
    int: lambda n: -2_000_000_000 - n,  # no row's id or count
    str: lambda n: f"\x1fstatement parameter {n}\x1f",
    datetime: lambda n: datetime(1901, 2, 3, 4, 5, n, tzinfo=UTC),
}
_DATETIME = DateTimeField()  # prepares a datetime parameter as the ORM sends it


class Stopped(Exception):
    """What stops the ORM once its SQL is taken: nothing is sent."""


def sql_of(run: Callable[[], Any]) -> tuple[str, tuple[Any, ...]]:
    """The one statement the ORM sends for `run()`, not sent: Django's execute wrapper takes it
    and stops there. On a thread and connection of its own, so that nothing of it shows on the
    caller's (no transaction marked, no query logged)."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(_taken, run).result()


def _taken(run: Callable[[], Any]) -> tuple[str, tuple[Any, ...]]:
    sent: list[tuple[str, tuple[Any, ...]]] = []

    def take(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append((sql, tuple(params or ())))
        raise Stopped

    connection = connections[DEFAULT_DB_ALIAS]
    try:
        # In a transaction, as a FOR UPDATE requires; not on SQLite, which has none, and whose
        # BEGIN would wait here for the write lock the caller's transaction may hold.
        block = transaction.atomic() if connection.vendor != "sqlite" else contextlib.nullcontext()
        with contextlib.suppress(Stopped), block, connection.execute_wrapper(take):
            run()
    finally:
        connection.close()
    if len(sent) != 1:
        raise ValueError(f"a statement is one query; the ORM sent {len(sent)}")
    return sent[0]


class Compiled:
    """One statement for one database: its SQL, where each parameter goes, and how each column
    of what it gives is converted (found at its first rows, from their names)."""

    def __init__(
        self,
        sql: str,
        params: Sequence[Any],
        names: dict[str, type],
        model: type[Model],
        fields: Mapping[str, Field[Any, Any]],
    ) -> None:
        """`fields`: the field each column is read as, by its name (`model`'s own, others)."""
        connection = connections[DEFAULT_DB_ALIAS]
        self.sql = sql
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
        self.model, self.fields = model, fields
        self.columns: list[str] | None = None  # the names of its columns, at its first rows
        self.converters: list[tuple[int, Convert]] = []

    def convert(self, cursor: Any, fetched: list[Any]) -> list[tuple[Any, ...]]:
        """Fetched rows as the queryset would give them."""
        if self.columns is None:
            self.columns = [column[0] for column in cursor.description]
            connection = connections[DEFAULT_DB_ALIAS]
            self.converters = [
                (n, convert)
                for n, name in enumerate(self.columns)
                if name in self.fields
                and (convert := converter(self.fields[name], connection)) is not None
            ]
        if not self.converters:
            return [tuple(row) for row in fetched]
        converted = []
        for row in fetched:
            values = list(row)
            for n, convert in self.converters:
                if values[n] is not None:
                    values[n] = convert(values[n])
            converted.append(tuple(values))
        return converted

    def params(self, values: dict[str, Any]) -> list[Any]:
        connection = connections[DEFAULT_DB_ALIAS]
        adapted = {
            name: _adapted(connection, self.kinds[name], value) for name, value in values.items()
        }
        return [adapted[name] if name else constant for name, constant in self.slots]


def converter(field: Field[Any, Any], connection: Any) -> Convert | None:
    """How a value of `field` read from the database becomes the model's (None: as it comes).
    The field's own `from_db_value` (JSON); a boolean from its `to_python` (SQLite gives 0 or
    1 for an annotation); a datetime made aware when the database keeps it naive in UTC
    (SQLite, as Django stores it there)."""
    from_db = getattr(field, "from_db_value", None)
    if from_db is not None:
        return lambda value: from_db(value, None, connection)
    if isinstance(field, BooleanField):
        return field.to_python
    if isinstance(field, DateTimeField):
        return _aware
    return None


def _aware(value: Any) -> datetime:
    moment = _DATETIME.to_python(value)
    if moment is not None and timezone.is_naive(moment):
        return timezone.make_aware(moment, UTC)
    return moment


class Statement(Generic[M]):
    """A SELECT built by `build(**stand_ins)`, its SQL taken once per database; `names` are its
    parameters and their types. `columns`: the fields that read columns not the model's own
    (an annotation, a joined table's column), by the column's name."""

    def __init__(
        self,
        build: Callable[..., QuerySet[M, Any]],
        *,
        columns: Mapping[str, Field[Any, Any]] | None = None,
        **names: type,
    ) -> None:
        self.build, self.names = build, names
        self.columns = dict(columns or {})
        self._compiled: dict[str, Compiled] = {}  # by the database's vendor

    def _run(self, values: dict[str, Any]) -> tuple[Compiled, Any]:
        compiled = self._here(values)
        cursor = connections[DEFAULT_DB_ALIAS].cursor()
        cursor.execute(compiled.sql, compiled.params(values))
        return compiled, cursor

    def _here(self, values: dict[str, Any]) -> Compiled:
        """The statement as built for this database."""
        if set(values) != set(self.names):
            raise TypeError(f"a statement of {sorted(self.names)} was given {sorted(values)}")
        vendor = connections[DEFAULT_DB_ALIAS].vendor
        compiled = self._compiled.get(vendor)
        if compiled is None:  # its first run in this process
            compiled = self._compiled[vendor] = self._compile(self._stand_ins())
        return compiled

    def _stand_ins(self) -> dict[str, Any]:
        return {name: STAND_INS[kind](n) for n, (name, kind) in enumerate(self.names.items())}

    def sql(self, **values: Any) -> tuple[str, list[Any]]:
        """Its SQL and parameters for `values`, not run: a part of a larger statement."""
        compiled = self._here(values)
        return compiled.sql, compiled.params(values)

    def _compile(self, stand_ins: dict[str, Any]) -> Compiled:
        queryset = self.build(**stand_ins)
        sql, params = sql_of(lambda: list(queryset))
        return Compiled(sql, params, self.names, queryset.model, self._fields(queryset.model))

    def _fields(self, model: type[Model]) -> dict[str, Field[Any, Any]]:
        """Each column's field by the names it may come under (a model's column: its name in a
        values_list, its attribute's, its column's), then the fields named for others."""
        own = {
            name: field
            for field in model._meta.concrete_fields
            for name in (field.name, field.attname, str(field.column))
        }
        return {**own, **self.columns}

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
            return compiled.convert(cursor, cursor.fetchall())

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

    @staticmethod
    def _objects_of(compiled: Compiled, cursor: Any) -> list[Any]:
        with cursor:
            rows = compiled.convert(cursor, cursor.fetchall())
        if not rows:
            return []
        model = compiled.model
        columns = compiled.columns or []
        own = {str(field.column): field.attname for field in model._meta.concrete_fields}
        places = [n for n, name in enumerate(columns) if name in own]
        names = [own[columns[n]] for n in places]
        extra = [(name, n) for n, name in enumerate(columns) if name not in own]
        made = []
        for row in rows:
            instance = model.from_db(DEFAULT_DB_ALIAS, names, [row[n] for n in places])
            for name, n in extra:
                setattr(instance, name, row[n])
            made.append(instance)
        return made

    def one(self, **values: Any) -> M:
        """The one instance, as `get` gives it (the model's DoesNotExist when there is none)."""
        found = self.objects(**values)
        if not found:
            model: Any = self._here(values).model
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
        self,
        build: Callable[..., tuple[QuerySet[M, Any], dict[str, Any]]],
        *,
        columns: Mapping[str, Field[Any, Any]] | None = None,
        **names: type,
    ) -> None:
        super().__init__(lambda **values: build(**values)[0], columns=columns, **names)
        self.build_update = build

    def _compile(self, stand_ins: dict[str, Any]) -> Compiled:
        queryset, values = self.build_update(**stand_ins)
        sql, params = sql_of(lambda: queryset.update(**values))
        return Compiled(sql, params, self.names, queryset.model, self._fields(queryset.model))

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
    only the updated table). Its rows come back through `objects` and `one`."""

    def __init__(
        self,
        build: Callable[..., tuple[QuerySet[M, Any], dict[str, Any]]],
        read: Callable[..., QuerySet[M, Any]],
        *,
        columns: Mapping[str, Field[Any, Any]] | None = None,
        **names: type,
    ) -> None:
        super().__init__(build, columns=columns, **names)
        self.read = read

    def _compile(self, stand_ins: dict[str, Any]) -> Compiled:
        queryset, values = self.build_update(**stand_ins)
        update_sql, update_params = sql_of(lambda: queryset.update(**values))
        reading = self.read(**stand_ins)
        read_sql, read_params = sql_of(lambda: list(reading))
        select, columns_params = _select_list(read_sql, read_params, reading.model)
        sql = f"{update_sql} RETURNING {select}"
        params = (*update_params, *columns_params)
        return Compiled(sql, params, self.names, queryset.model, self._fields(queryset.model))


def _select_list(
    sql: str, params: tuple[Any, ...], model: type[Model]
) -> tuple[str, tuple[Any, ...]]:
    """The columns a SELECT of `model`'s table alone reads, and their parameters: what follows
    SELECT up to the FROM of its table (a subquery among them names its tables by aliases of
    its own, U0 and on, so the last FROM of the table without one is the statement's)."""
    table = f'"{model._meta.db_table}"'
    head, found, tail = sql.rpartition(f" FROM {table}")
    joined = not tail.startswith((" WHERE ", " ORDER BY ", " LIMIT ")) and tail != ""
    if not found or not head.startswith("SELECT ") or joined or " JOIN " in tail:
        raise ValueError("a RETURNING clause names only the updated table: no joins")
    select = head.removeprefix("SELECT ")
    return select, params[: select.count("%s")]


def _adapted(connection: Any, kind: type, value: Any) -> Any:
    """A value as the ORM sends it to this database (SQLite: a datetime as text)."""
    if kind is datetime and value is not None:
        return _DATETIME.get_db_prep_value(value, connection)
    return value


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
