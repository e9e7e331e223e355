"""What hookline keeps from others: private files and folders (0700/0600) and the redaction
of credentials and paths from text that leaves the process (docs/security.md)."""
