"""Health: ``fleetsched status`` (is the running system healthy?) and ``doctor`` (is this
installation configured right?). ``checks`` holds both."""

__all__ = ["checks"]
