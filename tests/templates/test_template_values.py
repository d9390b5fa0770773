"""What a template's values can and cannot become: a value supplied at run time is one literal
argument, never a secret reference (``@env:``/``@file:``), never shell code and never a second
argument; run for real on the local executor (the worker's path: validate, resolve secrets,
run). And the file checks of ``templates.spec``: nesting depth, plain YAML values only, and
the declarations' bounds."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

import tasks
from scheduler.errors import ValidationError
from scheduler.templates.spec import digest, load_template, render, typed_values
from tasks.executors import build_executor
from tasks.host import Host
from tasks.secrets import resolve

SECRET = "s3cr3t-of-the-worker"
# Prints its arguments as JSON: what the program really received.
ECHO = shlex.join([sys.executable, "-c",
                   "import json, sys; sys.stdout.write(json.dumps(sys.argv[1:]))"])


def template(action: str, params: str, declared: str = "word: {}") -> str:
    return (f"parameters:\n  {declared}\naction: {action}\ntarget: web-01\n"
            f"params: {params}\nexecutor: local\n")


def run_for_real(text: str, values: dict[str, Any]) -> list[Any]:
    """The template filled in and run as a worker runs it: the arguments ECHO received."""
    file = load_template(text, "t.yaml")
    request = render(file, typed_values(file, values, "template t"), "t.yaml")
    action = tasks.get_action(request.action)
    params = resolve(action.validate(request.params))  # as the worker does, just before it runs
    host = Host("local-1")
    with build_executor("local", {}).session(host) as session:
        result = action.run(session, host, params, 30.0)
    assert result.ok, result.error
    return json.loads(result.results[-1].stdout_head)


@pytest.mark.parametrize("params", [
    "{cmd: " + json.dumps(ECHO + " {param.word}") + "}",
    "{cmd: " + json.dumps([*shlex.split(ECHO), "{param.word}"]) + "}",
    "{cmd: " + json.dumps(["sh", "-c", ECHO + ' "$1"', "x", "{param.word}"]) + "}",
], ids=["command-string", "command-list", "sh-c-argument"])
@pytest.mark.parametrize("value", ["@env:WORKER_SECRET", "@file:/etc/hostname", "@@x",
                                   "a b  c", "x; touch pwned", "'\"$(id)`id`"])
def test_a_value_is_one_literal_argument_never_a_secret_reference(
        params: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_SECRET", SECRET)
    # Given a command template whose value is a reference, has spaces, or shell syntax
    # When it runs on the local executor, secrets resolved as on a worker
    got = run_for_real(template("command", params), {"word": value})
    # Then the program received the value itself, as one argument
    assert got == [value]


def test_a_shell_value_is_one_quoted_word_and_runs_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # were a value run, what it made would land here
    canary = tmp_path / "pwned"
    text = template("shell", "{cmd: " + json.dumps(ECHO + " {param.word} {param.word}") + "}")
    for value in [f"nginx; touch {canary}", f"$(touch {canary})", f"`touch {canary}`",
                  f"x' ; touch {canary}; '", "a b", "", "@env:WORKER_SECRET"]:
        assert run_for_real(text, {"word": value}) == [value, value]
    assert not canary.exists()


@pytest.mark.parametrize(("script", "place"), [
    ('echo \\"{param.word}\\"', "inside double quotes"),
    ("echo '{param.word}'", "inside single quotes"),
    ("echo x # {param.word}", "inside a comment"),
    ("cat <<EOF\\n{param.word}\\nEOF", "after a here-document (<<)"),
    ("echo `{param.word}`", "inside backquotes"),
])
def test_a_shell_placeholder_where_a_quoted_word_is_not_one_is_refused_in_one_line(
        script: str, place: str) -> None:
    with pytest.raises(ValidationError) as exc:
        load_template(template("shell", f'{{cmd: "{script}"}}'), "t.yaml")
    assert str(exc.value).startswith("t.yaml:5: {param.word} at character ")
    assert place in str(exc.value) and "\n" not in str(exc.value)


def test_a_wave_check_value_is_one_quoted_word() -> None:
    text = template("command", '{cmd: "true"}') + ("waves: 1,100%\n"
                                                 "wave_check: systemctl is-active {param.word}\n")
    file = load_template(text, "t.yaml")
    request = render(file, typed_values(file, {"word": "x; id"}, "t"), "t.yaml")
    assert request.waves is not None and request.waves.check == "systemctl is-active 'x; id'"


@pytest.mark.parametrize("params", [
    '{cmd: ["cat", "@file:{param.word}"]}', '{cmd: "cat @env:{param.word}"}',
    '{cmd: "true", stdin: "@{param.word}"}',
])
def test_a_placeholder_in_a_secret_reference_is_refused_at_add(params: str) -> None:
    with pytest.raises(ValidationError, match="a placeholder cannot stand in a secret reference"):
        load_template(template("command", params), "t.yaml")


def test_the_author_own_references_still_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_SECRET", SECRET)
    argv = [*shlex.split(ECHO), "@env:WORKER_SECRET", "{param.word}"]
    text = template("command", "{cmd: " + json.dumps(argv) + "}")
    assert run_for_real(text, {"word": "@env:WORKER_SECRET"}) == [SECRET, "@env:WORKER_SECRET"]


def test_extra_vars_values_are_literals_in_their_pair() -> None:
    for params in ('{playbook: /p.yml, extra_vars: "v={param.word} k=2"}',
                   '{playbook: /p.yml, extra_vars: {v: "{param.word}", k: "2"}}'):
        file = load_template(template("ansible", params), "t.yaml")
        request = render(file, typed_values(file, {"word": "@env:X y=1"}, "t"), "t.yaml")
        assert tasks.get_action("ansible").validate(request.params)["extra_vars"] == {
            "v": "@env:X y=1", "k": "2"}


def test_a_value_holding_a_host_placeholder_is_refused() -> None:
    file = load_template(template("command", '{cmd: "echo {param.word}"}'), "t.yaml")
    with pytest.raises(ValidationError, match="host"):
        typed_values(file, {"word": "{host.vars.db_root_pw}"}, "template t")


@pytest.mark.parametrize("depth", [33, 200, 1000, 100_000])
def test_nesting_deeper_than_32_is_one_line_before_anything_recursive(depth: int) -> None:
    text = template("command", '{cmd: "true"}') + "name: " + "[" * depth + "]" * depth + "\n"
    with pytest.raises(ValidationError) as exc:
        load_template(text, "t.yaml")
    assert str(exc.value) in ("t.yaml:7: lists and mappings are nested more than 32 deep",
                              "t.yaml:7: not valid YAML (exceeded maximum nesting depth)")
    with pytest.raises(ValidationError):
        load_template(text.replace("name: ", "executor_options: {x: ") + "}", "t.yaml")


def test_nesting_32_deep_is_read() -> None:
    nested = "{a: " * 31 + "1" + "}" * 31  # in the file's own mapping: 32 deep
    load_template(template("command", '{cmd: "true"}') + f"executor_options: {nested}\n", "t.yaml")


@pytest.mark.parametrize("value", ["!!set {a: null, b: null}", "!!binary aGk=", "!mine x",
                                   "!!omap [{a: 1}]", "!!python/name:os.system x"])
def test_a_value_that_is_not_plain_yaml_is_refused_in_one_line(value: str) -> None:
    text = template("command", '{cmd: "true"}') + f"name: {value}\n"
    with pytest.raises(ValidationError, match=r"^t\.yaml:7: a \S+ value is not taken in a "
                                               r"template file \(only text"):
        load_template(text, "t.yaml")
    with pytest.raises(ValidationError, match="is not taken"):  # in a declaration too
        load_template(template("command", '{cmd: "echo {param.word}"}',
                               f"word: {{default: {value}}}"), "t.yaml")


def test_the_same_file_has_the_same_digest_and_a_number_key_is_refused() -> None:
    text = template("command", '{cmd: "echo {param.word}"}')
    assert digest(text) == digest(text.replace("\n", "  # a comment\n", 1))
    with pytest.raises(ValidationError, match=r"^t\.yaml:7: a key is text, not '1' \(quote it\)$"):
        load_template(text + "executor_options: {1: a, b: c}\n", "t.yaml")
    for key, said in (("[a, b]", "a list"), ("{a: b}", "a mapping")):
        with pytest.raises(ValidationError) as exc:
            load_template(text + f"executor_options: {{? {key} : c}}\n", "t.yaml")
        assert str(exc.value) == f"t.yaml:7: a key is text, not {said}"


@pytest.mark.parametrize(("declared", "said"), [
    ("n: {type: int, min: 5, max: 1}", "parameter 'n': min 5 is above max 1"),
    ("word: {required: false, pattern: '[a-z]+'}",
     "parameter 'word': optional, it is '' when not given, which its pattern does not match"),
    ("word: {pattern: '(a+)+$'}", "parameter 'word': pattern repeats a repeat ('(a+)+$')"),
    ("word: {pattern: '([a-z]*[0-9]?){2,}'}", "parameter 'word': pattern repeats a repeat"),
    ("word: {pattern: '(\\w+\\s?)+x'}", "parameter 'word': pattern repeats a repeat"),
    ("word: {pattern: '((a|b+))*'}", "parameter 'word': pattern repeats a repeat"),
])
def test_a_declaration_that_cannot_hold_is_refused_at_add(declared: str, said: str) -> None:
    with pytest.raises(ValidationError) as exc:
        load_template(template("command", '{cmd: "echo x"}', declared), "t.yaml")
    assert str(exc.value).startswith(f"t.yaml:2: {said}")


def test_an_optional_pattern_parameter_is_checked_when_empty_unless_empty_is_its_default() -> None:
    file = load_template(template("command", '{cmd: "echo {param.word}"}',
                                  "word: {required: false, pattern: '[a-z]*'}"), "t.yaml")
    assert typed_values(file, {}, "t") == {"word": ""}
    strict = load_template(template("command", '{cmd: "echo {param.word}"}',
                                    "word: {default: abc, pattern: '[a-z]+'}"), "t.yaml")
    with pytest.raises(ValidationError, match="must be a text matching"):
        typed_values(strict, {"word": ""}, "t")


@pytest.mark.parametrize("raw", ["1_0", " 3", "3 ", "٣", "+3", "0x10", "1e3", "", "３"])
def test_an_int_is_ascii_digits_only(raw: str) -> None:
    file = load_template(template("command", '{cmd: "echo {param.n}"}', "n: {type: int}"),
                         "t.yaml")
    with pytest.raises(ValidationError, match=r"^t: parameter 'n' must be an integer, not "):
        typed_values(file, {"n": raw}, "t")
    assert typed_values(file, {"n": "-12"}, "t") == {"n": -12}
    assert typed_values(file, {"n": 7}, "t") == {"n": 7}


def test_a_pattern_checked_value_is_at_most_256_characters() -> None:
    file = load_template(template("command", '{cmd: "echo {param.word}"}',
                                  "word: {pattern: '[a-z]+(-[a-z]+)*'}"), "t.yaml")
    assert typed_values(file, {"word": "a" * 256}, "t") == {"word": "a" * 256}
    with pytest.raises(ValidationError, match="at most 256 characters, not 257"):
        typed_values(file, {"word": "a" * 257}, "t")


def test_a_refused_long_value_is_shown_cut_to_60_characters() -> None:
    file = load_template(template("command", '{cmd: "echo {param.word}"}'), "t.yaml")
    with pytest.raises(ValidationError) as exc:
        typed_values(file, {"word": "a" * 100_000}, "t")
    assert str(exc.value) == f"t: parameter 'word' must be a text, not '{'a' * 57}...'"
