"""Bub compatibility layer: runs the real Bub 0.6 plugin ecosystem unchanged.

Loaded only when the ``bub`` distribution is installed (the kernel never imports it);
it adapts to the installed Bub package by importing Bub's own classes to recognise them.
"""
