"""One folder per paper; each registers itself with :mod:`paperzoo.registry` on import."""
