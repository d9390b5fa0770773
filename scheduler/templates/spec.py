"""A template file: a task file with ``{param.NAME}`` placeholders and the ``parameters`` that
declare them. Checked, filled in and parsed here; no SQL (the record is ``templates.store``).

1. :func:`load_template` reads the file: ``parameters`` (each a :class:`Declared`: type,
   required or default, description, and ``choices``/``pattern``/``min``/``max`` by type) is
   taken out, and what remains is the task spec. Every placeholder must name a declared
   parameter, and the spec filled with sample values must be a task file that
   ``scheduler.submission.taskfile.parse_task_text`` (the one parser) accepts, of an action
   that exists. Lists and mappings nested more than ``MAX_DEPTH`` (32) deep are refused before
   anything recursive reads the file; so are anchors and aliases, and any value that is not
   plain YAML (text, number, true/false, null, a time, list, mapping: no ``!!set``, no tag).
   A declaration that cannot hold (``min`` above ``max``; an optional pattern-checked string
   without a default whose pattern refuses ``""``; a pattern that repeats a body of repeats,
   ``(a+)+``, which backtracks exponentially) is refused.
2. :func:`typed_values` types an operator's ``NAME=VALUE`` pairs (or JSON values) by the
   declared types of ``tasks.paramtypes``: an unknown, missing or mistyped one is one line. An
   int given as text is ASCII ``-?[0-9]+``; a pattern-checked value is at most
   ``MAX_PATTERN_VALUE`` (256) characters.
3. :func:`render` fills the placeholders in the YAML tree's values, never in the text (a value
   cannot become YAML syntax, another key or another option), then parses the task file. A
   value that is exactly one placeholder takes the parameter's type (``retries:
   "{param.retries}"`` is a number); inside text it is the value as text. A value is the run's
   data, never the author's code, by the action parameter's type (``tasks.paramtypes``): in an
   argv (``Argv``) it is inside one element (a text argv is split before any value is in it),
   in ``key=value`` pairs inside one pair's value, in a shell script (``ShellScript``,
   ``wave_check``) one ``shlex.quote``-d word, allowed only where ``{host.*}`` placeholders
   are (``tasks.shellscript``); wherever a secret reference may stand, a value that starts
   with ``@`` becomes the literal ``@@...`` (``tasks.secrets``), and a placeholder inside the
   author's own reference is refused. A run's value holding ``{host.`` is refused.
4. :func:`digest`: the SHA-256 of what the file says (comments and layout aside), which tells
   an unchanged file from a new version.

``{param.NAME}`` cannot be taken for a host placeholder (``{host.*}``, ``tasks.argv``): none
is left when the task file is parsed, and a ``{param.`` the declarations do not name is refused.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from scheduler.errors import NotFoundError, ValidationError
from scheduler.submission.submit import TaskRequest

__all__ = ["PARAM_NAME", "PLACEHOLDER", "TYPES", "Declared", "TemplateFile", "digest",
           "load_template", "render", "typed_values"]

PLACEHOLDER = re.compile(r"\{param\.([^{}]*)\}")
PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
TYPES = ("string", "int", "bool", "choice")
FIELDS = ("type", "required", "default", "description", "choices", "pattern", "min", "max")
MAX_PARAMS = 50
MAX_DEPTH = 32  # lists and mappings within each other
MAX_PATTERN_VALUE = 256  # characters of a value a pattern checks (bounds a slow pattern's time)
_DIGITS = re.compile(r"-?[0-9]+")
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR, _INT, _BOOL = ("tag:yaml.org,2002:str", "tag:yaml.org,2002:int",
                     "tag:yaml.org,2002:bool")


@dataclass(frozen=True)
class Declared:
    """One declared parameter: its ``type`` (``string``, ``int``, ``bool``, ``choice``),
    whether it must be given, its default (typed) and what it is for."""

    name: str
    type: str = "string"
    required: bool = True
    default: Any = None
    description: str = ""
    choices: tuple[str, ...] = ()
    pattern: str | None = None
    min: int | None = None
    max: int | None = None

    def param_type(self) -> Any:
        """The ``tasks.paramtypes`` type that parses this parameter's values."""
        from tasks.paramtypes import Boolean, Choice, Integer, Text

        if self.type == "int":
            return Integer(self.min, self.max)
        if self.type == "bool":
            return Boolean()
        if self.type == "choice":
            return Choice(*self.choices)
        return Text(self.pattern, f"a text matching {self.pattern}" if self.pattern else None,
                    refs=False)

    def parse(self, raw: Any, where: str) -> Any:
        """``raw`` typed; one line naming the parameter otherwise. An int given as text is
        ASCII digits (``-?[0-9]+``: no ``1_0``, spaces or other scripts' digits); a value a
        pattern checks is at most ``MAX_PATTERN_VALUE`` characters."""
        from tasks.paramtypes import BadValue

        kind = self.param_type()
        if self.pattern is not None and isinstance(raw, str) and len(raw) > MAX_PATTERN_VALUE:
            raise ValidationError(f"{where}: parameter {self.name!r} is checked by a pattern: "
                                  f"at most {MAX_PATTERN_VALUE} characters, not {len(raw)}")
        try:
            if self.type == "int" and isinstance(raw, str) and not _DIGITS.fullmatch(raw):
                raise BadValue
            return kind.parse(raw)
        except BadValue as exc:
            why = str(exc) or f"must be {kind.expected}"
            shown = raw if not isinstance(raw, str) or len(raw) <= 60 else raw[:57] + "..."
            raise ValidationError(f"{where}: parameter {self.name!r} {why}, not {shown!r}"
                                  ) from None

    def sample(self) -> Any:
        """A value to check the spec with at add time: the default, else one of the type."""
        if self.default is not None:
            return self.default
        if self.type == "int":
            return self.min if self.min is not None else (self.max if self.max is not None
                                                          and self.max < 1 else 1)
        return {"bool": False, "choice": self.choices[0] if self.choices else ""}.get(
            self.type, "x")

    def as_dict(self) -> dict[str, Any]:
        """What is stored, shown and sent: the declaration's set fields."""
        out: dict[str, Any] = {"name": self.name, "type": self.type, "required": self.required,
                               "default": self.default, "description": self.description}
        out.update({k: v for k, v in (("choices", list(self.choices)), ("pattern", self.pattern),
                                      ("min", self.min), ("max", self.max)) if v not in (None, [])})
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Declared:
        return cls(name=d["name"], type=d.get("type", "string"),
                   required=bool(d.get("required", True)), default=d.get("default"),
                   description=d.get("description") or "", choices=tuple(d.get("choices") or ()),
                   pattern=d.get("pattern"), min=d.get("min"), max=d.get("max"))


