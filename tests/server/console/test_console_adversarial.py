"""Attacks on the web console's guarantees, on a real server (issue 29's adversarial review):
a customer learning anything of another through filters, paging, streams, error pages, the
window and host pages; markup in user data drawn as markup; state changed without the CSRF
field or by a GET; sessions surviving what should end them; absurd input answered with
anything but one line on a 4xx page; a secret or a pasted token shown anywhere.

Each test asks what test_matrix.py, test_tasks.py, test_customer.py and test_signin.py do not.
They share the module's server (tests/server/console/conftest.py), each with objects of its own
and judging only the server log it caused; the revoked token's stream has a server of its own,
which checks a stream's session every half second, and the NUL bytes one on PostgreSQL."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.server.conftest import serve_api
from tests.server.console.conftest import Browsing, Console
from tests.server.console.test_tasks import _events, _rows, _until, worker  # noqa: F401
from tests.server.test_authorization_matrix import build_world
from tests.submit_support import Cli, sql_rows, sql_snapshot

FOREIGN = re.compile(r"globex|web-0", re.IGNORECASE)


def _foreign(text: str) -> list[str]:
    return sorted(set(FOREIGN.findall(text)))


def _not_one_line_4xx(reply: httpx.Response, what: str) -> list[str]:
    """What is wrong with ``reply`` as an answer to bad input (nothing: a 2xx/3xx, or one
    line on a 4xx page)."""
    if reply.status_code < 400:
        return []
    if reply.status_code >= 500 or not reply.headers["content-type"].startswith("text/html"):
        return [f"{what}: {reply.status_code} {reply.text[:160]}"]
    if len(re.findall(r'class="problem"', reply.text)) > 1 or "Traceback" in reply.text:
        return [f"{what}: not one line"]
    return []


def _one_line_4xx(reply: httpx.Response, what: str) -> None:
    assert 400 <= reply.status_code < 500, f"{what}: {reply.status_code} {reply.text[:300]}"
    assert reply.headers["content-type"].startswith("text/html"), what
    assert "Traceback" not in reply.text, what
    assert "content-security-policy" in reply.headers, what


def test_acme_learns_nothing_of_globex_through_filters_pages_errors_and_windows(
        console: Console, tmp_path: Path) -> None:
    # Given the team's, acme's and globex's objects, and a mixed task in windows on acme-01
    # and globex-01 whose jobs wait on a window both customers must approve
    world = build_world(console.api, tmp_path)
    cli = console.api.cli
    cli.ok("windows", "add", "w-both", "--cron", "0 4 * * *", "--duration", "1h",
           "--requires-approval")
    cli.ok("windows", "assign", "w-both", "--host", "acme-01", "--host", "globex-01")
    globex = console.as_role("customer-approver", tenant="globex", owner="gina")
    version = re.search(r'name="version" value="(\d+)"', globex.get("/ui/windows/w-both").text)
    assert version, "globex's approver has no form on w-both"
    said = globex.post("/ui/windows/w-both/approve",
                       {"comment": "GLOBEX-PRIVATE-NOTE", "version": version.group(1)})
    assert said.status_code == 303, said.text[:500]
    waiting = cli.submit("command", "-t", "acme-01,globex-01,web-01", "-p", "cmd=true",
                         "--in-window")
    mixed = world.tasks["mixed"]
    acme = console.as_role("customer-approver", tenant="acme", owner="ann")
    # Then no page, filter or page of paging acme can ask names globex or the team's hosts
    pages = ["/ui/customer", "/ui/customer?offset=1", "/ui/tasks", "/ui/tasks?offset=1",
             "/ui/tasks?limit=1&offset=1", "/ui/tasks?state=pending",
             f"/ui/tasks/{mixed}", f"/ui/tasks/{mixed}?state=pending",
             f"/ui/tasks/{mixed}?offset=1", f"/ui/tasks/{mixed}?exit=0",
             f"/ui/tasks/{waiting}", "/ui/hosts", "/ui/hosts?match=*",
             "/ui/hosts?group=customers", "/ui/hosts/acme-01", "/ui/calendar",
             "/ui/calendar?group=customers", "/ui/windows/w-both", "/ui/windows/w-mixed",
             "/ui/windows/w-customers", f"/ui/jobs/{mixed}.0",
             f"/ui/login?next=/ui/tasks/{mixed}"]
    for path in pages:
        reply = acme.get(path)
        assert reply.status_code in (200, 400), f"{path}: {reply.status_code}"
        assert _foreign(reply.text) == [], f"{path} names {_foreign(reply.text)}"
        assert "GLOBEX-PRIVATE-NOTE" not in reply.text, path
    # And the mixed task counts acme's one job, on every page of its hosts
    page = acme.get(f"/ui/tasks/{mixed}")
    assert re.search(r'data-state="total">1<', page.text), page.text[:2000]
    assert _rows(acme.get(f"/ui/tasks/{mixed}?offset=1").text) == []
    # And the window's waiting jobs are acme's own (the team sees both customers')
    team = console.as_role("viewer")
    assert {f"{waiting}.0", f"{waiting}.1"} <= set(
        re.findall(r"<td>(\d+\.\d+)</td>", team.get("/ui/windows/w-both").text))
    assert re.findall(r"<td>(\d+\.\d+)</td>", acme.get("/ui/windows/w-both").text) == [
        f"{waiting}.0"]
    # And the live streams send nothing of them either
    fragments, _ = _events(acme, f"/ui/tasks/{waiting}/live",
                           lambda got, done: {"summary", "hosts"} <= set(got))
    assert _foreign("".join(fragments.values())) == []
    fragments, _ = _events(acme, f"/ui/jobs/{waiting}.0/live",
                           lambda got, done: "attempts" in got)
    assert _foreign("".join(fragments.values())) == []
    # And globex's objects are answered as ones that do not exist: the same status and words
    gt, gj = world.tasks["globex"], world.jobs["globex"]
    for theirs, their_word, none, no_word in (
            (f"/ui/tasks/{gt}", str(gt), "/ui/tasks/987654", "987654"),
            (f"/ui/tasks/{gt}/live", str(gt), "/ui/tasks/987654/live", "987654"),
            (f"/ui/jobs/{mixed}.1", f"{mixed}.1", f"/ui/jobs/{mixed}.7", f"{mixed}.7"),
            (f"/ui/jobs/{gj}/live", gj, "/ui/jobs/987654.0/live", "987654.0"),
            ("/ui/hosts/globex-01", "globex-01", "/ui/hosts/nobody-01", "nobody-01"),
            ("/ui/hosts?group=globex", "globex", "/ui/hosts?group=nobody", "nobody"),
            ("/ui/windows/w-globex", "w-globex", "/ui/windows/w-nobody", "w-nobody"),
            ("/ui/calendar?group=globex", "globex", "/ui/calendar?group=nobody", "nobody")):
        a, b = acme.get(theirs), acme.get(none)
        assert a.status_code == b.status_code, (theirs, a.status_code, b.status_code)
        words = _text(a.text, their_word), _text(b.text, no_word)
        assert words[0] == words[1], (theirs, words)
    # And a decision on globex's window or on the team's is refused as for no window
    for name in ("w-globex", "w-approve"):
        reply = acme.post(f"/ui/windows/{name}/approve", {"comment": "x"})
        assert reply.status_code in (403, 404), (name, reply.status_code)
    # And the audit and its downloads are the team's (403)
    for path in ("/ui/audit", "/ui/audit.csv", "/ui/audit.json"):
        assert acme.get(path).status_code == 403, path


def _text(html: str, asked: str) -> str:
    """A page's words after its heading, with the name asked for made neutral."""
    main = html.split("<main", 1)[-1].replace(asked, "X")
    return " ".join(re.sub(r"<[^>]+>", " ", main).split())


