"""``python -m scheduler ARGS`` is ``fleetsched ARGS`` (the demo and tests start workers this way)."""

from scheduler.cli.app import main

if __name__ == "__main__":
    main()
