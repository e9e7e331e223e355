"""A user's own adapter that happens to share a name with a module of the suite."""

from spec.pluggy_adapter import PluggyAdapter  # the suite's shipped adapter


class Mine(PluggyAdapter):
    name = "mine-not-the-suites"


make = Mine
