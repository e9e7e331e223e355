"""hookline.builtins: the default plugin (built in a later issue)."""