EVIL = "\"'><img src=x onerror=alert(1)><script>alert(1)</script>"
RAW = ("<img src=x", "<script>alert", "onerror=alert(1)>")  # markup only an unescaped EVIL makes


def _drawn_as_markup(text: str) -> list[str]:
    found = [raw for raw in RAW if raw in text]
    found += re.findall(r"""(?:href|src|action)\s*=\s*["']?\s*javascript:""", text, re.IGNORECASE)
    return found


def test_markup_in_every_kind_of_user_data_is_drawn_as_text(
        console: Console, worker: Callable[[], None], tmp_path: Path) -> None:  # noqa: F811
    # Given markup in a host's variables, a window's description and
    # approval comment, a task's name, parameters and operator, and a job's output
    cli = console.api.cli
    cli.ok("hosts", "add", "evil-01", "--group", "web", "--address", "evil.example",
           "--var", f"note={EVIL}", "--var", "link=javascript:alert(1)")
    cli.ok("windows", "add", "w-evil", "--cron", "0 2 * * *", "--duration", "2h",
           "--requires-approval", "--description", EVIL)
    cli.ok("windows", "assign", "w-evil", "--host", "evil-01")
    admin = console.as_role("window-admin", owner="wanda")
    version = re.search(r'name="version" value="(\d+)"', admin.get("/ui/windows/w-evil").text)
    assert version, admin.get("/ui/windows/w-evil").text[:2000]
    assert admin.post("/ui/windows/w-evil/approve",
                      {"comment": EVIL, "version": version.group(1)}).status_code == 303
    worker()
    printed = "printf '%s\\n' " + "'" + EVIL.replace("'", "'\\''") + "'"
    task = cli.submit("command", "-t", "evil-01", "-p", f"cmd={printed}", "-p",
                      f"stdin={EVIL}", "--name", EVIL, "--executor", "local",
                      "--ignore-windows", operator="evil<script>alert(1)</script>")
    _until(lambda: [r.state for r in sql_rows(
        console.api.database_url, f"SELECT state FROM jobs WHERE task_id = {task}")]
        == ["succeeded"], "the job's end")
    viewer = console.as_role("viewer")
    _until(lambda: "img src=x" in viewer.get(f"/ui/jobs/{task}.0").text, "the job's output")
    # Then no page draws any of it as markup, nor links to a javascript: address
    pages = ["/ui/", "/ui/tasks", f"/ui/tasks/{task}", f"/ui/tasks/{task}?text=img",
             f"/ui/jobs/{task}.0", "/ui/hosts", "/ui/hosts?match=evil*", "/ui/hosts/evil-01",
             "/ui/windows/w-evil", "/ui/calendar", "/ui/audit", f"/ui/audit?task={task}",
             "/ui/hosts?var=note%3D" + EVIL, f"/ui/tasks/{task}/cancel"]
    operator = console.as_role("operator")
    for path in pages:
        reply = (operator if path.endswith("/cancel") else viewer).get(path)
        assert reply.status_code in (200, 400), f"{path}: {reply.status_code}"
        assert _drawn_as_markup(reply.text) == [], f"{path}: {_drawn_as_markup(reply.text)}"
        assert reply.headers["content-security-policy"].startswith("default-src 'none'"), path
    # (and it is there, as text)
    for path in (f"/ui/jobs/{task}.0", f"/ui/tasks/{task}", "/ui/hosts/evil-01",
                 "/ui/windows/w-evil", "/ui/tasks", "/ui/audit"):
        assert "&lt;script&gt;alert(1)" in viewer.get(path).text, path
    assert viewer.get("/ui/windows/w-evil").text.count("&lt;script&gt;alert(1)") >= 2
    # And the streams' fragments escape it alike (console.js sets them as innerHTML)
    fragments, _ = _events(viewer, f"/ui/tasks/{task}/live",
                           lambda got, done: {"summary", "hosts"} <= set(got) or done)
    assert _drawn_as_markup("".join(fragments.values())) == []
    fragments, _ = _events(viewer, f"/ui/jobs/{task}.0/live",
                           lambda got, done: "attempts" in got or done)
    assert _drawn_as_markup("".join(fragments.values())) == []
    # And an error page echoing the input escapes it, with the policy
    for path in ("/ui/tasks?since=" + EVIL, "/ui/windows/" + EVIL, "/ui/hosts/" + EVIL,
                 "/ui/audit?state=" + EVIL, "/ui/tasks/1?exit=" + EVIL):
        reply = viewer.get(path)
        _one_line_4xx(reply, path)
        assert _drawn_as_markup(reply.text) == [], f"{path}: {_drawn_as_markup(reply.text)}"
    # And the sign-in page keeps a page asked for as text, and its redirect as an address
    with httpx.Client(follow_redirects=False, timeout=30) as client:
        asked = "/ui/tasks?x=" + EVIL + "\r\nSet-Cookie: evil=1"
        page = client.get(f"{console.root}/ui/login", params={"next": asked})
        assert _drawn_as_markup(page.text) == [] and "&lt;script&gt;" in page.text
        check = re.search(r'name="check" value="([^"]+)"', page.text)
        assert check
        token = console.token("n", "--role", "viewer")
        reply = client.post(f"{console.root}/ui/login",
                            data={"check": check.group(1), "next": asked, "token": token})
        assert reply.status_code == 303 and "evil" not in reply.cookies
        assert reply.headers["location"].startswith("/ui/") and "<" not in reply.headers[
            "location"] and "\n" not in reply.headers["location"]
    # And the downloads are attachments, never a page a browser would draw
    for path in (f"/ui/audit.csv?task={task}", f"/ui/audit.json?task={task}"):
        reply = viewer.get(path)
        assert reply.headers["content-disposition"].startswith("attachment"), path
        assert "html" not in reply.headers["content-type"], path


