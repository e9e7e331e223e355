"""Adapters whose harness fails: one that cannot make a kernel, one whose first kernel
never comes (later ones do)."""

import threading

from spec.pluggy_adapter import PluggyAdapter


class Crashing(PluggyAdapter):
    name = "crashing"

    def new_kernel(self):
        raise RuntimeError("no kernel today")


class Hanging(PluggyAdapter):
    name = "hanging"
    hung = False

    def new_kernel(self):
        if not Hanging.hung:
            Hanging.hung = True
            threading.Event().wait()  # forever
        return super().new_kernel()


crashing = Crashing
hanging = Hanging
