"""The SQLite tape store (the default): the store, its journal and its files."""
