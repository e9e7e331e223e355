"""hookline.testing: fixtures and helpers for testing hookline plugins with pytest.

The pytest plugin (`hookline.testing.plugin`, activated through the `pytest11` entry
point) only defines fixtures; everything heavy is imported when a fixture is used.
"""
