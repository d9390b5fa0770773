"""Saved job templates: named, versioned task files with typed parameters (docs/guides/templates.md).

- ``spec``: a template file: its declared parameters, its ``{param.NAME}`` placeholders, the
  values typed and filled in, the task request parsed by the one task-file parser;
- ``store``: the record: add (versions), list, show, remove, a run's request, who may run it,
  and a customer's template planning that customer's hosts only.
"""

__all__ = ["spec", "store"]