@dataclass(frozen=True)
class TemplateFile:
    """A checked template file: its text, the task spec's YAML tree (without ``parameters``)
    and the declared parameters in file order."""

    text: str
    spec: Any  # yaml.MappingNode
    params: tuple[Declared, ...]

    def declared(self) -> dict[str, Declared]:
        return {p.name: p for p in self.params}


def _where(source: str, node: Any) -> str:
    mark = getattr(node, "start_mark", None)
    return f"{source}:{mark.line + 1}" if mark is not None else source


def _depth(text: str, source: str) -> None:
    """Refuse lists and mappings nested deeper than :data:`MAX_DEPTH`, from the parser's
    events (no recursion), before anything recursive (composing, copying) reads the file."""
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                line = f":{mark.line + 1}" if mark is not None else ""
                raise ValidationError(f"{source}{line}: lists and mappings are nested more than "
                                      f"{MAX_DEPTH} deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _compose(text: str, source: str) -> Any:
    from scheduler.submission.taskfile import compose_yaml

    try:
        _depth(text, source)
    except yaml.YAMLError:
        pass  # bad YAML: compose_yaml says what and where, in one line
    node = compose_yaml(text, source)
    if not isinstance(node, yaml.MappingNode):
        raise ValidationError(f"{source}: a template file is one mapping (parameters:, "
                              "action:, target:, ...)", hint="see docs/guides/templates.md")
    return node


def _declared(name: Any, node: Any, source: str) -> Declared:
    where = _where(source, node)
    if not isinstance(name, str) or not PARAM_NAME.fullmatch(name):
        raise ValidationError(f"{where}: parameter name {name!r} must be letters, digits and "
                              "'_', starting with a letter or '_'")
    try:
        d = yaml.load(yaml.serialize(node), Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise ValidationError(f"{where}: unreadable parameter {name!r} ({exc})") from None
    d = {} if d is None else d
    if not isinstance(d, dict):
        raise ValidationError(f"{where}: parameter {name!r} is a mapping (type:, default:, "
                              "description: ...)")
    for key in d:
        if key not in FIELDS:
            close = difflib.get_close_matches(str(key), FIELDS, n=1)
            raise ValidationError(f"{where}: parameter {name!r}: unknown field {key!r}",
                                  f"did you mean {close[0]!r}?" if close
                                  else "fields: " + ", ".join(FIELDS))
    kind = d.get("type", "string")
    if kind not in TYPES:
        raise ValidationError(f"{where}: parameter {name!r}: type {kind!r} is not one of "
                              f"{', '.join(TYPES)}")
    choices = d.get("choices") or []
    if (kind == "choice") != bool(choices) or not all(isinstance(c, str) for c in choices):
        raise ValidationError(f"{where}: parameter {name!r}: a choice has choices (a list of "
                              "texts), and only a choice has them")
    if kind != "string" and d.get("pattern") is not None:
        raise ValidationError(f"{where}: parameter {name!r}: only a string has a pattern")
    if kind != "int" and (d.get("min") is not None or d.get("max") is not None):
        raise ValidationError(f"{where}: parameter {name!r}: only an int has min and max")
    for key in ("min", "max"):
        if d.get(key) is not None and (isinstance(d[key], bool) or not isinstance(d[key], int)):
            raise ValidationError(f"{where}: parameter {name!r}: {key} must be a whole number")
    if d.get("pattern") is not None:
        try:
            parsed = re._parser.parse(str(d["pattern"]))  # what re.compile reads
            re.compile(str(d["pattern"]))
        except re.error as exc:
            raise ValidationError(f"{where}: parameter {name!r}: pattern is not a regular "
                                  f"expression ({exc})") from None
        if _nested_repeat(parsed):
            raise ValidationError(f"{where}: parameter {name!r}: pattern repeats a repeat "
                                  f"({d['pattern']!r}): such a pattern can take exponential "
                                  "time on a short value", "write one repeat, e.g. [a-z]+ for "
                                  "([a-z]+)+, or separate the repeats: [a-z]+(-[a-z]+)*")
    if isinstance(d.get("min"), int) and isinstance(d.get("max"), int) and d["min"] > d["max"]:
        raise ValidationError(f"{where}: parameter {name!r}: min {d['min']} is above max "
                              f"{d['max']}")
    required = d.get("required", d.get("default") is None)
    if not isinstance(required, bool):
        raise ValidationError(f"{where}: parameter {name!r}: required must be true or false")
    if not isinstance(d.get("description") or "", str):
        raise ValidationError(f"{where}: parameter {name!r}: description must be text")
    out = Declared(name=name, type=kind, required=required, description=d.get("description")
                   or "", choices=tuple(choices),
                   pattern=None if d.get("pattern") is None else str(d["pattern"]),
                   min=d.get("min"), max=d.get("max"))
    if d.get("default") is not None:
        out = Declared(**{**out.__dict__, "default": out.parse(d["default"], where)})
    if not out.required and out.default is None and kind != "string":
        raise ValidationError(f"{where}: parameter {name!r}: an optional {kind} needs a default")
    if (not out.required and out.default is None and out.pattern is not None
            and not re.fullmatch(out.pattern, "")):
        raise ValidationError(f"{where}: parameter {name!r}: optional, it is '' when not given, "
                              f"which its pattern does not match: give it a default")
    return out


def _only_repeats(items: Any) -> bool:
    """Whether a repeated body is nothing but repeats, one of them of more than one (``a+``,
    ``a+b?``, ``(a|b+)``): it matches one run of text in many ways, the start of exponential
    backtracking once it is repeated itself."""
    from re import _constants as c

    items = list(items)
    while len(items) == 1 and items[0][0] is c.SUBPATTERN:
        items = list(items[0][1][3])
    if len(items) == 1 and items[0][0] is c.BRANCH:
        return any(_only_repeats(alternative) for alternative in items[0][1][1])
    repeats = [av for op, av in items if op in (c.MAX_REPEAT, c.MIN_REPEAT)]
    return bool(items) and len(repeats) == len(items) and any(av[1] > 1 for av in repeats)


def _nested_repeat(parsed: Any) -> bool:
    """Whether a parsed pattern (``re._parser``) repeats a body of repeats, like ``(a+)+`` or
    ``(\\w+\\s?)*``, the classic shape of catastrophic backtracking. A heuristic: a separator
    in the body (``(-[a-z]+)*``) passes, and so may other slow patterns (the length cap,
    ``MAX_PATTERN_VALUE``, bounds those)."""
    from re import _constants as c

    for op, av in parsed:
        subs: list[Any] = []
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            if op is not c.POSSESSIVE_REPEAT and av[1] > 1 and _only_repeats(av[2]):
                return True
            subs = [av[2]]
        elif op is c.SUBPATTERN:
            subs = [av[3]]
        elif op is c.BRANCH:
            subs = list(av[1])
        elif op in (c.ASSERT, c.ASSERT_NOT):
            subs = [av[1]]
        elif op is c.ATOMIC_GROUP:
            subs = [av]
        elif op is c.GROUPREF_EXISTS:
            subs = [p for p in av[1:] if p is not None]
        if any(_nested_repeat(sub) for sub in subs):
            return True
    return False


def _scalars(node: Any, source: str) -> Any:
    """Every scalar value of the spec, in order (keys must not hold placeholders)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, _value in node.value:
                if isinstance(key, yaml.ScalarNode) and PLACEHOLDER.search(key.value):
                    raise ValidationError(f"{_where(source, key)}: a placeholder stands in a "
                                          f"value, not in a key ({key.value!r})")
            stack.extend(value for _key, value in reversed(node.value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.ScalarNode):
            yield node


_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null",
                                                  "timestamp", "seq", "map")}


def _plain(node: Any, source: str) -> None:
    """Refuse a node met twice (an alias of an anchor: a template file needs none, and a nest
    of them would expand to a huge value, the "billion laughs"), and a value that is not plain
    YAML (text, number, boolean, null, a task file's time, list, mapping with text keys):
    ``!!set``, ``!!binary`` or a tag of one's own has no place in a task file, and its digest
    would not be stable (or, with a number among the keys, not be taken)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise ValidationError(f"{_where(source, node)}: anchors and aliases (&name, *name) "
                                  "are not taken in a template file")
        seen.add(id(node))
        if node.tag not in _PLAIN_TAGS:
            raise ValidationError(f"{_where(source, node)}: a {node.tag} value is not taken in a "
                                  "template file (only text, numbers, true/false, null, lists "
                                  "and mappings)")
        if isinstance(node, yaml.MappingNode):
            for key, _value in node.value:
                if key.tag != _STR:
                    said = (f"{key.value!r} (quote it)" if isinstance(key, yaml.ScalarNode)
                            else "a list" if isinstance(key, yaml.SequenceNode) else "a mapping")
                    raise ValidationError(f"{_where(source, key)}: a key is text, not {said}")
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def load_template(text: str, source: str = "<template file>") -> TemplateFile:
    """Check a template file (see the module docstring, 1); one line ``source:line: ...``."""
    node = _compose(text, source)
    _plain(node, source)
    params: list[Declared] = []
    rest = []
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "parameters":
            if params or not isinstance(value, yaml.MappingNode):
                raise ValidationError(f"{_where(source, value)}: parameters is one mapping of "
                                      "NAME: {type:, default:, description: ...}")
            for pkey, pvalue in value.value:
                params.append(_declared(pkey.value, pvalue, source))
            if len({p.name for p in params}) != len(params):
                raise ValidationError(f"{_where(source, value)}: a parameter is declared twice")
            continue
        rest.append((key, value))
    if len(params) > MAX_PARAMS:
        raise ValidationError(f"{source}: {len(params)} parameters: at most {MAX_PARAMS}")
    spec = yaml.MappingNode(node.tag, rest, node.start_mark, node.end_mark)
    names = {p.name for p in params}
    for scalar in _scalars(spec, source):
        for found in PLACEHOLDER.findall(scalar.value):
            if found not in names:
                close = difflib.get_close_matches(found, names, n=1)
                raise ValidationError(
                    f"{_where(source, scalar)}: unknown placeholder {{param.{found}}} "
                    f"(declared: {', '.join(sorted(names)) or 'none'})",
                    f"did you mean {{param.{close[0]}}}?" if close
                    else "declare it under parameters:")
    out = TemplateFile(text=text, spec=spec, params=tuple(params))
    request = render(out, {p.name: p.sample() for p in params}, source)  # a task file
    import tasks

    tasks.get_action(request.action)  # an unknown action: NotFoundError (exit code 4)
    return out


def typed_values(file: TemplateFile, given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The run's values by name, typed, defaults filled in (see the module docstring, 2)."""
    declared = file.declared()
    for name in given:
        if name not in declared:
            close = difflib.get_close_matches(str(name), declared, n=1)
            raise ValidationError(
                f"{where}: unknown parameter {name!r} (declared: "
                f"{', '.join(declared) or 'none'})",
                f"did you mean {close[0]!r}?" if close else "see `fleetsched templates show`")
    out: dict[str, Any] = {}
    for name, p in declared.items():
        if name not in given or given[name] is None:
            if p.required:
                about = f" ({p.description})" if p.description else ""
                raise ValidationError(f"{where}: missing required parameter {name!r}{about}",
                                      f"add -p {name}=VALUE")
            out[name] = p.default if p.default is not None else ""
            continue
        out[name] = p.parse(given[name], where)
        if isinstance(out[name], str) and "{host." in out[name]:
            raise ValidationError(f"{where}: parameter {name!r}: a value cannot hold a "
                                  "{host.*} placeholder (only the template's own text can)")
    return out


def _as_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _fill(text: str, values: Mapping[str, Any], paste: Any = _as_text) -> str:
    return PLACEHOLDER.sub(lambda m: paste(values[m.group(1)]), text)


def _literal(author: str, filled: str, where: str) -> str:
    """``filled`` (``author``'s text with values in it) as a value a secret-reference parser
    reads literally: a ``@`` that a value put at the start becomes ``@@`` (the literal escape of
    ``tasks.secrets``). A reference is the author's own text: one holding a placeholder is
    refused, as is a placeholder after a lone leading ``@``."""
    if not PLACEHOLDER.search(author):
        return filled
    if author.startswith("@") and not author.startswith("@@"):
        raise ValidationError(f"{where}: a placeholder cannot stand in a secret reference or "
                              f"after a leading '@' ({author!r})",
                              "a reference is the template's own text; write @@ for a literal @")
    return "@" + filled if filled.startswith("@") else filled


def _text_node(text: str, like: Any = None) -> Any:
    return yaml.ScalarNode(_STR, text, getattr(like, "start_mark", None),
                           getattr(like, "end_mark", None))


def _words(node: Any, opener: str, kind: type, where: str) -> list[Any] | None:
    """An argv or key=value text's words as nodes (JSON text as its items, else split with
    ``shlex`` before any value is in it, so a value is one word); None if not a text."""
    if not isinstance(node, yaml.ScalarNode) or node.tag != _STR:
        return None
    text = node.value
    if text.lstrip().startswith(opener):
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        if isinstance(decoded, kind):
            items = list(decoded.items()) if kind is dict else decoded
            if all(isinstance(v, str) for pair in items
                   for v in (pair if isinstance(pair, tuple) else (pair,))):
                return items
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValidationError(f"{_where(where, node)}: {text!r} does not split into words "
                              f"({exc})") from None


def _fill_words(node: Any, values: Mapping[str, Any], where: str) -> Any:
    """An argv (``command``'s ``cmd``, ...): every value is inside one element, as a literal."""
    if isinstance(node, yaml.ScalarNode) and PLACEHOLDER.search(node.value):
        words = _words(node, "[", list, where)
        if words is not None:
            node = yaml.SequenceNode("tag:yaml.org,2002:seq",
                                     [_text_node(w, node) for w in words],
                                     node.start_mark, node.end_mark)
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            if isinstance(item, yaml.ScalarNode) and PLACEHOLDER.search(item.value):
                node.value[i] = _text_node(_literal(item.value, _fill(item.value, values),
                                                   _where(where, item)), item)
        return node
    return _fill_text(node, values, where)


def _fill_pairs(node: Any, values: Mapping[str, Any], where: str) -> Any:
    """``key=value`` pairs (``ansible``'s ``extra_vars``): a value lands in a pair's value only,
    as a literal, never in a key nor as another pair."""
    if isinstance(node, yaml.ScalarNode) and PLACEHOLDER.search(node.value):
        words = _words(node, "{", dict, where)
        if words is not None:
            pairs = [w if isinstance(w, tuple) else tuple(w.split("=", 1)) for w in words]
            node = yaml.SequenceNode("tag:yaml.org,2002:seq",
                                     [_text_node("=".join(p), node) for p in pairs],
                                     node.start_mark, node.end_mark)
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            if isinstance(item, yaml.ScalarNode) and PLACEHOLDER.search(item.value):
                key, eq, val = item.value.partition("=")
                if not eq or PLACEHOLDER.search(key):
                    raise ValidationError(f"{_where(where, item)}: a placeholder stands in a "
                                          f"key=value pair's value, not its key ({item.value!r})")
                node.value[i] = _text_node(
                    f"{key}={_literal(val, _fill(val, values), _where(where, item))}", item)
        return node
    if isinstance(node, yaml.MappingNode):
        for i, (key, val) in enumerate(node.value):
            if isinstance(val, yaml.ScalarNode) and PLACEHOLDER.search(val.value):
                node.value[i] = (key, _text_node(
                    _literal(val.value, _fill(val.value, values), _where(where, val)), val))
        return node
    return _fill_text(node, values, where)


def _fill_shell(node: Any, values: Mapping[str, Any], where: str) -> Any:
    """A shell script (``shell``'s ``cmd``, ``wave_check``): each value is one shell word
    (``shlex.quote``), so a placeholder may stand only where ``{host.*}`` may
    (``tasks.shellscript``: outside quotes, comments, backquotes and here-documents)."""
    from tasks.shellscript import _places  # the rule {host.*} placeholders are held to

    if not isinstance(node, yaml.ScalarNode) or not PLACEHOLDER.search(node.value):
        return _fill_text(node, values, where)
    places = _places(node.value)
    for m in PLACEHOLDER.finditer(node.value):
        if places[m.start()] != "plain":
            raise ValidationError(
                f"{_where(where, node)}: {m.group(0)} at character {m.start() + 1} is "
                f"{places[m.start()]}: in a shell script write it bare, outside quotes, "
                "comments, backquotes and here-documents (its value is quoted as one word)")
    return _text_node(_fill(node.value, values, lambda v: shlex.quote(_as_text(v))), node)


def _fill_text(node: Any, values: Mapping[str, Any], where: str, refs: bool = False) -> Any:
    """Any other value: one placeholder that is the whole value takes its type, else text;
    where a secret reference may stand (``refs``), a value is a literal."""
    for scalar in _scalars(node, where):
        whole = PLACEHOLDER.fullmatch(scalar.value)
        author = scalar.value
        if whole:  # the whole value: the parameter's value as its type
            value = values[whole.group(1)]
            scalar.value, scalar.style = _as_text(value), None
            scalar.tag = (_BOOL if isinstance(value, bool) else
                          _INT if isinstance(value, int) else _STR)
        elif PLACEHOLDER.search(scalar.value):
            scalar.value, scalar.tag = _fill(scalar.value, values), _STR
        if refs and scalar.tag == _STR:
            scalar.value = _literal(author, scalar.value, _where(where, scalar))
    return node


def _fillers(spec: Any, source: str) -> dict[str, Any]:
    """How each of the action's parameters is filled in, by its type (``tasks.paramtypes``)."""
    from tasks.paramtypes import Argv, KeyValues, ShellScript

    found = [v for k, v in spec.value if isinstance(k, yaml.ScalarNode) and k.value == "action"]
    if not found or not isinstance(found[0], yaml.ScalarNode):
        return {}
    if PLACEHOLDER.search(found[0].value):
        raise ValidationError(f"{_where(source, found[0])}: the action is the template's own: "
                              "no placeholder in action:")
    import tasks

    try:
        declared = tasks.get_action(found[0].value).params
    except NotFoundError:  # refused once the file is parsed (load_template)
        return {}
    out: dict[str, Any] = {}
    for name, param in declared.items():
        kind = param.type
        out[name] = (_fill_shell if isinstance(kind, ShellScript) else
                     _fill_words if isinstance(kind, Argv) else
                     _fill_pairs if isinstance(kind, KeyValues) else
                     (lambda n, v, w: _fill_text(n, v, w, refs=True)) if kind.refs else
                     _fill_text)
    return out


def render(file: TemplateFile, values: Mapping[str, Any], source: str) -> TaskRequest:
    """The task request of ``file`` with ``values`` (see the module docstring, 3)."""
    from scheduler.submission.taskfile import parse_task_text

    spec = copy.deepcopy(file.spec)
    fillers = _fillers(spec, source)
    for i, (key, value) in enumerate(spec.value):
        name = key.value if isinstance(key, yaml.ScalarNode) else None
        if name == "params" and isinstance(value, yaml.MappingNode):
            for j, (pkey, pvalue) in enumerate(value.value):
                fill = fillers.get(pkey.value if isinstance(pkey, yaml.ScalarNode) else None,
                                   _fill_text)
                value.value[j] = (pkey, fill(pvalue, values, source))
        elif name == "wave_check":
            spec.value[i] = (key, _fill_shell(value, values, source))
        else:
            _fill_text(value, values, source)
    try:
        return parse_task_text(yaml.serialize(spec), source)
    except ValidationError as exc:  # its line is the filled-in file's, not the template's
        said = re.sub(rf"^{re.escape(source)}:\d+: ", f"{source}: ", str(exc))
        raise ValidationError(said, exc.hint) from None


def digest(text: str) -> str:
    """The SHA-256 (hex) of what a template file says, comments and layout aside."""
    said = json.dumps(yaml.load(text, Loader=_LOADER), sort_keys=True, default=str,
                      separators=(",", ":"))
    return hashlib.sha256(said.encode()).hexdigest()
