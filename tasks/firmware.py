"""The ``firmware`` action: upload an image, verify it, upgrade, optionally reboot, check version.

Steps:

1. unless ``skip_if_current`` is off, ask the host its version first: already at
   ``expected_version`` means nothing to do (``changed=False``), so a re-run is harmless;
2. upload the image over SFTP into a private ``mktemp -d`` directory, check its SHA-256 on the
   host (and, with ``sha256``, the worker's copy before sending it);
3. run ``upgrade_cmd`` (``{image}`` is the uploaded path); the directory is removed afterwards,
   whatever happened;
4. with ``reboot``: run ``reboot_cmd`` (a dropped connection is expected), wait
   ``reboot_delay``, then open fresh sessions through ``ActionContext.reconnect`` until one
   works or ``reconnect_timeout`` (and the job's timeout) runs out; a changed host key fails
   at once;
5. run ``version_cmd``: its output must contain ``expected_version``, else the job fails for
   good (retrying an upgrade that reported the wrong version is for a human to decide).

Not idempotent, and by default it needs a service window.
"""

from __future__ import annotations

import contextlib
import posixpath
import shlex
import time
from typing import Any

from scheduler.errors import HostKeyError
from tasks.base import ActionContext, BaseAction, Step, StepFailed, Steps
from tasks.host import Host
from tasks.params import Argv, Boolean, Duration, LocalPath, Param, RemotePath, Sha256, Text
from tasks.remote import (
    make_temp_dir,
    read_local,
    remove_temp_dir,
    sha256_hex,
    upload,
    verify_upload,
)

REBOOT_CMD_TIMEOUT_S = 30.0
RECONNECT_PAUSE_S = (0.5, 5.0)  # first and largest pause between reconnect attempts


class FirmwareAction(BaseAction):
    name = "firmware"
    description = ("Upload a firmware image, verify its checksum, upgrade, optionally reboot and "
                   "wait for the host, verify the reported version.")
    idempotent = False
    requires_window = True
    expected_ms = 600_000
    params = {
        "image": Param("image", LocalPath(), "the firmware image on the worker node", required=True),
        "upgrade_cmd": Param("upgrade_cmd", Argv(extra_placeholders=("image",)),
                             "the upgrade command; {image} is the uploaded image's path",
                             required=True),
        "version_cmd": Param("version_cmd", Argv(), "prints the running version", required=True),
        "expected_version": Param("expected_version", Text(refs=False, max_len=200),
                                  "text version_cmd must print after the upgrade", required=True),
        "sha256": Param("sha256", Sha256(), "refuse unless the image has this checksum"),
        "reboot": Param("reboot", Boolean(), "reboot after the upgrade and wait for the host",
                        default=False),
        "reboot_cmd": Param("reboot_cmd", Argv(), "how to reboot", default=["reboot"]),
        "reboot_delay": Param("reboot_delay", Duration(), "wait this long before reconnecting",
                              default=10.0),
        "reconnect_timeout": Param("reconnect_timeout", Duration(min_s=1),
                                   "give up if the host is not back within this", default=600.0),
        "skip_if_current": Param("skip_if_current", Boolean(),
                                 "do nothing if the host already reports expected_version",
                                 default=True),
        "remote_tmp": Param("remote_tmp", RemotePath(directory=True),
                            "where on the host the image's private directory is made",
                            default="/tmp"),
    }

    def check(self, params: dict[str, Any]) -> None:
        if params["reboot"] and params["reboot_delay"] >= params["reconnect_timeout"]:
            raise self.invalid("reboot_delay must be shorter than reconnect_timeout")

    def estimate_ms(self, params: dict[str, Any]) -> int:
        extra = params["reboot_delay"] + params["reconnect_timeout"] if params.get("reboot") else 0
        return self.expected_ms + int(extra * 1000)

    def execute(self, steps: Steps, host: Host, params: dict[str, Any],
                ctx: ActionContext) -> None:
        expected = params["expected_version"]
        version_cmd = steps.render(params["version_cmd"])
        if params["reboot"] and ctx.reconnect is None:
            raise StepFailed("reboot requested but this worker gave the action no way to "
                             "reconnect", retryable=False)
        if params["skip_if_current"]:
            probe = steps.run(version_cmd, "version check", check=False)
            if probe.exit_code == 0 and expected in probe.stdout_head + probe.stdout_tail:
                steps.changed = False
                return
        data = read_local(params["image"], "firmware image")
        digest = sha256_hex(data)
        if params["sha256"] and digest != params["sha256"]:
            raise StepFailed(f"firmware image {params['image']} does not have the required "
                             f"sha256 {params['sha256'][:16]}...", retryable=False)
        tmp = make_temp_dir(steps, params["remote_tmp"])
        try:
            image = posixpath.join(tmp, posixpath.basename(params["image"]) or "image")
            upload(steps, data, image, "firmware image")
            verify_upload(steps, image, digest, "firmware image")
            steps.changed = True
            steps.run(steps.render(params["upgrade_cmd"], {"image": image}), "upgrade")
        finally:
            steps.cleanup("remove the firmware image", lambda: remove_temp_dir(steps, tmp))
        with contextlib.ExitStack() as stack:
            if params["reboot"]:
                self._reboot(steps, params, ctx, stack)
            result = steps.run(version_cmd, "version check after the upgrade")
            reported = (result.stdout_head + result.stdout_tail).strip()
            if expected not in reported:
                shown = reported.splitlines()[-1][:100] if reported else ""
                raise StepFailed(f"version check: the host reports {shown!r}, expected "
                                 f"{expected!r}", retryable=False, step=steps.last)

    def _reboot(self, steps: Steps, params: dict[str, Any], ctx: ActionContext,
                stack: contextlib.ExitStack) -> None:
        argv = steps.render(params["reboot_cmd"])
        start = time.monotonic()
        try:
            result = steps.session.run(argv, timeout=REBOOT_CMD_TIMEOUT_S, stdin=None)
        except Exception:  # noqa: BLE001 - the host going away under us is what a reboot does
            steps.record(Step("reboot", shlex.join(argv), None, time.monotonic() - start,
                              note="the connection dropped, as a reboot does"))
        else:
            step = steps.record(Step("reboot", result.command, result, result.duration_s))
            if result.exit_code not in (None, 0) and not result.timed_out:
                raise StepFailed(f"reboot command failed (exit {result.exit_code})", step=step)
        ctx.sleep(params["reboot_delay"])
        give_up = min(time.monotonic() + params["reconnect_timeout"], steps.deadline)
        pause, last_error = RECONNECT_PAUSE_S[0], "no attempt"
        assert ctx.reconnect is not None
        while True:
            try:
                steps.session = stack.enter_context(ctx.reconnect())
                return
            except HostKeyError as exc:
                raise StepFailed(f"after the reboot the host key check failed: {exc}",
                                 retryable=False) from None
            except Exception as exc:  # noqa: BLE001 - not back yet; try again until the deadline
                last_error = f"{type(exc).__name__}: {exc}"
            if time.monotonic() + pause >= give_up:
                raise StepFailed(f"the host did not come back after the reboot within "
                                 f"{params['reconnect_timeout']:g}s (last error: {last_error})")
            ctx.sleep(pause)
            pause = min(pause * 2, RECONNECT_PAUSE_S[1])
