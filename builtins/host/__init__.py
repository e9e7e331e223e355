"""The host the tools act on: the local environment, regular files, processes and their
table, background shells, the builtin tools, and the Landlock sandbox with the filtered
environment every tool process gets (docs/security.md)."""