HUGE = "9" * 40
SUPER = "\u00b2"  # a digit to str.isdigit(), not to int()
LONG = "x" * 6000  # within a request line's limit; a form field gets far more below
ODD = "\x00\u202e\U0001f4a5%_*[(?\\"


def test_absurd_input_is_one_line_on_a_4xx_page_and_never_a_traceback(
        console: Console) -> None:
    # Given a task, a window needing approval and an operator, a window admin and a customer
    cli = console.api.cli
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--in", "1h")
    cli.ok("windows", "add", "w-odd", "--cron", "0 2 * * *", "--duration", "2h",
           "--requires-approval")
    cli.ok("windows", "assign", "w-odd", "--host", "web-01")
    operator, admin = console.as_role("operator"), console.as_role("window-admin")
    # When every query parameter and path part is given absurd values
    gets = [f"/ui/tasks?{k}={v}" for k in ("offset", "limit") for v in ("-1", HUGE, "abc", "")]
    gets += [f"/ui/tasks?{k}={v}" for k in ("state", "since", "until") for v in (ODD, LONG)]
    gets += ["/ui/tasks?limit=0", "/ui/tasks?limit=100000", f"/ui/tasks?offset={2**62}"]
    gets += [f"/ui/tasks/{v}" for v in ("abc", "-1", "0", HUGE, "1.5", "%00")]
    gets += [f"/ui/tasks/{task}?{k}={v}" for k in ("offset", "exit", "text", "state")
             for v in ("-1", HUGE, ODD, LONG, "--1", SUPER, "-" + SUPER)]
    gets += [f"/ui/tasks/{task}/live?{k}" for k in (  # each refused: none may stream
             "offset=-1", f"offset={HUGE}", f"exit={HUGE}", "exit=--1", f"text={LONG}")]
    gets += [f"/ui/tasks/{HUGE}/cancel", f"/ui/tasks/{HUGE}/live"]
    gets += [f"/ui/jobs/{v}" for v in ("%00", "x" * 81, "abc", "1.abc", f"{HUGE}.0",
                                       f"{task}.{HUGE}", f"{task}.-1", ".", ODD)]
    gets += [f"/ui/jobs/{HUGE}.0/live"]
    gets += [f"/ui/hosts?{k}={v}" for k in ("match", "group", "var", "offset")
             for v in ("[", "%00", ODD, LONG, "-1", HUGE, "=", "=x", "a b=c")]
    gets += [f"/ui/hosts/{v}" for v in ("%00", "x" * 300, ODD)]
    gets += [f"/ui/hosts/web-01?offset={v}" for v in ("-1", HUGE, "abc")]
    gets += [f"/ui/windows/{v}" for v in ("%00", "x" * 300, ODD)]
    gets += [f"/ui/calendar?{k}={v}" for k in ("weeks", "group")
             for v in ("0", "99", "abc", HUGE, ODD, LONG)]
    gets += [f"/ui/audit?{k}={v}" for k in ("task", "since", "until", "host", "group",
                                            "state", "offset") for v in ("-1", HUGE, ODD, "0", SUPER)]
    gets += [f"/ui/audit.csv?task={HUGE}", f"/ui/audit.json?since={ODD}"]
    gets += [f"/ui/customer?offset={v}" for v in ("-1", HUGE, "abc")]
    gets += [f"/ui/submit?action={ODD}&target={LONG}"]
    broken: list[str] = []
    for path in gets:
        try:
            reply = operator.get(quote(path, safe="/?=&%:"))
        except httpx.TransportError as exc:
            broken.append(f"{path[:80]} ({len(quote(path))} chars): {exc}")
            continue
        broken += _not_one_line_4xx(reply, path[:80])
    # And every form field too
    bomb = "a: &a [*a, *a]\nb: *a\n"
    posts: list[tuple[Browsing, str, dict[str, str]]] = [
        (operator, "/ui/submit/plan", {"action": ODD}),
        (operator, "/ui/submit/plan", {"action": "command", "target": ODD, "params": "cmd=x"}),
        (operator, "/ui/submit/plan", {"action": "command", "target": "web-01",
                                       "params": "no equals sign\n=\n" + LONG}),
        (operator, "/ui/submit/plan", {"action": "command", "target": "web-01",
                                       "params": "cmd=true", "max_concurrency": HUGE,
                                       "max_failures": "-5", "waves": ODD,
                                       "priority": ODD, "at": ODD, "in": HUGE}),
        (operator, "/ui/submit/plan", {"action": "command", "target": "web-01",
                                       "params": "cmd=true", "waves": "2", "wave_seed": HUGE}),
        (operator, "/ui/submit/plan", {"action": "command", "target": "web-01",
                                       "params": "cmd=true", "waves": "2",
                                       "wave_seed": SUPER}),
        (operator, "/ui/submit", {"idempotency_key": "k1", "action": "command",
                                  "target": "web-01", "params": "cmd=true", "waves": "2",
                                  "wave_seed": HUGE, "in": "1h"}),
        (operator, "/ui/submit/plan", {"task_file": bomb}),
        (operator, "/ui/submit/plan", {"task_file": "[" * 5000}),
        (operator, "/ui/submit/plan", {"task_file": "action: command\nparams: " + ODD}),
        (operator, "/ui/submit", {"idempotency_key": ODD, "action": "command",
                                  "target": "web-01", "params": "cmd=true",
                                  "wave_seed": "-1"}),
        (operator, f"/ui/tasks/{task}/pause", {"x": "y" * 200_000}),
        (operator, f"/ui/tasks/{task}/cancel", {"x": "y" * 300_000}),
        (admin, "/ui/windows/w-odd/approve", {"version": HUGE, "comment": "fine"}),
        (admin, "/ui/windows/w-odd/approve", {"version": "-1"}),
        (admin, "/ui/windows/w-odd/approve", {"version": SUPER}),
        (admin, "/ui/windows/w-odd/approve", {"version": "1", "comment": "c" * 3000}),
        (admin, "/ui/windows/w-odd/deny", {"version": "1", "comment": ODD}),
        (admin, f"/ui/windows/{'x' * 300}/approve", {"comment": "x"}),
    ]
    for who, path, data in posts:
        try:
            reply = who.post(path, data)
        except httpx.TransportError as exc:
            broken.append(f"POST {path[:60]} {str(data)[:80]}: {exc}")
            continue
        broken += _not_one_line_4xx(reply, f"POST {path[:60]} {str(data)[:80]}")
    # And the sign-in form with a strange token, or none of it UTF-8
    for token in ("\x00", ODD, "t" * 100_000):
        with httpx.Client(follow_redirects=False, timeout=30) as client:
            page = client.get(f"{console.root}/ui/login?next=/ui/{quote(ODD)}")
            check = re.search(r'name="check" value="([^"]+)"', page.text)
            assert check
            reply = client.post(f"{console.root}/ui/login", data={
                "check": check.group(1), "next": ODD, "token": token})
            broken += _not_one_line_4xx(reply, f"sign-in with {token[:10]!r}")
    raw = httpx.post(f"{console.root}/ui/login", content=b"\xff\xfe\x00check=1&token=\xc3",
                     headers={"content-type": "application/x-www-form-urlencoded"})
    broken += _not_one_line_4xx(raw, "a sign-in not in UTF-8")
    assert broken == [], "\n".join(broken)
    # Then the server logged no traceback and no unexpected error
    log = console.server_log()
    assert "Traceback" not in log and "unexpected" not in log, log[-3000:]


