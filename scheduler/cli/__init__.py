"""The ``fleetsched`` command line: one typer sub-app per noun, thin commands."""
