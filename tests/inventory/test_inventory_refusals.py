"""Bad inventories are refused with one line naming the file, the line (and column where
known) and the problem; vault values and inventory plugins are refused with a hint."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from scheduler.inventory import InventoryError, load_inventory, resolve
from scheduler.inventory import source as inventory_source

# (file name, content, expected "file:line[:col]" prefix, a word the message must contain)
BAD = [
    ("syntax.ini", b"[web]\nw1\n[web\n", "syntax.ini:3:1", "section header"),
    ("section-type.ini", b"[web:hosts2]\nw1\n", "section-type.ini:1:1", "unknown type"),
    ("quote.ini", b"[web]\nw1 motd='unclosed\n", "quote.ini:2:1", "closing quotation"),
    ("kv.ini", b"[web]\nw1 novalue\n", "kv.ini:2:1", "key=value"),
    ("vars.ini", b"[web]\nw1\n[web:vars]\njust-a-word\n", "vars.ini:4:1", "key=value"),
    ("syntax.yml", b"all:\n  hosts:\n    w1:\n   bad: [\n", "syntax.yml:4:", "YAML"),
    ("syntax.json", b'{\n  "web": {"hosts": ["w1",]}\n}\n', "syntax.json:2:", "JSON"),
    ("unknown-child.ini", b"[web]\nw1\n[prod:children]\nweb\ndbs\n",
     "unknown-child.ini:5:1", "'dbs'"),
    ("orphan-vars.ini", b"[web]\nw1\n[dbs:vars]\nx=1\n", "orphan-vars.ini:3:1", "dbs"),
    ("dup-address.ini", b"[web]\nw1 ansible_host=10.0.0.1\n[db]\nw1 ansible_host=10.0.0.2\n",
     "dup-address.ini:4:1", "line 2"),
    ("dup-address.yml", b"all:\n  children:\n    web:\n      hosts:\n        w1:\n"
                        b"          ansible_host: 10.0.0.1\n    db:\n      hosts:\n        w1:\n"
                        b"          ansible_host: 10.0.0.2\n", "dup-address.yml:9:9", "line 5"),
    ("dup-key.json", b'{"_meta": {"hostvars": {\n"w1": {},\n"w1": {"a": 1}}},\n'
                     b'"web": ["w1"]}\n', "dup-key.json:3:", "twice"),
    ("dup-key.yml", b"all:\n  hosts:\n    w1:\n    w1:\n", "dup-key.yml:4:5", "twice"),
    ("loop.ini", b"[a:children]\nb\n[b:children]\na\n[a]\nh\n", "loop.ini:", "loop"),
    ("metachar.ini", b"[web]\nw1;reboot\n", "metachar.ini:2:1", "';'"),
    ("dash.yml", b"all:\n  hosts:\n    -oProxyCommand=x:\n", "dash.yml:3:", "'-'"),
    ("space.json", b'{"web": {"hosts": ["ok",\n "w 1"]}}', "space.json:2:", "whitespace"),
    ("address.ini", b"[web]\nw1 ansible_host='a;b'\n", "address.ini:2:1", "address"),
    ("ctrl.yml", b'all:\n  hosts:\n    w1:\n      ansible_host: "a\\tb"\n', "ctrl.yml:4:7",
     "whitespace"),
    ("port.ini", b"[web]\nw1 ansible_port=70000\n", "port.ini:2:1", "65535"),
    ("user.yml", b"all:\n  vars:\n    ansible_user: 'root; id'\n  hosts:\n    w1:\n",
     "user.yml:3:", "user"),
    ("group.ini", b"[we$b]\nw1\n", "group.ini:1:1", "'$'"),
    ("empty.ini", b"", "empty.ini:1", "empty"),
    ("blank.yml", b"\n\n   \n", "blank.yml:1", "empty"),
    ("comments.ini", b"# nothing here\n; nor here\n", "comments.ini:1", "no hosts"),
    ("null.yml", b"~\n", "null.yml:1:1", "mapping"),
    ("list.json", b"[1, 2]", "list.json", "object"),
    ("nan.json", b'{"_meta": {"hostvars": {"w1": {"x": NaN}}}}', "nan.json:1:", "NaN"),
    ("binary.ini", b"[web]\nw1\nw2\x00\x01\x02\n", "binary.ini:3:3", "binary"),
    ("latin1.ini", b"[web]\nw1\n# caf\xe9\n", "latin1.ini:3:6", "UTF-8"),
    ("vault.yml", b"all:\n  hosts:\n    w1:\n      secret_x: !vault |\n"
                  b"        $ANSIBLE_VAULT;1.1;AES256\n        6162\n", "vault.yml:4:", "Vault"),
    ("vault-file.yml", b"$ANSIBLE_VAULT;1.1;AES256\n61626364\n", "vault-file.yml:1", "Vault"),
    ("vault-value.ini", b"[web]\nw1\n[web:vars]\nx=$ANSIBLE_VAULT;1.1;AES256\n",
     "vault-value.ini:4:1", "Vault"),
    ("vault.json", b'{"_meta": {"hostvars": {"w1": {"x": {"__ansible_vault": '
                   b'"$ANSIBLE_VAULT;1.1;AES256"}}}}}', "vault.json:1:", "Vault"),
    ("plugin.yml", b"plugin: amazon.aws.aws_ec2\nregions: [eu-west-1]\n", "plugin.yml:1:1",
     "plugin"),
    ("tag.yml", b"all:\n  vars:\n    x: !python/object:os.system ls\n  hosts: {w1: }\n",
     "tag.yml:3:", "constructor"),
    ("deep.yml", b"all:\n  vars:\n    x: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
     "deep.yml:3:", "nesting"),
    ("deep.json", b'{"_meta": {"hostvars": {"w1": {"x": ' + b"[" * 100_000 + b"]" * 100_000
     + b"}}}}", "deep.json", "deep"),
    ("aliases.yml",
     b"all:\n  vars:\n    a: &a [x, x, x, x, x, x, x, x, x, x]\n"
     + b"".join(b"    l%d: &l%d [%s]\n" % (i, i, b", ".join([b"*" + (b"a" if i == 0 else
                b"l%d" % (i - 1))] * 10)) for i in range(8))
     + b"  hosts: {w1: }\n", "aliases.yml:8:5", "values"),
    ("hosts-list.yml", b"all:\n  hosts:\n    - w1\n", "hosts-list.yml:3:", "mapping"),
    ("unknown-key.yml", b"all:\n  host:\n    w1:\n", "unknown-key.yml:2:3", "'host'"),
    ("unknown-key.json", b'{"web": {"hosts": ["w1"],\n "hostz": []}}', "unknown-key.json:2:",
     "'hostz'"),
    ("range.ini", b"[web]\nw[1:999999999]\n", "range.ini:2:1", "more than"),
    ("ipv6-name.ini", b"[web]\nfe80::1\n", "ipv6-name.ini:2:1", "IPv6"),
]


@pytest.mark.parametrize("name,content,where,word", BAD, ids=[b[0] for b in BAD])
def test_a_bad_inventory_is_one_line_naming_file_and_line(
        tmp_path: Path, name: str, content: bytes, where: str, word: str) -> None:
    # Given a bad inventory file
    path = tmp_path / name
    path.write_bytes(content)
    # When it is loaded and resolved
    with pytest.raises(InventoryError) as err:
        resolve(load_inventory(path))
    message = str(err.value)
    # Then the error is one line, starting with file:line[:col], saying what is wrong
    assert "\n" not in message
    assert message.startswith(str(tmp_path / where)), message
    assert word.lower() in message.lower(), message
    assert err.value.exit_code == 2


def test_vault_and_plugin_refusals_point_to_ansible_inventory_list(tmp_path: Path) -> None:
    for name, content in [("v.yml", b"all:\n  vars:\n    p: !vault |\n      $ANSIBLE_VAULT;1\n"),
                          ("p.yml", b"plugin: constructed\n")]:
        (tmp_path / name).write_bytes(content)
        with pytest.raises(InventoryError) as err:
            load_inventory(tmp_path / name)
        assert "ansible-inventory" in (err.value.hint or "")


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # Given a (sparse) file one byte over the cap
    path = tmp_path / "huge.ini"
    with path.open("wb") as fh:
        fh.truncate(inventory_source.MAX_BYTES + 1)
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    assert str(err.value).startswith(f"{path}: ")
    assert "50 MB limit" in str(err.value)


@pytest.mark.parametrize("suffix", [".ini", ".yml", ".json", ""])
def test_ten_megabytes_of_random_bytes_are_refused_quickly_with_a_line(
        tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"garbage{suffix}"
    path.write_bytes(random.Random(7).randbytes(10 * 1024 * 1024))
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    assert str(err.value).startswith(f"{path}:1:")


@pytest.mark.parametrize("suffix", [".ini", ".yml", ".json", ""])
def test_ten_megabytes_of_printable_garbage_are_refused_with_a_line(
        tmp_path: Path, suffix: str) -> None:
    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 :=[]{}#;'\",.-_!&|$\t"
    line = "".join(rng.choice(alphabet) for _ in range(4000))
    lines = [line[i:i + 80] for i in range(0, len(line) - 80, 37)]
    text = "\n".join(rng.choice(lines) for _ in range(10 * 1024 * 1024 // 80))
    path = tmp_path / f"garbage{suffix}"
    path.write_text(text)
    with pytest.raises(InventoryError) as err:
        resolve(load_inventory(path))
    message = str(err.value)
    assert message.startswith(f"{path}:") and "\n" not in message
    assert message[len(str(path)) + 1].isdigit(), message


def test_a_directory_or_missing_path_is_named(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="is a directory"):
        load_inventory(tmp_path)
    with pytest.raises(InventoryError, match="no such file"):
        load_inventory(tmp_path / "nope.ini")
