"""Where the ``shell`` action's ``cmd`` may hold a ``{host.*}`` placeholder
(:mod:`tasks.shellscript`): bare words are accepted; quotes, comments, backslashes,
backquotes, here-documents and substitutions inside double quotes are refused with one line."""

from __future__ import annotations

import pytest

import tasks
from scheduler.errors import ValidationError

ACCEPTED = [
    "uname -n; echo ok",
    "echo {host.name}",
    "tar czf /backup/{host.name}.tgz /etc && echo done",
    "echo a#{host.name} $(hostname) {host.vars.zone}",
    "x={host.port}; echo \"$x\" '{not a placeholder}' | tail -1",
    "echo \\\n{host.name}",
]
REFUSED = [
    ('echo "{host.name}"', "inside double quotes"),
    ("echo '{host.name}'", "inside single quotes"),
    ("echo $'{host.name}'", "inside $'...'"),
    ("ls # {host.name}", "inside a comment"),
    ("echo \\{host.name}", "after a backslash"),
    ("echo `echo {host.name}`", "inside backquotes"),
    ('echo "$(echo "{host.name}")"', "after a substitution inside double quotes"),
    ("cat <<EOF\nx\nEOF\necho {host.name}", "after a here-document (<<)"),
]


@pytest.mark.parametrize("script", ACCEPTED)
def test_a_bare_placeholder_or_none_is_accepted_and_kept_as_written(script: str) -> None:
    assert tasks.get_action("shell").validate({"cmd": script})["cmd"] == script


@pytest.mark.parametrize(("script", "place"), REFUSED)
def test_a_placeholder_where_a_quoted_word_is_not_one_word_is_refused(script: str,
                                                                      place: str) -> None:
    with pytest.raises(ValidationError) as info:
        tasks.get_action("shell").validate({"cmd": script})
    message = str(info.value)
    assert message.startswith("action shell: parameter 'cmd': {host.name} at character ")
    assert f" is {place}: write it bare" in message and "\n" not in message


def test_an_unknown_placeholder_and_an_empty_script_are_refused() -> None:
    action = tasks.get_action("shell")
    with pytest.raises(ValidationError, match=r"unknown placeholder '\{host.password\}'"):
        action.validate({"cmd": "echo {host.password}"})
    with pytest.raises(ValidationError, match="must not be empty"):
        action.validate({"cmd": "  "})
