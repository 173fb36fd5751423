"""What the app stands on: database access from async code, the channel layers, and the
security helpers. Below `sessions` (the app) and `agentweb` (the project), imported by them,
importing neither."""
