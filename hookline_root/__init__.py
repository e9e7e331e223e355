"""hookline: a tiny agent runtime in which every stage of a turn is a hook.

A regular package (this file), so that tools which read an installed distribution's
files see one top-level name, ``hookline``: pytest's assertion rewriting marks only it
(not ``builtins``, ``kernel``, ``cli`` and ``testing``), and type checkers find its
subpackages through it. It imports nothing: ``hookline.kernel`` is the plugin API.
"""
