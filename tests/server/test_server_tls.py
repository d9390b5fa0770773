"""``fleetsched server`` serving HTTPS with a certificate made here (a self-signed one for
127.0.0.1, ``cryptography``), httpx verifying against it; the TLS files it refuses in one line
before the port opens; the warning for another address without TLS; text logs on request."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.servers import free_port, wait_for_port
from tests.submit_support import Cli


def trusting(cert: Path) -> ssl.SSLContext:
    """A client context that trusts ``cert`` and nothing else."""
    return ssl.create_default_context(cafile=str(cert))


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, valid for a day, and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fleetsched test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (tmp / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "key.pem").write_bytes(key_pem(key))
    return tmp / "cert.pem", tmp / "key.pem"


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    cli = Cli(tmp_path, redis_url, f"sqlite:///{tmp_path / 'record.db'}")
    cli.ok("db", "upgrade")
    return cli


def server_argv(cli: Cli, *args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "scheduler", "--redis-url", cli.redis_url,
            "--database-url", cli.database_url, "server", *args]


def server_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    return env | {"XDG_CONFIG_HOME": str(tmp / "config"), "XDG_STATE_HOME": str(tmp), **extra}


@contextmanager
def running(cli: Cli, tmp: Path, *args: str, **env: str) -> Iterator[tuple[int, Path]]:
    """A server process on a free port; its port and its log (stdout and stderr)."""
    port = free_port()
    log_path = tmp / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(server_argv(cli, "--port", str(port), *args), cwd=tmp,
                                env=server_env(tmp, **env), stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            wait_for_port("127.0.0.1", port, timeout=30)
            yield port, log_path
        finally:
            proc.terminate()
            proc.wait(timeout=15)


def refused(cli: Cli, tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(server_argv(cli, "--port", str(free_port()), *args), cwd=tmp,
                          env=server_env(tmp, **env), capture_output=True, text=True,
                          timeout=60)


def test_with_a_certificate_it_serves_https_that_verifies_against_it(
        cli: Cli, tmp_path: Path) -> None:
    # Given a self-signed certificate for 127.0.0.1 and a viewer's token
    cert, key = self_signed(tmp_path)
    token = cli.ok("tokens", "create", "dash", "--role", "viewer").strip()
    # When the server is started with it, by the settings (the environment's layer)
    with running(cli, tmp_path, FLEETSCHED_SERVER_TLS_CERT=str(cert),
                 FLEETSCHED_SERVER_TLS_KEY=str(key)) as (port, log):
        # Then a client that trusts only that certificate reads the API over HTTPS
        answer = httpx.get(f"https://127.0.0.1:{port}/api/v1/status", verify=trusting(cert),
                           headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert answer.status_code == 200, answer.text
        assert httpx.get(f"https://127.0.0.1:{port}/metrics", verify=trusting(cert),
                         timeout=30).status_code == 200
        # And plain HTTP on the same port gets no API
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/api/v1/status", timeout=5)
        # And a client that does not trust it is refused by its own check
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"https://127.0.0.1:{port}/metrics", timeout=5)
    assert f"https://127.0.0.1:{port}/api/v1" in log.read_text()


def test_the_flags_serve_https_too_and_override_the_settings(cli: Cli, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    with running(cli, tmp_path, "--tls-cert", str(cert), "--tls-key", str(key),
                 FLEETSCHED_SERVER_TLS_CERT="/nonexistent/cert.pem",
                 FLEETSCHED_SERVER_TLS_KEY="/nonexistent/key.pem") as (port, _log):
        answer = httpx.get(f"https://127.0.0.1:{port}/metrics", verify=trusting(cert), timeout=30)
        assert answer.status_code == 200


def test_unusable_tls_files_are_refused_in_one_line_before_the_port_opens(
        cli: Cli, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    other = tmp_path / "other-key.pem"
    other.write_bytes(key_pem(ec.generate_private_key(ec.SECP256R1())))
    unreadable = tmp_path / "unreadable.pem"
    unreadable.write_bytes(key.read_bytes())
    unreadable.chmod(0)
    cases = [
        (("--tls-cert", str(cert)), "server_tls_cert is set but server_tls_key is not"),
        (("--tls-key", str(key)), "server_tls_key is set but server_tls_cert is not"),
        (("--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(key)),
         f"TLS certificate {tmp_path / 'missing.pem'}: No such file or directory"),
        (("--tls-cert", str(cert), "--tls-key", str(other)),
         "cannot be used together"),
        (("--tls-cert", str(key), "--tls-key", str(key)), "cannot be used together"),
    ]
    if os.geteuid() != 0:  # root reads a file of mode 0
        cases.append((("--tls-cert", str(cert), "--tls-key", str(unreadable)),
                      f"TLS private key {unreadable}: Permission denied"))
    for args, message in cases:
        run = refused(cli, tmp_path, *args)
        assert run.returncode == 2, (args, run.stderr)
        first, *rest = run.stderr.splitlines()
        assert first.startswith("error: ") and message in first, (args, run.stderr)
        assert [line for line in rest if not line.startswith("hint: ")] == [], run.stderr
        assert "serving" not in run.stderr


def test_another_address_without_tls_is_served_with_a_one_line_warning(
        cli: Cli, tmp_path: Path) -> None:
    # When the server listens on every address, without TLS, its log in text
    with running(cli, tmp_path, "--host", "0.0.0.0", "--log-format", "text") as (port, log):
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).status_code == 200
    lines = log.read_text().splitlines()
    # Then one line warns, and the request was logged as text
    warnings = [line for line in lines if "without TLS" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: listening on 0.0.0.0")
    assert "TLS-terminating proxy" in warnings[0]
    access = [line for line in lines if "fleetsched.server.access" in line]
    assert access and "GET /metrics 200" in access[0] and not access[0].startswith("{")
