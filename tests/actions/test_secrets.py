"""Secret references: resolved only on the worker, and masked in whatever leaves it."""

from __future__ import annotations

import json
import logging
import shlex
from pathlib import Path

import pytest

from scheduler.redact import MASK, RedactingFilter, Redactor
from tasks.host import CommandResult
from tasks.secrets import SecretError, SecretRef, SecretValue, parse_ref, resolve

CANARY = "canary-7f3a'9\"$x"


def test_references_parse_and_a_doubled_at_sign_is_a_literal() -> None:
    assert parse_ref("@env:DNS_KEY") == SecretRef("env", "DNS_KEY")
    assert parse_ref("@file:/etc/fleet/key") == SecretRef("file", "/etc/fleet/key")
    assert parse_ref("@@env:NOT_A_REF") == "@env:NOT_A_REF"
    assert parse_ref("plain") is None
    for bad in ("@env:", "@env:A-B", "@file:relative", "@vault:x"):
        with pytest.raises(SecretError):
            parse_ref(bad)


def test_resolve_reads_env_and_file_secrets_now_and_teaches_the_redactor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given one secret in the environment and one in a file (with a trailing newline)
    monkeypatch.setenv("FS_TEST_TOKEN", CANARY)
    key = tmp_path / "key"
    key.write_text("file-secret-value\n")
    params = {"cmd": ["login", SecretRef("env", "FS_TEST_TOKEN")],
              "stdin": SecretRef("file", str(key)), "vars": {"t": SecretRef("env", "FS_TEST_TOKEN")},
              "mode": 0o644}
    redactor = Redactor()
    # When they are resolved
    resolved = resolve(params, redactor)
    # Then the values are in place (file without its newline), typed as secrets, and known
    assert resolved["cmd"] == ["login", CANARY]
    assert resolved["stdin"] == "file-secret-value"
    assert resolved["vars"] == {"t": CANARY} and resolved["mode"] == 0o644
    assert isinstance(resolved["cmd"][1], SecretValue) and MASK in repr(resolved["cmd"][1])
    assert CANARY not in redactor.redact(f"token is {CANARY}!")
    assert params["cmd"][1] == SecretRef("env", "FS_TEST_TOKEN")  # the input is not changed


def test_an_unset_or_unreadable_secret_is_named_by_its_reference(tmp_path: Path) -> None:
    with pytest.raises(SecretError, match=r"secret @env:FS_TEST_SURELY_UNSET is not set"):
        resolve({"x": SecretRef("env", "FS_TEST_SURELY_UNSET")})
    with pytest.raises(SecretError, match=r"secret @file:.*/missing cannot be read"):
        resolve({"x": SecretRef("file", str(tmp_path / "missing"))})


def test_the_redactor_masks_quoted_json_and_multiline_forms_of_a_secret() -> None:
    pem = "-----BEGIN KEY-----\nMIIEvQIBADANBgkq\n-----END KEY-----"
    redactor = Redactor([CANARY, pem])
    texts = [
        f"echo {CANARY}",
        shlex.join(["echo", CANARY]),                              # as a session quotes it
        shlex.join(["-e", json.dumps({"token": CANARY})]),         # ansible's extra vars
        "line two of the key: MIIEvQIBADANBgkq",                    # one line of a PEM secret
    ]
    for text in texts:
        out = redactor.redact(text)
        assert "canary-7f3a" not in out and "MIIEvQIBADANBgkq" not in out and MASK in out


def test_a_secret_cut_in_half_by_the_head_or_tail_capture_is_masked_too() -> None:
    secret = "s3cr3t-value-abcdef"
    redactor = Redactor([secret])
    head = "output ... " + secret[:8]      # the head capture ended inside the secret
    tail = secret[-9:] + " ... more"       # the tail capture started inside it
    assert secret[:8] not in redactor.redact(head, head=True)
    assert secret[-9:] not in redactor.redact(tail, tail=True)
    # and ordinary text that merely ends like any text is left alone
    assert redactor.redact("nothing to see", head=True) == "nothing to see"


def test_command_results_are_masked_in_every_field_that_leaves_the_worker() -> None:
    redactor = Redactor([CANARY])
    result = CommandResult(command=shlex.join(["login", CANARY]), exit_code=1,
                           stdout_head=f"hello {CANARY}", stdout_tail=f"{CANARY} bye",
                           stderr_head=f"bad token {CANARY}", stderr_tail=CANARY)
    masked = redactor.result(result)
    assert "canary-7f3a" not in repr(masked)
    assert masked.exit_code == 1 and masked.stdout_head == f"hello {MASK}"


def test_the_logging_filter_masks_messages_arguments_and_tracebacks(
        caplog: pytest.LogCaptureFixture) -> None:
    redactor = Redactor([CANARY])
    caplog.handler.addFilter(RedactingFilter(redactor))
    log = logging.getLogger("fleetsched.test.secrets")
    with caplog.at_level(logging.DEBUG, logger="fleetsched.test.secrets"):
        log.debug("running %s", ["login", CANARY])
        try:
            raise RuntimeError(f"failed with {CANARY}")
        except RuntimeError:
            log.exception("boom")
    assert len(caplog.records) == 2
    # not even in the escaped form a list's repr gives it
    assert "canary-7f3a" not in caplog.text and MASK in caplog.text