def _session_cookie(reply: httpx.Response) -> str:
    found = re.search(r"fleetsched_session=([^;]+);([^,]*)", reply.headers.get("set-cookie", ""))
    assert found, reply.headers
    return found.group(1)


def test_sessions_are_new_at_each_sign_in_bound_to_their_csrf_and_end_with_their_token(
        console: Console) -> None:
    # Given an attacker's own live session, planted in the victim's browser
    attacker = console.as_role("customer-viewer", tenant="globex")
    planted = attacker.client.cookies["fleetsched_session"]
    token = console.token("victim", "--role", "operator", "--owner", "vera")
    with httpx.Client(follow_redirects=False, timeout=30) as victim:
        victim.cookies.set("fleetsched_session", planted, domain="127.0.0.1", path="/")
        page = victim.get(f"{console.root}/ui/login")
        check = re.search(r'name="check" value="([^"]+)"', page.text)
        assert check
        signin = page.headers["set-cookie"]
        assert "HttpOnly" in signin and "SameSite=strict" in signin and "Path=/ui/login" in signin
        # When the victim signs in with her token
        reply = victim.post(f"{console.root}/ui/login",
                            data={"check": check.group(1), "next": "/ui/", "token": token})
        assert reply.status_code == 303
        # Then she gets a new session, HttpOnly and same-site; the planted one stays the
        # attacker's (signing in never upgrades a session the browser brought)
        fresh = _session_cookie(reply)
        assert fresh != planted
        cookie = next(c for c in reply.headers.get_list("set-cookie")
                      if c.startswith("fleetsched_session="))
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/" in cookie
        assert "vera" in victim.get(f"{console.root}/ui/").text
        assert "vera" not in attacker.get("/ui/customer").text
        assert attacker.get("/ui/tasks/1/cancel").status_code == 403
        # And the token is on no page, in no cookie, in no header, nor in the server's log
        for answer in (reply, victim.get(f"{console.root}/ui/")):
            assert token not in answer.text and token not in str(answer.headers)
        assert token not in " ".join(str(c.value) for c in victim.cookies.jar)
    # And a form posted with another session's CSRF token is refused, and changes nothing
    task = console.api.cli.submit("command", "-t", "web-01", "-p", "cmd=true", "--in", "1h")
    operator = console.as_role("operator")
    other = console.as_role("operator")
    assert operator.post(f"/ui/tasks/{task}/cancel", {"csrf_token": other.csrf},
                         csrf=False).status_code == 403
    assert sql_rows(console.api.database_url,
                    f"SELECT state FROM tasks WHERE id = {task}")[0].state != "cancelled"
    # And a token shown wrongly at sign-in is not echoed back nor logged
    with httpx.Client(follow_redirects=False, timeout=30) as stranger:
        page = stranger.get(f"{console.root}/ui/login")
        check = re.search(r'name="check" value="([^"]+)"', page.text)
        assert check
        wrong = "fst_123_NOTAREALSECRETVALUE"
        refused = stranger.post(f"{console.root}/ui/login",
                                data={"check": check.group(1), "next": "/ui/", "token": wrong})
        assert refused.status_code == 401 and "NOTAREALSECRET" not in refused.text
    log = console.server_log()
    assert token not in log and token.split("_")[-1] not in log and "NOTAREALSECRET" not in log


