"""SSH, in one place: how fleetsched reaches a host over SSH and checks it can.

- ``connect``: one connection, in the order that makes it safe (target, TCP, host key, auth);
- ``jump``: which jump hosts (ProxyJump) a host is reached through, from where it is set;
- ``tunnel``: connecting through them, each hop checked like a host, one login per bastion;
- ``known_hosts``: strict host-key checking against an OpenSSH ``known_hosts`` file;
- ``become``: whom a host's commands run as (``sudo -n -H -u USER --``);
- ``executor``: the ``ssh`` executor (pooled connections, commands, SFTP);
- ``shellfiles``: files through the shell for a host without SFTP;
- ``probe``: checking one host step by step as the executor connects (``hosts check``).

Nothing is imported here: ``hosts check`` and a submit's become check load only what they use.
"""
