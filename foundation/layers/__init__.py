"""The channel layers agentweb runs on: `memory` in one process (no REDIS_URL), `bus` across
processes through Redis (settings.py picks one)."""