# A server of its own, whose live streams check their session every 0.5 s (the heartbeat
# setting) instead of every 15 s, so the stream's end is not waited for that long.
@pytest.mark.own_server(heartbeat_ms=500)
def test_no_get_changes_anything_and_a_live_stream_ends_with_its_revoked_token(
        console: Console) -> None:
    # Given a waiting task and an operator, whose session was opened with a token
    task = console.api.cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--in", "1h")
    token = console.token("olga", "--role", "operator", "--owner", "olga")
    operator = console.signed(token)
    before = sql_snapshot(console.api.database_url)
    # When every page a form posts to is asked with GET instead (as a link elsewhere could)
    for verb in ("cancel", "pause", "resume", "continue", "retry-failed"):
        assert operator.get(f"/ui/tasks/{task}/{verb}").status_code == 200, verb
    for path in ("/ui/submit?action=command&target=web-01", "/ui/logout",
                 "/ui/windows/w/approve", "/ui/submit/plan"):
        assert operator.get(path).status_code in (200, 404, 405), path
    # (and the fleet's stream, as every stream, carries the page's policy)
    with operator.client.stream("GET", f"{console.root}/ui/fleet/live") as fleet:
        assert fleet.headers["content-security-policy"].startswith("default-src 'none'")
    # Then nothing changed, and the session still lives
    assert sql_snapshot(console.api.database_url) == before
    assert operator.get("/ui/").status_code == 200
    # And a stream it follows ends once its token is revoked (at the session's next check)
    number = next(line.split()[0] for line in console.api.cli.ok("tokens", "list").splitlines()
                  if token.split("_")[1] in line)
    start = time.monotonic()
    with operator.client.stream("GET", f"{console.root}/ui/tasks/{task}/live",
                                timeout=httpx.Timeout(120)) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-security-policy"].startswith("default-src 'none'")
        revoked = False
        for line in reply.iter_lines():
            if not revoked and line.startswith("event: fragment"):
                console.api.cli.ok("tokens", "revoke", number)
                revoked = True
            if line == "event: end":
                break
            assert time.monotonic() - start < 110, "the stream outlived its revoked token"
    assert revoked and operator.get("/ui/").status_code == 303


