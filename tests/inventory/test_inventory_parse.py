"""Inventory parsing without a database: the three formats read into the same hosts, host
ranges, variable precedence, INI value typing, format detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.inventory import InventoryError, detect_format, load_inventory, parse_text, resolve
from scheduler.inventory.ini_format import parse_value
from scheduler.inventory.ranges import expand

DATA = Path(__file__).parent / "data" / "inventories"
SAMPLES = ["fleet.ini", "fleet.yml", "fleet.json", "fleet-flat.json"]


def hosts_of(name: str) -> dict:
    return {n: h.as_dict() for n, h in resolve(load_inventory(DATA / name)).hosts.items()}


# ------------------------------------------------------------------------ same fleet, 4 files


@pytest.mark.parametrize("sample", SAMPLES[1:])
def test_every_format_of_the_sample_fleet_resolves_to_the_same_hosts(sample: str) -> None:
    # Given the same fleet written as INI, YAML, ansible-inventory --list --export JSON and
    # plain --list JSON (group vars folded into hostvars)
    # When each is parsed and resolved
    # Then every host has the same address, port, user, groups and effective vars
    assert hosts_of(sample) == hosts_of("fleet.ini")


@pytest.mark.parametrize("sample", ["fleet.yml", "fleet.json"])
def test_formats_that_keep_group_vars_resolve_to_the_same_groups(sample: str) -> None:
    ini = resolve(load_inventory(DATA / "fleet.ini")).groups
    assert resolve(load_inventory(DATA / sample)).groups == ini


def test_the_sample_fleet_resolves_as_documented() -> None:
    hosts = hosts_of("fleet.yml")
    # Ranges expanded; port from the name:port form
    assert sorted(hosts) == sorted(
        ["bastion.example.com", "lb1.example.com", "db-a.example.com", "db-b.example.com",
         "db-c.example.com"] + [f"web0{i}.example.com" for i in range(1, 5)])
    assert hosts["web04.example.com"]["port"] == 2222
    # Connection vars became columns and left vars
    assert hosts["lb1.example.com"]["address"] == "192.0.2.20"
    assert hosts["lb1.example.com"]["port"] == 8022
    assert "ansible_host" not in hosts["lb1.example.com"]["vars"]
    assert hosts["db-c.example.com"]["address"] == "2001:db8::c"
    # No ansible_host: address None (connect to the name)
    assert hosts["web01.example.com"]["address"] is None
    # Hosts in no group are in no stored group
    assert hosts["bastion.example.com"]["groups"] == []
    assert hosts["web01.example.com"]["groups"] == ["web"]


# ------------------------------------------------------------------------ precedence


def test_host_vars_win_over_group_vars_and_child_groups_win_over_parents() -> None:
    hosts = hosts_of("fleet.ini")
    # all: http_port=80 < prod (parent): 8080 < web (child): 8081
    assert hosts["web01.example.com"]["vars"]["http_port"] == 8081
    assert hosts["db-a.example.com"]["vars"]["http_port"] == 8080
    assert hosts["lb1.example.com"]["vars"]["http_port"] == 80
    # a group var (frontend: tier=frontend) loses to the host's own (tier=canary)
    assert hosts["web01.example.com"]["vars"]["tier"] == "frontend"
    assert hosts["web04.example.com"]["vars"]["tier"] == "canary"
    # all: ansible_user=deploy, overridden per host
    assert hosts["web01.example.com"]["user"] == "deploy"
    assert hosts["db-a.example.com"]["user"] == "postgres"
    assert hosts["bastion.example.com"]["user"] == "ops"


def test_groups_at_the_same_depth_merge_by_name_unless_a_priority_says_otherwise() -> None:
    text = ("[a]\nh1\n[b]\nh1\n[a:vars]\ncolour=red\n[b:vars]\ncolour=blue\n")
    assert resolve(parse_text(text, "x.ini", "ini")).hosts["h1"].vars["colour"] == "blue"
    text += "[a:vars]\nansible_group_priority=10\n"
    assert resolve(parse_text(text, "x.ini", "ini")).hosts["h1"].vars["colour"] == "red"


def test_ungrouped_hosts_get_all_vars_but_not_other_groups_vars() -> None:
    text = "lonely\n[web]\nw1\n[all:vars]\nntp=a\n[web:vars]\nrole=web\n"
    hosts = resolve(parse_text(text, "x.ini", "ini")).hosts
    assert hosts["lonely"].vars == {"ntp": "a"}
    assert hosts["w1"].vars == {"ntp": "a", "role": "web"}


def test_secret_variables_are_skipped_and_reported_by_name_only() -> None:
    text = ("[web]\nw1 ansible_password=hunter2 ansible_become_pass=x\n"
            "[web:vars]\napi_token=t\nok=1\n")
    resolved = resolve(parse_text(text, "x.ini", "ini"))
    assert resolved.hosts["w1"].vars == {"ok": 1}
    assert resolved.groups["web"].vars == {"ok": 1}
    assert resolved.skipped_secrets == ["ansible_become_pass", "ansible_password", "api_token"]


def test_secrets_inside_values_are_dropped_or_masked_and_reported_by_path() -> None:
    text = ("all:\n  hosts:\n    h1:\n      db: {user: app, password: NestedHunter2}\n"
            "      conn: postgresql://app:UrlHunter2@db/app\n"
            "      key: \"-----BEGIN OPENSSH PRIVATE KEY-----\\nb3Blbn\\n"
            "-----END OPENSSH PRIVATE KEY-----\"\n      ntp: [a, b]\n")
    resolved = resolve(parse_text(text, "x.yaml", "yaml"))
    vars_ = resolved.hosts["h1"].vars
    assert vars_["db"] == {"user": "app"} and vars_["ntp"] == ["a", "b"]
    assert vars_["conn"] == "postgresql://app:***@db/app" and vars_["key"] == "***"
    assert resolved.skipped_secrets == ["conn", "db.password", "key"]
    assert "Hunter2" not in repr(resolved) and "b3Blbn" not in repr(resolved)


# ------------------------------------------------------------------------ ranges


@pytest.mark.parametrize("pattern,names,port", [
    ("web[01:03]", ["web01", "web02", "web03"], None),
    ("web[8:10].x", ["web8.x", "web9.x", "web10.x"], None),
    ("web[08:10].x", ["web08.x", "web09.x", "web10.x"], None),
    ("db-[a:c]", ["db-a", "db-b", "db-c"], None),
    ("n[0:8:4]", ["n0", "n4", "n8"], None),
    ("r[1:2]-n[a:b]:2222", ["r1-na", "r1-nb", "r2-na", "r2-nb"], 2222),
    ("plain", ["plain"], None),
])
def test_host_patterns_expand_like_ansible(
        pattern: str, names: list[str], port: int | None) -> None:
    assert expand(pattern) == (names, port)


def test_a_fifty_host_range_in_ini_gives_fifty_zero_padded_hosts() -> None:
    hosts = resolve(parse_text("[web]\nweb[01:50] ansible_user=u\n", "x.ini", "ini")).hosts
    assert len(hosts) == 50
    assert min(hosts) == "web01" and max(hosts) == "web50"
    assert {h.user for h in hosts.values()} == {"u"}


@pytest.mark.parametrize("pattern", ["w[1:", "w[01:100]", "w[3:1]", "w[1:z]", "w[1:9999999]",
                                     "w[a:b:0]", "::1", "w:99999"])
def test_bad_host_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError):
        expand(pattern)


# ------------------------------------------------------------------------ values, detection


@pytest.mark.parametrize("raw,value", [
    ("8080", 8080), ("True", True), ("'quoted #1'", "quoted #1"), ("[1, 'a']", [1, "a"]),
    ("ntp.example.com", "ntp.example.com"), ("010", "010"), ("", ""), ("...", "..."),
    ("1j", "1j"), ("[" * 500, "[" * 500),
])
def test_ini_values_are_python_literals_where_they_parse_else_strings(
        raw: str, value: object) -> None:
    assert parse_value(raw) == value


def test_inline_host_vars_may_be_quoted_and_followed_by_a_comment() -> None:
    text = '[web]\nw1 motd="hello world" port_list="[1, 2]"  # a comment\n'
    h = resolve(parse_text(text, "x.ini", "ini")).hosts["w1"]
    assert h.vars == {"motd": "hello world", "port_list": [1, 2]}


@pytest.mark.parametrize("name,text,fmt", [
    ("inv.json", "{}", "json"),
    ("inv.yaml", "all: {}", "yaml"),
    ("inv.yml", "all: {}", "yaml"),
    ("inv.ini", "[web]\nw1", "ini"),
    ("hosts", '{"all": {}}', "json"),
    ("hosts", "# c\n[web]\nw1\n", "ini"),
    ("hosts", "w1 ansible_host=1.2.3.4\n", "ini"),
    ("hosts", "---\nall:\n  hosts:\n", "yaml"),
    ("hosts", "all:\n  hosts:\n", "yaml"),
])
def test_the_format_is_chosen_by_extension_then_content(name: str, text: str, fmt: str) -> None:
    assert detect_format(name, text) == fmt


def test_a_yaml_file_given_as_ini_is_refused_with_a_hint() -> None:
    with pytest.raises(InventoryError) as err:
        parse_text("all:\n  hosts:\n    w1:\n", "hosts", "ini")
    assert str(err.value).startswith("hosts:1:1: ")
    assert "yaml" in (err.value.hint or "")


def test_yaml_unsafe_tag_reads_as_a_plain_string_and_dates_become_text() -> None:
    text = "all:\n  hosts:\n    w1:\n      tmpl: !unsafe '{{ x }}'\n      since: 2024-01-02\n"
    h = resolve(parse_text(text, "x.yml", "yaml")).hosts["w1"]
    assert h.vars == {"tmpl": "{{ x }}", "since": "2024-01-02"}


def test_json_script_form_with_plain_host_lists_is_accepted() -> None:
    text = '{"web": ["w1", "w2"], "db": {"hosts": ["d1"], "children": ["empty"]}}'
    resolved = resolve(parse_text(text, "x.json", "json"))
    assert sorted(resolved.hosts) == ["d1", "w1", "w2"]
    # a child group named but not described is an empty group (ansible-inventory omits them)
    assert resolved.groups["db"].children == ("empty",)
    assert resolved.groups["empty"].vars == {}
