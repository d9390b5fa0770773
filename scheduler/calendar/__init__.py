"""Pure time arithmetic: cron expressions, RFC 5545 recurrences, windows, catch-up.

No Redis, no SQL, no clock reads except where a caller passes ``now``:

- ``cron``: cron expressions in IANA zones with Debian cron's DST rules;
- ``recurrence``: RRULE occurrences across DST, zone arithmetic;
- ``windows``: the service window and freeze model, and when a job may start;
- ``catchup``: which missed occurrences of a schedule to run after downtime.
"""

__all__ = ["catchup", "cron", "recurrence", "windows"]