def test_a_secret_parameter_shows_its_reference_never_its_value_on_any_page_or_download(
        console: Console, tmp_path: Path) -> None:
    # Given a task whose secret is a reference to the environment, and a file of the server's
    cli = Cli(tmp_path, console.redis_url, console.api.database_url,
              env={"FS_ADV_SECRET": "hunter2-env-value"})
    rollover = ["-p", "pre_check=true", "-p", "rollover=true", "-p", "post_check=true"]
    task = cli.submit("key-rollover", "--target", "group:web", *rollover,
                      "-p", "secret=@env:FS_ADV_SECRET", "--in", "1h")
    (tmp_path / "secret.txt").write_text("hunter2-file-value\n")
    operator = console.as_role("operator")
    # When the operator plans and submits one with a file reference from the console
    fields = {"action": "key-rollover", "target": "web-01", "in": "1h",
              "params": "pre_check=true\nrollover=true\npost_check=true\n"
                        f"secret=@file:{tmp_path / 'secret.txt'}"}
    plan = operator.post("/ui/submit/plan", fields)
    assert plan.status_code == 200, plan.text[:1000]
    key = re.search(r'name="idempotency_key" value="([^"]+)"', plan.text)
    assert key
    done = operator.post("/ui/submit", {**fields, "idempotency_key": key.group(1)})
    assert done.status_code == 303, done.text[:1000]
    mine = int(done.headers["location"].rsplit("/", 1)[1])
    # Then no page, download or stream shows either value; the references are there
    pages = {"/ui/tasks": None, f"/ui/tasks/{task}": "@env:FS_ADV_SECRET",
             f"/ui/tasks/{mine}": "@file:", f"/ui/jobs/{task}.0": None, "/ui/": None,
             f"/ui/audit?task={task}": None, f"/ui/audit.csv?task={task}": None,
             f"/ui/audit.json?task={mine}": None, f"/ui/tasks/{task}/cancel": None}
    for path, reference in pages.items():
        reply = operator.get(path)
        assert reply.status_code == 200, path
        assert "hunter2" not in reply.text, path
        assert reference is None or reference in reply.text, (path, reference)
    assert "hunter2" not in plan.text
    fragments, _ = _events(operator, f"/ui/tasks/{task}/live",
                           lambda got, done: {"summary", "hosts"} <= set(got))
    assert "hunter2" not in "".join(fragments.values())
    assert "hunter2" not in console.server_log()


