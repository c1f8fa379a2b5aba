"""The chat providers behind the judges, one module each (see :mod:`.base`)."""
