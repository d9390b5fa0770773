"""Action parameters: one clear line for every bad value, typed values for good ones, and a JSON
form that validates back to the same thing (what the queue and the database store)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tasks
from scheduler.errors import NotFoundError, ValidationError
from tasks.secrets import SecretRef


def error_of(action: str, params: dict) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        tasks.get_action(action).validate(params)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"action {action}: ")
    return info.value


COPY = {"src": "/srv/app.conf", "dest": "/etc/app.conf"}


def test_a_bad_file_mode_is_named_with_what_was_expected_and_what_was_given() -> None:
    err = error_of("copy", {**COPY, "mode": "999"})
    assert str(err) == ("action copy: parameter 'mode' must be an octal file mode like 0644, "
                        "got '999'")


@pytest.mark.parametrize("action, params, fragment", [
    ("copy", {"src": "/a"}, "missing required parameter 'dest'"),
    ("copy", {**COPY, "mdoe": "0644"}, "unknown parameter 'mdoe' (known: src, dest, mode"),
    ("copy", {**COPY, "src": "relative/file"}, "parameter 'src' must be an absolute path"),
    ("copy", {**COPY, "dest": "/etc/"}, "parameter 'dest' must name a file, not end with '/'"),
    ("copy", {**COPY, "owner": "root;id"}, "parameter 'owner' must be an owner like"),
    ("copy", {**COPY, "sha256": "abc"}, "parameter 'sha256' must be a SHA-256 checksum"),
    ("command", {"cmd": ""}, "parameter 'cmd' must not be empty"),
    ("command", {"cmd": "echo 'unclosed"}, "parameter 'cmd' must be a command"),
    ("command", {"cmd": ["echo", 3.5j]}, "parameter 'cmd': element 2 of the list is \"3.5j\", not a string"),
    ("command", {"cmd": ["sleep", 5]}, "parameter 'cmd': element 2 of the list is 5, not a string"),
    ("command", {"cmd": ["echo", "a\0b"]}, "must not contain a NUL character"),
    ("command", {"cmd": "echo {host.password}"}, "unknown placeholder '{host.password}'"),
    ("command", {"cmd": "echo @env:1BAD"}, "must be @env:NAME"),
    ("command", {"cmd": "echo @nope"}, "write @@ for a literal '@'"),
    ("command", {"cmd": ["@env:PROG", "x"]}, "must not start with a secret reference"),
    ("firmware", {"image": "/fw.bin", "upgrade_cmd": "up", "version_cmd": "v",
                  "expected_version": "4.2", "reboot": "maybe"},
     "parameter 'reboot' must be true or false, got 'maybe'"),
    ("firmware", {"image": "/fw.bin", "upgrade_cmd": "up", "version_cmd": "v",
                  "expected_version": "4.2", "reconnect_timeout": "soon"},
     "parameter 'reconnect_timeout' must be a duration like 30s"),
    ("firmware", {"image": "/fw.bin", "upgrade_cmd": "up", "version_cmd": "v",
                  "expected_version": "4.2", "reboot": True, "reboot_delay": "5m",
                  "reconnect_timeout": "1m"},
     "reboot_delay must be shorter than reconnect_timeout"),
    ("ansible", {"playbook": "/p.yml", "extra_vars": "9lives=yes"}, "has a bad key '9lives'"),
    ("ansible", {"playbook": "/p.yml", "extra_vars": "novalue"}, "must be key=value pairs"),
    ("ansible", {"playbook": "/p.yml", "tags": "a b"}, "parameter 'tags' must be tags like"),
    ("script", {"script": "/s.sh", "remote_tmp": "tmp"}, "must be an absolute directory path"),
])
def test_each_kind_of_bad_parameter_gives_one_line_naming_it(action: str, params: dict,
                                                             fragment: str) -> None:
    assert fragment in str(error_of(action, params))


def test_an_unknown_parameter_close_to_a_known_one_gets_a_did_you_mean_hint() -> None:
    assert error_of("copy", {**COPY, "mdoe": "0644"}).hint == "did you mean 'mode'?"


def test_a_secret_parameter_refuses_a_literal_value_without_echoing_it() -> None:
    # Given a literal passphrase where a reference belongs
    err = error_of("key-rollover", {"pre_check": "true", "rollover": "roll", "post_check": "true",
                                    "secret": "hunter2-the-passphrase"})
    # Then the message says what to give instead, and never shows the value
    assert "@env:NAME or @file:/path" in str(err)
    assert "hunter2" not in str(err) and "hunter2" not in (err.hint or "")


def test_a_secret_parameter_accepts_a_reference_and_keeps_it_unresolved() -> None:
    params = tasks.get_action("key-rollover").validate(
        {"pre_check": "true", "rollover": "roll", "post_check": "true", "secret": "@env:DNS_PIN"})
    assert params["secret"] == SecretRef("env", "DNS_PIN")
    assert str(params["secret"]) == "@env:DNS_PIN"


def test_a_command_string_is_split_like_a_shell_would_and_equals_the_list_form() -> None:
    command = tasks.get_action("command")
    as_text = command.validate({"cmd": "grep -r 'two words' \"/var/log/my app\""})
    as_list = command.validate({"cmd": ["grep", "-r", "two words", "/var/log/my app"]})
    assert as_text == as_list
    assert as_text["cmd"] == ["grep", "-r", "two words", "/var/log/my app"]


def test_a_command_given_as_json_text_on_the_command_line_is_that_list_not_one_word() -> None:
    # Given -p 'cmd=["sh","-c","a | b"]' as the CLI passes it (text), and a test command
    as_json = tasks.get_action("command").validate({"cmd": '["sh", "-c", "date | wc -c"]'})
    bracket = tasks.get_action("command").validate({"cmd": "[ -f /etc/motd ]"})
    # Then the JSON text is the argv list, while text that is not JSON is split like a shell
    assert as_json["cmd"] == ["sh", "-c", "date | wc -c"]
    assert bracket["cmd"] == ["[", "-f", "/etc/motd", "]"]


def test_typed_values_come_back_as_python_types_with_defaults_filled_in() -> None:
    copy = tasks.get_action("copy").validate({**COPY, "mode": "0640"})
    assert copy["mode"] == 0o640 and copy["owner"] is None
    fw = tasks.get_action("firmware").validate({
        "image": "/fw.bin", "upgrade_cmd": "fw-install {image}", "version_cmd": "fw-version",
        "expected_version": "4.2", "reboot": "yes", "reconnect_timeout": "15m"})
    assert fw["reboot"] is True and fw["reconnect_timeout"] == 900.0
    assert fw["reboot_cmd"] == ["reboot"] and fw["skip_if_current"] is True
    assert fw["upgrade_cmd"] == ["fw-install", "{image}"]


def test_an_at_sign_is_escaped_by_doubling_and_survives_the_round_trip() -> None:
    command = tasks.get_action("command")
    params = command.validate({"cmd": ["echo", "@@me", "@env:TOKEN"]})
    assert params["cmd"] == ["echo", "@me", SecretRef("env", "TOKEN")]
    assert command.dump(params) == {"cmd": ["echo", "@@me", "@env:TOKEN"]}
    assert command.validate(command.dump(params)) == params


FULL = {
    "command": {"cmd": "systemctl reload nginx", "stdin": "@file:/etc/fleet/token"},
    "script": {"script": "/srv/s.sh", "args": "--zone {host.vars.zone}", "interpreter": "bash",
               "stdin": "hello", "sha256": "a" * 64, "remote_tmp": "/var/tmp"},
    "copy": {**COPY, "mode": "0600", "owner": "www-data:www-data", "sha256": "B" * 64},
    "firmware": {"image": "/fw.bin", "upgrade_cmd": "fw-install {image}", "version_cmd": "v",
                 "expected_version": "4.2", "sha256": "c" * 64, "reboot": "true",
                 "reboot_cmd": "shutdown -r now", "reboot_delay": "30s",
                 "reconnect_timeout": "20m", "skip_if_current": "no", "remote_tmp": "/data"},
    "key-rollover": {"pre_check": "dnssec-verify z", "rollover": "rndc dnssec -rollover z",
                     "post_check": "dig z DNSKEY", "done_check": "test -e /done",
                     "secret": "@env:PASS"},
    "ansible": {"playbook": "/pb/site.yml", "inventory": "/pb/hosts", "check": "yes",
                "extra_vars": "version=4.2 note='two words' token=@env:TOK", "tags": "deploy",
                "ansible_playbook": "/opt/ansible/bin/ansible-playbook"},
}


@pytest.mark.parametrize("name", sorted(FULL))
def test_every_builtin_action_validates_its_own_dumped_parameters_unchanged(name: str) -> None:
    action = tasks.get_action(name)
    typed = action.validate(FULL[name])
    assert action.validate(action.dump(typed)) == typed


def test_every_builtin_action_declares_its_nature() -> None:
    by_name = {a.name: a for a in tasks.list_actions()}
    assert set(FULL) <= set(by_name)
    assert by_name["firmware"].requires_window and not by_name["firmware"].idempotent
    assert by_name["key-rollover"].idempotent and by_name["copy"].idempotent
    assert not by_name["command"].idempotent and not by_name["script"].idempotent
    assert by_name["ansible"].default_executor == "local"
    for action in by_name.values():
        assert isinstance(action, tasks.Action)
        assert action.expected_ms > 0 and action.description
        assert all(isinstance(p, tasks.Param) and p.help for p in action.params.values())


def test_an_unknown_action_is_not_found_and_the_hint_lists_the_known_ones() -> None:
    with pytest.raises(NotFoundError) as info:
        tasks.get_action("firmwre")
    assert str(info.value) == "unknown action 'firmwre'"
    assert "command" in info.value.hint and "key-rollover" in info.value.hint


argv_text = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                    max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(argv_text, min_size=1, max_size=6))
def test_any_argv_list_survives_dump_and_validate_unchanged(argv: list[str]) -> None:
    # Hypothesis: whatever an operator types (quotes, $, ;, newlines, leading @), the stored
    # form gives back the same elements
    command = tasks.get_action("command")
    try:
        typed = command.validate({"cmd": argv})
    except ValidationError:
        # only values that look like references or placeholders may be refused
        assert any(a.startswith("@") or "{host." in a for a in argv)
        return
    assert command.validate(command.dump(typed)) == typed
    plain = [a for a in typed["cmd"] if isinstance(a, str)]
    assert all("\0" not in a for a in plain)