def test_nul_bytes_in_every_text_filter_are_one_line_on_postgresql(
        tmp_path: Path, redis_url: str, fresh_postgres_url: str) -> None:
    # Given the console of a server on PostgreSQL (which takes no NUL in a text), and a task
    with serve_api(tmp_path, redis_url, fresh_postgres_url) as served:
        console = Console(served, tmp_path / "server.log")
        try:
            task = served.cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--in", "1h")
            operator = console.as_role("operator")
            # When each text a page filters by holds a NUL
            nul = "a%00b"
            gets = [f"/ui/tasks?{k}={nul}" for k in ("state", "operator", "action", "group",
                                                        "since")]
            gets += [f"/ui/tasks/{task}?{k}={nul}" for k in ("state", "text", "exit")]
            gets += [f"/ui/hosts?{k}={nul}" for k in ("match", "group")]
            gets += [f"/ui/hosts?var=k%3D{nul}", f"/ui/hosts/{nul}", f"/ui/hosts/{nul}?offset=1",
                     f"/ui/windows/{nul}", f"/ui/calendar?group={nul}", f"/ui/jobs/{nul}",
                     f"/ui/jobs/{task}.{nul}"]
            gets += [f"/ui/audit?{k}={nul}" for k in ("host", "group", "action", "state",
                                                       "operator")]
            broken: list[str] = []
            for path in gets:
                try:
                    broken += _not_one_line_4xx(operator.get(path), path)
                except httpx.TransportError as exc:  # after a 500 the connection is gone
                    broken.append(f"{path}: {exc}")
            admin = console.as_role("window-admin")
            broken += _not_one_line_4xx(admin.post(f"/ui/windows/{nul}/approve",
                                                   {"comment": "x"}), "approve a\\0b")
            broken += _not_one_line_4xx(operator.post("/ui/submit/plan", {
                "action": "command", "target": "web-01", "params": "cmd=a\x00b"}), "plan")
            broken += _not_one_line_4xx(operator.post("/ui/submit/plan", {
                "action": "command", "target": "a\x00b", "params": "cmd=x"}), "plan target")
            with httpx.Client(follow_redirects=False, timeout=30) as client:
                page = client.get(f"{console.root}/ui/login")
                check = re.search(r'name="check" value="([^"]+)"', page.text)
                assert check
                broken += _not_one_line_4xx(client.post(f"{console.root}/ui/login", data={
                    "check": check.group(1), "next": "/ui/", "token": "fst_1_a\x00b"}),
                    "sign in")
            # Then each is refused in one line, none is a 500
            assert broken == [], "\n".join(broken)
        finally:
            console.close()
    log = (tmp_path / "server.log").read_text(errors="replace")
    assert "Traceback" not in log and "unexpected" not in log, log[-3000:]
