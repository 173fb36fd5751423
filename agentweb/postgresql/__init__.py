"""Django's PostgreSQL backend, as agentweb runs it (settings.py names it for a postgres://
DATABASE_URL): see base.py."""
