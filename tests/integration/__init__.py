"""Integration tests: graceguard's adapters against real parts (SQLite files, a PostgreSQL server
started by the test session)."""
